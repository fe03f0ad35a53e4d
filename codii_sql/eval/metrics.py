"""Retrieval metrics from ir-measures (the ``[bench]`` extra): NDCG@10, MRR@10, Recall@k, Acc@k, hit@k; latency percentiles."""

from __future__ import annotations

import numpy as np

from ..errors import UsageError

#: Acc@k cut-offs: LocAgent/SweRank convention, as in the bench README.
ACC_KS = (1, 3, 5, 10)
#: Metrics that need *every* relevant doc in the top k (no ir-measures measure): name -> k.
_ALL_RELEVANT = {"swebench": {f"Acc@{k}": k for k in ACC_KS}, "git": {"all-gold@5": 5}}


def require_metrics() -> None:
    """Check that ir-measures (the ``bench`` extra) imports, before any indexing or query runs.

    Raises:
        UsageError: it is missing; the message says how to install it.
    """
    try:
        import ir_measures  # noqa: F401
    except ImportError:
        raise UsageError('eval needs ir-measures for its metrics: install it with `pip install "codii-sql[bench]"` '
                         '(from a checkout: `pip install ".[bench]"`)') from None


def _measures(kind: str) -> dict:
    """Report name -> ir-measures measure. MRR@10 is the mean of ir-measures' per-query RR@10;
    hit@k (some relevant doc in the top k) is ``Success@k``."""
    from ir_measures import RR, R, Success, nDCG

    if kind == "git":
        return {"hit@1": Success @ 1, "hit@5": Success @ 5, "hit@10": Success @ 10, "MRR@10": RR @ 10}
    if kind == "cosqa":
        return {"NDCG@10": nDCG @ 10, "MRR@10": RR @ 10, "Recall@1": R @ 1, "Recall@5": R @ 5,
                "Recall@10": R @ 10, "Recall@100": R @ 100}
    return {"Recall@5": R @ 5, "Recall@10": R @ 10, "MRR@10": RR @ 10, "NDCG@10": nDCG @ 10}


def metric_names(kind: str) -> list[str]:
    """The metrics reported for a dataset kind, in table order (git: the hits, all-gold@5, MRR@10)."""
    if kind == "git":
        return ["hit@1", "hit@5", "hit@10", "all-gold@5", "MRR@10"]
    return list(_ALL_RELEVANT.get(kind, {})) + list(_measures(kind))


def score(kind: str, relevant: dict[str, list[str]], ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per-query metrics from ir-measures: ``{query id: {metric name: value in [0, 1]}}``.

    Args:
        kind: ``cosqa``, ``swebench`` or ``git`` (selects :func:`metric_names`).
        relevant: query id -> relevant doc ids (binary relevance).
        ranked: query id -> distinct doc ids, best first.

    Acc@k and all-gold@5 (all relevant files in the top k) have no ir-measures measure: each is
    the library's per-query ``R@k`` equal to 1.0 (exact in floating point: |G| / |G|).
    """
    import ir_measures
    from ir_measures import Qrel, R, ScoredDoc

    named = _measures(kind)
    every = _ALL_RELEVANT.get(kind, {})
    wanted = set(named.values()) | {R @ k for k in every.values()}
    qrels = [Qrel(qid, doc, 1) for qid, docs in relevant.items() for doc in docs]
    # Scores decrease with rank so the library keeps our order (it sorts by score).
    run = [ScoredDoc(qid, doc, float(len(docs) - i)) for qid, docs in ranked.items() for i, doc in enumerate(docs)]
    raw: dict[str, dict] = {}
    for m in ir_measures.iter_calc(wanted, qrels, run):
        raw.setdefault(m.query_id, {})[m.measure] = m.value
    out = {}
    for qid in relevant:
        # A query with no results at all may be absent from the library's output: it scores 0.
        got = raw.get(qid, {})
        row = {name: float(got.get(R @ k, 0.0) == 1.0) for name, k in every.items()}
        row.update({name: got.get(m, 0.0) for name, m in named.items()})
        out[qid] = {name: row[name] for name in metric_names(kind)}
    return out


def mean_metrics(rows: list[dict[str, float]], names: list[str]) -> dict[str, float]:
    """The arithmetic mean of each metric over ``rows`` (empty rows: all 0)."""
    return {n: float(np.mean([r[n] for r in rows])) if rows else 0.0 for n in names}


def latency(ms: list[float]) -> dict[str, float]:
    """``{"p50", "p95", "mean"}`` of per-query times in milliseconds (numpy linear interpolation)."""
    if not ms:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2),
            "mean": round(float(np.mean(ms)), 2)}
