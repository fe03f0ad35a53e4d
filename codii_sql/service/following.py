"""A server's watchers: each codebase it indexed or searched is kept fresh by a :class:`Watcher` thread."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from ..codebase import Codebase
from ..errors import CodiiError, IndexBusyError
from ..ingest.report import BuildReport, Progress
from .builds import refresh
from .jobs import Jobs
from .watchers import kept_fresh, registered
from .watching import Update, Watcher, update_if_stale

#: ``0`` turns the MCP server's watching off (as ``codii-sql-server --no-watch`` does).
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

    ``last`` keeps each codebase's latest :class:`Update` (for status and tests).
    """

    def __init__(self, jobs: Jobs, *, enabled: bool | None = None) -> None:
        self.jobs = jobs
        self.enabled = watch_wanted() if enabled is None else enabled
        self.stopped = False
        self.last: dict[Codebase, Update] = {}
        self._threads: dict[Codebase, tuple[threading.Thread, threading.Event]] = {}
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
            stop = threading.Event()
            thread = threading.Thread(target=self._run, args=(cb, stop), name=f"codii-watch-{cb.root.name}",
                                      daemon=True)
            self._threads[cb] = (thread, stop)
            thread.start()

    def catch_up(self, cb: Codebase) -> None:
        """Before a tool first reads ``cb`` (symbols, references, grep): bring its index up to date now,
        lexically (the vectors wait for the next search), then follow it. A fresh server's find_symbol
        listed a deleted file's definitions and missed a new function until a search started the
        watcher. Nothing when watching is off or ``cb`` is followed already; a build that cannot run
        (another one runs, a read-only or full disk) leaves the last committed state to answer."""
        if not self.enabled or cb.alone or not cb.db_path.is_file():
            return
        if cb in self.watched():
            self.settle(cb)
            return
        with self.jobs.guard(cb) as job:
            busy = job is not None and job.alive and job.phase != "vectors"
        if not busy:
            with contextlib.suppress(CodiiError):
                refresh(cb, vectors=False)
        self.follow(cb)

    def settle(self, cb: Codebase) -> None:
        """Wait, at most :data:`SETTLE_SECONDS`, till this server's watcher of ``cb`` has heard of every
        change made before now (its next wake, at most ~0.1 s: :meth:`~.watching.Watcher.caught_up`)
        and committed them all (:func:`~.watchers.kept_fresh`); at once when ``cb`` is not followed.
        A new user's agent wrote a file and grepped it in the same turn: 3 tries of 3 answered from
        before the write, for the event was still in watchfiles' 50 ms group. At once too when the
        watcher's last update failed: nothing will be committed to wait for."""
        asked = time.monotonic()
        deadline = asked + SETTLE_SECONDS
        while cb in self.watched() and time.monotonic() < deadline:
            watcher = self._watchers.get(cb)
            if watcher is not None and watcher.caught_up(asked):
                failed = (last := self.last.get(cb)) is not None and last.error is not None
                # A last update that failed (a damaged index, a full disk) commits nothing until someone acts:
                # waiting for it made each of a new user's tool calls on a damaged index take 5 s.
                if failed or kept_fresh(cb) is not None:
                    return
            time.sleep(0.01)

    def unfollow(self, cb: Codebase, timeout: float = 5.0) -> None:
        """Stop keeping ``cb`` fresh (its index was cleared: a later change must not rebuild it)."""
        with self._lock:
            entry = self._threads.pop(cb, None)
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

    def _run(self, cb: Codebase, stop: threading.Event) -> None:
        watcher = Watcher([cb], stop=stop, on_update=self._heard, update=self._update)
        self._watchers[cb] = watcher
        with registered(cb, "mcp"):
            try:
                watcher.run()
            except (OSError, RuntimeError):  # the root went away or the OS refused a watch: stop following
                pass
            finally:
                self._watchers.pop(cb, None)

    def _heard(self, update: Update) -> None:
        self.last[update.codebase] = update

    def _update(self, cb: Codebase, progress: Progress) -> tuple[BuildReport | None, list[str]]:
        if not cb.db_path.is_file():  # cleared meanwhile (by another process): building is index_codebase's call
            return None, []
        with self.jobs.guard(cb) as job:
            if job is not None and job.alive and job.phase != "vectors":
                raise IndexBusyError(f"{cb.root} is being indexed by this server")
        return update_if_stale(cb, progress)
