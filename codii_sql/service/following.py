"""A server's watchers: each codebase it indexed or searched is kept fresh by a :class:`Watcher` thread."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection

from ..codebase import Codebase
from ..errors import IndexBusyError
from ..ingest.report import BuildReport, Progress
from .jobs import Jobs
from .watchers import registered
from .watching import Update, Watcher, update_if_stale

#: ``0`` turns the servers' watching off (as ``serve --no-watch`` does).
ENV_WATCH = "CODII_SQL_WATCH"
#: Seconds a tool waits at most for this server's watcher to commit the changes it was told of: an
#: agent that edits a file and greps for it at once read the index from before the edit (a new user's
#: grep_code found nothing: "indexing is running"). An edit reaches a watched index in about 1-2 s.
SETTLE_SECONDS = 5.0


def watch_wanted() -> bool:
    """False when ``$CODII_SQL_WATCH`` is ``0``."""
    return os.environ.get(ENV_WATCH, "1").strip() != "0"


class Following:
    """One watcher thread per followed codebase, sharing this server's :class:`Jobs`: an update waits
    while this server's own build of that codebase is in its lexical phase (that build sees the
    change), and runs beside its vector phase (which embeds what the update queues).

    ``last`` keeps each codebase's latest :class:`Update` (for status and tests); ``by`` names the
    server in status's ``watched_by`` (``mcp``, ``http``).
    """

    def __init__(self, jobs: Jobs, *, enabled: bool | None = None, by: str = "mcp") -> None:
        self.jobs, self.by = jobs, by
        self.enabled = watch_wanted() if enabled is None else enabled
        self.stopped = False
        self.last: dict[Codebase, Update] = {}
        self._threads: dict[Codebase, tuple[threading.Thread, threading.Event]] = {}
        self._ready: dict[Codebase, threading.Event] = {}  # set once a watcher's first checks are committed
        self._watchers: dict[Codebase, Watcher] = {}
        self._lock = threading.Lock()

    def follow(self, cb: Codebase) -> None:
        """Keep ``cb`` fresh from now on (once per codebase; nothing when watching is off, or for an index
        file alone: it has no source to follow, and nothing may be made beside it)."""
        if not self.enabled or cb.alone:
            return
        with self._lock:
            if self.stopped or (cb in self._threads and self._threads[cb][0].is_alive()):
                return
            stop, ready = threading.Event(), threading.Event()
            self._ready[cb] = ready
            thread = threading.Thread(target=self._run, args=(cb, stop, ready), name=f"codii-watch-{cb.root.name}",
                                      daemon=True)
            self._threads[cb] = (thread, stop)
            thread.start()

    def catch_up(self, *codebases: Codebase, events: bool = True) -> None:
        """Before a tool first reads ``codebases`` (symbols, references, grep, a served workspace):
        follow them, and wait (at most :data:`SETTLE_SECONDS`) till each watcher's first checks have
        brought its index up to date, lexically (the vectors wait for the next search); later,
        :meth:`settle`. A fresh server's find_symbol listed a deleted file's definitions and missed a
        new function until a search started the watcher; and an answer read while the watcher's first
        check still held the index said "indexing is running". Nothing when watching is off; an update
        that cannot run (this server's build runs, a read-only or full disk) leaves the last committed
        state to answer. ``events``: as for :meth:`settle`."""
        wanted = [cb for cb in codebases if self.enabled and not cb.alone and cb.db_path.is_file()]
        watched = set(self.watched())
        new = [cb for cb in wanted if cb not in watched]
        for cb in new:
            self.follow(cb)
        deadline = time.monotonic() + SETTLE_SECONDS
        for cb in new:
            if (ready := self._ready.get(cb)) is not None:
                ready.wait(max(0.0, deadline - time.monotonic()))
        self.settle(*(cb for cb in wanted if cb in watched), events=events)

    def settle(self, *codebases: Codebase, events: bool = True) -> None:
        """Wait, at most :data:`SETTLE_SECONDS`, till this server's watchers of ``codebases`` have heard
        of every change made before now (each one's next wake, at most :data:`~.watching.WAKE_MS`:
        :meth:`~.watching.Watcher.caught_up`) and committed them all (:meth:`~.watching.Watcher.committed`),
        all at once (a workspace's members one after the other took a wake each); at once for one not
        followed. A new user's agent wrote a file and grepped it in the same turn: 3 tries of 3 answered
        from before the write, for the event was still in watchfiles' 50 ms group. At once too for one
        whose last update failed: nothing will be committed to wait for.

        ``events=False`` waits only for the changes the watchers have heard of: a change made less than
        a wake before may be missed, and the answer costs no wake (the HTTP server: a wake each was
        +50-75 ms a request, p50 45 -> 130 ms over a workspace of two)."""
        asked = time.monotonic()
        deadline = asked + SETTLE_SECONDS
        waiting = list(codebases)
        while time.monotonic() < deadline:
            watched = self.watched()
            waiting = [cb for cb in waiting if cb in watched and not self._settled(cb, asked, events)]
            if not waiting:
                return
            time.sleep(0.005)

    def _settled(self, cb: Codebase, asked: float, events: bool) -> bool:
        """Whether ``cb``'s watcher has committed every change made before ``asked`` (with ``events``
        false: every change it has heard of; see :meth:`settle`)."""
        watcher = self._watchers.get(cb)
        if watcher is None or events and not watcher.caught_up(asked):
            return False
        # A last update that failed (a damaged index, a full disk) commits nothing until someone acts:
        # waiting for it made each of a new user's tool calls on a damaged index take 5 s.
        failed = (last := self.last.get(cb)) is not None and last.error is not None
        return failed or watcher.committed(cb)

    def unfollow(self, cb: Codebase, timeout: float = 5.0) -> None:
        """Stop keeping ``cb`` fresh (its index was cleared: a later change must not rebuild it)."""
        with self._lock:
            entry = self._threads.pop(cb, None)
            self._ready.pop(cb, None)
        if entry is not None:
            entry[1].set()
            entry[0].join(timeout)

    def watched(self) -> list[Codebase]:
        with self._lock:
            return [cb for cb, (t, _) in self._threads.items() if t.is_alive()]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop every watcher (a running update ends at its next batch commit)."""
        with self._lock:
            self.stopped = True
            entries = list(self._threads.values())
        for _, stop in entries:
            stop.set()
        for thread, _ in entries:
            thread.join(timeout)

    def _run(self, cb: Codebase, stop: threading.Event, ready: threading.Event) -> None:
        watcher = Watcher([cb], stop=stop, on_update=self._heard, update=self._update)
        self._watchers[cb] = watcher
        with registered(cb, self.by):
            try:
                watcher.run(ready=ready.set)
            except (OSError, RuntimeError):  # the root went away or the OS refused a watch: stop following
                pass
            finally:
                self._watchers.pop(cb, None)
                ready.set()  # nobody waits on a watcher that is gone

    def _heard(self, update: Update) -> None:
        self.last[update.codebase] = update

    def _update(self, cb: Codebase, progress: Progress,
                changed: Collection[str] | None) -> tuple[BuildReport | None, list[str]]:
        if not cb.db_path.is_file():  # cleared meanwhile (by another process): building is index_codebase's call
            return None, []
        with self.jobs.guard(cb) as job:
            if job is not None and job.alive and job.phase != "vectors":
                raise IndexBusyError(f"{cb.root} is being indexed by this server")
        return update_if_stale(cb, progress, changed)
