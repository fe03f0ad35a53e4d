"""Shards: the one interface a search asks of an index, whatever holds it (zoekt's ``Searcher``, one per shard).

A shard is a codebase's index as a search sees it: :class:`LocalShard` (a codebase folder here,
brought up to date before it answers when asked), and the other kinds in their own modules.
The use case (:mod:`.searching`) and the fan-out (:mod:`.fanout`) know shards only through
:class:`Shard`; a new kind of shard is one new module.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..codebase import Codebase
from ..errors import NotIndexedError, Remedy
from ..ingest.report import Progress
from ..models.embedder import Embedder
from ..search.answer import Note
from ..search.results import Result, SearchOptions
from ..search.searcher import Hits, Searcher
from ..storage.lock import daemon_running, is_locked, vectors_running
from .builds import ensure_index
from .grepping import grep_chunk_ids
from .indexes import OpenIndexes, open_searcher
from .notes import embedder_note, empty_filter_note, filter_note, scope_note, vectors_note
from .status import not_indexed


@dataclass
class ShardAnswer:
    """One shard's answer: its hits (results in its own order and scores), the notes about it, and
    the model id its vectors come from (None without vectors)."""

    hits: Hits
    notes: list[Note] = field(default_factory=list)
    model_id: str | None = None


class Shard(Protocol):
    """What a search asks of one index.

    Attributes:
        name: what the results' ``codebase`` says: the codebase root, or the shard's own name.
        scope: the folder (relative POSIX path) its results are kept to, or "".
        embedder: embeds the query for this shard (a search embeds it once per embedder); None
            when the shard embeds it itself (a remote server), or has no vectors to compare it with.
    """

    name: str
    scope: str
    embedder: Embedder | None

    def prepare(self) -> Note | None:
        """Get ready to answer (a local codebase: update its index first, when asked); a note when
        the answer comes from an older or unfinished state.

        Raises:
            CodiiError: the shard cannot answer at all (not indexed, unreadable).
        """

    def probe(self, vector: np.ndarray) -> float | None:
        """How well the shard matches a query embedding (float32[dims]) as a whole: the mean cosine of
        its 10 nearest chunks (routing), or None when unknown (no vectors yet)."""

    def search(self, query: str, opts: SearchOptions, vector: np.ndarray | None,
               embedder_failed: str | None = None) -> ShardAnswer:
        """The shard's top ``opts.limit`` results for ``query`` (``vector``: its embedding when the
        caller made it; ``embedder_failed``: why it could not, the shard then answers from BM25).

        Raises:
            UsageError: a bad query or option for this shard (a language it has none of).
        """

    def owns(self, result: Result) -> bool:
        """Whether a result of a merged answer is this shard's."""

    def close(self) -> None:
        """Release what the shard holds open."""


class LocalShard:
    """A codebase folder on this machine and its index.

    Args:
        codebase: the codebase (its root and index file).
        scope: the subfolder searched (a search from a subfolder of an indexed codebase), or "".
        update: bring the index up to date before answering (a CLI search); else answer from the
            last committed state.
        progress: progress of that update.
        indexes: a long-lived face's open indexes (one connection per index, reused); None opens
            one for this shard and closes it with :meth:`close`.
        building: whether a build of the codebase runs now (default: its writer lock is held).
    """

    def __init__(self, codebase: Codebase, scope: str = "", *, update: bool = False, progress: Progress | None = None,
                 indexes: OpenIndexes | None = None, building: Callable[[Codebase], bool] | None = None):
        self.codebase, self.scope = codebase, scope
        self.name = str(codebase.root)
        self.update, self.progress = update, progress
        self.indexes = indexes
        self.building = building or is_locked
        self._own: Searcher | None = None
        self._embedder: Embedder | None = None
        self._embedder_known = False

    def prepare(self) -> Note | None:
        """See :meth:`Shard.prepare` (:func:`ensure_index`).

        Raises:
            NotIndexedError: no index yet and no update asked for (or a first build is running).
        """
        if not self.update and not self.codebase.db_path.is_file():
            if self.building(self.codebase):
                raise NotIndexedError(f"{self.codebase.root} is being indexed for the first time and has no committed "
                                      "chunks yet", Remedy("poll_status", {"root": self.name}))
            raise not_indexed(self.codebase)
        return ensure_index(self.codebase, update=self.update, progress=self.progress)

    @property
    def embedder(self) -> Embedder | None:
        # Kept once known: asked several times a search, it must not reopen an index the open-index
        # cache closed meanwhile (1,000 shards past its 128 thrashed for minutes).
        if not self._embedder_known:
            with self._searcher() as searcher:
                self._embedder = searcher.embedder if searcher.store.value("has_vectors") else None
            self._embedder_known = True
        return self._embedder

    @contextlib.contextmanager
    def _searcher(self) -> Iterator[Searcher]:
        if self.indexes is not None:
            with self.indexes.searcher(self.codebase) as searcher:
                yield searcher
            return
        if self._own is None:
            self._own = open_searcher(self.codebase)
        yield self._own

    def probe(self, vector: np.ndarray) -> float | None:
        with self._searcher() as searcher:
            return searcher.match(vector)

    def search(self, query: str, opts: SearchOptions, vector: np.ndarray | None,
               embedder_failed: str | None = None) -> ShardAnswer:
        if self.scope:
            opts = dataclasses.replace(opts, under=self.scope)
        if opts.grep:
            opts = dataclasses.replace(opts, chunk_ids=grep_chunk_ids(self.codebase, opts.grep))
        with self._searcher() as s:
            hits = s.find(query, opts, vector, embedder_failed=embedder_failed)
            # A build with vectors off holds the writer lock as well, but embeds nothing.
            running = self.embedding_now() and s.store.meta().get("vectors_enabled") is not False
            notes = [embedder_note(s.embedder.name, hits.embedder_failed) if hits.embedder_failed else None,
                     filter_note(s.store, self.name, indexing=lambda: self.building(self.codebase)),
                     None if hits.results else scope_note(s.store, opts.under),
                     None if hits.results else empty_filter_note(s.store, opts.exts, opts.glob),
                     vectors_note(s.store, self.name, running=running,
                                  mode="bm25" if hits.embedder_failed else opts.mode,
                                  alone_db=str(self.codebase.db_path) if self.codebase.alone else None)]
            return ShardAnswer(hits, [n for n in notes if n], s.embedder.model_id)

    def owns(self, result: Result) -> bool:
        return result.codebase == self.name

    def embedding_now(self) -> bool:
        """Whether a build embeds this codebase's chunks now (its vector lock, its background build)."""
        return vectors_running(self.codebase) or daemon_running(self.codebase) or self.building(self.codebase)

    def close(self) -> None:
        if self._own is not None:
            self._own.store.close()
            self._own = None
