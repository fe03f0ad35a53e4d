"""The HTTP search face: ``GET /search`` over a workspace's shards and ``GET /healthz``.

Served by one process (:func:`.server.run`, a team server) or by Ray Serve replicas
(:mod:`codii_sql.cluster.serving`).
"""

from .handler import SearchHandler
from .server import app, check_port, run

__all__ = ["SearchHandler", "app", "check_port", "run"]
