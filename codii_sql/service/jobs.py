"""Background builds in this process, one per codebase, beside the writer lock that spans processes."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import BuildFailedError, BuildStopped, CodiiError, DiskFullError, IndexBusyError, ReadOnlyIndexError
from ..storage.lock import is_locked
from .builds import build, build_in_background
from .daemon import NICE, background_allowed
from .status import is_stale, open_store, refuse_damaged, status

#: Seconds :meth:`Jobs.start` waits for its build thread to take the writer lock (or learn that
#: another process holds it), so that the answer says which of the two happened.
START_WAIT_SECONDS = 2.0
#: Seconds :meth:`Jobs.shutdown` waits for a cancelled build to commit its current batch.
SHUTDOWN_WAIT_SECONDS = 5.0


class BuildCancelled(BuildStopped):
    """Raised from the progress callback to stop a build at a batch boundary (server exit): a stop on
    request, so the index keeps what it committed and reads as stale, not failed with a class name."""


#: Files an agent searched lately whose chunks the vector phase embeds first (most recent kept).
MAX_HOT_FILES = 64


@dataclass
class Job:
    """One background build in this process. ``outcome``: running, indexed, failed, busy, cancelled.

    ``done``/``total`` count files in the lexical phases, ``vectors_done``/``vectors_total`` chunks
    in the vector phase; ``hot`` holds the files searches found, embedded first.
    """

    codebase: Codebase
    started_at: float = field(default_factory=time.time)
    phase: str = "scan"
    done: int = 0
    total: int = 0
    vectors_done: int = 0
    vectors_total: int = 0
    hot: dict[str, None] = field(default_factory=dict)
    outcome: str = "running"
    error: str | None = None
    #: The failure itself, when it was one of ours (its remedy is worded by the face).
    failure: CodiiError | None = None
    finished_at: float | None = None
    report: dict | None = None
    warnings: list[str] = field(default_factory=list)
    #: False when building again cannot help (a read-only or full disk): ``error`` says what does.
    resumable: bool = True
    #: Whether the build reported progress: a failure before any is a refusal (another embedder without
    #: force, a bad option) that changed nothing, so the index's own state still stands.
    worked: bool = False
    signal: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self.outcome == "running"


class Jobs:
    """Background builds and every writer-lock probe of this process.

    ``is_locked`` probes by taking the lock for an instant, which would make a build starting
    in that instant fail as busy; so probes and build starts of one codebase are serialised here.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._codebase_locks: dict[str, threading.Lock] = {}
        self.cancel = threading.Event()

    @contextlib.contextmanager
    def guard(self, cb: Codebase) -> Iterator[Job | None]:
        """Hold ``cb``'s lock; yields its latest in-process job (or None)."""
        key = str(cb.db_path)
        with self._lock:
            lock = self._codebase_locks.setdefault(key, threading.Lock())
        with lock:
            yield self._jobs.get(key)

    def status(self, cb: Codebase) -> tuple[dict, Job | None]:
        """:func:`status` (probing the lock safely) and the latest in-process job."""
        with self.guard(cb) as job:
            return status(cb), job

    def locked(self, cb: Codebase) -> bool:
        """Whether any process is indexing ``cb``."""
        with self.guard(cb) as job:
            return (job is not None and job.alive) or is_locked(cb)

    def start(self, cb: Codebase, force: bool, ignore_patterns: list[str] | None, extensions: list[str] | None,
              embedder: str | None = None, workers: int | None = None) -> str:
        """Start a build unless one runs or the index is current: ``started``, ``already indexing``,
        ``already up to date``.

        Raises:
            BuildFailedError: the build failed at once (bad ``.codii.yaml``, model/index mismatch...).
            ReadOnlyIndexError: ``cb`` is an index file alone (a shard is never built).
            DamagedIndexError: the index is damaged and ``force`` is false (its remedy: force=true).
        """
        cb.refuse_writes()
        with self.guard(cb) as job:
            if (job is not None and job.alive) or is_locked(cb):
                return "already indexing"
            st = status(cb, check_stale=False)
            if st["status"] != "not_indexed" and not force:  # damaged is no "up to date" (an agent then looped)
                with open_store(cb) as store:
                    refuse_damaged(cb, store)
            fresh = (st["status"] != "not_indexed" and not force and embedder in (None, st.get("embedder"))
                     and not is_stale(cb, ignore_patterns, extensions))
            if fresh and st["status"] == "indexed" and st["vectors"]["state"] in ("complete", "off"):
                if job is not None:  # a refused build (a bad embedder) no longer stands for the index's state
                    self._jobs.pop(str(cb.db_path), None)
                return "already up to date"
            if fresh and st.get("phase") == "vectors":  # another process is embedding; nothing else to do
                return "already indexing"
            job = Job(cb)
            job.thread = threading.Thread(target=self._run, args=(job, force, ignore_patterns, extensions, embedder, workers),
                                          name=f"codii-build-{cb.root.name}", daemon=True)
            self._jobs[str(cb.db_path)] = job
            job.thread.start()
            job.signal.wait(START_WAIT_SECONDS)
        if job.outcome == "busy":
            return "already indexing"
        if job.outcome == "failed":
            if not job.worked:  # refused before any work: status said a healthy index had "failed"
                with self.guard(cb):
                    self._jobs.pop(str(cb.db_path), None)
            raise BuildFailedError(f"indexing failed: {job.failure.what if job.failure else job.error}",
                                   job.failure.hint if job.failure else None)
        return "started"

    def prefer(self, cb: Codebase, paths: list[str]) -> None:
        """Tell ``cb``'s running build that a search found these files: their vectors come next."""
        job = self._jobs.get(str(cb.db_path))
        if job is not None and job.alive:
            for path in paths:
                job.hot.pop(path, None)
                job.hot[path] = None
            while len(job.hot) > MAX_HOT_FILES:
                job.hot.pop(next(iter(job.hot)))

    def _run(self, job: Job, force: bool, ignore_patterns: list[str] | None, extensions: list[str] | None,
             embedder: str | None, workers: int | None) -> None:
        def progress(phase: str, done: int, total: int) -> None:
            if self.cancel.is_set():
                raise BuildCancelled("the MCP server shut down before the build finished")
            job.worked = True
            if phase == "vectors":
                job.phase, job.vectors_done, job.vectors_total = phase, done, total
            else:
                job.phase, job.done, job.total = phase, done, total
            job.signal.set()

        _lower_priority()
        try:
            report = build(job.codebase, force=force, wait=False, progress=progress, warn=job.warnings.append,
                           ignore_patterns=ignore_patterns, extensions=extensions, embedder_name=embedder,
                           prefer=lambda: list(job.hot), workers=workers)
            job.report = report.to_dict()
            job.outcome, job.phase = "indexed", "done"
        except IndexBusyError:
            job.outcome = "busy"
        except BuildCancelled as err:
            job.outcome, job.error = "cancelled", str(err)
        except Exception as err:  # reported through get_indexing_status; the thread must not die silently
            job.outcome = "failed"
            job.error = str(err) if isinstance(err, CodiiError) else f"{type(err).__name__}: {err}"
            job.failure = err if isinstance(err, CodiiError) else None
            job.resumable = not isinstance(err, (ReadOnlyIndexError, DiskFullError))
        finally:
            job.finished_at = time.time()
            job.signal.set()

    def shutdown(self) -> None:
        """Stop running builds at their next batch commit and wait a little for them (after
        :meth:`hand_over`, which the session runs first)."""
        self.cancel.set()
        deadline = time.monotonic() + SHUTDOWN_WAIT_SECONDS
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join(max(0.0, deadline - time.monotonic()))

    def hand_over(self) -> None:
        """Stop the running builds at their next batch commit and start a background build (``build --daemon``)
        for each, unless ``$CODII_SQL_BACKGROUND=0``: it waits for this process's locks, then goes on from the
        vector queue. An agent's session is often shorter than the model's hour, and its vectors stopped with
        it (new users)."""
        self.cancel.set()
        if not background_allowed():
            return
        for job in list(self._jobs.values()):
            if job.outcome in ("running", "cancelled"):
                with contextlib.suppress(CodiiError):  # another process builds it, or it cannot: a search will say
                    build_in_background(job.codebase, [])


def _lower_priority() -> None:
    """Run this build thread at :data:`NICE` so the server's searches keep their core (Linux: per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed: the build just competes equally
        pass
