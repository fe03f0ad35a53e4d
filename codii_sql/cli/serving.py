"""``serve --http``: the HTTP search face over a workspace, in this process or on Ray Serve."""

from __future__ import annotations

from ..errors import UsageError
from .output import echo


def serve_http(workspaces: list[str], host: str, port: int, ray_address: str | None, replicas: int | None,
               shards: str | None = None, token: str | None = None, watch: bool = True) -> None:
    """Serve ``workspaces`` (and the folder of index files ``shards``) on ``host:port`` until
    interrupted: Ray Serve replicas with ``ray_address``, else one process, whose watchers keep the
    served codebases fresh unless ``watch`` is false.

    Raises:
        UsageError: nothing or an unknown workspace to serve, --replicas without --ray, Ray missing or
            unreachable, --shards with --ray.
    """
    # The HTTP server (starlette, Jinja2, Pygments) and Ray load only when serving: every other
    # command starts ~0.2 s sooner.
    from .. import cluster, http, service

    if replicas is not None and ray_address is None:
        raise UsageError("--replicas counts Ray Serve replicas: pass --ray too (one process serves without it)")
    if shards is not None and ray_address is not None:
        raise UsageError("--shards serves a folder from this process", "drop --ray (or serve a workspace on Ray)")
    token = http.token_from(token)
    if token is not None and ray_address is not None:
        raise UsageError("--token guards the server of this process", "drop --ray, or guard Ray Serve's port yourself")
    url = f"http://{host}:{port}/search?q=..."
    if ray_address is None:
        service.serve_unmapped()  # a file alone overwritten in place fails its own requests, not the server (SIGBUS)
        # refuses nothing to serve before the port is tried
        handler = http.SearchHandler(workspaces, shards, watch=watch)
        http.check_port(host, port)
        served = [*handler.workspaces, *([f"the shards of {handler.shards.folder}"] if handler.shards else [])]
        page = f"http://{host}:{port}/"
        echo(f"Serving {', '.join(served)} on {page} (the web page; GET /search and /healthz for programs"
             f"{'; the token is needed' if token else ''}; Ctrl-C stops)", err=True)
        if handler.shards and not handler.shards.files():
            echo(f"Note: {handler.shards.folder} holds no .db file yet: an index renamed into it is served from "
                 "the next request", err=True)
        if token is None and http.allowed_hosts(host) == ["*"]:
            echo(f"Warning: {host} is reachable from other machines and no --token is set: whoever reaches port "
                 f"{port} reads every served file (--token or $CODII_SQL_HTTP_TOKEN guards it)", err=True)
        try:
            http.run(handler, host, port, token)
        finally:
            handler.session.shutdown()
        return

    def ready() -> None:
        echo(f"Serving {', '.join(workspaces)} on {url} from {replicas or 1} Ray Serve replica"
             f"{'s' * ((replicas or 1) != 1)} (GET /healthz; Ctrl-C stops)", err=True)

    cluster.serve_on_ray(ray_address, workspaces, host=host, port=port, replicas=replicas or 1, ready=ready)
