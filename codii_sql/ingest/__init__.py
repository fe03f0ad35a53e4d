"""Files in, index rows out: ignore rules, the walk, the Merkle tree, chunking, and the indexer that writes them."""
