"""codii-sql: local hybrid code search in one SQLite file per codebase.

The package is laid out by stages, data flowing one way (README "How it works"): ``ingest``
(files -> chunks -> index rows) and ``search`` (query -> the one hybrid SQL statement ->
results) over ``models`` (embedders, cross-encoder) and ``storage`` (apsw + ``sql/*.sql``),
reached by the faces (``cli``, ``mcp``, ``eval``) through ``service`` only.
"""

__version__ = "0.2.0"
