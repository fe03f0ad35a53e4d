"""``serve --http``: the HTTP search face over a workspace, in this process or on Ray Serve."""

from __future__ import annotations

from .. import cluster, http
from ..errors import UsageError
from .output import echo


def serve_http(workspaces: list[str], host: str, port: int, ray_address: str | None, replicas: int | None) -> None:
    """Serve ``workspaces`` on ``host:port`` until interrupted: Ray Serve replicas with ``ray_address``,
    else one process.

    Raises:
        UsageError: no or an unknown workspace, --replicas without --ray, Ray missing or unreachable.
    """
    if replicas is not None and ray_address is None:
        raise UsageError("--replicas counts Ray Serve replicas: pass --ray too (one process serves without it)")
    url = f"http://{host}:{port}/search?q=..."
    if ray_address is None:
        http.check_port(host, port)
        handler = http.SearchHandler(workspaces)
        echo(f"Serving {', '.join(handler.workspaces)} on {url} (GET /healthz; Ctrl-C stops)", err=True)
        http.run(handler, host, port)
        return

    def ready() -> None:
        echo(f"Serving {', '.join(workspaces)} on {url} from {replicas or 1} Ray Serve replica"
             f"{'s' * ((replicas or 1) != 1)} (GET /healthz; Ctrl-C stops)", err=True)

    cluster.serve_on_ray(ray_address, workspaces, host=host, port=port, replicas=replicas or 1, ready=ready)
