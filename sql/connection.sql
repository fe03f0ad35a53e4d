-- Per-connection settings, run by Python when it opens a .db.

-- name: pragmas_write
-- WAL: readers keep seeing the last committed state while one writer works (NOTES.md).
PRAGMA journal_mode = WAL;

-- name: pragma_synchronous
-- NORMAL is durable at each WAL checkpoint and never corrupts; FULL only adds fsyncs.
PRAGMA synchronous = NORMAL;

-- name: pragma_mmap
-- Measured: mmap >= the file size makes vec0's brute-force KNN ~40% faster.
PRAGMA mmap_size = 1073741824;

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

-- name: begin_immediate
-- Takes the write lock up front: two writers then wait on the busy timeout instead of
-- failing with SQLITE_BUSY when a read transaction tries to upgrade.
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: table_count
-- A file with tables of its own that are none of ours is someone else's database: never write to it.
SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view');

-- name: is_index
-- 1 when this file already holds a codii-sql index (checked before anything is written).
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'files', 'chunks');
