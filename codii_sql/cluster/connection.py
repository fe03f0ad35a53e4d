"""Joining a Ray cluster (or starting one on this machine) for the length of a command."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from types import ModuleType

from ..errors import UsageError

#: Environment variables a task takes from the command that started it: the index folder, the
#: embedder and provider settings, the workspaces. On a real cluster their paths must be valid on every node
#: (a shared folder); see docs/scale.md.
FORWARDED_PREFIXES = ("CODII_SQL_", "OLLAMA_", "OPENAI_", "WORKSPACE_")
#: Seconds to wait for a cluster's head to accept a connection before calling it unreachable.
CONNECT_SECONDS = 5.0


def require_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        UsageError: Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install \"codii-sql[ray]\" (Ray 2.60 with Serve)") from None
    return ray


@contextlib.contextmanager
def connected(address: str, *, cpus: int | None = None) -> Iterator[ModuleType]:
    """Ray, connected for the ``with`` block: ``address`` ``local`` starts a Ray on this machine with
    ``cpus`` CPUs (default: all) and stops it after; ``auto`` joins the cluster in ``$RAY_ADDRESS``
    (or the one running on this machine); anything else is a cluster address (``host:6379``,
    ``ray://host:10001``). A process already connected stays connected.

    Raises:
        UsageError: Ray is missing, ``cpus`` is given for a cluster Ray did not start here, or the
            cluster cannot be reached.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    if cpus is not None and address != "local":
        raise UsageError("--ray-cpus sizes a Ray started here: use it with --ray local")
    _check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False if address == "local" else None,
                 num_cpus=cpus if address == "local" else None, logging_level=logging.ERROR,
                 log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        auth = "" if os.environ.get("RAY_AUTH_MODE") else (
            "; a cluster started with Ray's token authentication (the default of `ray start` since Ray 2.59) also "
            "needs RAY_AUTH_MODE=token here, and its token in RAY_AUTH_TOKEN or ~/.ray/auth_token")
        raise UsageError(f"cannot reach the Ray cluster at {address!r} ({first}): start one with `ray start "
                         f"--head`, pass its address (host:6379), or use --ray local{auth}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """Refuse an address nobody answers at within :data:`CONNECT_SECONDS` (Ray itself retries an
    unreachable head for minutes, printing a warning every 5 s).

    Raises:
        UsageError: not a ``host:port`` address, or no answer there.
    """
    target = os.environ.get("RAY_ADDRESS", "").strip() if address == "auto" else address
    if address == "local" or target in ("", "auto", "local"):
        return  # `auto` without $RAY_ADDRESS looks on this machine, and says at once when none runs
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {address}: {target!r} is not a Ray address: use host:port (the head's GCS port, "
                         "6379 by default), ray://host:10001, local or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as err:
        raise UsageError(f"cannot reach the Ray cluster at {target} ({err.strerror or err}): start one with `ray start "
                         "--head`, check the address, or use --ray local") from None


def forwarded_env() -> dict[str, str]:
    """This process's settings that tasks and replicas apply (see :data:`FORWARDED_PREFIXES`)."""
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` set in ``os.environ`` for the ``with`` block (a Ray worker runs many tasks in turn)."""
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
