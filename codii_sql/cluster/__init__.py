"""Beyond one machine, on Ray: builds as Ray tasks across a cluster, and HTTP search from Ray Serve replicas.

Each codebase is a task, and the chunk batches of a big one are tasks of their own; the HTTP
search face runs in Ray Serve replicas that hold the shards read-only.

Ray is an optional extra (``pip install "codii-sql[ray]"``): nothing here imports it until a
command asks for a cluster, and then a missing Ray is a one-line usage error.
"""

from .builds import Options, build_on_ray
from .connection import connected
from .serving import serve_on_ray

__all__ = ["Options", "build_on_ray", "connected", "serve_on_ray"]
