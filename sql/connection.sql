-- Per-connection settings, run by Python when it opens a .db.

-- name: pragmas_write
-- WAL: readers keep seeing the last committed state while one writer works (NOTES.md).
PRAGMA journal_mode = WAL;

-- name: pragma_synchronous
-- NORMAL is durable at each WAL checkpoint and never corrupts; FULL only adds fsyncs.
PRAGMA synchronous = NORMAL;

-- name: pragma_mmap
-- Measured: mmap >= the file size makes vec0's brute-force KNN ~40% faster, and an IVF probe of
-- 16 lists 3.7x faster at 1M chunks (27 vs 102 ms: the lists are written last, past the first GB of
-- the 2.2 GB file). 16 GiB of address space, not memory: pages are read only as touched.
PRAGMA mmap_size = 17179869184;

-- name: pragma_integrity_check
PRAGMA integrity_check;

-- name: pragma_quick_check
PRAGMA quick_check;

-- name: fts_integrity_check
-- FTS5's own check; PRAGMA integrity_check does not look inside external-content FTS5.
INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1);

-- name: fts_rebuild
INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');

-- name: wal_checkpoint
PRAGMA wal_checkpoint(TRUNCATE);

-- name: index_bytes
-- The index's size in bytes as its last commit left it, in the file or in the file and its log: what the
-- file measures once a checkpoint has folded the whole log into it (storage/health.py's vouch).
SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size();

-- name: begin_immediate
-- Takes the write lock up front: two writers then wait on the busy timeout instead of
-- failing with SQLITE_BUSY when a read transaction tries to upgrade.
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: index_shape
-- One read, so a schema committed by another process between two checks cannot mix states.
-- ours: how many of meta/files/chunks exist (3 = a codii-sql index); tables: all tables and views;
-- foreign: tables that are not ours, or named like ours with another shape (someone else's
-- database, never written to). Ours: meta, files, chunks, merkle_nodes, vector_queue, file_texts, definitions and the
-- FTS5/vec0 shadow tables chunks_* and file_trigrams*, and sql/history.sql's history_*; the column checks
-- catch another tool's `meta`/`files`/`chunks`.
SELECT
  (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'files', 'chunks')) AS ours,
  (SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view')) AS tables,
  (SELECT count(*) FROM sqlite_master m
   WHERE m.type IN ('table', 'view')
     AND ((m.name NOT IN ('meta', 'files', 'chunks', 'merkle_nodes', 'vector_queue', 'file_texts', 'definitions')
           AND m.name NOT LIKE 'chunks\_%' ESCAPE '\' AND m.name NOT LIKE 'file\_trigrams%' ESCAPE '\'
           AND m.name NOT LIKE 'history\_%' ESCAPE '\'
           AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\')
          OR (m.name = 'meta' AND NOT EXISTS (SELECT 1 FROM pragma_table_info('meta') WHERE name = 'value'))
          OR (m.name = 'files' AND NOT EXISTS (SELECT 1 FROM pragma_table_info('files') WHERE name = 'mtime_ns'))
          OR (m.name = 'chunks' AND NOT EXISTS (SELECT 1 FROM pragma_table_info('chunks') WHERE name = 'text_hash')))
  ) AS foreign_tables;
