"""The vector phase of a build: embed the queued chunks in priority order, committing each batch.

A vector is an addition to a chunk that is already committed and searchable by BM25. Each
batch is read from ``vector_queue``, looked up in the index and the shared cache, embedded in
steps (each step cached at once, so a kill loses at most one step of model time), and written
in one transaction that re-checks every chunk still holds the text that was embedded: a
lexical build may have replaced a file meanwhile. A kill leaves the queue as the last commit
left it; the next build resumes from there and embeds nothing twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

import numpy as np

from ..errors import EmbeddingFailedError, IndexMismatchError, Remedy
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..storage.store import Store
from .report import VECTOR_BATCH, BuildReport, Progress
from .vectors import known_vectors

#: Queued chunks read at a time (in priority order) and sorted by length, so that each model
#: batch pads little. Measured on 12.5k Django chunks: taking them 512 at a time in queue order
#: cost 1.12x the model's own time on the same texts (180.9 s against 161.1 s).
VECTOR_WINDOW = 2048
#: Texts per embedder call: progress moves and the cache fills while a batch is embedded, so a
#: kill loses at most one step of model time.
EMBED_STEP = 128
#: Weight of the newest window in the embedding rate (chunks/s) behind the ETA: an exponential
#: moving average, so the estimate follows a machine that gets busier or quieter. Measured per
#: window, not per batch: a window's batches run shortest first, so one batch's rate says
#: little (on a Sphinx release per-batch rates put the ETA at 64 s with 10 minutes to go).
RATE_SMOOTHING = 0.3


def embed_queued(store: Store, embedder: Embedder, cache: EmbeddingCache | None, report: BuildReport,
                 progress: Progress, *, prefer: Callable[[], Iterable[str]] | None = None,
                 reuse_index: bool = True, batch_size: int | None = None) -> None:
    """Embed every queued chunk of ``store`` (the caller holds the vector lock), ``batch_size``
    texts per embedder call (None: :data:`EMBED_STEP`).

    ``prefer()`` names files whose chunks go first (those an agent is searching), asked before
    each window of :data:`VECTOR_WINDOW` chunks; ``progress("vectors", done, total)`` counts chunks with a vector. Counts and
    times go to ``report`` (``chunks_embedded``, ``vectors_reused``, ``vectors_deduplicated``, phase ``vectors``).

    Raises:
        EmbeddingFailedError: the model failed; every batch before it is committed.
        IndexMismatchError: the index now holds another model's vectors (a forced rebuild).
    """
    counts = store.row("vector_counts")
    total, pending = counts["chunks"], counts["pending"]
    meta = store.meta()
    rate, char_rate = meta.get("vectors_rate"), meta.get("vectors_char_rate")
    left_chars = store.value("vector_queue_chars") if pending else 0  # once: the queue's text, counted down
    while pending:
        window = _next_batch(store, sorted(set(prefer() if prefer is not None else ())), VECTOR_WINDOW)
        if not window:
            break
        window.sort(key=lambda r: len(r["content"]))
        started, previous, previous_chars, window_chars = time.perf_counter(), rate, char_rate, 0
        for start in range(0, len(window), VECTOR_BATCH):
            t = time.perf_counter()
            rows = window[start:start + VECTOR_BATCH]
            done = total - pending
            vectors = _vectors_for(store, embedder, cache, rows, report, reuse_index, batch_size or EMBED_STEP,
                                   lambda n, done=done: progress("vectors", done + n, total))
            elapsed = max(time.perf_counter() - started, 1e-6)
            chars = sum(len(r["content"]) for r in rows)
            window_chars += chars
            so_far, chars_so_far = (start + len(rows)) / elapsed, window_chars / elapsed
            # Until a first window ends, its own average so far is the best estimate there is.
            rate = so_far if previous is None else previous
            char_rate = chars_so_far if previous_chars is None else previous_chars
            if start + len(rows) == len(window):
                rate = so_far if previous is None else RATE_SMOOTHING * so_far + (1 - RATE_SMOOTHING) * previous
                char_rate = (chars_so_far if previous_chars is None
                             else RATE_SMOOTHING * chars_so_far + (1 - RATE_SMOOTHING) * previous_chars)
            left_chars = max(0, left_chars - chars)
            counts = _commit(store, embedder, rows, vectors, rate, char_rate, left_chars)
            total, pending = counts["chunks"], counts["pending"]
            report.phase_seconds["vectors"] += time.perf_counter() - t
            progress("vectors", total - pending, total)


def _commit(store: Store, embedder: Embedder, rows: list[dict], vectors: dict[str, bytes], rate: float,
            char_rate: float, left_chars: int) -> dict:
    """Write the vectors of those ``rows`` whose chunks still hold the embedded text, in one
    transaction, with the phase's rates (chunks and characters a second) and the characters still queued
    (status's time left: chunks go shortest first within a window, so a rate in chunks misjudged the
    rest, and the count of chunks moves only at a commit); returns the new ``vector_counts``.

    Raises:
        IndexMismatchError: the index now holds another model's vectors (a forced rebuild).
    """
    with store.transaction():
        if store.meta().get("model_id") != embedder.model_id:
            raise IndexMismatchError(f"the index of {store.path.name} now holds another model's vectors "
                                     "(a forced rebuild): this vector phase stops")
        width = {len(v) // 4 for v in vectors.values()}
        if width - {store.vector_dims()}:
            raise IndexMismatchError(f"the embedder {embedder.name} now returns {width.pop()}-dim vectors but the "
                                     f"index of {store.path.name} holds {store.vector_dims()}-dim ones",
                                     Remedy("force_build"))
        wanted = {r["id"] for r in store.rows("vector_queue_still_wanted", {"chunks": json.dumps(
            [{"id": r["id"], "text_hash": r["text_hash"]} for r in rows])})}
        store.many("chunk_insert_vec", [{"id": r["id"], "embedding": vectors[r["text_hash"]]}
                                        for r in rows if r["id"] in wanted])
        store.many("vector_queue_done", [{"id": i} for i in wanted])
        store.set_meta(vectors_rate=round(rate, 3), vectors_char_rate=round(char_rate, 1),
                       vectors_pending_chars=left_chars, vectors_updated_at=time.time())
        return store.row("vector_counts")


def _next_batch(store: Store, hot: list[str], n: int) -> list[dict]:
    """Up to ``n`` queued chunks: those of the ``hot`` files first, then by priority."""
    rows = store.rows("vector_queue_of_files", {"paths": json.dumps(hot), "n": n}) if hot else []
    if len(rows) < n:
        taken = {r["id"] for r in rows}
        rows += [r for r in store.rows("vector_queue_next", {"n": n}) if r["id"] not in taken]
    return rows[:n]


def _vectors_for(store: Store, embedder: Embedder, cache: EmbeddingCache | None, rows: list[dict],
                 report: BuildReport, reuse_index: bool, batch_size: int, step: Callable[[int], None]) -> dict[str, bytes]:
    """``{text key: float32 blob}`` for the queued ``rows``: reused where known, else embedded in
    steps of ``batch_size`` texts (each step cached at once); ``step(chunks done)`` after each."""
    found = known_vectors(store, cache, [r["text_hash"] for r in rows], reuse_index=reuse_index)
    missing = [r for r in rows if r["text_hash"] not in found]
    texts = {r["text_hash"]: r["content"] for r in missing}
    report.vectors_reused += len(rows) - len(missing)
    report.vectors_deduplicated += len(missing) - len(texts)  # embedded once for all of them
    order = list(texts)
    for start in range(0, len(order), batch_size):
        keys = order[start:start + batch_size]
        try:
            vecs = embedder.embed([texts[k] for k in keys])
        except Exception as err:  # noqa: BLE001 - any model failure stops the phase with what is committed
            ours = isinstance(err, EmbeddingFailedError)
            what = err.what if ours else f"embedding failed: {type(err).__name__}: {err}"
            raise EmbeddingFailedError(f"{what}; the chunks embedded so far are kept and the next build resumes "
                                       "the rest", err.hint if ours else None) from err
        fresh = {k: np.asarray(v, dtype=np.float32).tobytes() for k, v in zip(keys, vecs, strict=True)}
        if cache is not None:
            cache.put({k: np.frombuffer(b, dtype=np.float32) for k, b in fresh.items()})
        found.update(fresh)
        report.chunks_embedded += len(keys)
        step(sum(1 for r in rows if r["text_hash"] in found))
    return found
