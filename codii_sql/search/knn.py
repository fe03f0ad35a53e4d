"""The KNN list of a large search, computed ahead of the fusion statement and beside BM25's.

Small and filtered searches scan the float vectors exactly inside sql/search.sql ``search_hybrid``.
From :data:`COARSE_MIN_CHUNKS` on, an unfiltered search takes its candidates from the sign bits or,
once the index is clustered (storage/ann.py), from the nearest IVF lists: ``knn_ahead``, whose list
``search_hybrid`` is given as ``:knn_given``, as it is given BM25's by search/pruning.py. The two
lists are made at once on two connections to the file: apsw lets go of the GIL while SQLite runs,
so on two cores a hybrid search costs about the slower of the two (docs/benchmarks.md, seventeenth round).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TypeVar

from ..processes import cpus
from ..storage import ann
from ..storage.store import Store

#: From this many chunks on, KNN takes its candidates by hamming distance over the vectors'
#: sign bits and re-scores them with the float cosine (sql/search.sql); below it the exact
#: float scan is fast enough (measured, idle: 31 ms at 50k, 66 ms at 100k chunks).
COARSE_MIN_CHUNKS = 20_000
#: Hamming candidates re-scored, as a multiple of the KNN depth, taken evenly from the 8
#: partitions of chunks_bits (sql/search.sql ``coarse``). Measured on Sphinx 5.1.1 (27.9k real
#: chunk vectors, 180 CoSQA, SWE-bench and benchmark queries), share of the exact top 10 kept:
#: one top-100 0.83, 8 x 13 0.83, 8 x 25 0.90, 8 x 32 0.91, 8 x 50 0.94; CPU ms at 50k chunks
#: (load 6): 15.1, 9.3, 12.3, 13.1, 22.5. 4 x depth it is: better than before at less cost.
COARSE_FACTOR = 4
#: int8 candidates of the probed IVF lists re-scored with the float cosine, as a multiple of the
#: depth (int8 cosines of unit vectors are off by ~1e-3: they misorder near ties only; not tuned).
IVF_RESCORE_FACTOR = 2
#: Partitions of chunks_bits (rowid % 8; sql/schema.sql and sql/search.sql hold the same 8).
BITS_PARTITIONS = 8

T = TypeVar("T")


def ahead(store: Store, qvec: bytes | None, depth: int, filtered: bool) -> dict | None:
    """``knn_ahead``'s parameters for a search of ``depth`` KNN candidates (1-4096), or None when
    ``search_hybrid`` scans exactly itself: no query vector, a filtered search, a small index."""
    if qvec is None or filtered:
        return None
    lists = ann.lists(store)
    if lists:
        return {"qvec": qvec, "depth": depth, "coarse_k": 0, "nprobe": min(ann.NPROBE, lists),
                "ivf_rescore": min(IVF_RESCORE_FACTOR * depth, 4096)}
    if store.row("counts")["chunks"] < COARSE_MIN_CHUNKS:
        return None
    return {"qvec": qvec, "depth": depth, "coarse_k": min(-(-COARSE_FACTOR * depth // BITS_PARTITIONS), 4096),
            "nprobe": 0, "ivf_rescore": 0}


def alongside(store: Store, params: dict, bm25: Callable[[], T], overlap: bool) -> tuple[T, str]:
    """``bm25()``'s answer, and the KNN list of ``knn_ahead`` with ``params`` as ``search_hybrid``'s
    ``:knn_given`` (a JSON array of [chunk id, cosine distance], nearest first).

    With ``overlap`` (``bm25`` has work to do: a large index's pruned BM25) and more than one CPU to run on, the
    KNN list is made in a thread of its own on ``store``'s second connection while ``bm25`` runs here;
    else one after the other here. The two connections may read two commits of a file a writer is
    changing: a chunk the later one deleted drops out of the answer, as between any two statements.

    Raises:
        whatever either raises (the thread's error is raised here once ``bm25`` is done).
    """
    if not overlap or len(cpus()) < 2:
        return bm25(), _listed(store, params)
    side = store.sibling()
    done: dict[str, object] = {}

    def knn() -> None:
        try:
            done["list"] = _listed(side, params)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread below
            done["error"] = err

    thread = threading.Thread(target=knn, name="codii-knn", daemon=True)
    thread.start()
    try:
        top = bm25()
    finally:
        thread.join()
    if "error" in done:
        raise done["error"]  # type: ignore[misc]
    return top, done["list"]  # type: ignore[return-value]


def _listed(store: Store, params: dict) -> str:
    return json.dumps([[r["id"], r["distance"]] for r in store.rows("knn_ahead", params)])
