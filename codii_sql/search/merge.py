"""Merging the answers of several codebases' indexes into one ranked list.

Each index answers with its own hybrid statement, whose fused scores are normalised within that
index: every member's best chunk scores about 1, relevant or not, and BM25 scores from different
FTS5 indexes are not comparable either (each has its own document statistics). Cosine
similarities from one embedding model are. So each member's results keep their own order and
fused scores, scaled by how well that member matches the query as a whole: its best raw cosine
``c_m`` against the best of all members ``c*``, weight ``exp(-(c* - c_m) / T)``. A member a
cosine gap of ``T`` behind the best keeps 37% of its scores; one far behind contributes its
results only below every close member's. A chunk defining a named symbol or in a named file
(tier > 0, identifier queries) still comes before those without, as in one index. Members
whose vectors come from different models share no cosine scale: they merge by rank (RRF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .results import Result

#: Cosine gap that costs a member a factor e of its scores. Measured on SWE-bench dev issues
#: with five projects' releases in one workspace (docs/eval.md): see MERGE_TEMPERATURE's note there.
MERGE_TEMPERATURE = 0.05
#: RRF constant for the rank merge (Cormack, Clarke & Buettcher, SIGIR 2009).
RRF_K = 60


@dataclass
class MemberAnswer:
    """One member's results (its own order), its root, and the model id its vectors come from."""

    codebase: str
    results: list[Result]
    model_id: str


def best_cosine(results: list[Result]) -> float | None:
    """The highest raw cosine among ``results`` (None when none was a KNN candidate)."""
    found = [r.cosine for r in results if r.cosine is not None]
    return max(found) if found else None


def merge(answers: list[MemberAnswer], limit: int, *,
          temperature: float = MERGE_TEMPERATURE) -> tuple[list[Result], bool]:
    """The first ``limit`` results of all members, each tagged with its ``codebase``; and whether the
    merge fell back to ranks (members of different models, or no cosine anywhere: BM25 mode).
    ``temperature`` is the cosine gap that costs a member a factor e (benchmarks sweep it)."""
    tagged = [MemberAnswer(a.codebase, [replace(r, codebase=a.codebase) for r in a.results], a.model_id)
              for a in answers]
    cosines = {a.codebase: best_cosine(a.results) for a in tagged}
    known = [c for c in cosines.values() if c is not None]
    if len({a.model_id for a in tagged}) > 1 or not known:
        return _by_rank(tagged, limit), len(tagged) > 1
    top = max(known)
    floor = min(known)
    scored = []
    for order, a in enumerate(tagged):
        # A member without any KNN candidate (its chunks await their vectors) gets the weakest weight seen.
        c = cosines[a.codebase] if cosines[a.codebase] is not None else floor
        weight = math.exp(-(top - c) / temperature)
        scored += [((r.tier, r.score * weight), -order, -rank, r) for rank, r in enumerate(a.results)]
    scored.sort(key=lambda item: item[:3], reverse=True)
    return [r for *_, r in scored[:limit]], False


def _by_rank(answers: list[MemberAnswer], limit: int) -> list[Result]:
    """Reciprocal-rank merge: the members' results interleaved by rank, named tiers first."""
    scored = [((r.tier, 1.0 / (RRF_K + rank)), -order, r)
              for order, a in enumerate(answers) for rank, r in enumerate(a.results, 1)]
    scored.sort(key=lambda item: item[:2], reverse=True)
    return [r for *_, r in scored[:limit]]
