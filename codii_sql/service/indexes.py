"""Opening indexes for search, and those a long-lived face keeps open: one read connection per index, and each codebase's readable file set."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..codebase import Codebase
from ..ingest.indexer import index_settings
from ..search.searcher import Searcher
from . import boundary
from .embedders import embedder_for_search
from .status import not_indexed, open_store, scan_rules


def open_searcher(codebase: Codebase) -> Searcher:
    """A :class:`Searcher` over the existing index; the caller closes ``searcher.store``. An index
    alone is searched without its source: its results' ``stale`` is None.

    Raises:
        NotIndexedError: no index file yet.
        IndexMismatchError: built by another model (older chunking rules are fine: the next build re-chunks).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    store = open_store(codebase)
    try:
        embedder = embedder_for_search(store.meta())
        # Chunks of older chunking rules are still valid search results; the next build re-chunks.
        store.check_compatible({k: v for k, v in index_settings(embedder).items() if k != "chunker_version"})
    except Exception:
        store.close()
        raise
    return Searcher(store, None if codebase.alone else codebase.root, embedder)


@dataclass
class OpenIndex:
    """A cached searcher, the identity ``(st_dev, st_ino)`` of the file it opened, and its lock."""

    searcher: Searcher
    identity: tuple[int, int]
    lock: threading.Lock = field(default_factory=threading.Lock)


class OpenIndexes:
    """One read connection per index, reused across calls; reopened when the file is replaced.

    An apsw connection must not run two statements at once from two threads, so each is used
    under its own lock.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._open: dict[str, OpenIndex] = {}
        self._filesets: dict[str, tuple[str, boundary.FileSet]] = {}

    @contextlib.contextmanager
    def searcher(self, cb: Codebase) -> Iterator[Searcher]:
        """The cached :class:`Searcher` of ``cb``, held exclusively for the ``with`` block.

        Raises:
            NotIndexedError, IndexMismatchError: see :func:`open_searcher`.
        """
        key = str(cb.db_path)
        with self._lock:
            entry = self._open.get(key)
            identity = _identity(cb.db_path)
            if entry is not None and entry.identity != identity:
                self._close(key)
                entry = None
            if entry is None:
                entry = self._open[key] = OpenIndex(open_searcher(cb), identity)
        with entry.lock:
            yield entry.searcher

    def forget(self, cb: Codebase) -> None:
        """Close ``cb``'s connection (before its file is deleted)."""
        with self._lock:
            self._close(str(cb.db_path))
            self._filesets.pop(str(cb.db_path), None)

    def _close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        if entry is not None:
            with entry.lock:
                entry.searcher.store.close()

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


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino
