"""Merging the answers of several codebases' indexes into one ranked list.

Each index answers with its own hybrid statement, whose fused scores are normalised within that
index: every member's best chunk scores about 1, relevant or not, and BM25 scores from different
FTS5 indexes are not comparable either (each has its own document statistics). Cosine
similarities from one embedding model are. So each member's results keep their own order and
fused scores (a result merges by the best score from it to the end of its tier, so its member's
order holds), scaled by how well that member matches the query as a whole: the mean cosine of
its 10 nearest chunks ``m`` (``knn_match``) against the best member's ``m*``, weight
``exp(-(m* - m) / T)``. A member a gap of ``T`` behind keeps 37% of its scores; one far behind
contributes its results only below every close member's. A chunk defining a named symbol or in
a named file (tier > 0, identifier queries) still comes before those without, as in one index.
A member with no cosine (built without vectors, or its chunks still waiting for them) keeps its
scores when BM25 found a chunk holding every query word or a named symbol (its match is unknown,
not poor), else its results come after those of every member with a cosine or that evidence, in
the same tier: its best chunk holds only some of the words (a new user's workspace put a Django
`.po` catalogue holding "report" above x/tools' second `Reportf` for `Pass.Reportf`: a BM25-only
member's fused scores run on another scale, so no weight on them ranks it fairly). Members
whose vectors come from different models share no cosine scale, and BM25-only searches have
none: they merge by rank (RRF), those without the evidence after the others as above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .results import Result

#: Gap in ``knn_match`` that costs a member a factor e of its scores. benchmarks/workspace_merge.py:
#: 48 SWE-bench dev issues, each asked of its own release and of a workspace holding it and one
#: release of each of the 5 other projects; Acc@5 own index 0.688. Weighting by the best cosine
#: among a member's results gave 0.521-0.604 (T 0.01-0.2): long queries rank by BM25, so a
#: member's results often hold no KNN candidate at all. By the mean of its 10 nearest chunks:
#: 0.688 for T 0.01-0.05 (issue titles alone: own 0.604, merged 0.583); T = 0.03 sits mid-plateau.
#: (The mean of the nearest 10, not the best one alone, 0.625-0.688, nor of 3-5, 0.667.)
MERGE_TEMPERATURE = 0.03
#: RRF constant for the rank merge (Cormack, Clarke & Buettcher, SIGIR 2009).
RRF_K = 60


@dataclass
class MemberAnswer:
    """One member's results (its own order), its root, the model id its vectors come from, and its
    ``evidence`` when it has no cosine (``Hits.lexical_evidence``; None: not judged)."""

    codebase: str
    results: list[Result]
    model_id: str | None
    evidence: bool | None = None


@dataclass
class Merged:
    """The merged list; whether it fell back to ranks (members of different models, or no cosine
    anywhere: BM25 mode); the best member's match ``top`` (the weights' reference, None by rank);
    and ``floor``: the weighted score a result of another member must beat to enter the list
    (that of the last result kept when the list is full, else -inf)."""

    results: list[Result]
    by_rank: bool
    top: float | None = None
    floor: float = -math.inf


def member_match(results: list[Result]) -> float | None:
    """How well a member matches the query: its results' ``knn_match`` (None without results, or while
    its chunks still wait for vectors)."""
    return next((r.knn_match for r in results if r.knn_match is not None), None)


def weight(match: float, top: float, temperature: float = MERGE_TEMPERATURE) -> float:
    """A member's score multiplier: ``exp(-(top - match) / temperature)`` (see the module docstring)."""
    return math.exp(-(top - match) / temperature)


def merge(answers: list[MemberAnswer], limit: int, *, temperature: float = MERGE_TEMPERATURE) -> Merged:
    """The first ``limit`` results of all members, each tagged with its ``codebase`` (see :class:`Merged`).
    ``temperature`` is the cosine gap that costs a member a factor e (benchmarks sweep it)."""
    tagged = [MemberAnswer(a.codebase, [replace(r, codebase=r.codebase or a.codebase) for r in a.results], a.model_id,
                           a.evidence) for a in answers]
    cosines = {a.codebase: member_match(a.results) for a in tagged}
    known = [c for c in cosines.values() if c is not None]
    if len({a.model_id for a in tagged}) > 1 or not known:
        return Merged(_by_rank(tagged, limit), len(tagged) > 1)
    top = max(known)
    scored = []
    for order, a in enumerate(tagged):
        # No cosine is "not known", not "irrelevant": BM25's evidence decides (module docstring).
        match = cosines[a.codebase]
        band = int(match is not None or a.evidence is not False)
        w = weight(top if match is None else match, top, temperature)
        scored += [((r.tier, band, best * w), -order, -rank, r) for rank, (r, best) in enumerate(_kept_order(a.results))]
    scored.sort(key=lambda item: item[:3], reverse=True)
    kept = scored[:limit]
    floor = kept[-1][0][2] if len(kept) == limit and kept[-1][0][1] else -math.inf
    return Merged([r for *_, r in kept], False, top, floor)


def _kept_order(results: list[Result]) -> list[tuple[Result, float]]:
    """Each result with the score it merges by: the best of its own and those after it in its tier, so
    that sorting keeps the member's order. A named symbol's windows read top-down in one index (the
    signature's window may score below the body's), and a new user's workspace answer sorted them by
    score, unlike the folder's own answer."""
    out: list[tuple[Result, float]] = []
    best, tier = -math.inf, None
    for r in reversed(results):
        best = r.score if r.tier != tier else max(best, r.score)
        tier = r.tier
        out.append((r, best))
    return out[::-1]


def _by_rank(answers: list[MemberAnswer], limit: int) -> list[Result]:
    """Reciprocal-rank merge: the members' results interleaved by rank, named tiers first, in a tier
    members whose BM25 found no chunk holding every query word after the others."""
    scored = [((r.tier, int(a.evidence is not False), 1.0 / (RRF_K + rank)), -order, r)
              for order, a in enumerate(answers) for rank, r in enumerate(a.results, 1)]
    scored.sort(key=lambda item: item[:2], reverse=True)
    return [r for *_, r in scored[:limit]]
