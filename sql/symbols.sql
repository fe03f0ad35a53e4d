-- Symbols for agents (service/symbols.py): definitions by name, from the chunks' symbols.

-- name: symbol_candidates
-- Chunks whose symbol holds :needle (the last part of the name asked for; service/symbols.py
-- groups them per (file, symbol), extends a class over its members' chunks, and keeps the exact,
-- qualified or prefix matches, generics and `::` normalised), in file, symbol and line order.
-- in_kind says whether the chunk is of :kind (always, with no :kind); first_content is the text
-- of the first such chunk of its (file, symbol), for the signature, and NULL on the others.
-- A :needle that is a whole word of the symbols it names (every name but a prefix's start) comes
-- with :fts (`symbol : "needle"`), and FTS5's symbol column finds the chunks; without it, one scan
-- of every chunk (`symbol tcp_retransmit_timer` on the kernel's 2.8M chunks: 1.4-4.7 s, reading the
-- whole chunks table). Each arm's test of :fts is a constant SQLite checks before its loop, so
-- only one runs. A member's symbol (Session.send) holds its class's word, and :needle, too (per-group
-- subqueries here took 28 s for `f` over 6,000 symbols f0..f5999 in one file).
WITH matched AS (
    SELECT c.file_id, c.symbol, c.kind, c.start_line, c.end_line, c.content,
           (:kind IS NULL OR c.kind = :kind) AS in_kind
    FROM chunks c
    WHERE :fts IS NULL AND c.symbol IS NOT NULL AND instr(c.symbol, :needle) > 0
    UNION ALL
    SELECT c.file_id, c.symbol, c.kind, c.start_line, c.end_line, c.content,
           (:kind IS NULL OR c.kind = :kind) AS in_kind
    FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
    WHERE :fts IS NOT NULL AND chunks_fts MATCH :fts AND c.symbol IS NOT NULL AND instr(c.symbol, :needle) > 0
)
SELECT m.file_id, f.path, m.symbol, m.kind, m.start_line, m.end_line, m.in_kind, f.role, f.language,
       CASE WHEN m.in_kind AND row_number() OVER (PARTITION BY m.file_id, m.symbol, m.in_kind
                                                  ORDER BY m.start_line) = 1
            THEN m.content END AS first_content
FROM matched m JOIN files f ON f.id = m.file_id
ORDER BY m.file_id, m.symbol, m.start_line;

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
-- Chunks whose text holds the identifier (:fts, an FTS5 phrase on the content column), in the
-- order service/references.py lists uses in (source files first, tests last, then path and
-- line), at most :cap: their ids and places; reference_texts reads the texts in slices.
SELECT c.id, c.path, c.start_line, f.role
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
