"""Build progress for people and scripts: a bar on stderr with the rate and the time left (:mod:`.bar`), or
one JSON line per progress event on stdout (``build --json``)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable

#: What each phase counts (ingest/report.py's Progress phases; a search's update reports the same).
UNITS = {"scan": "files", "hash": "files", "chunk": "files", "vectors": "chunks", "waiting": "chunks",
         "history": "commits", "history vectors": "commits", "compact": "steps"}
#: Seconds between two JSON progress lines of one phase: its first and last events always go out,
#: so a kernel-sized build writes a few hundred lines, not one per batch of files.
JSON_EVERY_SECONDS = 1.0


class Rate:
    """One phase's speed since its first event (units a second) and the seconds left at that speed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started: float | None = None
        self.first = 0

    def update(self, done: int, total: int | None) -> tuple[float | None, float | None]:
        """``(per_second, eta_seconds)`` after ``done`` of ``total``; None while unknown (the first
        event, a total not known yet)."""
        now = self.clock()
        if self.started is None:
            self.started, self.first = now, done
        elapsed = now - self.started
        per_second = (done - self.first) / elapsed if elapsed > 0 and done > self.first else None
        left = None if total is None or per_second is None else max(0, total - done) / per_second
        return per_second, left


def json_lines(write: Callable[[dict], None], clock: Callable[[], float] = time.monotonic):
    """A progress callback that ``write``s ``{"event": "progress", "phase", "unit", "done", "total",
    "per_second", "eta_seconds", "elapsed_seconds"}`` (seconds rounded to 0.1, rates to 0.1 units a
    second, None while unknown): a phase's first event, its last (done == total), and at most one
    more every :data:`JSON_EVERY_SECONDS`."""
    rates: dict[str, Rate] = {}
    last: dict[str, float] = {}
    began = clock()

    def progress(phase: str, done: int, total: int | None) -> None:
        rate = rates.setdefault(phase, Rate(clock))
        per_second, left = rate.update(done, total)
        now = clock()
        if phase in last and done != total and now - last[phase] < JSON_EVERY_SECONDS:
            return
        last[phase] = now
        write({"event": "progress", "phase": phase, "unit": UNITS.get(phase, "items"), "done": done, "total": total,
               "per_second": None if per_second is None else round(per_second, 1),
               "eta_seconds": None if left is None else round(left, 1), "elapsed_seconds": round(now - began, 1)})

    return progress


def stderr_is_terminal() -> bool:
    """Whether a progress bar would be seen: stderr is a terminal."""
    return sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(enabled: bool):
    """A progress bar by phase on stderr (:func:`.bar.phase_bar`), or a no-op callback (None) when
    ``enabled`` is false."""
    if not enabled:
        yield None
        return
    from .bar import (
        phase_bar,  # rich loads only when a bar is drawn: ~35 ms of every other command's start-up
    )

    with phase_bar(UNITS) as update:
        yield update
