-- The Merkle tree of the indexed files: a directory's hash covers its children's names and
-- hashes, so the root names the whole index's content (a snapshot's identity), and a changed
-- file rehashes only the folders above it.

-- name: merkle_all
SELECT path, parent, is_dir, hash FROM merkle_nodes;

-- name: merkle_near
-- The folders :folders (a JSON array of paths, '' the root) and their children: the nodes a change of
-- files in those folders rehashes (plan.py's _tree_near). One pass over the table in SQLite; only
-- those rows reach Python.
SELECT path, parent, is_dir, hash FROM merkle_nodes
WHERE path IN (SELECT value FROM json_each(:folders)) OR parent IN (SELECT value FROM json_each(:folders));

-- name: merkle_root
SELECT hash FROM merkle_nodes WHERE path = '';

-- name: merkle_upsert
INSERT INTO merkle_nodes(path, parent, is_dir, hash) VALUES (:path, :parent, :is_dir, :hash)
ON CONFLICT(path) DO UPDATE SET parent = excluded.parent, is_dir = excluded.is_dir, hash = excluded.hash;

-- name: merkle_delete
DELETE FROM merkle_nodes WHERE path = :path;
