-- Consistency checks and repairs for `codii-sql doctor`. PRAGMA integrity_check does not look
-- inside external-content FTS5 or vec0 shadow tables, so rows are compared by id here.

-- name: chunks_without_vector
-- Chunks missing a vector (or its sign bits) that are not waiting for one in vector_queue.
SELECT c.id, c.path FROM chunks c
WHERE (c.id NOT IN (SELECT rowid FROM chunks_vec) OR c.id NOT IN (SELECT rowid FROM chunks_bits))
  AND c.id NOT IN (SELECT chunk_id FROM vector_queue);

-- name: queued_with_vector_or_without_chunk
-- Queue rows that are no longer true: the chunk is gone, or it has its vector already.
SELECT chunk_id AS id FROM vector_queue
WHERE chunk_id NOT IN (SELECT id FROM chunks) OR chunk_id IN (SELECT rowid FROM chunks_vec);

-- name: queued_with_vector_or_without_chunk_delete
-- Run last in a repair: the chunks it deleted leave their queue rows too (the vector phase never
-- reaches a row whose chunk is gone, so the index stayed "pending" for good).
DELETE FROM vector_queue
WHERE chunk_id NOT IN (SELECT id FROM chunks) OR chunk_id IN (SELECT rowid FROM chunks_vec);

-- name: vectors_without_chunk
SELECT rowid AS id FROM chunks_vec WHERE rowid NOT IN (SELECT id FROM chunks)
UNION
SELECT rowid FROM chunks_bits WHERE rowid NOT IN (SELECT id FROM chunks);

-- name: chunks_without_file
SELECT id FROM chunks WHERE file_id NOT IN (SELECT id FROM files);

-- name: definitions_without_file
-- Definition rows whose file is gone (a file's are deleted with its chunks: write.delete_file_rows).
SELECT count(*) FROM definitions WHERE file_id NOT IN (SELECT id FROM files);

-- name: definitions_without_file_delete
DELETE FROM definitions WHERE file_id NOT IN (SELECT id FROM files);

-- name: chunk_count_mismatch
-- Files whose chunk_count disagrees with their chunk rows (a half-written file).
SELECT f.path, f.chunk_count, count(c.id) AS found
FROM files f LEFT JOIN chunks c ON c.file_id = f.id
GROUP BY f.id HAVING found <> f.chunk_count;

-- name: fts_row_count
SELECT count(*) FROM chunks_fts_docsize;

-- name: file_hashes
SELECT path, hash FROM files;

-- name: chunk_delete_by_id
DELETE FROM chunks WHERE id = :id;

-- name: file_forget
-- Makes the next build re-index this file from scratch (its hash no longer matches).
UPDATE files SET hash = '', size = -1 WHERE path = :path;

-- name: merkle_clear
DELETE FROM merkle_nodes;

-- name: counts_bits
SELECT count(*) FROM chunks_bits;
