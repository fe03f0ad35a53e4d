"""The MCP server (stdio) for coding agents: tools over the same service as the CLI.

Tools keep the names and parameters agents know from Codii and claude-context
(``index_codebase``, ``get_indexing_status``, ``search_code``, ``clear_index``) and add
``list_codebases``, ``find_similar_code``, ``get_content`` and ``get_chunk``. Builds run in
the background (:class:`codii_sql.service.Session`); the model loads on the first embedding.
"""

from . import file_tools, indexing_tools, search_tools  # noqa: F401 - importing registers the tools
from .app import SESSION, server


def main() -> None:
    """Serve MCP over stdio until the client closes the connection (``codii-sql-server``)."""
    try:
        server.run("stdio")
    finally:
        SESSION.shutdown()


__all__ = ["main", "server"]
