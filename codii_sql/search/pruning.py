"""BM25's top chunks of a large index with less work and the same answer (MaxScore over FTS5 phrases).

FTS5 scores every chunk that holds any phrase of an OR query, about 0.3 us each: on the kernel
(2.8M chunks) ``struct file_operations`` scores 1.1M chunks for 50. Most of them hold only common
phrases (``struct``), whose BM25 weight is small. As in MaxScore (Turtle & Flood, "Query evaluation:
strategies and optimizations", IP&M 1995), a chunk holding common phrases alone scores under the
sum of their largest possible contributions; when the ``depth``-th best chunk holding a rare phrase
scores above that sum, no chunk of common phrases alone can enter, and the rare phrases' chunks,
scored by every phrase, are the answer (sql/search.sql ``bm25_pruned``). Otherwise a rarer split is
tried, then the plain query. Measurements: docs/benchmarks.md "BM25 at kernel size".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from ..storage.store import Store
from .query import fts_quoted

#: Below this many chunks the plain OR query is taken. Measured, BM25 p50 warm, plain -> pruned: zod's
#: 12.8k chunks (100 commit subjects) 8.0 -> 10.2 ms, the probes cost more than they save; the kernel's
#: 2.77M (20 queries) 97 -> 43-49 ms. Set between the two, not tuned further (docs/benchmarks.md).
PRUNE_MIN_CHUNKS = 200_000
#: A phrase held by at least 1/16 of the chunks is common; its count probe stops there, and its
#: bound is taken at that count (the largest weight a phrase that common can have).
PROBE_SHARE = 16
#: Splits tried before the plain query: the second is chosen by the first's last score, so that it
#: cannot fail (unless the plain query is cheaper).
MAX_TRIES = 2
#: FTS5's bm25() constant k1 (sqlite/ext/fts5/fts5_aux.c): a phrase adds idf * f * (k1 + 1) /
#: (f + k1 * (1 - b + b * D / avgdl)), always less than idf * (k1 + 1), whatever its frequency f
#: (column weights included) and the chunk's length D.
K1 = 1.2


def fts_rows(store: Store) -> int:
    """The number of rows FTS5's bm25() counts (its averages record's first varint), 0 when empty."""
    blob = store.value("fts_averages")
    return _varint(blob) if blob else 0


def _varint(blob: bytes) -> int:
    """SQLite's variable-length integer at the start of ``blob`` (big-endian 7 bits a byte, the
    ninth byte all 8: sqlite3GetVarint, which FTS5 writes its records with)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


def idf(rows: int, holding: int) -> float:
    """FTS5's IDF of a phrase ``holding`` chunks of ``rows``: log((N - n + 0.5) / (n + 0.5)), at least 1e-6."""
    return max(math.log((rows - holding + 0.5) / (holding + 0.5)), 1e-6)


def bm25_top(store: Store, phrases: Sequence[str], depth: int,
             weights: Mapping[str, float]) -> list[tuple[int, float]] | None:
    """The ``depth`` best (chunk id, BM25 score) pairs of the OR of ``phrases``, best first, exactly as
    the plain query gives them (ties aside), or None when the plain query is the cheaper way (a small
    index, one phrase, no split that the bound allows). ``weights`` are bm25()'s column weights by name
    (content, subtokens, symbol, path). Unfiltered searches only: a filter narrows the plain query.
    """
    # A phrase given twice weighs twice in the plain query: not split here.
    rows = fts_rows(store) if len(set(phrases)) == len(phrases) > 1 else 0
    if rows < PRUNE_MIN_CHUNKS:
        return None
    cap = rows // PROBE_SHARE
    counts = {p: store.value("phrase_count", {"phrase": fts_quoted(p), "cap": cap}) for p in phrases}
    order = sorted((p for p in counts if counts[p]), key=lambda p: counts[p])
    total = sum(counts[p] for p in order)
    split, held = 0, 0
    while split < len(order) and held < depth:  # the rarest phrases that can fill the list
        held += counts[order[split]]
        split += 1
    params = {f"bm25_{col}": w for col, w in weights.items()} | {"depth": depth}
    for _ in range(MAX_TRIES):
        rare, common = order[:split], order[split:]
        # The common phrases' chunks are read by both lists: past half of every phrase's (capped) count the plain
        # query is taken, the rule measured when the rare chunks were also scored twice (docs/benchmarks.md).
        if not common or 2 * sum(counts[p] for p in rare) > total:
            return None
        either, others = " OR ".join(map(fts_quoted, rare)), " OR ".join(map(fts_quoted, common))
        top = store.rows("bm25_pruned", params | {"fts_both": f"({either}) AND ({others})",
                                                  "fts_rare_only": f"({either}) NOT ({others})"})
        if len(top) < depth:  # the rare phrases' chunks cannot fill the list: take one phrase more
            split += 1
            continue
        if top[-1]["raw"] > _bound(rows, [counts[p] for p in common]):
            return [(r["id"], r["raw"]) for r in top]
        # A larger rare set keeps every chunk scored here, so its list's last score is at least this one's:
        # move phrases over, rarest first, until what the rest can add falls under it (that try succeeds),
        # or, when so many would cost more than the plain query, one phrase (that try may succeed).
        sure = split + 1
        while sure < len(order) and _bound(rows, [counts[p] for p in order[sure:]]) >= top[-1]["raw"]:
            sure += 1
        split = sure if 2 * sum(counts[p] for p in order[:sure]) <= total else split + 1
    return None


def plain_top(store: Store, fts_query: str, depth: int, weights: Mapping[str, float]) -> list[tuple[int, float]]:
    """The ``depth`` best (chunk id, BM25 score) pairs of the FTS5 expression ``fts_query``, best first: the
    plain query, every chunk holding a phrase scored (``weights`` as for :func:`bm25_top`)."""
    params = {f"bm25_{col}": w for col, w in weights.items()} | {"depth": depth, "fts_query": fts_query}
    return [(r["id"], r["raw"]) for r in store.rows("bm25_plain", params)]


def _bound(rows: int, holding: Sequence[int]) -> float:
    """More than any chunk holding only phrases held by ``holding`` chunks each can score (:data:`K1`)."""
    return (K1 + 1) * sum(idf(rows, n) for n in holding)


def as_json(top: list[tuple[int, float]] | None) -> str | None:
    """``top`` as sql/search.sql's ``:bm25_given``."""
    return None if top is None else json.dumps(top)
