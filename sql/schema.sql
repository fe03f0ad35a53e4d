-- Schema of one codebase's index. Every table lives in this one file so the .db can be
-- copied to another machine. Paths are POSIX paths relative to the codebase root.

-- name: create_schema
-- Idempotent; run on every write connection. Needs sqlite-vec loaded (vec0).
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS files (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    size        INTEGER NOT NULL,          -- bytes
    mtime_ns    INTEGER NOT NULL,          -- last change, ns: the later of mtime and ctime; a hint, the hash decides
    hash        TEXT NOT NULL,             -- sha256 hex of the raw bytes
    language    TEXT,
    role        TEXT NOT NULL,             -- source | test | docs | config | generated | vendored | data
    chunk_count INTEGER NOT NULL,
    indexed_at  REAL NOT NULL              -- unix seconds
);

CREATE TABLE IF NOT EXISTS chunks (
    id         INTEGER PRIMARY KEY,
    file_id    INTEGER NOT NULL REFERENCES files(id),
    path       TEXT NOT NULL,              -- copy of files.path: FTS5 external content reads it here
    start_line INTEGER NOT NULL,           -- 1-based, inclusive
    end_line   INTEGER NOT NULL,           -- 1-based, inclusive
    start_byte INTEGER NOT NULL,           -- into the UTF-8 text, inclusive
    end_byte   INTEGER NOT NULL,           -- exclusive
    kind       TEXT NOT NULL,              -- function | method | class | module | section | text
    symbol     TEXT,                       -- e.g. Session.resolve_redirects
    language   TEXT,
    content    TEXT NOT NULL,
    subtokens  TEXT NOT NULL,              -- identifier sub-tokens of symbol, path and content
    text_hash  TEXT NOT NULL               -- sha256 of (model id, embedded text): reuse vectors
);
CREATE INDEX IF NOT EXISTS chunks_file_id ON chunks(file_id);
-- (chunks_text_hash: lookup_indexes, below)

-- BM25 over code: '_' is part of a word so parse_header stays one token; the subtokens
-- column makes getUserName match "user name" (measured: +22% index, queries ~1 ms). Porter
-- stemming (both sides: FTS5 stems MATCH terms too) lets "retries" find retry(): BM25 alone
-- measured CoSQA dev NDCG@10 0.347 -> 0.364, git dev hit@1 0.441 -> 0.458 (docs/eval.md).
-- search.sql's stem_probe must use this same tokenizer.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    content, subtokens, symbol, path,
    content = 'chunks', content_rowid = 'id',
    tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
);

-- rowid = chunks.id. Brute-force cosine KNN (sqlite-vec 0.1.9 has no ANN index). 384 is the bundled
-- model's width; a build with another embedder makes both vector tables again with its width
-- while they are empty (vector_tables_create below).
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0(
    embedding float[384] distance_metric=cosine
);

-- rowid = chunks.id. Sign bits of each chunks_vec embedding (sqlite-vec vec_quantize_binary):
-- large indexes pick KNN candidates by hamming distance over these 48-byte rows, then re-score
-- them with the float cosine above (measured at 100k: 66 ms float scan vs ~12 ms; sql/search.sql).
-- part = rowid % 8: search.sql takes the top k of each of the 8 partitions, since vec0's top-k
-- selection costs grow with k faster than its scan (sql/search.sql `coarse`).
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_bits USING vec0(
    part integer partition key,
    embedding bit[384]
);

-- Approximate KNN (IVF, codii_sql/storage/ann.py), in use once an index holds ann_min_vectors
-- vectors: rowid = list number (1..lists), the unit-length mean of the list's vectors (spherical
-- k-means, about sqrt(n) lists). Empty below the threshold: search then scans exactly.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_ivf USING vec0(
    centroid float[384] distance_metric=cosine
);

-- rowid = chunks.id. Each clustered vector in its list (the partition key), as int8 (384 bytes
-- against float's 1,536): a probe scans only the nearest lists' rows and the float cosine of
-- chunks_vec re-scores the best of them (sql/search.sql `ivf`). vec0 cannot change a row's
-- partition in place, so re-clustering writes this table anew. Empty while chunks_ivf is.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_lists USING vec0(
    list integer partition key,
    embedding int8[384] distance_metric=cosine,
    chunk_size=128
);
-- vec0 finds a partition's rows by scanning its chunks table (one row per 128 vectors); this index
-- makes that a lookup: a 16-list probe at 100k real vectors 8.0 -> 6.1 ms (docs/benchmarks.md).
CREATE INDEX IF NOT EXISTS chunks_lists_by_list ON chunks_lists_chunks(partition00);

-- Chunks still waiting for their vector. A build commits a file's chunks, FTS5 rows and Merkle
-- node first (BM25 and symbols find them at once); the vector phase then embeds the queued
-- chunks in priority order and deletes their rows here as their vectors commit. A killed vector
-- phase resumes from this table; search ranks a queued chunk by BM25 alone (sql/search.sql).
CREATE TABLE IF NOT EXISTS vector_queue (
    chunk_id INTEGER PRIMARY KEY,          -- chunks.id
    priority INTEGER NOT NULL              -- lower first: source, tests, docs, config, generated/vendored
);
CREATE INDEX IF NOT EXISTS vector_queue_order ON vector_queue(priority, chunk_id);

-- Grep (issue 27). Each indexed file's text as it was read (text.decode_source), zlib-compressed:
-- what grep verifies against when the source is not here (a portable shard), and what removing the
-- file's trigram row needs (a contentless FTS5 table deletes a row only given its old text).
CREATE TABLE IF NOT EXISTS file_texts (
    file_id INTEGER PRIMARY KEY,           -- files.id
    text    BLOB NOT NULL                  -- zlib (RFC 1950) of the UTF-8 text
);

-- rowid = files.id: one row per whole file, so no chunk boundary, gap (lines no chunk holds) or
-- window of a long line can split a line's trigrams; a notebook's row is its JSON, as rg reads it.
-- Contentless (the text is in file_texts), detail=none (grep asks only which files hold every
-- trigram of a literal), columnsize=0 (no BM25): on Django 5.1.4 this table is 6.5 MB and file_texts
-- 10.4 MB, +15% over the 100.1 MB lexical index (docs: README "Grep"). All three options are
-- older than SQLite 3.40, so Debian's sqlite3 shell opens the file.
CREATE VIRTUAL TABLE IF NOT EXISTS file_trigrams USING fts5(
    text, content = '', tokenize = 'trigram', detail = 'none', columnsize = 0
);

-- Every definition a file's parse finds (issue 25), nested ones too (a method, a macro, a constant),
-- with its whole line range: what `symbol` and `refs` look up by name, where they parsed up to
-- 40-200 files per question before (p50 296 ms on the Linux kernel). Written with the file's chunks,
-- from the chunker's own parse (ingest/chunking/regions.index_source).
CREATE TABLE IF NOT EXISTS definitions (
    file_id    INTEGER NOT NULL,           -- files.id
    seq        INTEGER NOT NULL,           -- its place in the file's outline, pre-order, from 0
    nested     INTEGER NOT NULL,           -- definitions inside it: rows seq + 1 .. seq + nested
    name       TEXT NOT NULL,              -- the symbol's last part, generics dropped: the look-up key
    symbol     TEXT NOT NULL,              -- qualified, e.g. Session.send
    kind       TEXT NOT NULL,              -- function | method | class | type | macro | constant | variable | section
    start_line INTEGER NOT NULL,           -- 1-based, inclusive, with decorators and leading comments
    end_line   INTEGER NOT NULL,           -- 1-based, inclusive
    signature  TEXT NOT NULL,              -- its first line of code, at most 200 characters (then "…")
    PRIMARY KEY (file_id, seq)
) WITHOUT ROWID;
-- (definitions_by_name: lookup_indexes, below)

-- One row per file and directory; the root directory is ''.
CREATE TABLE IF NOT EXISTS merkle_nodes (
    path   TEXT PRIMARY KEY,
    parent TEXT,                           -- NULL for the root
    is_dir INTEGER NOT NULL,
    hash   TEXT NOT NULL                   -- file: content sha256; dir: sha256 of its children
) WITHOUT ROWID;

-- name: lookup_indexes
-- The two indexes whose keys arrive in random order (a sha256, a name): vector reuse by text and `symbol`'s
-- look-up by name. Idempotent; create_schema runs it, and every build after its writes, since a first
-- build writes without them (lookup_indexes_drop): each batch dirtied thousands of their pages scattered
-- over the file, written to the WAL at every commit and again at every checkpoint (docs/benchmarks.md
-- "Eleventh round").
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
CREATE INDEX IF NOT EXISTS definitions_by_name ON definitions(name);

-- name: lookup_indexes_drop
-- Before a build's writes to most of the index's files (a first build, new chunking rules, --force) when it
-- reuses no vector of the index; lookup_indexes sorts them once after. A kill between the two leaves them
-- to the next build (a `symbol` meanwhile reads the definitions whole). An in-place re-chunk of the kernel
-- kept them and wrote 63 GB for a 4.5 GB file (docs/benchmarks.md "Thirteenth round").
DROP INDEX IF EXISTS chunks_text_hash;
DROP INDEX IF EXISTS definitions_by_name;

-- name: definitions_index_drop
-- lookup_indexes_drop for a build that reuses the index's vectors: their look-up by text hash needs
-- chunks_text_hash while the build writes.
DROP INDEX IF EXISTS definitions_by_name;

-- name: lookup_indexes_present
SELECT count(*) = 2 FROM sqlite_master WHERE type = 'index' AND name IN ('chunks_text_hash', 'definitions_by_name');

-- name: wipe
-- Empties the index for `build --force` (one transaction: a crash leaves either state).
DROP TABLE IF EXISTS chunks_fts;
DROP TABLE IF EXISTS chunks_vec;
DROP TABLE IF EXISTS chunks_bits;
DROP TABLE IF EXISTS chunks_ivf;
DROP TABLE IF EXISTS chunks_lists;
DROP TABLE IF EXISTS file_trigrams;
DELETE FROM file_texts;
DELETE FROM definitions;
DELETE FROM vector_queue;
DELETE FROM chunks;
DELETE FROM files;
DELETE FROM merkle_nodes;
DELETE FROM meta;

-- name: fts_drop
-- Schema 1-4 -> 5 migration: chunks_fts again with the porter tokenizer (FTS5 cannot change a
-- table's tokenizer in place); create_schema makes it anew, fts_rebuild refills it from chunks.
DROP TABLE IF EXISTS chunks_fts;

-- name: bits_rebuild
-- Schema 1/2 -> 3 migration: chunks_bits again, partitioned, from the float vectors (a vec0
-- table cannot gain a partition key in place). A plain INSERT ... SELECT: any WHERE that reads
-- chunks_bits makes SQLite stage the rows in a temp table, which drops the bit-vector subtype
-- sqlite-vec needs (measured).
DROP TABLE IF EXISTS chunks_bits;
CREATE VIRTUAL TABLE chunks_bits USING vec0(
    part integer partition key,
    embedding bit[384]
);
INSERT INTO chunks_bits(rowid, part, embedding) SELECT rowid, rowid % 8, vec_quantize_binary(embedding) FROM chunks_vec;

-- name: vector_table_sql
-- The declaration of chunks_vec, whose `float[N]` says the vectors' width.
SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks_vec';

-- name: vector_rows
-- The vectors stored: counted in vec0's row ids (see has_vectors), 1 ms at 1.1M where counting chunks_vec read them all.
SELECT count(*) FROM chunks_vec_rowids;

-- name: vector_tables_create
-- The vector tables with another width ({dims} is replaced by Store.make_vector_tables with a
-- validated integer, a multiple of 8: bit vectors are whole bytes). Run while they are empty,
-- followed by sql/ann.sql ann_reset (the IVF tables, as wide).
DROP TABLE IF EXISTS chunks_vec;
DROP TABLE IF EXISTS chunks_bits;
CREATE VIRTUAL TABLE chunks_vec USING vec0(
    embedding float[{dims}] distance_metric=cosine
);
CREATE VIRTUAL TABLE chunks_bits USING vec0(
    part integer partition key,
    embedding bit[{dims}]
);
