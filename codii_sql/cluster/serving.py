"""``serve --http --ray``: the HTTP face as a Ray Serve deployment, its replicas holding the shards read-only.

Each replica is a :class:`codii_sql.http.SearchHandler`: it opens the workspace's indexes once
and answers ``/search`` by the same fan-out and merge as ``search --workspace``, so any replica
gives the answer one process would. Ray Serve spreads the replicas over the cluster's nodes
(each node must see the index files: a shared folder, or a copy per node) and balances requests
across them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading

from ..errors import UsageError
from ..http.server import check_port, query_params
from ..service import get_workspace
from .connection import connected, forwarded_env

APP_NAME = "codii-sql"


def serve_on_ray(address: str, workspaces: list[str], *, host: str, port: int, replicas: int = 1,
                 ready=None) -> None:
    """Serve ``workspaces`` over HTTP on ``host:port`` with ``replicas`` Ray Serve replicas until
    SIGINT/SIGTERM; ``ready()`` is called once the deployment answers.

    Raises:
        UsageError: Ray is missing, the cluster cannot be reached, a workspace is unknown (checked
            before anything is deployed), or the replicas did not start.
    """
    _check_workspaces(workspaces)
    with connected(address) as ray:
        from ray import serve

        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its INFO lines would bury the server's own
        ours = _check_serve(serve, host, port)
        serve.start(http_options={"host": host, "port": port})
        try:
            try:
                serve.run(application(workspaces, replicas), name=APP_NAME, route_prefix="/")
            except (ray.exceptions.RayError, RuntimeError) as err:
                lines = str(err).strip().splitlines() or [type(err).__name__]
                raise UsageError(f"the Ray Serve replicas did not start: {lines[-1]}") from None
            if ready is not None:
                ready()
            _wait_for_signal()
        finally:
            serve.delete(APP_NAME)
            if ours:  # Serve was started for this server: its proxy would hold the port after it
                serve.shutdown()


def _check_serve(serve, host: str, port: int) -> bool:
    """Whether Serve must be started for this server (it is not running on the cluster yet).

    Ray Serve has one HTTP proxy port per cluster and routes ``/`` to one application, so a
    second codii-sql server on the same cluster would take the first one's place on the first
    one's port, whatever port it asked for.

    Raises:
        UsageError: Serve already listens on another port, a codii-sql server already runs there, or
            (Serve not running yet) the port is in use on this machine.
    """
    from ray.serve.context import _get_global_client  # the running Serve's HTTP port has no public getter

    client = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        check_port(host, port)  # Serve's proxy would fail on a port in use with a 60-line traceback
        return True
    running = client.http_config.port
    if running != port:
        raise UsageError(f"Ray Serve on this cluster already listens on port {running} (one HTTP port per cluster): "
                         f"serve with --http {running}, or stop it first (`serve shutdown`)")
    if APP_NAME in serve.status().applications:
        raise UsageError(f"a codii-sql server already runs on this cluster's port {port} (GET /healthz names its "
                         "workspaces): stop it first, or serve every workspace from one with --workspace A --workspace B")
    return False


def application(workspaces: list[str], replicas: int = 1):
    """The Serve application: ``replicas`` :class:`SearchReplica` of ``workspaces``, with this process's
    settings (:func:`forwarded_env`). A replica needs no CPU of its own: SQLite and the query
    embedding run in its threads, and Ray's CPUs stay for build tasks."""
    from ray import serve

    return serve.deployment(SearchReplica, name="search", num_replicas=replicas,
                            ray_actor_options={"num_cpus": 0}).bind(workspaces, forwarded_env())


def build_app(args: dict):
    """A Ray Serve application builder, for ``serve run`` and a KubeRay RayService's ``import_path``:
    ``serve run codii_sql.cluster.serving:build_app workspace=org,docs replicas=4``.

    Raises:
        UsageError: no or an unknown workspace.
    """
    names = [n.strip() for n in str(args.get("workspace", "")).split(",") if n.strip()]
    _check_workspaces(names)
    return application(names, int(args.get("replicas", 1)))


def _check_workspaces(names: list[str]) -> None:
    """Raises UsageError for no workspace or an unknown one, before anything is deployed."""
    if not names:
        raise UsageError("serving needs a workspace: --workspace NAME (serve run: workspace=NAME[,NAME...])")
    for name in names:
        get_workspace(name)


class SearchReplica:
    """One Serve replica: a :class:`SearchHandler` over the workspaces, in this replica's process."""

    def __init__(self, workspaces: list[str], env: dict[str, str]):
        from ..http.handler import SearchHandler
        from ..service import serve_unmapped

        os.environ.update(env)  # this replica's process serves this deployment alone
        serve_unmapped()  # long-lived: a file alone overwritten in place fails its requests, not the replica
        self.handler = SearchHandler(workspaces)

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        status, body = await asyncio.to_thread(self.handler.answer, request.url.path, query_params(request),
                                               request.method)
        return JSONResponse(body, status_code=status)


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM (Ray Serve runs in other processes; this one only holds it up)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()

