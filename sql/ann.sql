-- Approximate KNN by inverted lists (IVF): the tables are in sql/schema.sql (chunks_ivf, chunks_lists),
-- the search in sql/search.sql (`probes`, `listed`), the clustering in codii_sql/storage/ann.py.

-- name: ann_lists
-- How many lists the index is clustered into (0: not clustered, search scans exactly).
SELECT count(*) FROM chunks_ivf;

-- name: ann_has_tables
-- 1 when the file itself holds the IVF tables (schema 8 on), else 0 (an older index read as it is).
SELECT count(*) = 2 FROM main.sqlite_schema WHERE type = 'table' AND name IN ('chunks_ivf', 'chunks_lists');

-- name: ann_stand_ins
-- Empty per-connection IVF tables ({dims}: the index's width, a validated integer) for an older
-- index read as it is: search_hybrid names chunks_ivf and chunks_lists, which resolve to these
-- (temp tables are writable on an immutable or read-only file), hold no list, so it scans exactly.
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_ivf USING vec0(
    centroid float[{dims}] distance_metric=cosine
);
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_lists USING vec0(
    list integer partition key,
    embedding int8[{dims}] distance_metric=cosine,
    chunk_size=128
);

-- name: ann_reset
-- Both IVF tables empty ({dims} as above), dropped and made again: deleting a million vec0 rows one
-- by one costs more than writing them; the caller owns the transaction. Also run after
-- vector_tables_create (Store.make_vector_tables), so a new width makes them once.
DROP TABLE IF EXISTS chunks_ivf;
DROP TABLE IF EXISTS chunks_lists;
CREATE VIRTUAL TABLE chunks_ivf USING vec0(
    centroid float[{dims}] distance_metric=cosine
);
CREATE VIRTUAL TABLE chunks_lists USING vec0(
    list integer partition key,
    embedding int8[{dims}] distance_metric=cosine,
    chunk_size=128
);
-- vec0 finds a partition's rows by scanning its chunks table (one row per 128 vectors); this index
-- makes that a lookup: a 16-list probe at 100k real vectors 8.0 -> 6.1 ms (docs/benchmarks.md).
CREATE INDEX chunks_lists_by_list ON chunks_lists_chunks(partition00);

-- name: ann_vectors
-- Every float vector in rowid order (streamed by ann.py, never held whole).
SELECT rowid AS id, embedding FROM chunks_vec;

-- name: ann_centroid_insert
INSERT INTO chunks_ivf(rowid, centroid) VALUES (:list, :centroid);

-- name: ann_list_insert
-- One vector into its list (executemany), as chunk_insert_vec places a new one.
INSERT INTO chunks_lists(rowid, list, embedding) VALUES (:id, :list, vec_quantize_int8(:embedding, 'unit'));

-- name: ann_unlisted
-- Clustered indexes only: vectors missing from their list, and list rows without a vector (doctor).
SELECT (SELECT count(*) FROM chunks_vec WHERE rowid NOT IN (SELECT rowid FROM chunks_lists)) AS unlisted,
       (SELECT count(*) FROM chunks_lists WHERE rowid NOT IN (SELECT rowid FROM chunks_vec)) AS orphans;
