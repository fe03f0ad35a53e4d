"""The vectors of a batch of prepared files: reused by text key from the index or the shared cache, else embedded."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np

from ..models.cache import EmbeddingCache, text_key
from ..models.embedder import Embedder
from ..storage.store import Store
from .prepare import Prepared
from .report import BuildReport

#: Texts per embedder call within a batch: progress moves while a 512-chunk batch is embedded
#: (~50 s at 10 chunks/s; an MCP client polling get_indexing_status saw 0% until the commit).
EMBED_STEP = 128


def batch_vectors(store: Store, embedder: Embedder, cache: EmbeddingCache | None, files: list[Prepared],
                  report: BuildReport, step: Callable[[int, int], None], *,
                  reuse_index: bool = True) -> list[tuple[list[str], np.ndarray]]:
    """Per file: the chunks' text keys and their float32[n_chunks, dims] vectors, reused by key
    from this index (unless ``reuse_index`` is false) or the ``cache``, else embedded in steps of
    :data:`EMBED_STEP` texts, after each of which ``step(texts embedded, texts to embed)`` reports
    progress. Counts and times go to ``report`` (``vectors_reused``, ``chunks_embedded``, phases
    ``lookup`` and ``embed``).

    Raises:
        whatever ``embedder.embed`` raises (the caller keeps the files' old rows).
    """
    t = time.perf_counter()
    model = embedder.model_id
    keys = [[text_key(model, c.content) for c in p.chunks] for p in files]
    flat = sorted({k for ks in keys for k in ks})
    found: dict[str, bytes] = {}
    if flat and reuse_index:
        found.update({r["text_hash"]: r["embedding"]
                      for r in store.rows("vectors_by_text_hash", {"keys": json.dumps(flat)})})
    missing = [k for k in flat if k not in found]
    if cache is not None and missing:
        found.update(cache.get(missing))
    texts = {}
    for p, ks in zip(files, keys):
        for k, c in zip(ks, p.chunks):
            if k not in found:
                texts[k] = c.content
    report.vectors_reused += sum(len(ks) for ks in keys) - sum(1 for ks in keys for k in ks if k in texts)
    report.phase_seconds["lookup"] += time.perf_counter() - t
    if texts:
        t = time.perf_counter()
        order = list(texts)
        fresh = {}
        for start in range(0, len(order), EMBED_STEP):
            keys_now = order[start:start + EMBED_STEP]
            vecs = dict(zip(keys_now, embedder.embed([texts[k] for k in keys_now])))
            if cache is not None:  # each step at once: an interrupted build keeps its model time
                cache.put(vecs)
            fresh.update(vecs)
            step(min(start + EMBED_STEP, len(order)), len(order))
        report.phase_seconds["embed"] += time.perf_counter() - t
        report.chunks_embedded += len(order)
        found.update({k: v.astype(np.float32).tobytes() for k, v in fresh.items()})
    return [(ks, np.frombuffer(b"".join(found[k] for k in ks), dtype=np.float32).reshape(len(ks), -1)
             if ks else np.zeros((0, embedder.dims), np.float32)) for ks in keys]
