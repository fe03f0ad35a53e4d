-- The Merkle tree of the indexed files: a directory's hash covers its children's names and
-- hashes, so comparing two roots says whether anything changed, and a differing subtree
-- says where.

-- name: merkle_all
SELECT path, parent, is_dir, hash FROM merkle_nodes;

-- name: merkle_root
SELECT hash FROM merkle_nodes WHERE path = '';

-- name: merkle_upsert
INSERT INTO merkle_nodes(path, parent, is_dir, hash) VALUES (:path, :parent, :is_dir, :hash)
ON CONFLICT(path) DO UPDATE SET parent = excluded.parent, is_dir = excluded.is_dir, hash = excluded.hash;

-- name: merkle_delete
DELETE FROM merkle_nodes WHERE path = :path;
