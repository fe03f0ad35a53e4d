"""Indexes that stay fresh by themselves: follow file-system events and update incrementally.

:class:`Watcher` brings its codebases up to date, then waits on file-system events (watchfiles:
inotify, FSEvents or ReadDirectoryChangesW; no polling loop). A group of events (an editor's
atomic-rename save, a branch switch touching thousands of files) becomes one incremental
build. Events in trees the last scan did not walk (``.git``, ``node_modules``, ignored or
default-excluded directories) cause no work at all; a change under a walked directory costs a look at
the paths heard (:func:`~codii_sql.ingest.walk.rescan`; a walk when one may reach past its own path),
and a build that finds nothing to do writes nothing, so files that stay ignored cause no write. Several
watchers, servers and CLI builds of one codebase share its one writer lock: a watcher that finds
the lock taken retries each second until it is free, then finds the other build did its work.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import BuildStopped, CodiiError, IndexBusyError
from ..ingest.report import BuildReport, Progress
from ..ingest import scan_stats
from ..ingest.repositories import git_dir, git_info_path
from ..ingest.walk import RESCAN_MAX, scan
from .builds import refresh
from .status import scan_rules
from .watchers import HEARTBEAT_SECONDS, mark, renote

#: watchfiles' grouping: events keep joining a group until none came for STEP_MS (an editor save
#: is seen ~50 ms after it) or the group is DEBOUNCE_MS old (a burst becomes a few builds, not one
#: per file). Both are watchfiles' defaults.
STEP_MS = 50
DEBOUNCE_MS = 1600
#: How often the event wait wakes with no event: to notice a stop, to retry a codebase whose writer
#: lock another process held, and to prove to a tool about to answer that no event of an earlier
#: change is still on its way (:meth:`Watcher.caught_up`: the tool waits for the next wake, so this is
#: its worst added latency; 1 s let an agent's write-then-grep miss its own file). A wake costs
#: microseconds; nothing is read.
WAKE_MS = 100
#: Seconds from a write to its event in watchfiles' buffer (inotify's queue, read by notify's thread
#: at once: well under 1 ms here); a wake this long after a tool was asked has seen every earlier one.
EVENT_DELAY_SECONDS = 0.005
#: ``1`` makes watchers poll the file system every POLL_MS instead of waiting on events: for file
#: systems that deliver none (network mounts, some container volumes). Costs a directory walk of
#: every watched tree per poll, so it is slow on big trees and off by default.
ENV_POLL = "CODII_SQL_WATCH_POLL"
POLL_MS = 1000


@dataclass
class Update:
    """What one update of one codebase did: ``report`` (None when the index was current), a
    failure's one-line ``error``, one-line ``warnings``, and its wall ``seconds``."""

    codebase: Codebase
    report: BuildReport | None
    seconds: float
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def update_if_stale(codebase: Codebase, progress: Progress | None = None,
                    changed: Collection[str] | None = None) -> tuple[BuildReport | None, list[str]]:
    """:func:`refresh`, whose build writes nothing when it finds nothing to do; ``(None, [])`` then.
    One scan: a read-only scan first, then the build's own, took a kernel-size tree's edit 2.6 s to
    reach the index. ``changed``: the paths heard changing since the last update, which its scan
    looks at alone when it can (None: it walks). Raises IndexBusyError as :func:`refresh` does."""
    existed = codebase.db_path.is_file()
    report, warnings = refresh(codebase, progress=progress, changed=changed)
    changed = report.added or report.modified or report.removed or report.reindexed or report.touched
    return (report, warnings) if changed or warnings or not existed else (None, [])


#: Git's files under a work tree's root whose change changes the files listed: its index (`git add -f`
#: of an ignored file, `git rm --cached`), its exclude and attribute files. A new user's watcher never
#: saw them, and vouched for the CLI's update check, so both answered without the force-added file.
GIT_STATE_FILES = frozenset({".git/index", ".git/info/exclude", ".git/info/attributes"})


class Follow:
    """One codebase's root, what its last scan walked (which changed paths may matter), and the paths
    heard changing since its last update began (``heard``; None: unknown, the next update walks)."""

    def __init__(self, codebase: Codebase) -> None:
        self.codebase = codebase
        self.root = str(codebase.root)
        self.dirs: set[str] = {""}
        self.files: set[str] = set()
        self.gone = False
        self.walk_due = False  # a directory appeared: walk again even when the index stays as it is
        self.heard: set[str] | None = None
        self.fresh = False  # every change heard of is committed (what mark() tells other processes)
        # Git's files of a work tree whose top lies above the root (a subfolder's): `git add -f` and `git rm
        # --cached` change the files listed, and no event under the root tells of them (a new user's watched
        # src/ kept a file Git had dropped). Their folder is watched too; a change there walks.
        above = codebase.work_tree()
        self.git_dir = git_dir(str(above.root)) if above is not None else ""
        self.git_files = {os.path.join(self.git_dir, "index"), *(git_info_path(str(above.root), name)
                                                                  for name in ("exclude", "attributes"))} \
            if self.git_dir and os.path.isdir(self.git_dir) else set()

    def mark(self, fresh: bool) -> None:
        self.fresh = fresh
        mark(self.codebase, fresh)

    def hear(self, path: str) -> None:
        """Note that ``path`` (absolute, under the root) changed; past :data:`~.walk.RESCAN_MAX` paths the next
        update walks the tree (a branch switch), which is then cheaper than looking at each."""
        if self.heard is not None:
            self.heard.add(os.path.relpath(path, self.root).replace(os.sep, "/"))
            if len(self.heard) > RESCAN_MAX:
                self.heard = None

    def rescan(self) -> None:
        """Learn the directories and files an update would see: from the scan the last build kept beside
        the index (:func:`~codii_sql.ingest.scan_stats.load`: 0.1 s on the kernel), else by a read-only
        walk (1-1.6 s there, after each update)."""
        self.walk_due = False
        result = scan_stats.load(scan_stats.sidecar(self.codebase.db_path), None)
        if result is None:
            try:
                result = scan(self.codebase.root, **scan_rules(self.codebase))
            except (CodiiError, OSError):  # a bad .codii.yaml or a vanished root: watch every change
                self.dirs, self.files = {""}, set()
                return
        self.dirs, self.files = result.dirs, {f.path for f in result.files}

    def wants(self, path: str) -> bool:
        """Whether a change at ``path`` (absolute) can change the index: an indexed file, an entry of
        a walked directory (a new file or directory, an ignore or config file), or one of Git's
        :data:`GIT_STATE_FILES` of a root that is its work tree's top."""
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        if self.gone or rel.startswith("../") or rel == "..":
            return False
        if rel in self.files or rel in GIT_STATE_FILES:
            return True
        parent = rel.rpartition("/")[0]
        return (parent + "/" if parent else "") in self.dirs


class Watcher:
    """Keep ``codebases`` fresh until ``stop`` is set (see the module docstring).

    ``update(codebase, progress, changed)`` does one update (default :func:`update_if_stale`; ``changed``:
    the paths heard changing since the last one, None when unknown) and raises IndexBusyError when
    another writer holds the lock; ``on_update`` hears each :class:`Update`,
    ``on_notice`` a one-line message about the watcher itself.
    """

    def __init__(self, codebases: Iterable[Codebase], *, stop: threading.Event,
                 on_update: Callable[[Update], None] = lambda u: None,
                 update: Callable[..., tuple[BuildReport | None, list[str]]] = update_if_stale,
                 poll: bool | None = None, on_notice: Callable[[str], None] = lambda message: None) -> None:
        self.follows = [Follow(cb) for cb in codebases]
        self.stop = stop
        self.on_update = on_update
        self.on_notice = on_notice
        self.update = update
        self.poll = os.environ.get(ENV_POLL, "0").strip() == "1" if poll is None else poll
        self.due: set[int] = set(range(len(self.follows)))  # indexes into follows; all at the start
        self.woke_at = 0.0  # time.monotonic() of the last wake whose events are marked
        self.beat_at = 0.0  # time.monotonic() of the last note that the fresh codebases are still fresh

    def committed(self, codebase: Codebase) -> bool:
        """Whether this watcher has committed every change of ``codebase`` it has heard of (in memory: a
        ``clear`` by another process removed the note on disk, and a server waited 5 s on each call)."""
        return any(f.fresh for f in self.follows if f.codebase == codebase)

    def caught_up(self, asked: float) -> bool:
        """Whether every event of a change made before ``asked`` (``time.monotonic()`` seconds) has
        reached this watcher and been marked (:func:`~.watchers.mark`, so :func:`~.watchers.kept_fresh`
        says no until it is committed): it woke :data:`EVENT_DELAY_SECONDS` after, and watchfiles hands
        over every buffered event at a wake (or wakes on its timeout with none). A polling watcher
        sees a change only at its next poll, a second away: True, and the tool answers at once."""
        return self.poll or self.woke_at > asked + EVENT_DELAY_SECONDS

    def run(self, *, ready: Callable[[], None] = lambda: None) -> None:
        """Update every codebase, call ``ready`` (once) when events are followed, then follow them
        until ``stop`` is set. When the OS runs out of file watches (Linux:
        ``fs.inotify.max_user_watches``) it polls instead, after telling ``on_notice``.

        Raises:
            FileNotFoundError: a watched root no longer exists (watchfiles refuses it).
        """
        self._update_due()
        for f in self.follows:
            f.rescan()
        told: list[bool] = []

        def once() -> None:
            if not told:
                told.append(True)
                ready()

        while not self.stop.is_set():
            try:
                return self._follow_events(once)
            except RuntimeError as err:
                # notify cannot hand over an event of a name that is not UTF-8 (`caf\xe9.py`, which the index
                # skips): it ended the watch, and `codii-sql watch` stopped with a traceback (a new user). The
                # watch starts again; its first wake checks every codebase, as at the start.
                if type(err).__name__ != "WatchfilesRustInternalError" or "decode" not in str(err):
                    raise
                self.stop.wait(0.2)
            except OSError as err:
                # Not ignored: notify's "ignore permission denied" also hides a full watch table,
                # and every event under the folders left unwatched would be lost without a word.
                if self.poll or not ("limit" in str(err).lower() or isinstance(err, PermissionError)):
                    raise
                self.poll = True
                self.due = set(range(len(self.follows)))  # changes while switching are found by a scan
                why = ("the OS limit of file watches was reached (Linux: raise it with sudo sysctl "
                       "fs.inotify.max_user_watches=524288, then restart)" if "limit" in str(err).lower()
                       else f"a folder cannot be watched ({err})")
                self.on_notice(f"{why}: polling every {POLL_MS / 1000:g} s instead, which is slow on big trees")

    def _follow_events(self, ready: Callable[[], None]) -> None:
        """Wait on events; at the first wake (the watches are then in place) check every codebase
        once more, for changes made while they were being set up, and call ``ready``."""
        import watchfiles

        first = True
        git_dirs = sorted({f.git_dir for f in self.follows if f.git_files})
        for changes in watchfiles.watch(
                *(f.root for f in self.follows), *git_dirs, watch_filter=None, step=STEP_MS, debounce=DEBOUNCE_MS,
                stop_event=self.stop, rust_timeout=WAKE_MS, yield_on_timeout=True, raise_interrupt=False,
                force_polling=self.poll, poll_delay_ms=POLL_MS, ignore_permission_denied=False):
            for _, path in changes:
                owners = [i for i, f in enumerate(self.follows) if path in f.git_files]
                for owner in owners or [o for o in [self._owner(path)] if o is not None]:
                    if owner not in self.due:  # a search must walk the tree itself until this is committed
                        self.follows[owner].mark(False)
                    self.due.add(owner)
                    self.follows[owner].hear(path)
                    # An empty new folder changes no index, but what is created in it later must count.
                    self.follows[owner].walk_due |= os.path.isdir(path)
            if first:  # what changed while the watches were set up is found by the check below, not by an
                for f in self.follows:  # event: a tool must wait for that check too (a new user's agent, its
                    f.mark(False)  # first call then a write: find_symbol missed it 5 of 26 times)
                    f.heard = None  # ... which walks
            for f in self.follows:
                renote(f.codebase)
            if time.monotonic() - self.beat_at >= HEARTBEAT_SECONDS:  # still fresh, and still here to say it
                self.beat_at = time.monotonic()
                for f in self.follows:
                    if f.fresh:
                        f.mark(True)
            self.woke_at = time.monotonic()  # after the marks: a tool waiting on it then sees them
            if first:
                self.due, first = set(range(len(self.follows))), False
                self._update_due()
                ready()
            elif self.due:
                self._update_due()

    def _owner(self, path: str) -> int | None:
        """The follow (index) of the deepest watched root holding ``path``, if the change matters."""
        best = None
        for i, f in enumerate(self.follows):
            inside = path == f.root or path.startswith(f.root.rstrip(os.sep) + os.sep)
            if inside and (best is None or len(f.root) > len(self.follows[best].root)):
                best = i
        return best if best is not None and self.follows[best].wants(path) else None

    def _update_due(self) -> None:
        for i in sorted(self.due):
            if self.stop.is_set():
                return
            if self._update_one(self.follows[i]):
                self.due.discard(i)

    def _update_one(self, follow: Follow) -> bool:
        """One update; False when another writer holds the lock (retried at the next wake). A root
        that is gone is followed no more; with none left, the watcher stops."""
        started = time.perf_counter()
        if not follow.codebase.root.is_dir():
            follow.gone = True
            follow.mark(False)
            self.on_update(Update(follow.codebase, None, 0.0, error=f"{follow.root} is gone: no longer watched "
                                  "(its index is kept; `codii-sql clear` deletes it)"))
            if all(f.gone for f in self.follows):
                self.stop.set()
            return True
        # Polling hears no path: each poll's update walks.
        heard, follow.heard = (None if self.poll else follow.heard), set()
        try:
            report, warnings = self.update(follow.codebase, self._progress, heard)
        except IndexBusyError:  # the other writer's build keeps its scan: what was heard since still applies
            follow.heard = None if heard is None else heard | follow.heard
            return False
        except BuildStopped:
            follow.heard = None
            return True
        except (CodiiError, OSError) as err:  # reported; the next change tries again, with a walk
            follow.heard = None
            follow.mark(False)
            self.on_update(Update(follow.codebase, None, time.perf_counter() - started, error=str(err)))
            return True
        follow.mark(True)
        if report is not None or follow.walk_due:
            follow.rescan()
        changed = report is not None and (report.added or report.modified or report.removed or report.reindexed)
        if report is not None and (changed or warnings):  # else another writer did the work: nothing to tell
            self.on_update(Update(follow.codebase, report, time.perf_counter() - started, warnings=warnings))
        return True

    def _progress(self, phase: str, done: int, total: int | None) -> None:
        if self.stop.is_set():
            raise BuildStopped("the watcher stopped")

