"""The MCP server (stdio) for coding agents: tools over the same service as the CLI.

Tools keep the names and parameters agents know from Codii and claude-context
(``index_codebase``, ``get_indexing_status``, ``search_code``, ``clear_index``) and add
``list_codebases``, ``find_similar_code``, ``get_content``, ``get_chunk``, ``get_file_outline`` and
``find_symbol``, and ``search_history`` and ``explain_line`` over the git history. Builds run in
the background (:class:`codii_sql.service.Session`); the model loads on the first embedding.
"""

import argparse
import os
import signal
import sys

from . import file_tools, grep_tools, history_tools, indexing_tools, search_tools, symbol_tools  # noqa: F401 - importing registers the tools
from ..errors import CodiiError
from ..service import ShardFolder, serve_unmapped
from .app import SESSION, server
from .words import message


def main(argv: list[str] | None = None) -> None:
    """Serve MCP over stdio until the client closes the connection (``codii-sql-server [--no-watch]``).

    The server keeps fresh each codebase it indexed or searched (file-system events, see
    :mod:`codii_sql.service.watching`); ``--no-watch`` or ``$CODII_SQL_WATCH=0`` turns that off.
    """
    parser = argparse.ArgumentParser(prog="codii-sql-server", description="codii-sql's MCP server on stdio.")
    parser.add_argument("--no-watch", action="store_true",
                        help="do not keep indexed codebases fresh on file changes (also $CODII_SQL_WATCH=0)")
    parser.add_argument("--shards", metavar="DIR", default=None,
                        help="also serve the index files (.db) of DIR, each searched alone (search_code with "
                             "workspace=DIR's name, or with no path or workspace)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    serve_unmapped()  # a file alone overwritten in place fails its own calls, not the agent's server (SIGBUS)
    if args.no_watch:
        SESSION.following.enabled = False
    if args.shards:
        try:
            SESSION.shards = ShardFolder(args.shards)
        except CodiiError as err:
            parser.exit(2, f"Error: {message(err)}\n")
    signal.signal(signal.SIGTERM, _terminated)
    # Ctrl-C in a terminal: asyncio's own handler cancels the server's task, which then waits for the thread
    # reading stdin, so the server stopped only at Ctrl-D (a new user's). Unless the shell has it ignored.
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _terminated)
    try:
        server.run("stdio")
    finally:
        SESSION.shutdown()


def _terminated(signum: int, _frame) -> None:
    """SIGTERM (a client ending the server, as the mcp SDK's does 2 s after closing stdin) or SIGINT (Ctrl-C):
    hand the builds still running to a background process, then exit at once (128 + the signal's number, as
    a shell reports it); what a build had not committed is redone there (SQLite rolls it back)."""
    SESSION.jobs.hand_over()
    if signum == signal.SIGINT:
        sys.stderr.write("Interrupted.\n")
        sys.stderr.flush()
    os._exit(128 + signum)


__all__ = ["main", "server"]
