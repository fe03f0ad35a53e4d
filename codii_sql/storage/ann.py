"""Approximate KNN for large indexes: inverted lists (IVF) of the chunk vectors, kept in the index file.

Spherical k-means over the stored vectors makes about sqrt(n) lists; chunks_ivf holds their
centroids and chunks_lists each vector (int8) under its list as vec0's partition key, so a search
scans only the :data:`NPROBE` nearest lists (sql/search.sql ``probes``/``listed``) and re-scores
the best with the float cosine. Below ``ann_min_vectors`` vectors the lists are empty and search
scans exactly. A vector written after clustering goes to its nearest list (files.sql
chunk_insert_vec); :func:`maintain` clusters again once the count has moved :data:`RECLUSTER_GROWTH`
times away from the clustered one. Measurements: docs/benchmarks.md "Approximate KNN".
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from . import queries

#: Vectors from which an index is clustered (``.codii.yaml`` ``ann_min_vectors`` overrides it).
#: Measured (docs/benchmarks.md): at 100k real vectors the sign-bit path is as fast (14 ms) and keeps
#: more of the exact top 10 (0.99 vs 0.96); at 1M synthetic ones IVF is 54 vs 59 ms, recall 1.0 vs 0.87.
ANN_MIN_VECTORS = 1_000_000
#: Lists probed per search: 0.96 of the exact top 10 with 16 of 316 lists on 100k real vectors.
NPROBE = 16
#: Re-cluster when the vector count is this many times above (or below) the count clustered: the
#: lists are then about sqrt(2) off sqrt(n) in number and their centroids fit the new code less.
RECLUSTER_GROWTH = 2.0
#: k-means trains on this many sampled vectors per list (faiss warns under 39), for this many rounds.
SAMPLE_PER_LIST = 64
KMEANS_ROUNDS = 10
#: Vectors assigned and written per batch: a batch's (rows x lists) float32 scores stay ~64 MB at 1k lists.
BATCH = 16_384


def lists(store: Any) -> int:
    """How many lists ``store`` is clustered into (0: none; search is exact)."""
    return int(store.value("ann_lists") or 0)


def maintain(store: Any, min_vectors: int | None = None) -> int:
    """Cluster ``store`` when it holds ``min_vectors`` (default :data:`ANN_MIN_VECTORS`) vectors and is
    not clustered or its count moved :data:`RECLUSTER_GROWTH` times away; empty the lists when it
    has fallen below. Run with no vector waiting (after a build's vector phase).

    Returns:
        the number of lists after it (0: exact search).
    Raises:
        StorageError (and its kinds): the file cannot be written.
    """
    threshold = ANN_MIN_VECTORS if min_vectors is None else min_vectors
    count = int(store.value("vector_rows") or 0)
    have = lists(store)
    if count < max(threshold, 1):
        if have:
            with store.transaction():
                clear(store)
        return 0
    clustered = int(store.meta().get("ann_vectors") or 0)
    if have and clustered and clustered / RECLUSTER_GROWTH <= count <= clustered * RECLUSTER_GROWTH:
        return have
    return cluster(store)


def cluster(store: Any, seed: int = 0) -> int:
    """Cluster every vector of ``store`` into about sqrt(n) lists, written in one transaction (a kill
    leaves the old lists, or none, and search exact or approximate over them: never half).

    k-means trains on a sample read before the transaction; the assignment reads the vectors again
    inside it, so a vector committed in between is listed too. Returns the number of lists.
    """
    count = int(store.value("vector_rows") or 0)
    n_lists = max(1, round(math.sqrt(count)))
    centroids = kmeans(_sample(store, count, n_lists * SAMPLE_PER_LIST), n_lists, seed=seed)
    with store.transaction():
        _reset(store)
        store.many("ann_centroid_insert", ({"list": i + 1, "centroid": c.tobytes()} for i, c in enumerate(centroids)))
        listed = 0
        for ids, vectors in _batches(store):
            nearest = _nearest(vectors, centroids) + 1
            store.many("ann_list_insert", ({"id": int(i), "list": int(li), "embedding": v.tobytes()}
                                           for i, li, v in zip(ids, nearest, vectors)))
            listed += len(ids)
        store.set_meta(ann_vectors=listed)
    return len(centroids)


def clear(store: Any) -> None:
    """Empty the lists (search is exact again); the caller owns the transaction."""
    _reset(store)
    store.set_meta(ann_vectors=0)


def kmeans(sample: np.ndarray, n_lists: int, *, rounds: int = KMEANS_ROUNDS, seed: int = 0) -> np.ndarray:
    """Spherical k-means: ``n_lists`` unit centroids (float32[n_lists, dims]) of ``sample``
    (float32[m, dims]); a list left empty is re-seeded with a random sample vector."""
    rng = np.random.default_rng(seed)
    x = _unit(sample)
    k = min(n_lists, len(x))
    centroids = x[rng.choice(len(x), k, replace=False)].copy()
    for _ in range(rounds):
        assign = _nearest(x, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, x)
        empty = np.bincount(assign, minlength=k) == 0
        sums[empty] = x[rng.choice(len(x), int(empty.sum()))]
        centroids = _unit(sums)
    return centroids


def _nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The index of each row's nearest centroid by cosine (int64[rows]), in slices of :data:`BATCH`."""
    return np.concatenate([np.argmax(x[i:i + BATCH] @ centroids.T, axis=1) for i in range(0, len(x), BATCH)]
                          or [np.zeros(0, dtype=np.int64)])


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _sample(store: Any, count: int, size: int) -> np.ndarray:
    """Every ``count // size``-th stored vector (float32[<= ~size, dims]), read in one stream."""
    step = max(1, count // max(size, 1))
    kept = [v for ids, vectors in _batches(store) for v in vectors[(ids % step) == 0]]
    return np.stack(kept) if kept else np.zeros((0, store.vector_dims()), dtype=np.float32)


def _batches(store: Any):
    """``(ids int64[b], vectors float32[b, dims])`` of every stored vector, :data:`BATCH` at a time."""
    dims = store.vector_dims()
    rows = iter(store.conn.execute(queries.sql("ann_vectors")))
    while chunk := list(itertools.islice(rows, BATCH)):
        ids = np.fromiter((r[0] for r in chunk), dtype=np.int64, count=len(chunk))
        vectors = np.frombuffer(b"".join(r[1] for r in chunk), dtype=np.float32).reshape(len(chunk), dims)
        yield ids, vectors


def _reset(store: Any) -> None:
    store.run_text(queries.sql("ann_reset").replace("{dims}", str(int(store.vector_dims()))))
