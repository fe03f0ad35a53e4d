"""``inspect QUERY``: the chunks a search matches, with each retriever's rank, for debugging ranking."""

from __future__ import annotations

import json

from ..codebase import Codebase
from ..search.results import SearchOptions
from ..storage.store import Store
from .indexes import open_searcher


def inspect_query(codebase: Codebase, query: str, *, limit: int = 10, raw: bool = False) -> dict:
    """How the index answers ``query`` (hybrid search, the index as it is: nothing is updated):
    ``{"codebase", "query", "fts_terms", "chunks": [{"pos", "id", "path", "start_line", "end_line",
    "kind", "symbol", "role", "score", "tier", "bm25_rank", "knn_rank", "cosine", "has_vector",
    "first_line" or "content"}], ["note"]}``. ``bm25_rank``/``knn_rank`` are the chunk's 1-based place in
    each retriever's candidates (None: not a candidate of that one), ``cosine`` its similarity to
    the query, ``tier`` its name tier (2 a named symbol, 1 a named file); ``raw`` gives each chunk's
    whole stored ``content`` instead of its ``first_line``; ``note`` says why the query was not
    embedded (its embedder failed: BM25 alone then).

    Raises:
        UsageError: an empty query or a limit out of 1..200 (``MAX_LIMIT``). NotIndexedError: no index.
    """
    searcher = open_searcher(codebase)
    try:
        hits = searcher.find(query, SearchOptions(limit=limit))
        queued = _queued(searcher.store, [r.id for r in hits.results])
    finally:
        searcher.store.close()
    chunks = []
    for pos, r in enumerate(hits.results, 1):
        text = {"content": r.content} if raw else {"first_line": next((ln.strip() for ln in r.content.split("\n")
                                                                        if ln.strip()), "")}
        chunks.append({"pos": pos, "id": r.id, "path": r.path, "start_line": r.start_line, "end_line": r.end_line,
                       "kind": r.kind, "symbol": r.symbol, "role": r.role, "score": r.score, "tier": r.tier,
                       "bm25_rank": r.bm25_rank, "knn_rank": r.knn_rank, "cosine": r.cosine,
                       "has_vector": r.id not in queued, **text})
    terms = hits.analysis.terms if hits.analysis is not None else []
    return {"codebase": codebase.shown, "query": query, "fts_terms": terms, "chunks": chunks,
            **({"note": hits.embedder_failed} if hits.embedder_failed else {})}


def _queued(store: Store, ids: list[int]) -> set[int]:
    """Those of ``ids`` whose chunk still waits for its vector."""
    return {r["chunk_id"] for r in store.rows("vector_queue_among", {"ids": json.dumps(ids)})}
