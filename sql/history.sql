-- The history of a codebase in its index: commits of the branch the work tree is on, their diff
-- hunks as chunks, FTS5 rows over both, and one vector per commit. Every table is named history_*
-- (connection.sql's index_shape counts them as ours). Dates are unix seconds (the author date);
-- lines are 1-based.

-- name: history_schema
-- Idempotent; run with create_schema. history_vec is made by history_vec_create as wide as
-- chunks_vec before the first history is written (its model may be another than the default).
CREATE TABLE IF NOT EXISTS history_commits (
    id          INTEGER PRIMARY KEY,
    sha         TEXT NOT NULL UNIQUE,      -- 40 hex
    author      TEXT NOT NULL,
    email       TEXT NOT NULL,
    date        INTEGER NOT NULL,          -- author date, unix seconds
    subject     TEXT NOT NULL,
    body        TEXT NOT NULL,
    files       TEXT NOT NULL,             -- JSON array of the paths it touched that the rules keep
    hunk_count  INTEGER NOT NULL,          -- hunks stored (a sweeping commit is cut, see ingest/history.py)
    subtokens   TEXT NOT NULL              -- identifier sub-tokens of subject and body
);
CREATE INDEX IF NOT EXISTS history_commits_date ON history_commits(date);

CREATE TABLE IF NOT EXISTS history_hunks (
    id         INTEGER PRIMARY KEY,
    commit_id  INTEGER NOT NULL REFERENCES history_commits(id),
    path       TEXT NOT NULL,              -- after the commit (its old path for a deletion)
    old_path   TEXT,                       -- before, when renamed
    old_start  INTEGER NOT NULL,           -- 1-based; 0 when the hunk adds to an empty file
    old_lines  INTEGER NOT NULL,
    new_start  INTEGER NOT NULL,           -- 1-based; 0 when the hunk empties the file
    new_lines  INTEGER NOT NULL,
    content    TEXT NOT NULL,              -- the hunk: its @@ line, then ' ', '-' and '+' lines
    subtokens  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_hunks_commit ON history_hunks(commit_id);

-- BM25 as chunks_fts tokenizes code (schema.sql): '_' in words, porter stemming, sub-tokens.
CREATE VIRTUAL TABLE IF NOT EXISTS history_commits_fts USING fts5(
    subject, body, files, subtokens,
    content = 'history_commits', content_rowid = 'id',
    tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS history_hunks_fts USING fts5(
    content, subtokens, path,
    content = 'history_hunks', content_rowid = 'id',
    tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
);

-- Commits waiting for their vector (the vector phase embeds them after the chunks).
CREATE TABLE IF NOT EXISTS history_queue (
    commit_id INTEGER PRIMARY KEY          -- history_commits.id
);

-- name: history_vec_create
-- rowid = history_commits.id; {dims} is replaced by a validated integer (ingest/history_vectors.py).
-- Run while it holds no vector.
DROP TABLE IF EXISTS history_vec;
CREATE VIRTUAL TABLE history_vec USING vec0(
    embedding float[{dims}] distance_metric=cosine
);

-- name: history_vec_sql
SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'history_vec';

-- name: history_wipe
-- With schema.sql's wipe (another model): the history goes too, its vectors being that model's.
DROP TABLE IF EXISTS history_vec;
DROP TABLE IF EXISTS history_commits_fts;
DROP TABLE IF EXISTS history_hunks_fts;
DELETE FROM history_queue;
DELETE FROM history_hunks;
DELETE FROM history_commits;

-- name: history_present
-- 1 when this file has the history tables (an index of schema 5 read as it is has none).
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history_commits');

-- name: history_shas
SELECT id, sha FROM history_commits;

-- name: history_commit_insert
INSERT INTO history_commits(sha, author, email, date, subject, body, files, hunk_count, subtokens)
VALUES (:sha, :author, :email, :date, :subject, :body, :files, :hunk_count, :subtokens)
RETURNING id;

-- name: history_commit_fts_insert
INSERT INTO history_commits_fts(rowid, subject, body, files, subtokens)
SELECT id, subject, body, files, subtokens FROM history_commits WHERE id = :id;

-- name: history_hunk_insert
INSERT INTO history_hunks(commit_id, path, old_path, old_start, old_lines, new_start, new_lines, content, subtokens)
VALUES (:commit_id, :path, :old_path, :old_start, :old_lines, :new_start, :new_lines, :content, :subtokens);

-- name: history_hunks_fts_insert
INSERT INTO history_hunks_fts(rowid, content, subtokens, path)
SELECT id, content, subtokens, path FROM history_hunks WHERE commit_id = :id;

-- name: history_queue_insert
INSERT OR IGNORE INTO history_queue(commit_id) VALUES (:id);

-- name: history_commit_delete
-- One commit and everything of it (run inside the caller's transaction). The FTS5 'delete'
-- rows must repeat the indexed values, read here from the content tables before they go.
INSERT INTO history_hunks_fts(history_hunks_fts, rowid, content, subtokens, path)
SELECT 'delete', id, content, subtokens, path FROM history_hunks WHERE commit_id = :id;
DELETE FROM history_hunks WHERE commit_id = :id;
INSERT INTO history_commits_fts(history_commits_fts, rowid, subject, body, files, subtokens)
SELECT 'delete', id, subject, body, files, subtokens FROM history_commits WHERE id = :id;
DELETE FROM history_queue WHERE commit_id = :id;
DELETE FROM history_commits WHERE id = :id;

-- name: history_commits_of_paths
-- The commits holding a hunk of one of :paths (a JSON array), by its path or its path before a rename.
SELECT DISTINCT commit_id FROM history_hunks
WHERE path IN (SELECT value FROM json_each(:paths)) OR old_path IN (SELECT value FROM json_each(:paths));

-- name: history_vec_delete
DELETE FROM history_vec WHERE rowid = :id;

-- name: history_counts
-- commits, hunks, and those of the commits still without a vector.
SELECT (SELECT count(*) FROM history_commits) AS commits, (SELECT count(*) FROM history_hunks) AS hunks,
       (SELECT count(*) FROM history_queue) AS pending;

-- name: history_queue_next
-- Up to :n queued commits with their embedded text's parts, oldest id first.
SELECT c.id, c.sha, c.subject, c.body, c.files,
       (SELECT group_concat(content, char(10)) FROM (
            SELECT h.content FROM history_hunks h WHERE h.commit_id = c.id ORDER BY h.id LIMIT :hunks)) AS diff
FROM history_queue q JOIN history_commits c ON c.id = q.commit_id
ORDER BY q.commit_id
LIMIT :n;

-- name: history_queue_still_wanted
-- Which of the embedded commits (:commits, a JSON array of {"id", "sha"}) are still queued under
-- the same sha: a rewrite may have deleted a commit, and its id been given to another, meanwhile.
SELECT q.commit_id AS id
FROM json_each(:commits) j
JOIN history_queue q ON q.commit_id = j.value ->> 'id'
JOIN history_commits c ON c.id = q.commit_id AND c.sha = j.value ->> 'sha';

-- name: history_vec_insert
INSERT INTO history_vec(rowid, embedding) VALUES (:id, :embedding);

-- name: history_queue_done
DELETE FROM history_queue WHERE commit_id = :id;

-- name: history_search
-- Hybrid search over the history, one row per commit: three ranked lists fused by Reciprocal
-- Rank Fusion (score = sum of 1 / (:rrf_k + rank)) in this one statement:
--   commit_bm25  BM25 over subject, body and touched paths (history_commits_fts);
--   hunk_bm25    BM25 over the hunks, each commit ranked by its best hunk (history_hunks_fts);
--   knn          cosine KNN over the commit vectors (history_vec), when :qvec is not NULL.
-- A commit still waiting for its vector takes its best lexical rank in the KNN's place (as
-- search.sql does for queued chunks: "no vector yet" is not "irrelevant"), and one without a hunk
-- (a pure rename, a binary or left-out file's change) its message's rank in the hunks' place: a new
-- user's "renamed retry module" ranked the rename 4th, under commits that matched weakly in both lists.
-- Filters, applied inside each list (KNN through rowid IN, which sqlite-vec pushes into its scan):
--   :since  unix seconds, or NULL; :glob  SQLite GLOB over a hunk's path (a commit passes when one of
--   its hunks does; '*' also matches '/'; without '/', also the file name), or NULL;
--   :filtered 1 when either is set. :fts the MATCH expression or NULL; :k rows per list; :limit;
--   :confident_gap and :subject_all see `standout`.
WITH
allowed AS (
    SELECT c.id FROM history_commits c
    WHERE :filtered = 1
      AND (:since IS NULL OR c.date >= :since)
      AND (:glob IS NULL OR EXISTS (
            SELECT 1 FROM history_hunks h WHERE h.commit_id = c.id
              AND (h.path GLOB :glob OR (instr(:glob, '/') = 0 AND h.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND h.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))))
),
commit_bm25 AS (
    SELECT id, row_number() OVER (ORDER BY score) AS rnk, -score AS raw
    FROM (SELECT rowid AS id, bm25(history_commits_fts, 4.0, 1.0, 1.0, 0.5) AS score
          FROM history_commits_fts
          WHERE :fts IS NOT NULL AND history_commits_fts MATCH :fts
            AND (:filtered = 0 OR rowid IN (SELECT id FROM allowed))
          ORDER BY score
          LIMIT :k)
),
hunk_hits AS (
    SELECT h.commit_id AS id, bm25(history_hunks_fts, 1.0, 0.5, 0.5) AS score
    FROM history_hunks_fts JOIN history_hunks h ON h.id = history_hunks_fts.rowid
    WHERE :fts IS NOT NULL AND history_hunks_fts MATCH :fts
      AND (:glob IS NULL OR h.path GLOB :glob OR (instr(:glob, '/') = 0 AND h.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND h.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))
      AND (:filtered = 0 OR h.commit_id IN (SELECT id FROM allowed))
    ORDER BY score
    LIMIT :k * 4
),
hunk_bm25 AS (
    SELECT id, row_number() OVER (ORDER BY min(score)) AS rnk
    FROM hunk_hits GROUP BY id ORDER BY min(score) LIMIT :k
),
knn AS (
    SELECT rowid AS id, row_number() OVER (ORDER BY distance) AS rnk, distance
    FROM history_vec
    WHERE :qvec IS NOT NULL AND embedding MATCH :qvec AND k = :k
      AND (:filtered = 0 OR rowid IN (SELECT id FROM allowed))
),
lexical AS (
    SELECT id, min(rnk) AS rnk FROM (SELECT id, rnk FROM commit_bm25 UNION ALL SELECT id, rnk FROM hunk_bm25)
    GROUP BY id
),
-- The commit whose message stands out ((s1 - s2) / s1 of the two best message scores at least
-- :confident_gap), or whose subject holds every query word: its message's rank stands in for a hunk
-- rank it lacks or that is worse. A new user's verbatim subject ranked its commit 9th, under commits
-- matching weakly in both lists, when its diff did not hold the words (a list of names).
standout AS (
    SELECT id FROM commit_bm25
    WHERE rnk = 1 AND (raw - coalesce((SELECT raw FROM commit_bm25 WHERE rnk = 2), 0)) / nullif(raw, 0) >= :confident_gap
    UNION
    -- and so do the commits whose subject holds every word of the query (:subject_all, an AND over the
    -- subject column): a sibling commit's pasted subject ("... (#6890)" beside "... (#6345)") stood out of nothing
    SELECT rowid FROM history_commits_fts WHERE :subject_all IS NOT NULL AND history_commits_fts MATCH :subject_all
),
fused AS (
    SELECT ids.id,
           coalesce(1.0 / (:rrf_k + cb.rnk), 0)
           + coalesce(1.0 / (:rrf_k + CASE WHEN ids.id IN standout THEN min(coalesce(hb.rnk, cb.rnk), coalesce(cb.rnk, hb.rnk))
                                           ELSE hb.rnk END),
                      CASE WHEN hc.hunk_count = 0 THEN 1.0 / (:rrf_k + cb.rnk) END, 0)
           + coalesce(1.0 / (:rrf_k + kn.rnk),
                      CASE WHEN :qvec IS NOT NULL AND q.commit_id IS NOT NULL THEN 1.0 / (:rrf_k + lx.rnk) END, 0)
             AS score,
           cb.rnk AS commit_rank, hb.rnk AS hunk_rank, kn.rnk AS knn_rank, 1 - kn.distance AS cosine
    FROM (SELECT id FROM commit_bm25 UNION SELECT id FROM hunk_bm25 UNION SELECT id FROM knn) ids
    LEFT JOIN commit_bm25 cb ON cb.id = ids.id
    LEFT JOIN hunk_bm25 hb ON hb.id = ids.id
    LEFT JOIN knn kn ON kn.id = ids.id
    LEFT JOIN lexical lx ON lx.id = ids.id
    LEFT JOIN history_queue q ON q.commit_id = ids.id
    JOIN history_commits hc ON hc.id = ids.id
)
SELECT c.id, c.sha, c.author, c.email, c.date, c.subject, c.body, c.files, c.hunk_count,
       f.score, f.commit_rank, f.hunk_rank, f.knn_rank, f.cosine
FROM fused f JOIN history_commits c ON c.id = f.id
ORDER BY f.score DESC, c.date DESC
LIMIT :limit;

-- name: history_search_unranked
-- The newest commits passing the filters, for a query of no searchable word and no vector.
SELECT c.id, c.sha, c.author, c.email, c.date, c.subject, c.body, c.files, c.hunk_count,
       0.0 AS score, NULL AS commit_rank, NULL AS hunk_rank, NULL AS knn_rank, NULL AS cosine
FROM history_commits c
WHERE (:since IS NULL OR c.date >= :since)
  AND (:glob IS NULL OR EXISTS (
        SELECT 1 FROM history_hunks h WHERE h.commit_id = c.id
          AND (h.path GLOB :glob OR (instr(:glob, '/') = 0 AND h.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND h.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))))
ORDER BY c.date DESC
LIMIT :limit;

-- name: history_hunks_of
-- Up to :n hunks of each commit of :ids (a JSON array of history_commits ids) passing :glob,
-- those matching :fts first (by BM25), then in diff order. One MATCH for all of them: looking
-- the hunks up per commit, by rowid IN or rowid =, cost ~20-100 ms a commit (measured on Flask).
-- `matching` is MATERIALIZED so that a NULL :fts (a query of stop words only) skips the MATCH:
-- flattened into the join, FTS5 was handed the NULL and failed with a syntax error.
WITH matching AS MATERIALIZED (
    SELECT rowid AS id, bm25(history_hunks_fts, 1.0, 0.5, 0.5) AS score
    FROM history_hunks_fts WHERE :fts IS NOT NULL AND history_hunks_fts MATCH :fts
)
SELECT commit_id, id, path, old_path, old_start, old_lines, new_start, new_lines, content, matched
FROM (
    SELECT h.*, m.score IS NOT NULL AS matched,
           row_number() OVER (PARTITION BY h.commit_id ORDER BY m.score IS NULL, m.score, h.id) AS nth
    FROM history_hunks h
    LEFT JOIN matching m ON m.id = h.id
    WHERE h.commit_id IN (SELECT value FROM json_each(:ids))
      AND (:glob IS NULL OR h.path GLOB :glob OR (instr(:glob, '/') = 0 AND h.path GLOB '*/' || :glob)
              OR (instr(:glob, '**/') > 0
                  AND h.path GLOB replace(iif(substr(:glob, 1, 3) = '**/', substr(:glob, 4), :glob), '/**/', '/')))
)
WHERE nth <= :n
ORDER BY commit_id, nth;

-- name: history_has_vectors
SELECT EXISTS (SELECT 1 FROM history_vec);
