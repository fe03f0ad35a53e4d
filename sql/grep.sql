-- Grep (issue 27): each file's text and its trigram row (schema.sql: file_texts, file_trigrams), and
-- the candidate files of a pattern. Rows are written and removed with the file's chunks, in the
-- caller's transaction (ingest/write.py).

-- name: file_text_insert
-- A file's text (executemany): :blob is text.pack_text(:text), :id its files.id.
INSERT INTO file_texts(file_id, text) VALUES (:id, :blob);
INSERT INTO file_trigrams(rowid, text) VALUES (:id, :text);

-- name: file_text_of_path
-- The stored text (packed) of the file at :path, with its files.id; no row for a file indexed
-- before grep existed (schema 5 and older) until its next build.
SELECT f.id, t.text FROM files f JOIN file_texts t ON t.file_id = f.id WHERE f.path = :path;

-- name: file_text_delete
-- A contentless FTS5 table removes a row only given the text it indexed (:text, unpacked).
INSERT INTO file_trigrams(file_trigrams, rowid, text) VALUES ('delete', :id, :text);
DELETE FROM file_texts WHERE file_id = :id;

-- name: grep_tables
-- 2 when this index has the grep tables (schema 6 on); a portable shard of schema 5 has none.
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('file_texts', 'file_trigrams');

-- name: grep_candidates
-- Files that may hold a match: those whose trigram row has every trigram the pattern requires
-- (:trigrams, an FTS5 expression of quoted trigrams joined by AND/OR: search/trigrams.py). Driven
-- by the MATCH, so a selective pattern touches its few files only (meta grep_complete: every file
-- has its trigram row).
SELECT f.id, f.path, f.role, f.language, f.size, 1 AS has_text
FROM file_trigrams t JOIN files f ON f.id = t.rowid
WHERE file_trigrams MATCH :trigrams
ORDER BY f.path;

-- name: grep_candidates_partial
-- As grep_candidates, for an index whose files may lack their trigram row (upgraded from schema 5
-- or 6, before the build that fills them): every file without one is a candidate too, which only
-- reading can tell. The NOT IN probes file_texts once per file: 21 s cold on the kernel's 92k files.
SELECT f.id, f.path, f.role, f.language, f.size,
       f.id IN (SELECT file_id FROM file_texts) AS has_text
FROM files f
WHERE f.id IN (SELECT rowid FROM file_trigrams WHERE file_trigrams MATCH :trigrams)
   OR f.id NOT IN (SELECT file_id FROM file_texts)
ORDER BY f.path;

-- name: grep_files_all
-- Every indexed file: the candidates of a pattern that requires no trigram (it is read whole).
SELECT f.id, f.path, f.role, f.language, f.size,
       f.id IN (SELECT file_id FROM file_texts) AS has_text
FROM files f
ORDER BY f.path;

-- name: grep_mark_incomplete
-- Schema 5/6 -> 7 (storage/store.py _GREP): files lack their trigram row until a build has written
-- them all again, whatever the snapshot said before.
DELETE FROM meta WHERE key = 'grep_complete';

-- name: grep_without_text
-- How many indexed files have no stored text and trigram row yet (an index upgraded from schema 5
-- or 6 before its next build); grep reads them whole. A look-up per file, once per index: a build
-- that finds none records meta grep_complete, and every later build writes each file's row.
SELECT count(*) FROM files f WHERE NOT EXISTS (SELECT 1 FROM file_texts t WHERE t.file_id = f.id);

-- name: file_text_by_id
SELECT text FROM file_texts WHERE file_id = :id;

-- name: files_for_grep
-- Every indexed file of an index without the grep tables (a portable shard of schema 5): read from
-- its chunks' stored lines.
SELECT id, path, role, language, size, 0 AS has_text FROM files ORDER BY path;

-- name: chunks_at_lines
-- The chunks holding any of the lines in the JSON array :lines ([[path, line], ...]; search --grep).
SELECT DISTINCT c.id
FROM json_each(:lines) j
JOIN files f ON f.path = j.value ->> 0
JOIN chunks c ON c.file_id = f.id AND c.start_line <= j.value ->> 1 AND c.end_line >= j.value ->> 1;

-- name: files_without_text
SELECT path FROM files WHERE id NOT IN (SELECT file_id FROM file_texts) ORDER BY path;

-- name: texts_without_file
SELECT file_id, text FROM file_texts WHERE file_id NOT IN (SELECT id FROM files);

-- name: texts_with_path
-- Every stored text and its file (doctor unpacks each: a page whose bytes changed under SQLite's
-- notice, as a hand edit, reads as a blob zlib refuses).
SELECT f.path, t.text FROM file_texts t JOIN files f ON f.id = t.file_id ORDER BY f.path;
