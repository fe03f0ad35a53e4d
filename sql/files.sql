-- Files and their chunks: every write of one file (delete old chunks, FTS rows and vectors,
-- insert new ones, upsert the file row) runs inside the caller's transaction.

-- name: pragma_write_cache
-- The indexer's page cache (KiB). vec0 keeps vectors in 1,024-row blobs (1.5 MB for float[384]):
-- with SQLite's default 2 MB cache each insert re-read that blob's pages, 190-210 us per vector;
-- with 16 MB, 33 us (measured, 16k rows in 512-row transactions). An upper bound, not an allocation.
-- The WAL is folded into the file every 16,384 pages (64 MiB), not SQLite's 1,000: a kernel-size
-- build rewrote the same FTS5 and B-tree pages at every small checkpoint (with 4,096-chunk
-- transactions, the write phase of 414k chunks took 1.7x less wall time; docs/benchmarks.md).
-- No memory map for the writer (readers keep sql/connection.sql's): every page a build touched stayed
-- mapped, and counted in its resident set (the kernel's build peaked at 3.2 GB instead of ~0.5 GB).
PRAGMA cache_size = -65536;
PRAGMA wal_autocheckpoint = 16384;
PRAGMA mmap_size = 0;

-- name: files_all
-- The stat hints and hashes the indexer compares a fresh scan against.
SELECT path, size, mtime_ns, hash FROM files;

-- name: file_by_path
SELECT id, path, size, mtime_ns, hash, language, role, chunk_count, indexed_at
FROM files WHERE path = :path;

-- name: file_touch
-- Same content, new stat (e.g. `touch`, a checkout): no re-chunking needed.
UPDATE files SET size = :size, mtime_ns = :mtime_ns WHERE path = :path;

-- name: file_upsert
INSERT INTO files(path, size, mtime_ns, hash, language, role, chunk_count, indexed_at)
VALUES (:path, :size, :mtime_ns, :hash, :language, :role, :chunk_count, :indexed_at)
ON CONFLICT(path) DO UPDATE SET
    size = excluded.size, mtime_ns = excluded.mtime_ns, hash = excluded.hash,
    language = excluded.language, role = excluded.role,
    chunk_count = excluded.chunk_count, indexed_at = excluded.indexed_at
RETURNING id;

-- name: file_delete
DELETE FROM files WHERE path = :path;

-- name: chunks_delete_fts
-- External-content FTS5 needs the old values to remove a row ('delete' command).
INSERT INTO chunks_fts(chunks_fts, rowid, content, subtokens, symbol, path)
SELECT 'delete', id, content, subtokens, symbol, path FROM chunks
WHERE file_id = (SELECT id FROM files WHERE path = :path);

-- name: chunk_ids_of_file
SELECT id FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = :path);

-- name: vectors_delete
-- One chunk's vector and sign bits, by rowid: vec0 answers `rowid IN (subquery)` with a scan
-- of the whole table (measured: 8 ms per call at 20k rows, against 23 us for `rowid = ?`).
DELETE FROM chunks_vec WHERE rowid = :id;
DELETE FROM chunks_bits WHERE rowid = :id;
DELETE FROM chunks_lists WHERE rowid = :id;

-- name: chunks_delete
DELETE FROM vector_queue WHERE chunk_id IN (SELECT id FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = :path));
DELETE FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = :path);

-- name: chunk_insert_with_id
-- Chunk rows in bulk (executemany): the writer picks ids from chunk_next_id.
INSERT INTO chunks(id, file_id, path, start_line, end_line, start_byte, end_byte, kind, symbol,
                   language, content, subtokens, text_hash)
VALUES (:id, :file_id, :path, :start_line, :end_line, :start_byte, :end_byte, :kind, :symbol,
        :language, :content, :subtokens, :text_hash);

-- name: chunk_next_id
-- The id SQLite itself would give the next chunk (max + 1; chunks.id is not AUTOINCREMENT).
SELECT coalesce(max(id), 0) + 1 FROM chunks;

-- name: chunks_insert_fts_range
-- FTS5 rows of the chunks just inserted with ids :first..:last (inclusive), in one statement.
INSERT INTO chunks_fts(rowid, content, subtokens, symbol, path)
SELECT id, content, subtokens, symbol, path FROM chunks WHERE id BETWEEN :first AND :last;

-- name: files_present
-- Which of the paths in the JSON array :paths already have a file row (so old chunks to delete).
SELECT path FROM files WHERE path IN (SELECT value FROM json_each(:paths));

-- name: chunk_insert_vec
-- The float vector, its sign bits (schema.sql: chunks_bits) and, once the index is clustered,
-- its int8 copy in the nearest list (chunks_ivf empty: no row), always together.
INSERT INTO chunks_vec(rowid, embedding) VALUES (:id, :embedding);
INSERT INTO chunks_bits(rowid, part, embedding) VALUES (:id, :id % 8, vec_quantize_binary(:embedding));
INSERT INTO chunks_lists(rowid, list, embedding)
SELECT :id, rowid, vec_quantize_int8(:embedding, 'unit') FROM chunks_ivf WHERE centroid MATCH :embedding AND k = 1;

-- name: vector_queue_add
-- A chunk written without its vector (executemany): the vector phase embeds it later.
INSERT OR REPLACE INTO vector_queue(chunk_id, priority) VALUES (:id, :priority);

-- name: vector_queue_next
-- The next :n queued chunks to embed, by priority (source first), then in chunk order: the
-- vector_queue_order index walk, no sort of the whole queue.
SELECT q.chunk_id AS id, c.text_hash, c.content, c.path
FROM vector_queue q JOIN chunks c ON c.id = q.chunk_id
ORDER BY q.priority, q.chunk_id
LIMIT :n;

-- name: vector_queue_of_files
-- Up to :n queued chunks of the files in the JSON array :paths (files an agent is searching),
-- which go before the rest.
SELECT q.chunk_id AS id, c.text_hash, c.content, c.path
FROM json_each(:paths) p
JOIN files f ON f.path = p.value
JOIN chunks c ON c.file_id = f.id
JOIN vector_queue q ON q.chunk_id = c.id
ORDER BY q.priority, q.chunk_id
LIMIT :n;

-- name: vector_queue_still_wanted
-- Which of the chunks in the JSON array :chunks ({"id", "text_hash"}) are still queued with that
-- text: a build may have replaced a file's chunks (and even reused a chunk id) while its old
-- texts were being embedded. Run inside the transaction that writes their vectors.
SELECT q.chunk_id AS id
FROM json_each(:chunks) j
JOIN vector_queue q ON q.chunk_id = j.value ->> 'id'
JOIN chunks c ON c.id = q.chunk_id AND c.text_hash = j.value ->> 'text_hash';

-- name: vector_queue_done
DELETE FROM vector_queue WHERE chunk_id = :id;

-- name: vector_queue_among
-- Those of the chunk ids :ids (a JSON array) that still wait for their vector.
SELECT q.chunk_id FROM json_each(:ids) j JOIN vector_queue q ON q.chunk_id = j.value;

-- name: vectors_pending
-- 1 when any chunk still waits for its vector (cheap: stops at the first queue row).
SELECT EXISTS (SELECT 1 FROM vector_queue);

-- name: vectors_pending_many
-- 1 when more than 1 in 20 chunks wait for their vector (the queue counted only that far: the kernel's
-- is 2.7M): their cosines unknown, a low nearest one says little. A few chunks an edit left without
-- one under --no-vectors withheld no_good_match for good (a new user).
SELECT (SELECT count(*) FROM (SELECT 1 FROM vector_queue LIMIT (SELECT coalesce(max(id), 0) / 20 + 1 FROM chunks)))
       > (SELECT coalesce(max(id), 0) / 20 FROM chunks);

-- name: vector_counts
-- chunks: every chunk; pending: those still waiting for their vector.
SELECT (SELECT count(*) FROM chunks) AS chunks, (SELECT count(*) FROM vector_queue) AS pending;

-- name: vector_queue_chars
-- The text still waiting for vectors, in bytes of the files (about its characters): the vector phase's
-- time left counts it down (integers of the chunk rows: no chunk's text is read).
SELECT coalesce(sum(c.end_byte - c.start_byte), 0) FROM vector_queue q JOIN chunks c ON c.id = q.chunk_id;

-- name: vector_queue_any
-- 1 when some chunk waits for its vector (the queue's first row, not its count: the kernel's is 2.7M).
SELECT EXISTS (SELECT 1 FROM vector_queue);

-- name: vectors_by_text_hash
-- Vectors this codebase already holds for the same embedded texts (renames, moves, copies).
-- :keys is a JSON array of text hashes.
SELECT c.text_hash, v.embedding
FROM chunks c JOIN chunks_vec v ON v.rowid = c.id
WHERE c.text_hash IN (SELECT value FROM json_each(:keys))
GROUP BY c.text_hash;

-- name: chunk_by_id
SELECT c.id, c.path, c.start_line, c.end_line, c.start_byte, c.end_byte, c.kind, c.symbol,
       c.language, c.content, f.hash AS file_hash, f.size AS file_size, f.mtime_ns AS file_mtime_ns
FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = :id;

-- name: chunks_of_file
SELECT id, start_line, end_line, kind, symbol FROM chunks
WHERE path = :path ORDER BY start_line;

-- name: chunks_of_file_text
-- A file's chunks with their text, in line order: what an index searched without its source knows
-- of the file (its outline, its stored lines).
SELECT id, start_line, end_line, kind, symbol, content FROM chunks
WHERE path = :path ORDER BY start_line, id;

-- name: file_language
SELECT language FROM files WHERE path = :path;

-- name: file_roles
-- Every indexed file's role (roles.py, as the build stored it).
SELECT path, role FROM files;

-- name: file_set_role
-- Re-classification after the role rules change (roles.VERSION): no re-chunking needed.
UPDATE files SET role = :role WHERE path = :path;

-- name: vector_queue_reprioritise
-- After a re-classification: queued chunks take their file's new role's place in the vector
-- phase's order (:priorities is a JSON object role -> priority, write.VECTOR_PRIORITY).
UPDATE vector_queue SET priority = coalesce(
    (SELECT :priorities ->> f.role FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = vector_queue.chunk_id),
    priority);

-- name: files_mark_reindex
-- Makes the next plan re-read and re-chunk every file (a chunker upgrade, `build --force`):
-- size -1 forces a read and marks the file for re-chunking even when its hash is unchanged.
-- Hash and Merkle nodes stay: until its file is written again they still describe the
-- content whose chunks are indexed, so a kill halfway leaves a consistent index.
UPDATE files SET size = -1;

-- name: files_mark_reindex_scoped
-- files_mark_reindex for the files of some languages (:languages) or file-name suffixes (:suffixes, lower
-- case), JSON arrays: a chunker upgrade that changed those alone (ingest/chunking/version.py SCOPED).
UPDATE files SET size = -1
WHERE language IN (SELECT value FROM json_each(:languages))
   OR EXISTS (SELECT 1 FROM json_each(:suffixes) j WHERE lower(files.path) LIKE '%' || j.value);  -- json_each has a path too

-- name: files_in_scope
-- How many files files_mark_reindex_scoped would mark (its parameters).
SELECT count(*) FROM files
WHERE language IN (SELECT value FROM json_each(:languages))
   OR EXISTS (SELECT 1 FROM json_each(:suffixes) j WHERE lower(files.path) LIKE '%' || j.value);  -- json_each has a path too

-- name: fts_optimize
-- Merge each text index into one segment, dropping the rows of deleted chunks (FTS5's 'optimize'):
-- after a build that rewrote many files (ingest/lexical.py compact_text_indexes).
INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize');
INSERT INTO file_trigrams(file_trigrams) VALUES ('optimize');

-- name: fts_merge_bulk
-- A first build merges each text index's segments 16 at a time, not FTS5's 4 (its 'automerge'): each
-- chunk's postings are rewritten log16 instead of log4 times of the segments the 4,096-chunk commits
-- make, and the build's compaction merges them all after. The kernel's build: written 18.9 -> 14.5 GB,
-- the main process's CPU 229 -> 202 s (docs/benchmarks.md "Eleventh round").
INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('automerge', 16);
INSERT INTO file_trigrams(file_trigrams, rank) VALUES ('automerge', 16);

-- name: fts_merge_usual
-- FTS5's default again after a first build's writes (or one killed halfway): an update's few segments
-- merge as they come. Written only when fts_merge_bulk's value is there, so an update writes nothing more.
INSERT INTO chunks_fts(chunks_fts, rank)
SELECT 'automerge', 4 WHERE (SELECT v FROM chunks_fts_config WHERE k = 'automerge') = 16;
INSERT INTO file_trigrams(file_trigrams, rank)
SELECT 'automerge', 4 WHERE (SELECT v FROM file_trigrams_config WHERE k = 'automerge') = 16;
