"""Opening indexes for search, and those a long-lived face keeps open: one read connection per index, and each codebase's readable file set."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..ingest.settings import check_compatible, index_settings
from ..search.searcher import Searcher
from . import boundary
from .embedders import embedder_for_search
from ..errors import CodiiError, DamagedIndexError
from .status import naming, not_indexed, open_store, refuse_damaged, scan_rules


def open_searcher(codebase: Codebase) -> Searcher:
    """A :class:`Searcher` over the existing index; the caller closes ``searcher.store``. An index
    alone is searched without its source: its results' ``stale`` is None.

    Raises:
        NotIndexedError: no index file yet.
        DamagedIndexError: quick_check finds broken pages, or an export's rows differ from its digest
            (each checked once per change of the file, see :func:`codii_sql.storage.health.damage`).
        IndexMismatchError: built by another model (older chunking rules are fine: the next build re-chunks).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    store = open_store(codebase)
    try:
        refuse_damaged(codebase, store)
        embedder = embedder_for_search(store.meta())
        # Chunks of older chunking rules are still valid search results; the next build re-chunks.
        check_compatible(store, {k: v for k, v in index_settings(embedder).items() if k != "chunker_version"})
    except CodiiError as err:
        store.close()
        raise naming(err, codebase) from None
    except Exception:
        store.close()
        raise
    return Searcher(store, None if codebase.alone else codebase.root, embedder)


#: Connections kept open at most: a folder of 1,000 shards must not hold 1,000 files open (each
#: at least one descriptor); the least recently used idle ones are closed past it.
MAX_OPEN = 128


@dataclass
class OpenIndex:
    """A cached searcher, the identity ``(st_dev, st_ino)`` of the file it opened, its lock, and
    when it was last used (a count of uses: the least recent is closed first)."""

    searcher: Searcher
    identity: tuple[int, int]
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: int = 0
    #: Set (under ``lock``) once it is closed: a search that waited for it looks again.
    closed: bool = False


class OpenIndexes:
    """One read connection per index, reused across calls; reopened when the file is replaced.

    An apsw connection must not run two statements at once from two threads, so each is used
    under its own lock. A file replaced by rename (a new inode) is opened anew for the next search,
    and the old connection is closed once the search still using it ends: that search reads the
    old file whole, the next the new one whole. At most :data:`MAX_OPEN` stay open.
    """

    def __init__(self, max_open: int = MAX_OPEN):
        self._lock = threading.Lock()
        self._open: dict[str, OpenIndex] = {}
        self._filesets: dict[str, tuple[str, boundary.FileSet]] = {}
        self._damaged: dict[str, tuple[tuple, DamagedIndexError]] = {}  # a file's identity when found damaged
        self._uses = 0
        self.max_open = max_open

    @contextlib.contextmanager
    def searcher(self, cb: Codebase) -> Iterator[Searcher]:
        """The cached :class:`Searcher` of ``cb``, held exclusively for the ``with`` block.

        Raises:
            NotIndexedError, IndexMismatchError: see :func:`open_searcher`.
        """
        while True:
            entry = self._entry(cb)
            with entry.lock:
                if entry.closed:  # retired (its file replaced) or evicted while this search waited for it
                    continue
                if _same_embedder(entry.searcher):
                    yield entry.searcher
                    return
                # Rebuilt in place with another embedder (build --force --embedder X): a new user's server
                # kept embedding queries with the old model and scored them against the new vectors.
                entry.searcher.store.close()
                entry.closed = True
            with self._lock:
                if self._open.get(str(cb.db_path)) is entry:
                    del self._open[str(cb.db_path)]

    def _entry(self, cb: Codebase) -> OpenIndex:
        """The open entry of ``cb``'s file as it is now (opened anew when it was replaced); the entries
        this retires are closed once the searches using them end."""
        key = str(cb.db_path)
        retired: list[OpenIndex] = []
        with self._lock:
            entry = self._open.get(key)
            identity = _identity(cb)
            if entry is not None and entry.identity != identity:
                retired.append(self._open.pop(key))
                entry = None
            failed = self._damaged.get(key)
            if entry is None and failed is not None and failed[0] == identity:
                raise failed[1]  # as broken as when it was checked: not read whole again
            self._uses += 1
            if entry is None:
                # A shard new or rewritten in place has its pages checked before it is searched (half-copied, it
                # answered "searched, no results" from the pages it could still read); a server reads it
                # unmapped (storage.store.serve_unmapped), so such a read is an error, not SIGBUS.
                try:
                    searcher = open_searcher(cb)
                except DamagedIndexError as err:
                    self._damaged[key] = (identity, err)
                    raise
                self._damaged.pop(key, None)
                entry = self._open[key] = OpenIndex(searcher, identity, used=self._uses)
                retired += self._least_used()  # never the new one: it is the most recent
            entry.used = self._uses
        for old in retired:  # outside the shared lock: waiting for a search on it holds up no other
            _close(old)
        return entry

    def damaged(self, cb: Codebase) -> str | None:
        """Why opening ``cb``'s file found it damaged (the error's sentence), while the file is as it was then; else None."""
        with self._lock:
            failed = self._damaged.get(str(cb.db_path))
        try:
            return failed[1].what if failed is not None and failed[0] == _identity(cb) else None
        except CodiiError:  # gone since
            return None

    def _least_used(self) -> list[OpenIndex]:
        """The idle entries past :attr:`max_open`, least recently used first, taken out of the cache."""
        over = len(self._open) - self.max_open
        if over <= 0:
            return []
        idle = sorted((e.used, k) for k, e in self._open.items() if not e.lock.locked())
        return [self._open.pop(k) for _, k in idle[:over]]

    def forget(self, cb: Codebase) -> None:
        """Close ``cb``'s connection (before its file is deleted)."""
        with self._lock:
            self._close(str(cb.db_path))
            self._filesets.pop(str(cb.db_path), None)

    def _close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        if entry is not None:
            _close(entry)

    def fileset(self, cb: Codebase) -> boundary.FileSet:
        """The boundary's file set for ``cb`` under its current rules (``.codii.yaml`` + last build's options)."""
        rules = scan_rules(cb)
        fingerprint = json.dumps(rules, sort_keys=True, default=list)
        key = str(cb.db_path)
        with self._lock:
            cached = self._filesets.get(key)
            if cached is None or cached[0] != fingerprint:
                cached = self._filesets[key] = (fingerprint, boundary.FileSet(cb.root, rules))
            return cached[1]


def _identity(cb: Codebase) -> tuple[int, ...]:
    """The file's ``(st_dev, st_ino)``: another one when the file was replaced by rename; for an index
    alone, which nothing here writes, also its size, mtime and ctime (ns): a change there is a rewrite in
    place (the ctime too, which no one can set: a server kept searching a shard altered in place whose mtime
    was put back, while its /grep refused it).

    Raises:
        NotIndexedError: the file is gone.
    """
    try:
        st = os.stat(cb.db_path)
    except FileNotFoundError:
        raise not_indexed(cb) from None
    return (st.st_dev, st.st_ino) + ((st.st_size, st.st_mtime_ns, st.st_ctime_ns) if cb.alone else ())


def _same_embedder(searcher: Searcher) -> bool:
    """Whether the index still records the embedder ``searcher`` embeds queries with (the snapshot's model id,
    one row); an index whose model is not recorded yet (a rebuild just started) keeps it."""
    recorded = searcher.store.value("meta_get", {"key": "model_id"})
    return recorded is None or json.loads(recorded) in (None, searcher.embedder.model_id)


def _close(entry: OpenIndex) -> None:
    """Close ``entry`` once no search uses it, and mark it so."""
    with entry.lock:
        entry.searcher.store.close()
        entry.closed = True
