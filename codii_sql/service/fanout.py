"""Searching several codebases at once: each index answers in its own thread, the answers merge into one list.

The query is embedded once per embedding model among the members, each member runs its own
hybrid statement on its own connection (apsw releases the GIL while SQLite works, so the members'
statements run side by side on the cores), and :func:`codii_sql.search.merge.merge` makes one
ranked list whose results carry their ``codebase``. A member that is missing, not indexed, or
fails is a note, and the others still answer.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import CodiiError, EmbeddingFailedError, UsageError
from ..search.merge import MERGE_TEMPERATURE, MemberAnswer, merge
from ..search.query import query_shape
from ..search.results import Result, SearchOptions
from ..search.searcher import Searcher
from ..storage.lock import daemon_running, is_locked, vectors_running
from .builds import ensure_index
from .notes import filter_note, scope_note, vectors_note
from .searching import open_searcher
from .workspaces import get_workspace, missing_member

#: Members searched at once; more threads than this only queue on 2-4 cores.
MAX_THREADS = 4
#: A member whose ``knn_match`` is this far below the best member's is left out of the full
#: search (2 merge temperatures: its merge weight would be under e^-2, 14%). On the SWE-bench
#: workspaces of benchmarks/workspace_merge.py (48 dev and 28 held-out issues, 6 members) the
#: Acc@5/MRR@10 of the merged list were those of merging every member, at 1.2 members searched
#: per issue (1.5 at 3 temperatures); 10 members, warm p50 24.8 -> 17.9 ms.
PRUNE_GAP = 2 * MERGE_TEMPERATURE

Provide = Callable[[Codebase], contextlib.AbstractContextManager[Searcher]]


@dataclass
class ManyResponse:
    """The merged answer over several codebases: ``members`` has one ``{"codebase", "status",
    ["results"], ["note"]}`` per member (status ``ok``, ``missing``, ``not_indexed`` or ``failed``)."""

    query: str
    workspace: str | None
    members: list[dict]
    results: list[Result]
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def note(self) -> str | None:
        return "; ".join(self.notes) or None

    def to_dict(self) -> dict:
        out = {"query": self.query, **({"workspace": self.workspace} if self.workspace else {}),
               "codebases": self.members, "results": [r.to_dict() for r in self.results],
               "seconds": round(self.seconds, 4)}
        if self.note:
            out["note"] = self.note
        return out


def member_paths(workspace: str | None, paths: list[str]) -> tuple[str | None, list[str]]:
    """The workspace's name (lower case) and its member paths followed by ``paths``, each once.

    Raises:
        UsageError: an unknown or empty workspace.
    """
    name, found = None, []
    if workspace:
        ws = get_workspace(workspace)
        name, found = ws.name, list(ws.paths)
    found += [os.path.abspath(os.path.expanduser(p)) for p in paths]
    return name, list(dict.fromkeys(found))


def members_of(paths: list[str]) -> tuple[list[Codebase], list[dict], dict[Codebase, str]]:
    """The indexed codebases among ``paths``, a member row (with a note) for each that is not, and
    the scopes: a subfolder of an indexed codebase searches that index, its files under the
    subfolder only (``{codebase: "sub/folder"}``), as a one-codebase search does."""
    codebases, rows, scopes = [], [], {}
    for path in paths:
        try:
            cb = Codebase.open(path)
        except CodiiError as err:
            rows.append(missing_member(path, err))
            continue
        outer = None if cb.db_path.is_file() else cb.enclosing()
        if outer is not None:
            scopes[outer] = cb.root.relative_to(outer.root).as_posix()
            cb = outer
        if cb in codebases:  # two spellings of one folder
            continue
        if not cb.db_path.is_file():
            rows.append({"codebase": str(cb.root), "status": "not_indexed",
                         "note": f"{cb.root} is not indexed: `codii-sql build {cb.root}` (or index_codebase) indexes it"})
            continue
        codebases.append(cb)
    return codebases, rows, scopes


def search_many(codebases: list[Codebase], query: str, opts: SearchOptions, *, workspace: str | None = None,
                rows: list[dict] | None = None, update: bool = False, provide: Provide | None = None,
                scopes: dict[Codebase, str] | None = None) -> ManyResponse:
    """Search every codebase of ``codebases`` for ``query`` and merge the answers (see the module docstring).

    ``rows`` are member rows already known (missing or unindexed members); ``update`` first brings
    each index up to date as a single search would; ``provide(codebase)`` gives a searcher to use
    (default: open one and close it after); ``scopes`` limits members to a subfolder (see
    :func:`members_of`).

    Raises:
        UsageError: a bad query or option (the first member's answer says so).
    """
    started = time.perf_counter()
    rows = list(rows or [])
    provide = provide or _opened
    updated = _refreshed(codebases) if update else {}
    with contextlib.ExitStack() as stack:
        searchers, failures = {}, {}
        for cb in codebases:
            try:
                searchers[cb] = stack.enter_context(provide(cb))
            except CodiiError as err:
                failures[cb] = str(err)
        vectors, embed_notes = _query_vectors(list(searchers.values()), query, opts)
        answers, far = _answers(searchers, query, opts, vectors, scopes or {})
    refusals = [res for res, _ in answers.values() if isinstance(res, UsageError)]
    if refusals and len(refusals) == len(answers):  # the query or an option itself is wrong
        if opts.language and all(str(r).startswith(f"no {opts.language.lower()!r} code") for r in refusals):
            raise UsageError(f"no {opts.language.lower()!r} code in any of the {len(refusals)} codebases searched")
        raise refusals[0]
    members = [MemberAnswer(str(cb.root), res, searchers[cb].embedder.model_id)
               for cb, (res, _) in answers.items() if isinstance(res, list)]
    merged, _ = merge(members, opts.limit)
    for cb in codebases:
        if cb in failures:
            rows.append({"codebase": str(cb.root), "status": "failed", "note": failures[cb]})
            continue
        if cb in far:
            rows.append({"codebase": str(cb.root), "status": "ok", "results": 0, "pruned": True})
            continue
        res, note = answers[cb]
        scope = (scopes or {}).get(cb)
        notes = [str(n) for n in (f"files under {scope}/ only" if scope else None, updated.get(cb), note) if n]
        if isinstance(res, UsageError):  # e.g. a language this member has none of: no answer here
            rows.append({"codebase": str(cb.root), "status": "ok", "results": 0, "note": str(res)})
            continue
        if isinstance(res, CodiiError):
            rows.append({"codebase": str(cb.root), "status": "failed", "note": str(res)})
            continue
        rows.append({"codebase": str(cb.root), "status": "ok", "results": sum(r.codebase == str(cb.root)
                                                                             for r in merged),
                     **({"note": "; ".join(notes)} if notes else {})})
    notes = embed_notes + [r["note"] if r["note"].startswith(r["codebase"]) else f"{r['codebase']}: {r['note']}"
                           for r in rows if r.get("note")]
    if len({m.model_id for m in members}) > 1:  # no shared cosine scale: say why they merged by rank
        notes.append("the members' vectors come from different embedding models, so their results are merged by "
                     "rank, not by similarity")
    return ManyResponse(query, workspace, rows, merged, time.perf_counter() - started, notes)


@contextlib.contextmanager
def _opened(cb: Codebase) -> Iterator[Searcher]:
    searcher = open_searcher(cb)
    try:
        yield searcher
    finally:
        searcher.store.close()


def _query_vectors(searchers: list[Searcher], query: str, opts: SearchOptions) -> tuple[dict[str, object], list[str]]:
    """The query's embedding once per embedder among ``searchers`` (None where it did not answer)."""
    out, notes = {}, []
    if opts.mode == "bm25":
        return out, notes
    for searcher in searchers:
        name = searcher.embedder.name
        if name in out:
            continue
        try:
            out[name] = searcher.embedder.embed_query(query)
        except EmbeddingFailedError as err:
            out[name] = None
            notes.append(f"the embedder {name} did not answer ({err}): its members' results are BM25 only")
    return out, notes


def _answers(searchers: dict[Codebase, Searcher], query: str, opts: SearchOptions,
             vectors: dict[str, object], scopes: dict[Codebase, str]) -> tuple[dict[Codebase, tuple], list[Codebase]]:
    """Each near member's ``(results or error, note)`` (:func:`_answer`, in threads), and the far ones
    left out (:func:`_select`); when the near ones give fewer than ``opts.limit`` results, the far
    ones are searched too and none is left out."""
    def ask(cb: Codebase):
        member_opts = dataclasses.replace(opts, under=scopes[cb]) if cb in scopes else opts
        return _answer(cb, searchers[cb], query, member_opts, vectors)

    near, far = _select(searchers, query, opts, vectors) if not scopes else (list(searchers), [])
    answers = _in_threads(near, ask)
    if far and sum(len(r) for r, _ in answers.values() if isinstance(r, list)) < opts.limit:
        answers.update(_in_threads(far, ask))
        far = []
    return answers, far


def _select(searchers: dict[Codebase, Searcher], query: str, opts: SearchOptions,
            vectors: dict[str, object]) -> tuple[list[Codebase], list[Codebase]]:
    """``(near, far)``: the members to search in full, and those whose nearest chunks are more than
    :data:`PRUNE_GAP` below the best member's (resource selection: their merge weight would be
    under e^-2, so their results would seldom reach the merged top). Every member is near for
    BM25-only, filtered or identifier searches (a named symbol outranks any cosine), members of
    different models, or fewer than three members."""
    everyone = (list(searchers), [])
    filtered = opts.exts or opts.glob or opts.language or opts.exclude_path or opts.under
    models = {s.embedder.model_id for s in searchers.values()}
    if opts.mode == "bm25" or filtered or len(searchers) < 3 or len(models) > 1 or query_shape(query) == "identifier":
        return everyone
    vector = vectors.get(next(iter(searchers.values())).embedder.name)
    if vector is None:
        return everyone
    matches = _in_threads(list(searchers), lambda cb: searchers[cb].match(vector))
    known = {cb: m for cb, m in matches.items() if isinstance(m, float)}
    if not known:
        return everyone
    best = max(known.values())
    far = [cb for cb in searchers if cb in known and known[cb] < best - PRUNE_GAP]
    return [cb for cb in searchers if cb not in far], far


def _answer(cb: Codebase, searcher: Searcher, query: str, opts: SearchOptions,
            vectors: dict[str, object]) -> tuple[list[Result] | CodiiError, str | None]:
    """One member's results and notes (or the error it raised)."""
    vector = vectors.get(searcher.embedder.name)
    member_opts = opts if vector is not None or opts.mode == "bm25" else _bm25(opts)
    try:
        results = searcher.search(query, member_opts, query_vector=vector)
    except CodiiError as err:
        return err, None
    streaming = vectors_running(cb) or daemon_running(cb)
    note = "; ".join(filter(None, (
        filter_note(searcher.store, indexing=lambda: is_locked(cb)),
        None if results else scope_note(searcher.store, opts.under),
        vectors_note(searcher.store, running=streaming, mode=member_opts.mode)))) or None
    return results, note


def _bm25(opts: SearchOptions) -> SearchOptions:
    return dataclasses.replace(opts, mode="bm25")


def _refreshed(codebases: list[Codebase]) -> dict[Codebase, object]:
    """``{codebase: ensure_index note or error}``, brought up to date in threads of their own
    (a refresh may take seconds: it must not hold the shared search threads)."""
    with cf.ThreadPoolExecutor(max_workers=min(MAX_THREADS, len(codebases) or 1)) as pool:
        return dict(zip(codebases, pool.map(_guarded(lambda cb: ensure_index(cb, update=True)), codebases)))


def _guarded(work: Callable[[Codebase], object]) -> Callable[[Codebase], object]:
    """``work`` with a CodiiError returned as the value instead of raised."""
    def guarded(cb: Codebase):
        try:
            return work(cb)
        except CodiiError as err:
            return err
    return guarded


def _in_threads(codebases: list[Codebase], work: Callable[[Codebase], object]) -> dict[Codebase, object]:
    """``{codebase: work(codebase)}``, up to :data:`MAX_THREADS` at once; an error is kept as the value.

    One pool serves every call: starting threads anew cost 1-2 ms a query on 2 busy cores.
    ``work`` must not itself call this (it would wait on the pool it occupies).
    """
    guarded = _guarded(work)
    if len(codebases) < 2:
        return {cb: guarded(cb) for cb in codebases}
    return dict(zip(codebases, _pool().map(guarded, codebases)))


@functools.cache
def _pool() -> cf.ThreadPoolExecutor:
    return cf.ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="codii-sql-member")


def search_workspace(query: str, opts: SearchOptions, *, workspace: str | None = None, paths: list[str] = (),
                     update: bool = True, provide: Provide | None = None) -> ManyResponse:
    """Search the members of ``workspace`` and the codebases at ``paths`` together (:func:`search_many`).

    Raises:
        UsageError: an unknown or empty workspace, no member at all, or a bad query or option.
    """
    name, found = member_paths(workspace, list(paths))
    codebases, rows, scopes = members_of(found)
    if not codebases:
        why = "; ".join(r["note"] for r in rows) or "no codebase given"
        raise UsageError(f"nothing to search{f' in workspace {name!r}' if name else ''}: {why}")
    return search_many(codebases, query, opts, workspace=name, rows=rows, update=update, provide=provide,
                       scopes=scopes)
