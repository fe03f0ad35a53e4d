"""How the hybrid statement weighs its two lists for one query (sql/search.sql ``weights``, ``normalised``)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .results import Result

#: BM25 is confident when (s1 - s2) / s1 of its two best scores reaches this (sql/search.sql; sql/history.sql
#: reads a commit message that stands out so).
CONFIDENT_GAP = 0.25

#: Fusion shapes (searcher.py ``_fusion_shape``) whose KNN scores are normalised by the best cosine
#: (cosine / best) instead of min-max. Min-max stretches any KNN list over 0..1, so a flat list
#: (every candidate about as close as the best: the vectors cannot tell them apart) outvotes BM25
#: as much as a list with one clear winner; divided by the best, the vectors count by how far their
#: candidates stand apart. Questions that name code or a path word ("mixed") first: nine-repository
#: git dev set (900 commit subjects, hybrid) hit@1 0.468 -> 0.494, hit@5 0.740 -> 0.749, all-gold@5
#: 0.606 -> 0.624, MRR@10 0.584 -> 0.605; CoSQA dev NDCG@10 0.6097 -> 0.6088. Plain questions
#: ("natural") joined them with the cosine fill of sql/search.sql (a BM25 candidate the KNN list
#: missed counts by its own cosine, normalised as the list is; under min-max that is 0 for an exact
#: list): alone the by-best rule cost CoSQA 0.005 and gained nothing; with the fill, on five git
#: dev sets (gin, cJSON, serde-json, gson, zod: 500 subjects, benchmarks/fusion_fit.py) mean hit@1
#: 0.532 -> 0.560, hit@5 0.792 -> 0.822, all-gold@5 0.656 -> 0.696, MRR@10 0.641 -> 0.673 (the fill
#: alone: 0.546, 0.810, 0.686, 0.655), and hybrid now leads both retrievers on every one of them
#: (zod hit@5 0.74 -> 0.84 against BM25's 0.80); CoSQA dev NDCG@10 0.6088 -> 0.6039; SWE-bench dev
#: (70 issues) Acc@5 0.7714 and NDCG@10 0.7487, unchanged. Identifiers and long queries keep min-max.
KNN_BY_BEST_SHAPES = frozenset({"mixed", "natural"})
#: Soft prior by file role (roles.classify). Measured on the SWE-bench dev set (issue 6):
#: halving docs/tests/non-source scores lifts file Acc@1 0.13 -> 0.39. A query that names a
#: test or doc file still finds it: the prior only reorders near-ties.
#: A licence header (chunk kind ``license``, any file) weighs as data: it names no behaviour, yet
#: its words ("warranty", "permission", "use") matched questions on brotli. So does a preamble of imports
#: (chunk kind ``imports``): rack's `require 'time'` chunks ranked #3-#5 for "constant time string comparison".
ROLE_WEIGHTS = {"source": 1.0, "test": 0.6, "docs": 0.6, "config": 0.5, "generated": 0.5, "vendored": 0.5,
                "data": 0.5, "license": 0.5, "changelog": 0.5, "imports": 0.5}
#: The prior for long queries (issue reports, stack traces), which nearly always ask which
#: source file to change. Tuned on 70 SWE-bench dev issues (hybrid NDCG@10 0.677 -> 0.702,
#: Acc@k unchanged) and checked on the 57 held-out Sphinx issues (BM25: Acc@5 0.439 -> 0.544,
#: NDCG@10 0.388 -> 0.448). A file the query names still gets NAME_BOOST.
LONG_QUERY_ROLE_WEIGHTS = {"source": 1.0, "test": 0.4, "docs": 0.4, "config": 0.3, "generated": 0.3,
                           "vendored": 0.3, "data": 0.3, "license": 0.3, "changelog": 0.3, "imports": 0.3}
#: Results by file (``group_by_file``): a file's score is its best chunk's plus this times its second
#: best chunk's, among the chunks fetched: a file that matches in two places beats one that matches
#: once about as well (a large module such as axios's lib/adapters/http.js fell below files with one
#: close chunk). Measured, hybrid: git dev set (900 commit subjects) hit@1 0.494 -> 0.504, hit@5
#: 0.749 -> 0.759, all-gold@5 0.624 -> 0.632; SWE-bench dev (70 issues) Acc@1 0.514 -> 0.543,
#: Acc@5 0.743 unchanged, NDCG@10 0.723 -> 0.739; their titles alone as queries Acc@1 0.386 -> 0.443,
#: Acc@5 0.729 -> 0.757; held out, 31 Sphinx issue titles Acc@1 0.323 -> 0.387, Acc@5 0.742 -> 0.710,
#: MRR@10 0.503 -> 0.532 (whole issues: Acc@1 unchanged, MRR@10 0.461 -> 0.473); CoSQA is not grouped.
#: 0.3 and 0.15 for the third chunk as well: about the same (hit@1 0.508, hit@5 0.756).
SECOND_CHUNK_WEIGHT = 0.3


class Bm25Weight(NamedTuple):
    """BM25's weight in the fusion (the vectors get 1 minus it): ``usual``, ``confident`` when its
    best hit leads the second by CONFIDENT_GAP or more, ``weak_vectors`` when the nearest
    chunk's cosine is under searcher.WEAK_COSINE (sql/search.sql ``weights``); ``knn_by_best``:
    KNN scores divided by the best cosine instead of min-max (:data:`KNN_BY_BEST_SHAPES`)."""

    usual: float
    confident: float
    weak_vectors: float = 0.0
    knn_by_best: bool = False


def by_file(results: list[Result], *, aggregate: bool = True) -> list[Result]:
    """Each file once, as its best chunk; with ``aggregate`` (fused scores: not re-ranked ones) and
    no named tier among them, ranked by best + :data:`SECOND_CHUNK_WEIGHT` x second best chunk
    score, which becomes the result's score. Named tiers keep the statement's order."""
    chunks: dict[str, list[Result]] = {}
    for r in results:
        chunks.setdefault(r.path, []).append(r)
    files = [rs[0] for rs in chunks.values()]
    if not aggregate or any(r.tier for r in files):
        return files
    scored = [dataclasses.replace(rs[0], score=round(rs[0].score + SECOND_CHUNK_WEIGHT * rs[1].score, 6))
              if len(rs) > 1 else rs[0] for rs in chunks.values()]
    return sorted(scored, key=lambda r: -r.score)  # stable: ties keep the statement's order
