-- Hybrid retrieval in ONE statement: BM25 candidates from FTS5 and KNN candidates from vec0,
-- fused by two terms, times a soft prior by file role:
--   cc(d)  = sum_r w_r * norm_r(d)     convex combination of min-max normalised scores
--            (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval",
--            ACM TOIS 2023: it beats RRF and needs one weight, tuned on few queries)
--   rrf(d) = sum_r w_r / (k + rank_r(d))   Reciprocal Rank Fusion (Cormack, Clarke &
--            Buettcher, SIGIR 2009; k = 60 there)
--   score  = cc + :rrf_weight * rrf
-- A chunk missing from the BM25 list gets nothing from it. A BM25 candidate missing from the KNN
-- list gets its own cosine (:fill, every chunk embedded), normalised as the list is: cosine / best
-- with :knn_by_best, else min-max with the list's minimum (0 below it, so with an exact list only
-- an approximate one's misses gain). norm_r is 1 for a list of one. With :knn_by_best, norm_knn is
-- cosine / best cosine instead of min-max.
-- bm25_hits is MATERIALIZED and has no window function: flattened into a window query,
-- bm25() would be called outside the FTS5 scan, which FTS5 rejects ("unable to use
-- function bm25 in the requested context").
--
-- Parameters:
--   :fts_query    FTS5 MATCH expression, or NULL to skip BM25 (vector mode, no usable terms)
--   :bm25_given   JSON array of [chunk id, BM25 score] pairs, BM25's top :depth computed ahead
--                 (search/pruning.py, large indexes: the same list with less work), or NULL
--   :qvec         float32[384] query embedding as a blob, or NULL to skip KNN (bm25 mode)
--   :depth        candidates taken from each retriever (<= 4096, sqlite-vec's k limit)
--   :rrf_k        RRF constant k;  :rrf_weight  weight of the RRF term
--   :w_fts        BM25's weight (the vectors' is 1 - it), set by searcher.py from the query's shape;
--   :w_fts_confident, :confident_gap   BM25's weight when its best hit's lead is >= the gap
--   :w_fts_weak, :weak_cosine          BM25's weight when the nearest chunk's cosine is under it
--   :knn_by_best  1: KNN scores are normalised as cosine / best cosine, not min-max, so a flat KNN
--                 list (its candidates about equally close) counts little (search/fusion.py)
--   :bm25_*       FTS5 column weights for bm25(): content, subtokens, symbol, path
--   :knn_given    JSON array of [chunk id, cosine distance] pairs, the KNN top :depth computed ahead
--                 (knn_ahead: large unfiltered searches, the sign bits or the IVF lists), or NULL
--   :filtered     1 when any filter below is set; 0 lets KNN skip the rowid IN pushdown
--                 (measured: the pushdown costs ~30 ms at 100k chunks when it filters nothing)
--   :exts         JSON array of file name endings ('.py'), or NULL
--   :glob         SQLite GLOB over the relative path ('*' also matches '/'), or NULL;
--                 a pattern without '/' is also tried against the file name, and a '**/' matches
--                 no folder too, as in .gitignore ('**/render/**' matches render/html.go)
--   :language     language name, or NULL
--   :exclude_path a path whose chunks are left out (find-similar), or NULL
--   :under        a folder (relative, no trailing '/') whose files alone are kept, or NULL
--   :role         a file role (source, test, docs, config...: ingest/roles.py) whose files alone are kept, or NULL
--   :chunk_ids    JSON array of the chunk ids alone kept (search --grep: the chunks holding a matching line), or NULL
--   :role_weights JSON object role -> multiplier ('{"test": 0.5}'), or NULL for none; a licence
--                 header chunk (kind 'license') takes the role 'license' here, a preamble of imports
--                 (kind 'imports', ingest/chunking/imports.py) the role 'imports'
--   :names :tails :paths  JSON arrays (lower case, query.py named_in_query) of identifiers
--                 (`console.print`, `print`), last parts of dotted ones (`print`) and file paths
--                 or names named in the query; a candidate whose symbol, symbol tail or path
--                 matches gets :name_boost ("echo" must put `def echo` above chunks that call echo)
--   :cased        JSON object: each name written with capitals -> as written (`{"queryset": "QuerySet"}`)
--   :typed        JSON array: the names of :names a type keyword names (`Context struct`): only a chunk of
--                 kind 'class' matches them (gin's `Context` struct, not a method `Engine.Context`)
--   :tiered       1 (identifier-shaped queries): rank by named tier first, then score. Tier = 2 when the
--                 symbol is a name of :names, or ends with '.' + it (`Console.print`, also
--                 `Outer.Console.print`), 3 when that name is qualified (`queryset.get` of "QuerySet
--                 get" above `queryset`), + 2 when the file is a path of :paths (the whole path,
--                 or its end at a '/': `_auth.py`, `httpx/_auth.py`), or 1 when only its file
--                 name matches with leading underscores ignored (`auth.py` names `_auth.py`:
--                 Python's private-module convention; never above an exact name). A tail alone
--                 earns no tier: `print` of `Console.print` is not any `print`. Within a tier, a
--                 source file's definition named the name itself (gin's struct `Engine`) comes before
--                 members of that name (`defaultValidator.Engine`), whatever their scores. Within the
--                 symbol tier a symbol's chunks stay together, in line order (below). Chunks
--                 with a tier are candidates even when neither retriever found them (score 0
--                 from fusion); the returned score stays the fused one, so with a tier it is
--                 not monotonic down the list. 0 (questions, issues): a name only boosts.
--   :symbol_match FTS5 expression over the symbol column finding the chunks :names may match,
--                 or NULL (query.py symbol_match; exact matches kept here)
--   :pending      1 when some chunks still wait for their vector (vector_queue): they are ranked
--                 by BM25 in the vectors' place too (`imputed`); 0 skips that look-up
--   :fill         1: BM25 candidates the KNN list missed count by their own cosine (see above; 0 while
--                 chunks wait for vectors, whose candidates `imputed` stands in for)
--   :knn_share    the KNN list's share of the vectors' weight, 1 unless few chunks have a vector
--                 yet (searcher.py FULL_TRUST_COVERAGE); the rest goes to BM25 scores (`imputed`)
--   :limit        rows returned
--   :held_all, :held_coined, :held_members   see `held` below (filtered searches; else NULL)
-- Filters act inside both candidate lists, before fusion and before the limit: for FTS5 as a
-- WHERE term, for vec0 as `rowid IN (...)`, which sqlite-vec pushes into its scan (a filter
-- applied after a KNN would leave fewer than k rows).

-- name: search_hybrid
WITH
allowed AS (
    SELECT c.id FROM chunks c
    WHERE (:exts IS NULL OR EXISTS (SELECT 1 FROM json_each(:exts) e WHERE c.path LIKE '%' || e.value))
      AND (:glob IS NULL OR c.path GLOB :glob OR (instr(:glob, '/') = 0 AND c.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND c.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))
      AND (:language IS NULL OR c.language = :language)
      AND (:exclude_path IS NULL OR c.path <> :exclude_path)
      AND (:under IS NULL OR substr(c.path, 1, length(:under) + 1) = :under || '/')
      AND (:role IS NULL OR c.file_id IN (SELECT id FROM files WHERE role = :role))
      AND (:chunk_ids IS NULL OR c.id IN (SELECT value FROM json_each(:chunk_ids)))
),
bm25_hits AS MATERIALIZED (
    SELECT rowid AS id, -bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path) AS raw
    FROM chunks_fts
    WHERE :bm25_given IS NULL AND :fts_query IS NOT NULL AND chunks_fts MATCH :fts_query
      AND (:filtered = 0 OR rowid IN (SELECT id FROM allowed))
    ORDER BY bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path)
    LIMIT :depth
),
bm25_ranked AS (  -- :bm25_given is best first
    SELECT id, raw, row_number() OVER (ORDER BY raw DESC) AS rnk FROM bm25_hits
    UNION ALL
    SELECT value ->> 0, value ->> 1, key + 1 FROM json_each(:bm25_given)
),
-- Small indexes, and any filtered search: exact cosine scan of the float vectors (a filter is
-- pushed into the scan, which then reads only the allowed rows). Large unfiltered ones are given
-- their KNN list (:knn_given, from knn_ahead below).
knn_exact AS (
    SELECT rowid AS id, distance FROM chunks_vec
    WHERE :qvec IS NOT NULL AND :knn_given IS NULL AND :filtered = 0 AND embedding MATCH :qvec AND k = :depth
),
knn_exact_filtered AS (
    SELECT rowid AS id, distance FROM chunks_vec
    WHERE :qvec IS NOT NULL AND :filtered = 1 AND embedding MATCH :qvec AND k = :depth
      AND rowid IN (SELECT id FROM allowed WHERE :filtered = 1)  -- vec0 takes the list even when unfiltered
),
knn_hits AS (
    SELECT id, distance, 1.0 - distance AS raw, row_number() OVER (ORDER BY distance) AS rnk
    FROM (SELECT * FROM knn_exact UNION ALL SELECT * FROM knn_exact_filtered
          UNION ALL SELECT value ->> 0, value ->> 1 FROM json_each(:knn_given))
),
-- BM25's confidence: how far its best hit stands above the second, (s1 - s2) / s1 (1 for a
-- single hit). On CoSQA dev its top hit is right for 58% of queries with a gap >= 0.27 and
-- for 10% with a gap < 0.08: when the best match stands out, BM25 gets :w_fts_confident.
-- The vectors' own confidence: when their nearest chunk's cosine is under :weak_cosine (no
-- closer than unrelated questions get), BM25 gets at least :w_fts_weak.
weights AS (
    SELECT CASE WHEN coalesce((max(raw) - coalesce((SELECT raw FROM bm25_ranked WHERE rnk = 2), 0))
                              / nullif(max(raw), 0), 0) >= :confident_gap
                THEN :w_fts_confident
                WHEN max(raw) IS NOT NULL AND coalesce((SELECT max(raw) FROM knn_hits), 1.0) < :weak_cosine
                THEN :w_fts_weak
                ELSE :w_fts END AS w_fts
    FROM bm25_ranked
),
candidates AS (
    SELECT id, rnk, raw, NULL AS distance, (SELECT w_fts FROM weights) AS w, 'bm25' AS src FROM bm25_ranked
    UNION ALL
    SELECT id, rnk, raw, distance, (1.0 - coalesce((SELECT w_fts FROM weights), 0.0)) * :knn_share AS w,
           'knn' AS src FROM knn_hits
),
normalised AS (
    SELECT *, CASE WHEN src = 'knn' AND :knn_by_best = 1 AND max(raw) OVER lst > 0  -- (else min-max)
                   THEN max(raw, 0.0) / max(raw) OVER lst
                   ELSE coalesce((raw - min(raw) OVER lst) / nullif(max(raw) OVER lst - min(raw) OVER lst, 0), 1.0) END AS norm
    FROM candidates WINDOW lst AS (PARTITION BY src)
),
-- A chunk still waiting for its vector (vector_queue: a build's vector phase has not reached it)
-- is not irrelevant to the vectors, only unseen by them: in the KNN list's place it takes its
-- BM25 rank and normalised score, so the files the phase has reached do not push the others
-- down. Once its vector commits it competes as any other chunk. While few chunks have one
-- (:knn_share < 1), the KNN list counts for :knn_share of its weight and every BM25 candidate's
-- own score stands in for the rest.
imputed AS (
    SELECT n.id, n.rnk, n.raw, NULL AS distance,
           (1.0 - coalesce((SELECT w_fts FROM weights), 0.0))
           * CASE WHEN q.chunk_id IS NOT NULL THEN 1.0 ELSE 1.0 - :knn_share END AS w,
           'imputed' AS src, n.norm
    FROM normalised n LEFT JOIN vector_queue q ON q.chunk_id = n.id
    WHERE :pending = 1 AND :qvec IS NOT NULL AND n.src = 'bm25'
      AND (q.chunk_id IS NOT NULL OR :knn_share < 1.0)
),
fused AS (
    SELECT id,
           sum(w * norm) AS cc,
           sum(w / (:rrf_k + rnk)) AS rrf,
           min(CASE src WHEN 'bm25' THEN rnk END) AS bm25_rank,
           min(CASE src WHEN 'knn' THEN rnk END) AS knn_rank,
           min(distance) AS distance,
           max(CASE src WHEN 'bm25' THEN w END) AS w_bm25,
           max(max(CASE src WHEN 'knn' THEN raw END)) OVER () AS knn_hi,
           min(min(CASE src WHEN 'knn' THEN raw END)) OVER () AS knn_lo
    FROM (SELECT * FROM normalised UNION ALL SELECT * FROM imputed)
    GROUP BY id
),
-- Files the query names, with their path tier: 2 for the whole path or its end at a '/', 1
-- when only the file name matches with leading underscores ignored (lp: the lower-case path;
-- rtrim of every non-'/' character leaves its folder). CROSS JOIN keeps json_each outermost:
-- no paths, no work. (Keeping only the candidates' files here, when untiered, cost every search
-- 1.5 ms: the planner ran that IN list as a join over the fused candidates.)
named_files AS (
    SELECT file_id, 1 + max(exact) AS tier
    FROM (SELECT f.id AS file_id,
                 (f.lp = p.value OR substr(f.lp, -length(p.value) - 1) = '/' || p.value
                  OR substr(p.value, -length(f.lp) - 1) = '/' || f.lp) AS exact,
                 (instr(p.value, '/') = 0 AND ltrim(substr(f.lp, length(rtrim(f.lp, replace(f.lp, '/', ''))) + 1), '_')
                                              = ltrim(p.value, '_')) AS by_name
          FROM (SELECT value, ltrim(substr(value, length(rtrim(value, replace(value, '/', ''))) + 1), '_') AS name
                FROM json_each(:paths)) p
          CROSS JOIN (SELECT id, path, lower(path) AS lp FROM files) f
          WHERE f.path LIKE '%' || p.name)  -- every match ends so (LIKE folds ASCII case as lower() does): a path
                                            -- is lowered and cut only then, 200 -> 50-70 ms a path on the kernel
    WHERE (exact OR by_name)
    GROUP BY file_id
),
-- Identifiers the query names (is_name 1) and the last parts of dotted ones (is_name 0); a
-- symbol matches one when it is the identifier or ends with '.' + it.
wanted AS (
    SELECT value, 1 AS is_name, json_extract(:cased, '$."' || value || '"') AS cased,
           instr(:typed, json_quote(value)) > 0 AS typed FROM json_each(:names)  -- no subquery: expression depth
    UNION ALL SELECT value, 0, NULL, 0 FROM json_each(:tails)
),
named_symbols AS (
    SELECT c.id FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
    WHERE :symbol_match IS NOT NULL AND chunks_fts MATCH :symbol_match
      AND (:filtered = 0 OR c.id IN (SELECT id FROM allowed))
      AND EXISTS (SELECT 1 FROM wanted w
                  WHERE w.is_name = 1 AND (lower(c.symbol) = w.value
                                           OR substr(lower(c.symbol), -length(w.value) - 1) = '.' || w.value)
                    AND (NOT w.typed OR c.kind = 'class'))
    LIMIT :depth
),
-- A constant, variable or macro the query names whose definition lies in a chunk of another symbol or
-- a module's (`RRF_WEIGHT`, `#define MAX_LEN`): the chunks over its definition (the table `symbol`
-- reads) are named too; constants are written in capitals, so the name as asked or upper case.
named_definitions AS MATERIALIZED (  -- read per candidate below: once
    SELECT DISTINCT c.id FROM wanted w
    JOIN definitions d ON d.name IN (w.value, upper(w.value))
    JOIN chunks c ON c.file_id = d.file_id AND c.start_line <= d.end_line AND c.end_line >= d.start_line
    WHERE :tiered = 1 AND w.is_name = 1 AND NOT w.typed AND d.kind IN ('constant', 'variable', 'macro')
      AND (:filtered = 0 OR c.id IN (SELECT id FROM allowed))
    LIMIT :depth
),
pool AS (
    SELECT id FROM fused
    UNION SELECT id FROM named_symbols
    UNION SELECT id FROM named_definitions
    UNION SELECT value FROM json_each(:placed) WHERE :filtered = 0 OR value IN (SELECT id FROM allowed)
    UNION SELECT c.id FROM named_files nf JOIN chunks c ON c.file_id = nf.file_id
          WHERE :tiered = 1 AND (:filtered = 0 OR c.id IN (SELECT id FROM allowed))
),
-- A stub file's definition (.pyi, .d.ts: service/symbols.py STUB_SUFFIXES, which symbol orders by) ranks
-- after the ones with a body, a tier below them (a new user's `ZodString` listed v3/types.d.cts's windows
-- above src/v3/types.ts's class); so does a declaration without a body (an abstract or interface method, a
-- prototype: its text ends in ';' or says `abstract` (Kotlin's have no ';'), and no line ends in '{': an
-- agent's `nextSource` on moshi ranked JsonReader's abstract one above JsonUtf8Reader's, three times),
-- and a generated file's (a copy compiled from the TypeScript source:
-- zod's `prettifyError` in .js and .cjs above src/*.ts, ingest/roles.py compiled_copies).
-- match: 3 for a chunk holding a place the query names (:placed, `sessions.py:703`: search/locations.py;
-- the first tier, never cut off as a later window is), 2 when the symbol is a named qualified identifier
-- (`queryset.get`), 1 a named plain one, 0 only a tail, NULL for neither. The qualified name is the
-- more specific: "QuerySet get" names QuerySet and QuerySet.get (query.py), and the method's chunk
-- must not follow every window of the class. folded: 1
-- when every name the symbol matches was written with capitals (:cased) the symbol does not have; while
-- another candidate is spelled as asked, such a one has no tier, a boost as a tail's (a new user's
-- `QuerySet` listed three admin `queryset` methods no retriever found right after the class, above
-- QuerySet's own methods); with none spelled so (`Queryset`, `QUERYSET`), case is no evidence.
named AS MATERIALIZED (  -- once per row: scored reads each flag several times
    SELECT id, file_id, symbol, start_line, end_line, role, body,
           CASE WHEN demoted THEN 0 ELSE 2 * coalesce(match >= 1, 0) + coalesce(match = 2, 0) + 2 * coalesce(match = 3, 0)
                                         - coalesce(match IN (1, 2) AND (stub OR declared OR role = 'generated'), 0) END AS symbol_tier,
           coalesce(match = 0 OR demoted, 0) AS tail_named, path_tier,
           match IN (1, 2) AND NOT demoted AND role = 'source' AND instr(:names, json_quote(lower(symbol))) > 0 AS whole
    FROM (SELECT *, coalesce(folded, 0) AND max(coalesce(match >= 1 AND NOT folded, 0)) OVER () AS demoted
    FROM (SELECT pool.id, c.file_id, c.symbol, c.start_line, c.end_line, CASE WHEN c.kind IN ('license', 'imports') THEN c.kind ELSE f.role END AS role,
                 c.path GLOB '*.pyi' OR c.path GLOB '*.d.ts' OR c.path GLOB '*.d.[cm]ts' AS stub,
                 c.kind IN ('function', 'method') AS body,
                 c.kind IN ('function', 'method')
                     AND (rtrim(c.content, ' ' || char(9, 10, 13)) GLOB '*;' OR c.content GLOB '*abstract *')
                     AND instr(c.content, '{' || char(10)) = 0 AND instr(c.content, '{' || char(13)) = 0 AS declared,
                 coalesce((SELECT 3 FROM json_each(:placed) pl WHERE pl.value = pool.id),
                          (SELECT max(w.is_name * (1 + (instr(w.value, '.') > 0))) FROM wanted w
                           WHERE (lower(c.symbol) = w.value OR substr(lower(c.symbol), -length(w.value) - 1) = '.' || w.value)
                             AND (NOT w.typed OR c.kind = 'class')),
                          (SELECT 1 FROM named_definitions nd WHERE nd.id = pool.id)) AS match,
                 (SELECT min(w.cased IS NOT NULL AND c.symbol <> w.cased
                             AND substr(c.symbol, -length(w.cased) - 1) <> '.' || w.cased) FROM wanted w
                  WHERE w.is_name = 1 AND (lower(c.symbol) = w.value
                                           OR substr(lower(c.symbol), -length(w.value) - 1) = '.' || w.value))
                     AS folded,
                 coalesce((SELECT tier FROM named_files nf WHERE nf.file_id = c.file_id), 0) AS path_tier
          FROM pool JOIN chunks c ON c.id = pool.id JOIN files f ON f.id = c.file_id))
),
-- The filled cosine is read here, for the candidates left after fusion: a BM25 candidate that the
-- KNN list missed (zod, gson: the gold file was BM25's, and a flat list of near-equal cosines buried
-- it). Git dev set, five repositories, hybrid: see fusion.py KNN_BY_BEST_SHAPES. A chunk without a vector
-- fills nothing: :fill is read before this statement, and a watcher's commit in between added chunks
-- whose vectors were not made yet (a server failed 1-3 searches in 40 s of edits: "Error reading 1st
-- vector ... found NULL").
scored AS (
    SELECT nm.id, nm.file_id, nm.symbol, nm.start_line, nm.end_line, nm.start_line = nm.end_line AS one_line, nm.body,
           (coalesce(fu.cc, 0) + :rrf_weight * coalesce(fu.rrf, 0) + coalesce(
                CASE WHEN :fill = 1 AND fu.knn_rank IS NULL AND fu.bm25_rank IS NOT NULL AND fu.knn_hi > 0
                     THEN (1.0 - fu.w_bm25) * max(0.0, (1.0 - (SELECT vec_distance_cosine(v.embedding, :qvec)
                                                                FROM chunks_vec v WHERE v.rowid = nm.id)
                              - CASE WHEN :knn_by_best = 1 THEN 0.0 ELSE fu.knn_lo END)
                          / nullif(fu.knn_hi - CASE WHEN :knn_by_best = 1 THEN 0.0 ELSE fu.knn_lo END, 0)) END, 0))
           * coalesce(json_extract(:role_weights, '$.' || nm.role), 1.0)
           * CASE WHEN nm.symbol_tier + nm.path_tier > 0 OR nm.tail_named THEN :name_boost ELSE 1.0 END AS score,
           :tiered * (nm.symbol_tier + nm.path_tier) AS tier, :tiered * nm.symbol_tier AS in_symbol_tier,
           nm.role = 'test' AS test, nm.whole
    FROM named nm LEFT JOIN fused fu ON fu.id = nm.id
),
-- A named symbol cut into windows reads top-down: its chunks rank by their best score, then
-- by line, so the window holding the signature and docstring leads. A later window that neither
-- retriever found (score 0) leaves the tier, but of a function or method of 8 windows or fewer: a
-- class's 20 windows listed in line order pushed the real matches down (zod: "ZodError format issues"
-- ranked the bare `flatten` overloads 5th, ZodError.format 7th; `ZodString`'s interface, 7 windows of
-- members, filled ranks 2-8); a function's few are one body (a new user's `Model.save` lost its third
-- and fourth of 4, `Session.request` three of 5). So
-- does a later piece cut off from the windows before it (by other definitions: a class's comment
-- banners between its methods, each labelled with the class, filled a new user's top 6 for
-- `QuerySet` after its first window): it ranks by its score alone, without the name's boost. Only a chunk of another symbol cuts it off: the blank line a function's
-- windows leave out between them cut a new user's `Session.send` into three places, #1, #6 and #8.
-- A test's definition of the name that neither retriever found leaves the tier too: zod's tests each
-- define `const schema = z.nan()`, and for `schema` five of them, score 0, came before BM25's first chunk
-- (starlette's `app`: seven test-local `app`s). The windows of one line too long for a chunk are one place:
-- the best scored stands for them (a 40 KB base64 constant's windows, each holding its function's
-- symbol, filled nine of a fresh user's top 10 for the function's name). Ranked on ids and scores
-- alone: the text of a chunk joins in only for the rows returned.
windows AS MATERIALIZED (  -- once per row: ranked reads bare five times, each an EXISTS over the file's chunks
    SELECT id, score, start_line, tier, in_symbol_tier, symbol_best, whole,
           in_symbol_tier BETWEEN 1 AND 3 AND start_line > first_line
               AND ((score = 0 AND (windows > 8 OR NOT body)) OR (start_line > 1 + before_end
                                  AND EXISTS (SELECT 1 FROM chunks o WHERE o.file_id = sw.file_id
                                                AND o.start_line > sw.before_end AND o.start_line < sw.start_line
                                                AND o.symbol IS NOT sw.symbol)))
           OR (in_symbol_tier > 0 AND test AND symbol_best = 0) AS bare,
           repeated
    FROM (SELECT id, file_id, symbol, score, start_line, tier, in_symbol_tier, body, test, whole, max(score) OVER w AS symbol_best,
                 min(start_line) OVER w AS first_line, lag(end_line) OVER (w ORDER BY start_line) AS before_end,
                 count(*) OVER w AS windows,
                 one_line AND row_number() OVER (PARTITION BY file_id, start_line, one_line ORDER BY score DESC, id) > 1
                     AS repeated
          FROM scored WINDOW w AS (PARTITION BY file_id, symbol)) sw
),
ranked AS (
    SELECT id, score, tier, row_number() OVER (ORDER BY tier DESC, whole DESC, group_score DESC,
                                         CASE WHEN in_symbol_tier > 0 THEN start_line END, score DESC, id) AS pos
    FROM (SELECT id, CASE WHEN bare THEN score / :name_boost ELSE score END AS score, start_line,
                 in_symbol_tier > 0 AND whole AND NOT bare AS whole,
                 CASE WHEN bare THEN 0 ELSE tier END AS tier,
                 CASE WHEN bare THEN 0 ELSE in_symbol_tier END AS in_symbol_tier,
                 CASE WHEN in_symbol_tier > 0 AND NOT bare THEN symbol_best
                      WHEN bare THEN score / :name_boost ELSE score END AS group_score
          FROM windows WHERE NOT repeated)
),
-- How well this index as a whole matches the query: the mean cosine of its 10 nearest chunks, or of
-- its nearest half when it has fewer than 20 (merge.py weighs each codebase of a workspace search by
-- it; one model's cosines compare): a member of 2 chunks was judged by its unrelated second, and its
-- one answer lost to 50 chunks of a member matching nothing (a new user's billing.py beside notes).
knn_match AS (
    SELECT avg(raw) AS knn_match, max(raw) AS knn_best FROM (SELECT raw FROM knn_hits ORDER BY raw DESC
        LIMIT (SELECT min(10, max(1, (count(*) + 1) / 2)) FROM knn_hits))
),
-- A filtered search's evidence, read within its filter (no_good_match, search/searcher.py): whether an allowed
-- chunk holds every term (:held_all, the terms AND-ed), a name only code writes (:held_coined, query.py
-- coined_match) or, in its file, a definition named as a dotted name's last part (:held_members); NULL: not read.
-- Read over the whole index, the words of `access/` told a search of `utils/cryptography/*` it matched well.
-- Each matching chunk is looked up among the allowed ones, which are never listed here: as `rowid IN (allowed)`,
-- FTS5 ran the MATCH once per allowed chunk (a glob of '*.c' on 1.1M chunks: 1.3 -> 44 s, a new user's helper),
-- and a list of them made again cost 0.45 s of a 2.1 s `.h` search.
held AS (
    SELECT (SELECT EXISTS (SELECT 1 FROM chunks_fts f WHERE chunks_fts MATCH :held_all
                           AND EXISTS (SELECT 1 FROM allowed a WHERE a.id = f.rowid))
            WHERE :held_all IS NOT NULL) AS every_term,
           (SELECT EXISTS (SELECT 1 FROM chunks_fts f WHERE chunks_fts MATCH :held_coined
                           AND EXISTS (SELECT 1 FROM allowed a WHERE a.id = f.rowid))
                   OR EXISTS (SELECT 1 FROM definitions d JOIN chunks c ON c.file_id = d.file_id
                              WHERE d.name IN (SELECT value FROM json_each(:held_members))
                                AND EXISTS (SELECT 1 FROM allowed a WHERE a.id = c.id))
            WHERE :held_coined IS NOT NULL) AS coined
)
SELECT c.id, c.path, c.start_line, c.end_line, c.language, c.kind, c.symbol, c.content, r.score, r.tier,
       fu.cc, fu.rrf, fu.bm25_rank, fu.knn_rank, fu.distance, f.role,
       f.hash AS file_hash, f.size AS file_size, f.mtime_ns AS file_mtime_ns, m.knn_match, m.knn_best,
       h.every_term, h.coined
FROM ranked r
JOIN chunks c ON c.id = r.id
JOIN files f ON f.id = c.file_id
LEFT JOIN fused fu ON fu.id = r.id
CROSS JOIN knn_match m
CROSS JOIN held h
WHERE r.pos <= :limit
ORDER BY r.pos;

-- name: knn_ahead
-- The KNN list of a large unfiltered search (:depth pairs of chunk id and cosine distance, nearest
-- first), given to search_hybrid as :knn_given. search/knn.py runs it on a second connection
-- while the first computes BM25's list (search/pruning.py): apsw lets go of the GIL inside SQLite,
-- so on two cores the two retrievers overlap (docs/benchmarks.md, seventeenth round).
-- Parameters: :qvec, :depth; :coarse_k, the sign-bit candidates of each partition (0: none), or
-- :nprobe, the IVF lists probed (0: none), and :ivf_rescore, their int8 candidates re-scored.
WITH
-- Large unfiltered searches: hamming KNN over the sign bits takes the :coarse_k nearest of each
-- of chunks_bits' 8 partitions (part = rowid % 8), the float cosine re-scores them and keeps
-- :depth (binary quantisation with float rescoring). Eight small top-k's, not one large one:
-- vec0's top-k selection grows with k faster than its scan (50k rows: 11-15 ms for one k=100,
-- 9 ms for 8 x k=13, 12 ms for 8 x k=25), and 8 x 25 candidates keep more of the exact top 10
-- than 100 (0.90 vs 0.83 on Sphinx 5.1.1's 27.9k real vectors, 180 queries). CROSS JOIN keeps the
-- part numbers outer, so vec0 gets each as the constant partition key of its own scan (the same
-- rows and time as eight literal arms, which used 130 of SQLite's 1,000 units of expression depth
-- that search_hybrid is near).
coarse AS (
    SELECT b.rowid AS id FROM json_each('[0, 1, 2, 3, 4, 5, 6, 7]') p CROSS JOIN chunks_bits b
    WHERE :coarse_k > 0 AND b.part = p.value AND b.embedding MATCH vec_quantize_binary(:qvec) AND b.k = :coarse_k
),
knn_rescored AS (
    SELECT co.id, vec_distance_cosine(v.embedding, :qvec) AS distance
    FROM coarse co JOIN chunks_vec v ON v.rowid = co.id
    ORDER BY distance LIMIT :depth
),
-- Clustered indexes (storage/ann.py), unfiltered searches: the :nprobe lists whose centroids are
-- nearest the query, :depth int8 candidates from each (a list's rows only: its partition key), the
-- best :ivf_rescore of them re-scored with the float cosine. CROSS JOIN keeps the probes outer, so
-- vec0 gets each list as a constant of its own scan (one arm per list also works, but 3+ arms
-- nest this statement past SQLite's limit: "VIEWs and/or subqueries nested too deep").
-- An older index read as it is gets empty lists (ann.stand_in).
probes AS MATERIALIZED (
    SELECT rowid AS list FROM chunks_ivf WHERE :nprobe > 0 AND centroid MATCH :qvec AND k = :nprobe
),
knn_listed AS (
    SELECT l.id, vec_distance_cosine(v.embedding, :qvec) AS distance
    FROM (SELECT cl.rowid AS id FROM probes p CROSS JOIN chunks_lists cl
          WHERE cl.list = p.list AND cl.embedding MATCH vec_quantize_int8(:qvec, 'unit') AND cl.k = :depth
          ORDER BY cl.distance LIMIT :ivf_rescore) l
    JOIN chunks_vec v ON v.rowid = l.id
    ORDER BY distance LIMIT :depth
)
SELECT id, distance FROM (SELECT * FROM knn_rescored UNION ALL SELECT * FROM knn_listed) ORDER BY distance;

-- name: knn_match
-- A workspace search's first, cheap look at one member (service/fanout.py): the mean cosine of
-- its 10 nearest chunks (of the nearest half of fewer than 20: :depth is 20), as search_hybrid's
-- knn_match computes it, without BM25, fusion or
-- naming; :coarse_k hamming candidates per partition (0: the exact scan of :depth). Members far
-- below the best are then left out of the full search (search/searcher.py Searcher.match).
WITH
coarse AS (
    SELECT rowid AS id FROM chunks_bits WHERE :coarse_k > 0 AND part = 0
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 1
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 2
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 3
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 4
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 5
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 6
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
    UNION ALL SELECT rowid FROM chunks_bits WHERE :coarse_k > 0 AND part = 7
      AND embedding MATCH vec_quantize_binary(:qvec) AND k = :coarse_k
),
nearest AS (
    SELECT distance FROM chunks_vec WHERE :coarse_k = 0 AND embedding MATCH :qvec AND k = :depth
    UNION ALL
    SELECT vec_distance_cosine(v.embedding, :qvec) FROM coarse co JOIN chunks_vec v ON v.rowid = co.id
)
SELECT avg(1.0 - distance) AS knn_match FROM (SELECT distance FROM nearest ORDER BY distance
    LIMIT (SELECT min(10, max(1, (count(*) + 1) / 2)) FROM nearest));

-- name: any_allowed
-- 1 when some chunk passes a search's extension and path filters (:exts, :glob as search_hybrid
-- takes them), else 0: an empty answer says whether the filters left nothing to search.
SELECT EXISTS (
    SELECT 1 FROM chunks c
    WHERE (:exts IS NULL OR EXISTS (SELECT 1 FROM json_each(:exts) e WHERE c.path LIKE '%' || e.value))
      AND (:glob IS NULL OR c.path GLOB :glob OR (instr(:glob, '/') = 0 AND c.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND c.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))
);

-- name: index_extensions
-- The file name endings an index holds, the commonest first (what a filter could have named).
SELECT lower(CASE WHEN instr(name, '.') > 0 THEN '.' || replace(name, rtrim(name, replace(name, '.', '')), '')
                  ELSE name END) AS ext, count(*) AS files
FROM (SELECT replace(path, rtrim(path, replace(path, '/', '')), '') AS name FROM files)
GROUP BY ext ORDER BY files DESC LIMIT 8;

-- name: coined_held
-- 1 when some chunk holds a name of the query only code writes (:fts, search/query.py's coined_match), or
-- a definition is named as a dotted one's last part (:members, a JSON array: `ctx.Next` is Context.Next).
SELECT EXISTS (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH :fts)
    OR EXISTS (SELECT 1 FROM definitions WHERE name IN (SELECT value FROM json_each(:members)));

-- name: fts_any
-- 1 when some chunk holds every one of the query's terms (:fts_all: the terms AND-ed): a query
-- the vectors find nothing close to may still be matched word for word (search/searcher.py).
SELECT EXISTS (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH :fts_all);

-- name: file_vectors
-- The stored chunk vectors of a file's line range (find-similar: no re-embedding), with their symbols.
SELECT c.id, c.start_line, c.end_line, c.symbol, v.embedding
FROM chunks c JOIN chunks_vec v ON v.rowid = c.id
WHERE c.path = :path
  AND (:start_line IS NULL OR c.end_line >= :start_line)
  AND (:end_line IS NULL OR c.start_line <= :end_line)
ORDER BY c.start_line;

-- name: create_vocab
-- Per-connection (temp) view of FTS5's term statistics: the .db itself stays unchanged. The
-- vocabulary holds stems, so query terms are stemmed by an empty temp FTS5 table with the
-- tokenizer of chunks_fts (sql/schema.sql) and its 'instance' view: SQLite's own stemmer,
-- not a second one in Python that could disagree. Temp tables are writable even when the
-- index is opened read-only or immutable.
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_vocab USING fts5vocab(main, 'chunks_fts', 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_probe USING fts5(
    term, tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_probe_tokens USING fts5vocab(temp, 'stem_probe', 'instance');

-- name: path_has_a_term
-- 1 when some indexed path holds one of the query's terms (:fq, an FTS5 OR-expression), else
-- nothing: a question that names a file by a word of its path ("add turkmen (tk) locale" ->
-- locales/tk.ts), where BM25 finds what the vectors miss.
SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH '{path} : (' || :fq || ')' LIMIT 1;

-- name: term_doc_counts
-- How many chunks contain each term (:terms is a JSON array), by its stem; absent terms are
-- left out. A term of several tokens (4.17.2) counts as its rarest token. The term as written
-- is looked up too: an index of schema 4 opened immutable (unmigrated) holds unstemmed terms.
-- Linear in the terms: the stems are read in one pass of the probe's instances, joined to the
-- probe by rowid, and each is one equality look-up of the vocabulary (CROSS JOIN keeps the
-- vocabulary inside). Joined to json_each instead, every term re-read the whole array: 13,197
-- terms of a 100 KB query took 23.7 s, now 1.2 s (6.4k-chunk index, load 2).
DELETE FROM temp.stem_probe;
INSERT INTO temp.stem_probe(rowid, term) SELECT key + 1, value FROM json_each(:terms);
WITH stems AS MATERIALIZED (
    SELECT p.rowid AS key, p.term AS value, s.term AS stem
    FROM temp.stem_probe_tokens s JOIN temp.stem_probe p ON p.rowid = s.doc
),
counted AS (
    SELECT key, value, v.doc FROM stems CROSS JOIN temp.chunks_fts_vocab v WHERE v.term = stems.stem
    UNION ALL
    SELECT key, value, v.doc FROM stems CROSS JOIN temp.chunks_fts_vocab v WHERE v.term = stems.value
)
SELECT value AS term, min(doc) AS doc FROM counted GROUP BY key;

-- name: fts_averages
-- FTS5's averages record (rowid 1 of its %_data table): the number of rows as a varint, then each
-- column's token total. bm25() reads its row count from here; search/pruning.py needs the same count
-- (counting 2.8M chunks costs tens of milliseconds, this one page read).
SELECT block FROM chunks_fts_data WHERE id = 1;

-- name: phrase_count
-- How many chunks hold the FTS5 phrase :phrase, counting no further than :cap (a probe: the rows of
-- a common word are many, and past the cap only "common" matters).
SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH :phrase LIMIT :cap);

-- name: bm25_plain
-- BM25's top :depth of the plain OR query :fts_query, best first: a large search's list when search/pruning.py
-- cannot split it (one phrase: `NULL`, `kmalloc`), made ahead of search_hybrid so that the KNN list is made beside
-- it (search/knn.py), not after it inside the fusion statement.
SELECT id, raw
FROM (SELECT rowid AS id, -bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path) AS raw
      FROM chunks_fts WHERE chunks_fts MATCH :fts_query
      ORDER BY bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path)
      LIMIT :depth)
ORDER BY raw DESC, id;

-- name: bm25_pruned
-- BM25's top :depth among the chunks holding one of the query's rare phrases (:fts_rare, an OR
-- of them), scored by every phrase: `(rare) AND (common)` holds each phrase once, so bm25() gives
-- a chunk that holds both the score of the whole OR query; a chunk holding rare phrases alone,
-- `(rare) NOT (common)`, gets that score too (its common phrases add 0). The two lists share no
-- chunk, so each chunk is scored once: scoring every rare chunk again, as the OR of the rare
-- phrases alone did, cost 9% of the kernel's BM25 p50 (docs/benchmarks.md, ninth round).
-- search/pruning.py says when chunks holding common phrases alone cannot enter.
SELECT id, raw
FROM (SELECT * FROM (SELECT rowid AS id,
                            -bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path) AS raw
                     FROM chunks_fts WHERE chunks_fts MATCH :fts_both
                     ORDER BY bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path)
                     LIMIT :depth)
      UNION ALL
      SELECT * FROM (SELECT rowid AS id,
                            -bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path) AS raw
                     FROM chunks_fts WHERE chunks_fts MATCH :fts_rare_only
                     ORDER BY bm25(chunks_fts, :bm25_content, :bm25_subtokens, :bm25_symbol, :bm25_path)
                     LIMIT :depth))
ORDER BY raw DESC, id
LIMIT :depth;

-- name: line_pieces
-- The pieces of the long lines some results are a part of: for each of :ids (a JSON array of chunk
-- ids) that covers one line, every chunk of its file covering exactly that line, in byte order, with
-- its length in characters and whether it ends the line (a line too long for one chunk is cut into
-- pieces, ingest/chunking/layout.py line_parts). One row for a chunk that is the whole line.
SELECT c.id AS id, o.start_byte AS start_byte, o.end_byte AS end_byte, length(o.content) AS chars,
       substr(o.content, -1) = char(10) AS ends_line, o.id = c.id AS own
FROM chunks c JOIN chunks o ON o.file_id = c.file_id AND o.start_line = c.start_line AND o.end_line = c.start_line
WHERE c.id IN (SELECT value FROM json_each(:ids)) AND c.end_line = c.start_line
ORDER BY c.id, o.start_byte;

-- name: files_at_tail
-- The indexed files whose lower-case path is :tail or ends with '/' || :tail (the last components of a
-- path as another machine wrote it: search/locations.py), each with its last indexed line.
SELECT path, (SELECT max(c.end_line) FROM chunks c WHERE c.file_id = files.id) AS last_line FROM files
WHERE path LIKE '%' || :tail AND (lower(path) = :tail OR substr(lower(path), -length(:tail) - 1) = '/' || :tail);

-- name: symbols_at_lines
-- For each [path, line] of :lines, the symbol of the smallest chunk holding that line that has one.
SELECT DISTINCT (SELECT c.symbol FROM chunks c
                 WHERE c.file_id = f.id AND c.start_line <= j.value ->> 1 AND c.end_line >= j.value ->> 1
                   AND c.symbol IS NOT NULL AND c.symbol <> ''
                 ORDER BY c.end_line - c.start_line, c.start_line LIMIT 1) AS symbol
FROM json_each(:lines) j JOIN files f ON f.path = j.value ->> 0
WHERE symbol IS NOT NULL;

-- name: chunks_at_places
-- For each [path, line] of :lines, the chunks holding the line, or when none does (a blank line between
-- definitions) the first chunk below it, else the last above it (search/locations.py).
SELECT j.value ->> 0 AS path, j.value ->> 1 AS line, c.id
FROM json_each(:lines) j JOIN files f ON f.path = j.value ->> 0
JOIN chunks c ON c.file_id = f.id
WHERE (c.start_line <= j.value ->> 1 AND c.end_line >= j.value ->> 1)
   OR (NOT EXISTS (SELECT 1 FROM chunks h WHERE h.file_id = f.id AND h.start_line <= j.value ->> 1
                                            AND h.end_line >= j.value ->> 1)
       AND c.id = coalesce((SELECT n.id FROM chunks n WHERE n.file_id = f.id AND n.start_line > j.value ->> 1
                            ORDER BY n.start_line LIMIT 1),
                           (SELECT p.id FROM chunks p WHERE p.file_id = f.id ORDER BY p.end_line DESC LIMIT 1)));
