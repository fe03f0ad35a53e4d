"""Asking several shards at once: each in its own thread, the answers merged into one list, and
routing that leaves a shard out only when none of its results could enter the answer.

The query is embedded once per embedding model among the shards; each shard runs its own hybrid
statement on its own connection (apsw releases the GIL while SQLite works, so the statements run
side by side on the cores), and :func:`codii_sql.search.merge.merge` makes one ranked list. Before
that, a cheap probe (the mean cosine of each shard's 10 nearest chunks) orders them: those far
below the best are asked only if the merged list of the others leaves room for their best
possible result (resource selection with a safe bound, as max-score pruning does for terms).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CodiiError, EmbeddingFailedError
from ..search.answer import Note
from ..search.locations import places
from ..search.merge import MERGE_TEMPERATURE, MemberAnswer, Merged, merge, weight
from ..search.query import query_shape
from ..search.results import SearchOptions
from ..search.searcher import MAX_FUSED_SCORE, PROBE_LOW_BY
from .notes import embedder_note
from .shards import Shard, ShardAnswer

#: Shards asked at once; more threads than this only queue on 2-4 cores.
MAX_THREADS = 4
#: A shard whose probe is this far below the best shard's is a candidate to leave out (2 merge
#: temperatures: its merge weight would be under e^-2, 14%); it is asked anyway when its best
#: possible weighted score (:func:`_could_enter`) beats the last result of the merged list. On
#: the SWE-bench workspaces of benchmarks/workspace_merge.py (48 dev and 28 held-out issues, 6
#: members) the unbounded gap rule kept the Acc@5/MRR@10 of merging every member at 1.2 members
#: searched per issue; the bound makes the merged list that of asking everyone (docs/eval.md).
PRUNE_GAP = 2 * MERGE_TEMPERATURE


@dataclass
class Fanned:
    """What the shards answered: each asked shard's answer (or the error it raised), the merged
    list, the shards left out with their probe, and the notes of the query's embedding."""

    answers: dict[Shard, ShardAnswer | CodiiError]
    merged: Merged
    pruned: dict[Shard, float] = field(default_factory=dict)
    probes: dict[Shard, float] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)


def fan_out(shards: list[Shard], query: str, opts: SearchOptions) -> Fanned:
    """Ask ``shards`` for ``query`` and merge their answers (see the module docstring)."""
    vectors, failed, notes = _query_vectors(shards, query, opts)

    def ask(shard: Shard) -> ShardAnswer:
        key = _embedder_key(shard)
        return shard.search(query, opts, vectors.get(key), failed.get(key))

    near, far, probes = _route(shards, query, opts, vectors)
    answers = in_threads(near, ask)
    merged = _merged(answers, opts.limit)
    reach = [s for s in far if _could_enter(probes[s], merged)]
    if reach:
        answers.update(in_threads(reach, ask))
        merged = _merged({s: answers[s] for s in shards if s in answers}, opts.limit)
    pruned = {s: probes[s] for s in far if s not in reach}
    return Fanned(answers, merged, pruned, probes, notes)


def _embedder_key(shard: Shard) -> str | None:
    return shard.embedder.name if shard.embedder is not None else None


def _query_vectors(shards: list[Shard], query: str, opts: SearchOptions) -> tuple[dict, dict, list[Note]]:
    """The query's embedding once per embedder among ``shards``: ``({embedder: vector}, {embedder:
    why it failed}, notes)``; shards without an embedder of ours embed it themselves."""
    vectors, failed, notes = {}, {}, []
    if opts.mode == "bm25":
        return vectors, failed, notes
    for shard in shards:
        key = _embedder_key(shard)
        if key is None or key in vectors or key in failed:
            continue
        try:
            vectors[key] = shard.embedder.embed_query(query)
        except EmbeddingFailedError as err:
            failed[key] = str(err)
            # Members of another embedder kept their vectors: name those that did not (a new user's note
            # called a workspace's every result BM25 only, vector ranks and all).
            alike = [s.name for s in shards if _embedder_key(s) == key]
            notes.append(embedder_note(key, str(err), members=None if len(alike) == len(shards) else alike))
    return vectors, failed, notes


def _route(shards: list[Shard], query: str, opts: SearchOptions,
           vectors: dict) -> tuple[list[Shard], list[Shard], dict[Shard, float]]:
    """``(near, far, probes)``: the shards to ask first, those whose probe is more than
    :data:`PRUNE_GAP` below the best one's, and each probe taken. Every shard is near for BM25-only,
    filtered, re-ranked (logits have no bound) or identifier searches and those naming a place (a named
    symbol outranks any cosine), shards of different models, or fewer than three shards."""
    everyone = (list(shards), [], {})
    filtered = opts.exts or opts.glob or opts.language or opts.exclude_path or opts.under or opts.role
    scoped = any(s.scope for s in shards)
    models = {_embedder_key(s) for s in shards}
    shape = query_shape(query)
    if opts.mode == "bm25" or filtered or scoped or opts.rerank or len(shards) < 3 or len(models) > 1 \
            or None in models or shape == "identifier" or places(query, shape):
        return everyone
    vector = vectors.get(next(iter(models)))
    if vector is None:
        return everyone
    probes = {s: p for s, p in in_threads(list(shards), lambda s: s.probe(vector)).items() if isinstance(p, float)}
    if not probes:
        return everyone
    best = max(probes.values())
    far = [s for s in shards if s in probes and probes[s] < best - PRUNE_GAP]
    return [s for s in shards if s not in far], far, probes


def _could_enter(probe: float, merged: Merged) -> bool:
    """Whether a shard left out by its ``probe`` could still place a result in ``merged``: its best
    possible weighted score (:data:`MAX_FUSED_SCORE` at the weight its match would get, the probe
    raised by :data:`PROBE_LOW_BY`, how low it may read) beats the list's last one, or the list
    has room."""
    if merged.by_rank or merged.top is None:
        return True
    return weight(probe + PROBE_LOW_BY, merged.top) * MAX_FUSED_SCORE > merged.floor


def _merged(answers: dict[Shard, ShardAnswer | CodiiError], limit: int) -> Merged:
    return merge([MemberAnswer(s.name, a.hits.results, a.model_id, a.hits.lexical_evidence)
                  for s, a in answers.items() if isinstance(a, ShardAnswer)], limit)


def _guarded(work: Callable[[Shard], object]) -> Callable[[Shard], object]:
    """``work`` with a CodiiError returned as the value instead of raised."""
    def guarded(shard: Shard):
        try:
            return work(shard)
        except CodiiError as err:
            return err
    return guarded


def in_threads(items: list, work: Callable) -> dict:
    """``{item: work(item)}``, up to :data:`MAX_THREADS` at once; an error is kept as the value.

    One pool serves every call: starting threads anew cost 1-2 ms a query on 2 busy cores.
    ``work`` must not itself call this (it would wait on the pool it occupies).
    """
    guarded = _guarded(work)
    if len(items) < 2:
        return {item: guarded(item) for item in items}
    return dict(zip(items, _pool().map(guarded, items)))



@functools.cache
def _pool() -> cf.ThreadPoolExecutor:
    return cf.ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="codii-sql-member")
