"""Vector and hybrid search at kernel size: the real texts of a kernel index, vectors made from real ones.

Prints numbers; not run in CI. Embedding the kernel's 2.8M chunks takes days on 2 cores, so this copies an
index that ``benchmarks/kernel.py`` built without vectors and gives every chunk a vector made from a real one:
the bundled model embeds a sample of the index's own chunks (``--seeds``, 2,000 by default), and each chunk
gets a point between two random seeds' vectors (the first plus a uniform share of the second) plus Gaussian
noise (``--noise`` per dimension before normalising), a neighbourhood structure like real embeddings'
(uniform random vectors have none, and no index can cluster them). Queries are benchmarks/kernel.py's 20, embedded by the model.

  python benchmarks/kernel_vectors.py INDEX.db --work DIR [--chunks N] [--runs 3]

``--chunks N`` keeps the first N chunks' vectors (the others stay queued, so BM25 alone ranks them: say
1000000 for the issue's "1M chunks" figure over the kernel's real texts). Exact search (sign bits, then
floats) is timed first, then the index is clustered (storage/ann.py, timed) and the same queries run
through the IVF lists; recall@10 of each against the exact float scan. Every figure comes with the load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from kernel import QUERIES

from codii_sql.models.minilm import local_factory
from codii_sql.search.results import SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage import ann
from codii_sql.storage.store import Store

#: Vectors written per transaction.
BATCH = 20_000


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def give_vectors(db: Path, chunks: int | None, seeds: int, noise: float) -> dict:
    """Write a vector for each of the first ``chunks`` chunks (all: None) of ``db``; the seconds it took."""
    model = local_factory("")
    with Store(db) as store:
        ids = [r[0] for r in store.conn.execute("SELECT id FROM chunks ORDER BY id" + (f" LIMIT {int(chunks)}" if chunks else ""))]
        rng = np.random.default_rng(7)
        picked = sorted(rng.choice(ids, min(seeds, len(ids)), replace=False).tolist())
        texts = [store.conn.execute("SELECT content FROM chunks WHERE id = ?", (i,)).fetchone()[0] for i in picked]
        t = time.perf_counter()
        seed_vectors = model.embed(texts)
        embed_s = time.perf_counter() - t
        t = time.perf_counter()
        store.run("pragma_write_cache")
        for first in range(0, len(ids), BATCH):
            batch = ids[first:first + BATCH]
            # a point between two real vectors, and noise: near-copies of one seed alone tie, and ties make
            # recall@10 against the exact scan meaningless (0.28 for the exact path's own sign bits)
            pairs = rng.integers(0, len(seed_vectors), (len(batch), 2))
            mix = rng.random((len(batch), 1)).astype(np.float32)
            v = seed_vectors[pairs[:, 0]] + mix * seed_vectors[pairs[:, 1]] + rng.standard_normal(
                (len(batch), seed_vectors.shape[1])).astype(np.float32) * noise
            v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
            with store.transaction():
                store.many("chunk_insert_vec", ({"id": i, "embedding": e.tobytes()} for i, e in zip(batch, v)))
                store.conn.execute("DELETE FROM vector_queue WHERE chunk_id BETWEEN ? AND ?", (batch[0], batch[-1]))
        store.run("wal_checkpoint")
        return {"vectors": len(ids), "seed_embed_s": round(embed_s, 1), "write_s": round(time.perf_counter() - t, 1)}


def measure(db: Path, query_vectors: np.ndarray, runs: int) -> dict:
    """p50/p95 ms of vector and hybrid searches (warm: each query asked once first), recall@10 in vector mode."""
    out: dict[str, list[float]] = {"vector": [], "hybrid": [], "recall": []}
    with Store(db, readonly=True) as store:
        s = Searcher(store, None, None)
        for q, v in zip(QUERIES, query_vectors):
            s.find(q, SearchOptions(limit=10), query_vector=v)
        for _ in range(runs):
            for q, v in zip(QUERIES, query_vectors):
                exact = {r[0] for r in store.conn.execute(
                    "SELECT rowid FROM chunks_vec WHERE embedding MATCH ? AND k = 10", (v.tobytes(),))}
                t = time.perf_counter()
                got = s.find(q, SearchOptions(limit=10, mode="vector"), query_vector=v)
                out["vector"].append((time.perf_counter() - t) * 1000)
                out["recall"].append(len(exact & {r.id for r in got.results}) / 10)
                t = time.perf_counter()
                s.find(q, SearchOptions(limit=10), query_vector=v)
                out["hybrid"].append((time.perf_counter() - t) * 1000)

    def pct(xs: list[float], p: float) -> float:
        return round(float(np.percentile(xs, p)), 1)

    return {"recall_at_10": round(statistics.mean(out["recall"]), 3),
            "vector_p50_ms": pct(out["vector"], 50), "vector_p95_ms": pct(out["vector"], 95),
            "hybrid_p50_ms": pct(out["hybrid"], 50), "hybrid_p95_ms": pct(out["hybrid"], 95), "load": load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("index", type=Path, help="a kernel index built by benchmarks/kernel.py (read, never written)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kernel-vectors"))
    ap.add_argument("--chunks", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / f"kernel-{args.chunks or 'all'}.db"
    report: dict = {"load_before": load()}
    if not db.exists():
        shutil.copyfile(args.index, db)
        report["given"] = give_vectors(db, args.chunks, args.seeds, args.noise)
    query_vectors = local_factory("").embed(QUERIES)
    with Store(db) as store:
        with store.transaction():
            ann.clear(store)
        report["chunks"] = dict(store.row("vector_counts"))
        report["vectors"] = int(store.value("vector_rows"))
    report["exact"] = measure(db, query_vectors, args.runs)
    with Store(db) as store:
        t = time.perf_counter()
        report["lists"] = ann.cluster(store)
        report["cluster_s"] = round(time.perf_counter() - t, 1)
    report["ivf"] = measure(db, query_vectors, args.runs)
    report["db_mb"] = round(db.stat().st_size / 1e6, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
