-- The snapshot: schema version, model, chunker, root, status, counts, timestamps.

-- name: meta_get
SELECT value FROM meta WHERE key = :key;

-- name: meta_all
SELECT key, value FROM meta ORDER BY key;

-- name: meta_set
INSERT INTO meta(key, value) VALUES (:key, :value)
ON CONFLICT(key) DO UPDATE SET value = excluded.value;

-- name: counts
SELECT (SELECT count(*) FROM files)  AS files,
       (SELECT count(*) FROM chunks) AS chunks;

-- name: file_count
-- The indexed files (not the chunks: counting 2.9M kernel chunks read gigabytes from a cold cache).
SELECT count(*) FROM files;

-- name: has_vectors
-- 1 when any chunk has its vector (an index built with vectors off has none: a search need not
-- embed the query). Read from vec0's own table of row ids (sqlite-vec 0.1.9's chunks_vec_rowids,
-- one row a vector, deleted with it): a scan of chunks_vec starts by reading its vectors, 145-190 ms
-- on 1.1M of them and 365 ms on 2.77M before every search (a new user's helper); this one, 0.1 ms.
SELECT EXISTS (SELECT 1 FROM chunks_vec_rowids);

-- name: has_files
-- 1 when any file is indexed (cheap: stops at the first row; counts reads them all).
SELECT EXISTS (SELECT 1 FROM files);

-- name: first_rows
-- The first row of the tables every search reads (files, chunks, the text index): an index file served
-- alone whose pages are cut short or foreign fails here (service/shard_folder.py, /healthz).
SELECT (SELECT count(*) FROM (SELECT 1 FROM files LIMIT 1)) + (SELECT count(*) FROM (SELECT 1 FROM chunks LIMIT 1))
     + (SELECT count(*) FROM (SELECT 1 FROM chunks_fts LIMIT 1));

-- name: has_files_under
-- 1 when any file under the folder :under (relative, no trailing '/') is indexed.
SELECT EXISTS (SELECT 1 FROM files WHERE substr(path, 1, length(:under) + 1) = :under || '/');

-- name: holds_path
-- 1 when :path (relative, no trailing '/') is an indexed file or a folder holding one.
SELECT EXISTS (SELECT 1 FROM files WHERE path = :path OR substr(path, 1, length(:path) + 1) = :path || '/');

-- name: stats_by_language
SELECT coalesce(language, '(none)') AS language, count(DISTINCT file_id) AS files, count(*) AS chunks
FROM chunks GROUP BY 1 ORDER BY chunks DESC;

-- name: stats_by_kind
SELECT kind, count(*) AS chunks, avg(end_line - start_line + 1) AS avg_lines
FROM chunks GROUP BY kind ORDER BY chunks DESC;

-- name: stats_by_role
SELECT role, count(*) AS files, sum(chunk_count) AS chunks FROM files GROUP BY role ORDER BY files DESC;

-- name: vacuum_into
-- A compact copy of the whole index, as of its last commit, into the new file :target
-- (storage/copies.py export): the write-ahead log folded in, no free pages.
VACUUM INTO :target;

-- name: export_finish
-- Makes an exported copy self-contained: a rollback journal (read alone, it creates no -wal or
-- -shm beside it), the snapshot keys :drop (a JSON array) removed, and :meta (a JSON object of
-- key -> JSON-encoded value) set. secure_delete zeroes what the removed keys held (the machine's
-- absolute root was still in the file's bytes after a plain DELETE).
PRAGMA journal_mode = DELETE;
PRAGMA secure_delete = ON;
BEGIN;
DELETE FROM meta WHERE key IN (SELECT value FROM json_each(:drop));
INSERT OR REPLACE INTO meta(key, value) SELECT key, value FROM json_each(:meta);
COMMIT;

-- name: content_digest_rows
-- What an export's answers are made of, in a fixed order (storage/health.py content_digest): the
-- files, their chunks, their definitions and their stored texts. A page whose bytes changed inside a
-- row (text altered, a disk's bit flip) keeps SQLite's page checks happy, and was served as true.
SELECT id, path, hash, language, role FROM files ORDER BY id;
SELECT id, file_id, path, start_line, end_line, kind, symbol, content FROM chunks ORDER BY id;
SELECT file_id, seq, nested, name, symbol, kind, start_line, end_line, signature FROM definitions
ORDER BY file_id, seq;
SELECT file_id, text FROM file_texts ORDER BY file_id;
