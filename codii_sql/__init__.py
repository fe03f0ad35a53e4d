"""codii-sql: local hybrid code search in one SQLite file per codebase.

Data flows one way: scan (files, ignore rules) -> chunk (tree-sitter) -> embed (ONNX) ->
store (apsw + sql/*.sql) -> index (Merkle diff, batches); query -> search (the one hybrid
SQL statement, optional cross-encoder re-rank) -> cli / mcp_server.
"""

__version__ = "0.2.0"
