"""The history search use case: one request -> one :class:`HistoryAnswer` (commits, notes, budget), for every face."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import (DiskFullError, EmbeddingFailedError, IndexBusyError, ReadOnlyIndexError, Remedy, UsageError,
                      hint_text)
from ..ingest.indexer import Indexer
from ..models.cache import EmbeddingCache
from ..search.answer import SHOWN_QUERY_CHARS, Note, Words, with_notes, worded_notes
from ..search.budget import envelope_tokens
from ..search.history import CommitHit, HistorySearcher, fit_commits
from ..storage.lock import vectors_running
from .builds import ensure_index
from .codebases import open_codebase
from .embedders import embedder_for_search
from .searching import MAX_QUERY_CHARS
from .status import history_state, not_indexed, open_store

#: New commits whose vectors the search embeds itself before answering (about a second of model
#: time at ~30 texts/s); more wait for a build and rank by BM25 meanwhile.
INLINE_COMMITS = 32
#: The most commits one answer holds.
MAX_HISTORY_LIMIT = 50


@dataclass
class HistoryRequest:
    """One history search: ``query``; the codebase folder ``path`` (None: the current directory);
    ``glob`` over a hunk's path; ``since`` a date (``YYYY-MM-DD``, local time) or ISO date-time;
    ``limit`` commits; ``max_tokens`` the answer's budget (None: none); ``update`` the history
    first (new commits only); ``db`` an index file to search instead (a shard holds its history)."""

    query: str
    path: str | None = None
    glob: str | None = None
    since: str | None = None
    limit: int = 10
    max_tokens: int | None = None
    update: bool = True
    db: str | None = None


@dataclass
class HistoryAnswer:
    """The answer to a :class:`HistoryRequest`: ``results`` best first (one per commit, each with its
    matching hunks), ``history`` the index's history state (``state``, ``commits``, ``hunks``,
    ``vectors`` done/total, ``head``, ``branch``), ``notes``, ``budget`` (None without
    ``max_tokens``), ``seconds`` of the search (the update excluded)."""

    query: str
    codebase: str
    results: list[CommitHit]
    history: dict
    seconds: float
    notes: list[Note] = field(default_factory=list)
    budget: dict | None = None

    def note(self, words: Words) -> str | None:
        return worded_notes(self.notes, words)

    def to_dict(self, words: Words) -> dict:
        """``{"query" (cut at SHOWN_QUERY_CHARS), "codebase", "results": [commit], "history", "seconds", ["budget"],
        ["note", "notes"]}``;
        a commit is ``{"sha", "date" (unix seconds), "author", "email", "subject", "body", "files",
        "score", "commit_rank", "hunk_rank", "knn_rank", "cosine", "hunk_count", "hunks": [{"path",
        "old_path", "old_start", "old_lines", "new_start", "new_lines", "content", "matched"}]}``."""
        # The query echoed as search echoes it: a 50 KB stack trace came back whole (a new user's agent, 28k tokens).
        query = self.query if len(self.query) <= SHOWN_QUERY_CHARS else self.query[:SHOWN_QUERY_CHARS] + "…"
        out: dict = {"query": query, "codebase": self.codebase, "results": [r.to_dict() for r in self.results],
                     "history": self.history, "seconds": round(self.seconds, 4)}
        if self.budget is not None:
            out["budget"] = self.budget
        return with_notes(out, self.notes, words)


def search_history(request: HistoryRequest) -> HistoryAnswer:
    """Answer ``request`` from the codebase's index (its history brought up to date first when
    ``request.update``).

    Raises:
        UsageError: a bad limit, date, glob or budget, or no such folder.
        NotIndexedError: the codebase has no index (a build makes it, with its history).
        StorageError: the index cannot be read.
    """
    if not 1 <= request.limit <= MAX_HISTORY_LIMIT:
        raise UsageError(f"must be from 1 to {MAX_HISTORY_LIMIT}", field="limit")
    if not any(ch.isalnum() for ch in request.query) or len(request.query) > MAX_QUERY_CHARS:
        raise UsageError(f"must hold a word, in at most {MAX_QUERY_CHARS:,} characters", field="query")
    since = parse_since(request.since)
    codebase = open_codebase(request.path, request.db)
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    notes: list[Note] = []
    if request.update and not codebase.alone:
        # The files first: a commit's hunks are kept for indexed files only, and a file just committed
        # was not indexed yet (a new user's commit read back with no file and no hunk till the next build).
        notes += [n for n in (ensure_index(codebase, update=True, vectors=False), _update(codebase)) if n]
    store = open_store(codebase)
    try:
        started = time.perf_counter()
        state = history_state(store)
        notes += state_notes(state, codebase)
        hits, why = HistorySearcher(store, embedder_for_search(store.meta())).search(
            request.query, glob=request.glob, since=since, limit=request.limit)
        if why:
            notes.append(Note("vectors", why))
        budget = None
        if request.max_tokens is not None:
            # The answer's other fields first, with room for the budget's report and note (as search reserves them).
            bare = HistoryAnswer(request.query, codebase.shown, [], state, 0.0, notes, None).to_dict(hint_text)
            hits, budget = fit_commits(hits, request.max_tokens, envelope_tokens(bare))
            if budget["trimmed"] or budget["dropped"]:
                notes.append(Note("budget", f"{budget['trimmed']} hunk(s) cut or left out and {budget['dropped']} "
                                            f"commit(s) dropped to fit {request.max_tokens} tokens",
                                  "ask with a larger token budget, or fewer commits"))
        return HistoryAnswer(request.query, codebase.shown, hits, state, time.perf_counter() - started, notes,
                             budget)
    finally:
        store.close()


def parse_since(since: str | None) -> int | None:
    """``since`` (``YYYY-MM-DD`` as local midnight, or an ISO 8601 date-time) in unix seconds.

    Raises:
        UsageError: not such a date.
    """
    if since is None or not since.strip():
        return None
    try:
        return int(datetime.datetime.fromisoformat(since.strip()).timestamp())
    except ValueError:
        raise UsageError(f"takes a date such as 2024-01-31 (or 2024-01-31T12:00), got {since!r}", field="since") from None


def _update(codebase: Codebase) -> Note | None:
    """Read the commits made since the last build (its bound and rules), embedding a few; a note
    when another process is writing the index (the search answers from its last committed state)."""
    store = open_store(codebase)
    try:
        embedder = embedder_for_search(store.meta())
    finally:
        store.close()
    cache = EmbeddingCache()
    try:
        Indexer(codebase, embedder, cache=cache).refresh_history(embed_up_to=INLINE_COMMITS)
    except IndexBusyError:
        return Note("indexing", "another process is indexing this codebase: the history is searched as last committed")
    except (DiskFullError, ReadOnlyIndexError, EmbeddingFailedError) as err:
        # A search reads: the history it has is still worth answering from.
        return Note("update", f"the new commits could not be indexed ({err.what}): the history is searched as last "
                              "committed")
    finally:
        cache.close()
    return None


def state_notes(state: dict, codebase: Codebase) -> list[Note]:
    """Why a history answer may hold less than the branch: no history read yet, none to read
    (no git, a shallow clone, off), or commits still without their vectors."""
    root = {"root": str(codebase.root)}
    if state["state"] == "not_indexed":
        return [Note("history", f"the history of {codebase.root} is not indexed yet", Remedy("build", root))]
    if state.get("note"):
        return [Note("history", state["note"])]
    if state["state"] == "off":
        # its ways in named: an agent, told only "history: false or --no-history", had none it could take
        return [Note("history", "history indexing is off for this codebase (a build with --no-history, or "
                                "history: false in its .codii.yaml)",
                     "set history: true in the codebase's .codii.yaml (or run `codii-sql build --history`), then "
                     "index it again")]
    waiting = state["vectors"]["total"] - state["vectors"]["done"]
    if waiting:
        off = state["vectors"].get("off")
        if not off and vectors_running(codebase):
            # A new user was told to build while the background vector phase was embedding them.
            return [Note("vectors", f"the commits' vectors are still being embedded ({waiting} of {state['commits']} "
                                    "wait): they rank by BM25 alone")]
        return [Note("vectors", f"{waiting} of {state['commits']} commits wait for their vectors"
                                f"{' (built with vectors off)' if off else ''}: they rank by BM25 alone",
                     Remedy("embed_vectors" if off else "build", root))]
    return []
