"""The optional re-rank pass: the cross-encoder re-scores the top fused chunks of a search."""

from __future__ import annotations

import dataclasses
import os

from ..errors import UsageError
from ..models import cross_encoder
from ..models.cross_encoder import CrossEncoder
from .results import Result


def passage_text(result: Result) -> str:
    """The passage the cross-encoder reads for one chunk: ``"{path} {symbol}\\n{content}"``.

    The path and symbol name are often what a query names ("retry in http client"), and
    they cost ~5-15 word pieces; ``symbol`` is left out when the chunk has none.
    """
    head = f"{result.path} {result.symbol}" if result.symbol else result.path
    return f"{head}\n{result.content}"


def rerank(query: str, results: list[Result], *, model_path: str | os.PathLike[str] | None = None,
           top_n: int = 50) -> list[Result]:
    """Re-order the first ``top_n`` results by cross-encoder logit, highest first.

    Returns new :class:`Result` objects (inputs are not modified): the re-scored ones with
    ``score`` set to the logit (float; see :meth:`CrossEncoder.score`), ties kept in input
    order, then the results beyond ``top_n`` in their original order and with their scores.

    Raises:
        UsageError: no model (neither ``model_path`` nor ``$CODII_SQL_RERANK_MODEL``), a model
            path that cannot be loaded (see :class:`CrossEncoder`), or ``top_n`` < 1.
    """
    if top_n < 1:
        raise UsageError(f"re-rank top_n must be >= 1, not {top_n}")
    encoder = CrossEncoder.load(cross_encoder.model_path(model_path))
    if not results:
        return []
    head, tail = results[:top_n], results[top_n:]
    logits = encoder.score(query, [passage_text(r) for r in head])
    order = sorted(range(len(head)), key=lambda i: -logits[i])
    return [dataclasses.replace(head[i], score=float(logits[i])) for i in order] + list(tail)
