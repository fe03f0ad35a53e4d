"""The HTTP face: the JSON API and a web page for people, over workspaces and shard folders.

The API is ``GET /search`` and ``GET /healthz``; the page ``/``, ``/file/...``, ``/symbol`` and
``/refs``. Served by one process (:func:`.server.run`, a team server) or by Ray Serve replicas
(:mod:`codii_sql.cluster.serving`).
"""

from .auth import token_from
from .handler import SearchHandler
from .server import allowed_hosts, app, check_port, run

__all__ = ["SearchHandler", "allowed_hosts", "app", "check_port", "run", "token_from"]
