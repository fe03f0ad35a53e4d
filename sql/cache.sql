-- The embedding cache shared by every codebase ($CODII_SQL_HOME/cache/embeddings.db):
-- key = sha256 of (model id, embedded text). A cache only: deleting it loses nothing.

-- name: cache_schema
CREATE TABLE IF NOT EXISTS vectors (
    key       TEXT PRIMARY KEY,
    embedding BLOB NOT NULL          -- float32[dims], little-endian
) WITHOUT ROWID;

-- name: cache_get
-- :keys is a JSON array of keys.
SELECT key, embedding FROM vectors WHERE key IN (SELECT value FROM json_each(:keys));

-- name: cache_put
INSERT OR IGNORE INTO vectors(key, embedding) VALUES (:key, :embedding);
