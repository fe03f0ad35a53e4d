"""Searching one codebase: open its index, update it first if asked, answer with results and notes."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..codebase import Codebase
from ..ingest.indexer import index_settings
from ..ingest.report import Progress
from ..search.results import Result, SearchOptions
from ..search.searcher import Searcher
from ..storage.lock import daemon_running, is_locked, vectors_running
from ..storage.store import Store
from .builds import ensure_index
from .embedders import embedder_for_search
from .notes import filter_note, no_match_note, scope_note, vectors_note
from .status import not_indexed


@dataclass
class SearchResponse:
    """What a search returns: results plus how fresh the index was (``note`` says why if not).

    ``scope`` is the folder (relative to ``codebase``) the results were kept to, when the
    search came from a subfolder of an indexed codebase (:meth:`Codebase.find`).
    """

    query: str
    codebase: str
    results: list[Result]
    seconds: float
    note: str | None = None
    scope: str | None = None
    no_good_match: bool = False
    best_cosine: float | None = None
    budget: dict | None = None

    def to_dict(self) -> dict:
        """The documented JSON shape: ``{"query", "codebase", "results": [...]}`` plus ``seconds``,
        ``no_good_match`` (nothing matched the query well), ``best_cosine`` (the query's nearest
        chunk, when there are vectors), and ``note``/``scope`` when set."""
        out = {"query": self.query, "codebase": self.codebase, "results": [r.to_dict() for r in self.results],
               "seconds": round(self.seconds, 4), "no_good_match": self.no_good_match}
        if self.best_cosine is not None:
            out["best_cosine"] = round(self.best_cosine, 4)
        if self.budget is not None:
            out["budget"] = self.budget
        if self.scope:
            out["scope"] = self.scope
        if self.note:
            out["note"] = self.note
        return out


def open_searcher(codebase: Codebase) -> Searcher:
    """A :class:`Searcher` over the existing index; the caller closes ``searcher.store``.

    Raises:
        NotIndexedError: no index file yet.
        IndexMismatchError: built by another model (older chunking rules are fine: the next build re-chunks).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    store = Store(codebase.db_path, create=False)
    try:
        embedder = embedder_for_search(store.meta())
        # Chunks of older chunking rules are still valid search results; the next build re-chunks.
        store.check_compatible({k: v for k, v in index_settings(embedder).items() if k != "chunker_version"})
    except Exception:
        store.close()
        raise
    return Searcher(store, codebase.root, embedder)


def search(codebase: Codebase, query: str, opts: SearchOptions, *, update: bool = True,
           progress: Progress | None = None) -> SearchResponse:
    """Update the index if needed (see :func:`ensure_index`), then run one search.

    Raises:
        UsageError: a bad query or option (see :meth:`Searcher.search`).
        NotIndexedError, IndexMismatchError, StorageError: see :func:`open_searcher`.
    """
    opts.check()  # a bad option is refused before any indexing work
    if update and opts.mode != "bm25":
        # The model's start-up (~0.4 s) runs on the second core while the update check walks
        # the tree (0.1 s on Sphinx's 1.4k files, ~0.5 s on Django's): it overlaps, not adds.
        threading.Thread(target=_load_quietly, args=(codebase,), name="codii-model-load").start()
    note = ensure_index(codebase, update=update, progress=progress)
    searcher = open_searcher(codebase)
    try:
        t = time.perf_counter()
        results = searcher.search(query, opts)
        seconds = time.perf_counter() - t
        streaming = vectors_running(codebase) or daemon_running(codebase)
        note = "; ".join(filter(None, (
            no_match_note(searcher) if results else None, searcher.budget.note() if searcher.budget else None,
            note, searcher.note, filter_note(searcher.store, indexing=lambda: is_locked(codebase)),
            None if results else scope_note(searcher.store, opts.under),
            vectors_note(searcher.store, running=streaming, mode=opts.mode)))) or None
        return SearchResponse(query, str(codebase.root), results, seconds, note, opts.under or None,
                              searcher.no_good_match, searcher.best_cosine,
                              dataclasses.asdict(searcher.budget) if searcher.budget else None)
    finally:
        searcher.store.close()


@contextlib.contextmanager
def batch_searcher(codebase: Codebase, opts: SearchOptions, *,
                   update: bool = True) -> Iterator[Callable[[str], list[Result]]]:
    """One index update and one open index for many queries: yields ``search(query) -> results``.

    Raises:
        as :func:`search`; the yielded function raises ``UsageError`` for a bad query.
    """
    ensure_index(codebase, update=update)
    searcher = open_searcher(codebase)
    try:
        yield lambda query: searcher.search(query, opts)
    finally:
        searcher.store.close()


def similar_code(searcher: Searcher, file: str, start_line: int | None, end_line: int | None,
                 limit: int, max_tokens: int | None = None) -> tuple[int, list[Result]]:
    """Code most like ``file`` (lines ``start_line..end_line``, 1-based inclusive; None: the file's
    start/end): the mean of its stored chunk vectors (nothing is re-embedded), one result per
    other file, fitted to ``max_tokens`` if given (``searcher.budget`` says what it cut). Returns
    (chunks of ``file`` used, results); (0, []) when it has no indexed chunk.
    """
    rows = searcher.store.rows("file_vectors", {"path": file, "start_line": start_line, "end_line": end_line})
    if not rows:
        return 0, []
    vectors = np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])
    opts = SearchOptions(limit=limit, mode="vector", exclude_path=file, group_by_file=True, max_tokens=max_tokens)
    return len(rows), searcher.similar(vectors, opts)


def _load_quietly(codebase: Codebase) -> None:
    """Load the embedder the search will use (the index's, or the default for a first build)."""
    try:
        meta = {}
        if codebase.db_path.is_file():
            with Store(codebase.db_path, create=False) as store:
                meta = store.meta()
        embedder_for_search(meta).load()
    except Exception:  # noqa: BLE001 - the search's own embed call raises it with its message
        pass
