"""Distributed builds: each codebase a Ray task on any node, each published to its usual index path."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..codebase import Codebase
from ..errors import CodiiError
from ..service import recorded_filters
from .connection import connected, forwarded_env

#: Texts per embedding task: large enough that a task's overhead (~10 ms of scheduling, the model
#: load once per worker) is small against its model time (~2-4 s at 64-128 chunks/s per core),
#: small enough that a killed task loses little and a big codebase spreads over many CPUs.
EMBED_BATCH = 256


@dataclass
class Options:
    """A distributed build's options for every codebase (as :func:`codii_sql.service.build_aside`)."""

    force: bool = False
    use_cache: bool = True
    ignore_patterns: list[str] | None = None
    extensions: list[str] | None = None
    embedder_name: str | None = None
    vectors: bool | None = None


def build_on_ray(address: str, codebases: list[Codebase], options: Options, *, cpus: int | None = None,
                 batch: int = EMBED_BATCH, on_done: Callable[[dict], None] | None = None) -> list[dict]:
    """Build every one of ``codebases`` as a Ray task (see :mod:`.tasks`) on the cluster at
    ``address`` (:func:`.connection.connected`), their chunks embedded in tasks of ``batch`` texts.

    Returns one row per codebase, in the order they finished: ``{"ok": True, "codebase", "db",
    **report}`` or ``{"ok": False, "codebase", "error"}`` (a codebase whose task failed, after
    Ray's retries when its worker died; the others still build). ``on_done(row)`` is called as
    each finishes.

    Raises:
        UsageError: Ray is missing or the cluster cannot be reached.
    """
    with connected(address, cpus=cpus) as ray:
        from . import tasks

        env = forwarded_env()
        started = {}
        for cb in codebases:
            ref = tasks.build_codebase.remote(str(cb.root), str(cb.db_path), vars(options), env, batch)
            started[ref] = (cb, time.perf_counter())
        rows = []
        while started:
            done, _ = ray.wait(list(started), num_returns=1)
            cb, t = started.pop(done[0])
            row = _row(ray, done[0], cb, time.perf_counter() - t)
            rows.append(row)
            if on_done is not None:
                on_done(row)
        return rows


def _row(ray, ref, cb: Codebase, seconds: float) -> dict:
    """The finished task's report, or its error as one line (a CodiiError raised in the task keeps its
    message; a task Ray gave up on says so)."""
    head = {"codebase": str(cb.root), "db": str(cb.db_path)}
    try:
        report = ray.get(ref)
        return {"ok": True, **head, **report, "filters": recorded_filters(cb), "wall_seconds": round(seconds, 3)}
    except CodiiError as err:  # Ray re-raises the task's exception as a subclass of its own type
        return {"ok": False, **head, "error": _first_line(err)}
    except ray.exceptions.RayError as err:
        return {"ok": False, **head, "error": f"the Ray task failed: {_first_line(err)}"}


def _first_line(err: Exception) -> str:
    """The task's own message: a RayTaskError's text starts with a traceback header, and one raised in a
    task that a task started wraps another."""
    while getattr(err, "cause", None) is not None and err.cause is not err:
        err = err.cause
    text = str(err).strip()
    return text.splitlines()[-1] if text else type(err).__name__
