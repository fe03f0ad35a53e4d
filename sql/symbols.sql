-- Symbols for agents (service/symbols.py): definitions by name, from the chunks' symbols.

-- name: symbol_candidates
-- Symbols holding :needle (the last part of the name asked for; service/symbols.py then keeps
-- the exact, qualified or prefix matches, generics and `::` normalised). One row per (file,
-- symbol): the union of its chunks' lines, a class's extended over its members' chunks, and its
-- first chunk's text (for the signature). :kind limits the kind. At most :cap rows.
WITH matched AS (
    SELECT c.file_id, c.symbol, c.kind, c.start_line, c.end_line, c.content
    FROM chunks c
    WHERE c.symbol IS NOT NULL AND instr(c.symbol, :needle) > 0 AND (:kind IS NULL OR c.kind = :kind)
),
grouped AS (
    SELECT file_id, symbol, min(kind) AS kind, min(start_line) AS start_line, max(end_line) AS end_line,
           (SELECT m2.content FROM matched m2 WHERE m2.file_id = m.file_id AND m2.symbol = m.symbol
            ORDER BY m2.start_line LIMIT 1) AS first_content
    FROM matched m
    GROUP BY file_id, symbol
    LIMIT :cap
)
SELECT f.path, g.symbol, g.kind, g.start_line, g.first_content, f.role, f.language,
       max(g.end_line, coalesce((SELECT max(c3.end_line) FROM chunks c3 WHERE c3.file_id = g.file_id
                                   AND (substr(c3.symbol, 1, length(g.symbol) + 1) = g.symbol || '.'
                                        OR substr(c3.symbol, 1, length(g.symbol) + 2) = g.symbol || '::')),
                                g.end_line)) AS end_line
FROM grouped g JOIN files f ON f.id = g.file_id;

-- name: symbol_files
-- Files whose text, symbols or path hold every part of the name (:fts, an FTS5 expression),
-- best BM25 first: where a definition too small for a chunk of its own (a method inside its
-- class's chunk) can be.
WITH hits AS (
    SELECT rowid AS id, rank FROM chunks_fts WHERE chunks_fts MATCH :fts ORDER BY rank LIMIT :hits
)
SELECT f.path, f.role, f.language, min(h.rank) AS best
FROM hits h JOIN chunks c ON c.id = h.id JOIN files f ON f.id = c.file_id
GROUP BY f.id
ORDER BY best
LIMIT :files;

-- name: reference_chunks
-- Chunks whose text holds the identifier (:fts, an FTS5 phrase on the content column), in file
-- and line order, at most :cap: where service/symbols.py looks for its exact occurrences.
SELECT c.path, c.start_line, c.content, f.role
FROM chunks c JOIN files f ON f.id = c.file_id
WHERE c.id IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH :fts ORDER BY rank LIMIT :cap)
ORDER BY c.path, c.start_line;
