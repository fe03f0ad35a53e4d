-- Symbols for agents (service/symbols.py): definitions by name, from the chunks' symbols.

-- name: definitions_named
-- The definitions whose name (a symbol's last part, signatures.last_name) is :name, or with :prefix
-- starts with it (:name <= name <= :name || U+10FFFF: one range of definitions_by_name) together with
-- the members nested in those whose symbol starts with theirs (`Rout` lists Router and Router.route:
-- the `nested` rows after it in its file's outline, one range of the primary key); of :kind (NULL:
-- any; 'type' also takes a 'class': a Go struct, a Swift struct are types to whoever asks), in the files
-- under :under (NULL: all). The symbol equal to :wanted first, then source files
-- before docs before tests, shorter symbols, path and line; of one file's definitions of one symbol the
-- longest first (click's `command` listed its four 4-line @overload stubs before its 80-line body), and of
-- two at one place the later in the outline (`typedef struct node {...} node` is the typedef, as the name
-- is used); at most :cap (a name as common as `init` in a huge index). service/symbols.py keeps the exact,
-- qualified or prefix matches.
WITH hit AS (
    SELECT file_id, seq, symbol, nested FROM definitions
    WHERE name >= :name AND name <= CASE WHEN :prefix THEN :name || char(1114111) ELSE :name END
), found AS (
    SELECT file_id, seq FROM hit
    UNION
    SELECT m.file_id, m.seq
    FROM hit JOIN definitions m ON m.file_id = hit.file_id AND m.seq BETWEEN hit.seq + 1 AND hit.seq + hit.nested
    WHERE :prefix AND substr(m.symbol, 1, length(hit.symbol)) = hit.symbol
)
SELECT f.path, d.symbol, d.kind, d.start_line, d.end_line, d.signature, f.role, f.language,
       f.size AS file_size, f.mtime_ns AS file_mtime_ns, f.hash AS file_hash
FROM found JOIN definitions d ON d.file_id = found.file_id AND d.seq = found.seq
JOIN files f ON f.id = d.file_id
WHERE (:kind IS NULL OR d.kind = :kind OR (:kind = 'type' AND d.kind = 'class'))
  AND (:under IS NULL OR substr(f.path, 1, length(:under) + 1) = :under || '/')
ORDER BY d.symbol = :wanted DESC, CASE f.role WHEN 'source' THEN 0 WHEN 'test' THEN 2 ELSE 1 END,
         length(d.symbol), f.path, min(d.start_line) OVER (PARTITION BY d.file_id, d.symbol),
         d.end_line - d.start_line DESC, d.start_line, d.seq DESC
LIMIT :cap;

-- name: definition_insert
INSERT INTO definitions(file_id, seq, nested, name, symbol, kind, start_line, end_line, signature)
VALUES (:file_id, :seq, :nested, :name, :symbol, :kind, :start_line, :end_line, :signature);

-- name: definitions_delete
-- A file's definitions, before its new ones are written or it leaves the index.
DELETE FROM definitions WHERE file_id = (SELECT id FROM files WHERE path = :path);

-- name: definitions_present
-- 1 when the index has the definitions table (schema 9): an older one read as it is gets a stand-in.
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'definitions');

-- name: definitions_stand_in
-- An empty definitions table for an older index read as it is (its files lack them till rebuilt).
CREATE TEMP TABLE IF NOT EXISTS definitions (
    file_id INTEGER, seq INTEGER, nested INTEGER, name TEXT, symbol TEXT, kind TEXT, start_line INTEGER, end_line INTEGER,
    signature TEXT
);

-- name: definitions_unread
-- 1 when a file was indexed before its definitions were (an index upgraded from schema 8 or older,
-- before a build has read every file again: files_mark_reindex left their size -1). A build that
-- finds none records meta definitions_complete.
SELECT EXISTS (SELECT 1 FROM files WHERE size = -1);

-- name: reference_chunks
-- Chunks whose text holds the identifier (:fts, an FTS5 phrase on the content column), in the
-- order service/references.py lists uses in (source files first, tests last, then path and
-- line), at most :cap: their ids and places (and their file's, for the stale check);
-- reference_texts reads the texts in slices.
SELECT c.id, c.path, c.start_line, c.end_line, f.role, f.size AS file_size, f.mtime_ns AS file_mtime_ns, f.hash AS file_hash
FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
WHERE chunks_fts MATCH :fts
  AND (:under IS NULL OR substr(c.path, 1, length(:under) + 1) = :under || '/')  -- a subfolder searched
ORDER BY CASE f.role WHEN 'source' THEN 0 WHEN 'test' THEN 2 ELSE 1 END, c.path, c.start_line
LIMIT :cap;

-- name: reference_texts
-- The texts of the chunks :ids (a JSON array of ids), for reference_chunks' rows.
SELECT c.id, c.content FROM chunks c WHERE c.id IN (SELECT value FROM json_each(:ids));

-- name: reference_chunk_count
-- How many chunks hold the identifier (:fts as in reference_chunks): what a capped answer read part of.
SELECT count(*) FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
WHERE chunks_fts MATCH :fts AND (:under IS NULL OR substr(c.path, 1, length(:under) + 1) = :under || '/');
