"""How the hybrid statement weighs its two lists for one query (sql/search.sql ``weights``, ``normalised``)."""

from __future__ import annotations

from typing import NamedTuple

#: Fusion shapes (searcher.py ``_fusion_shape``) whose KNN scores are normalised by the best cosine
#: (cosine / best) instead of min-max. Min-max stretches any KNN list over 0..1, so a flat list
#: (every candidate about as close as the best: the vectors cannot tell them apart) outvotes BM25
#: as much as a list with one clear winner; divided by the best, the vectors count by how far their
#: candidates stand apart. For questions that name code or a path word ("mixed"), where BM25 and the
#: vectors both have a say, this is measured on the nine-repository git dev set (900 commit
#: subjects, hybrid): hit@1 0.468 -> 0.494, hit@5 0.740 -> 0.749, all-gold@5 0.606 -> 0.624,
#: MRR@10 0.584 -> 0.605; with non-source files left out of the ranking (so that the role prior,
#: which the dev set's source-only gold rewards, does not count) hit@1 still 0.534 -> 0.547;
#: CoSQA dev NDCG@10 0.6097 -> 0.6088 (4 of its 500 questions are mixed); SWE-bench dev unchanged
#: (long queries keep min-max). Natural questions keep min-max: there it cost CoSQA 0.005 and
#: gained nothing with non-source files left out; identifiers lost 0.003 hit@1.
KNN_BY_BEST_SHAPES = frozenset({"mixed"})


class Bm25Weight(NamedTuple):
    """BM25's weight in the fusion (the vectors get 1 minus it): ``usual``, ``confident`` when its
    best hit leads the second by searcher.CONFIDENT_GAP or more, ``weak_vectors`` when the nearest
    chunk's cosine is under searcher.WEAK_COSINE (sql/search.sql ``weights``); ``knn_by_best``:
    KNN scores divided by the best cosine instead of min-max (:data:`KNN_BY_BEST_SHAPES`)."""

    usual: float
    confident: float
    weak_vectors: float = 0.0
    knn_by_best: bool = False
