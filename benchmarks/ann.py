"""Approximate KNN (IVF, codii_sql/storage/ann.py) against today's path, on synthetic clustered vectors.

    python benchmarks/ann.py --n 100000 --work /work/ann-bench --queries 100

Builds (once, kept under --work) an index of ``n`` chunks whose vectors are drawn around
n/500 random unit centres (cosine ~0.7 to their centre: a neighbourhood structure, unlike the
Gaussian vectors of run.py's --scale, on which no index can beat a scan), clusters it (timed,
with this process's peak RSS), then runs each query through Searcher.find twice, interleaved:
IVF lists, and the unclustered path of today (sign bits + float re-score above 20k chunks).
Reports recall@10 of each against the exact float scan, p50/p95 ms of vector and hybrid
searches, and the file size before and after clustering. Prints one JSON line.

    python benchmarks/ann.py --n 100000 --vectors CACHE.db

indexes real chunk vectors from an embedding cache instead (sql/cache.sql), queried by held-out ones.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from codii_sql.models.minilm import DIMS  # noqa: E402
from codii_sql.search.results import SearchOptions  # noqa: E402
from codii_sql.search.searcher import Searcher  # noqa: E402
from codii_sql.storage import ann  # noqa: E402
from codii_sql.storage.store import Store  # noqa: E402

#: Chunks per transaction while writing the synthetic index.
BATCH = 10_000
#: Chunks per synthetic file (the kernel averages 32, at most 3,033): files of 10,000 one-line chunks made
#: each result's long-line check (results.place_pieces) read 10,000 rows, half a vector search's time at 1M.
FILE_CHUNKS = 100
#: Words of the synthetic chunk texts (BM25 needs some), and of the hybrid queries.
WORDS = ("request", "session", "retry", "header", "cookie", "proxy", "stream", "timeout", "adapter", "redirect",
         "parse", "encode", "token", "cache", "socket", "buffer", "schema", "query", "index", "commit")


def synth(db: Path, n: int, seed: int = 0, given: np.ndarray | None = None) -> np.ndarray:
    """Write an index of ``n`` chunks at ``db`` (vectors ``given``, else drawn around centres);
    returns the centres (float32[n/500, DIMS])."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((max(1, n // 500), DIMS)))
    with Store(db) as store:
        store.run("pragma_write_cache")
        for first in range(0, n, BATCH):
            count = min(BATCH, n - first)
            with store.transaction():
                fids = [store.value("file_upsert", {"path": f"synthetic/mod{(first + k) // FILE_CHUNKS}.py", "size": 0,
                                                    "mtime_ns": 0, "hash": "0" * 64, "language": "python",
                                                    "role": "source", "chunk_count": min(FILE_CHUNKS, count - k),
                                                    "indexed_at": 0.0})
                        for k in range(0, count, FILE_CHUNKS)]
                chunks = []
                vecs = given[first:first + count] if given is not None else _points(rng, centres, count)
                for j in range(count):
                    cid = first + j + 1
                    text = " ".join(WORDS[(cid * p) % len(WORDS)] for p in (1, 3, 7, 11)) + f" handler_{cid}"
                    chunks.append({"id": cid, "file_id": fids[j // FILE_CHUNKS],
                                   "path": f"synthetic/mod{(first + j) // FILE_CHUNKS}.py",
                                   "start_line": j % FILE_CHUNKS + 1, "end_line": j % FILE_CHUNKS + 1,
                                   "start_byte": 0, "end_byte": 0,
                                   "kind": "function", "symbol": None, "language": "python", "content": text,
                                   "subtokens": text, "text_hash": str(cid)})
                store.many("chunk_insert_with_id", chunks)
                store.run("chunks_insert_fts_range", {"first": first + 1, "last": first + count})
                store.many("chunk_insert_vec", ({"id": first + j + 1, "embedding": v.tobytes()}
                                                for j, v in enumerate(vecs)))
        store.run("wal_checkpoint")
    return centres


def real_vectors(cache: Path, n: int, held_out: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n + held_out`` 384-dim vectors of an embedding cache (sql/cache.sql, read
    immutable): ``n`` to index, ``held_out`` (never indexed) as queries, as find-similar asks."""
    import apsw

    conn = apsw.Connection(f"file:{cache}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    rows = conn.execute("SELECT embedding FROM vectors WHERE length(embedding) = ? LIMIT ?", (DIMS * 4, n + held_out))
    x = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(-1, DIMS)
    return x[:n], x[n:]


def _points(rng, centres: np.ndarray, count: int) -> np.ndarray:
    noise = rng.standard_normal((count, DIMS)) * (1.0 / np.sqrt(DIMS))
    return _unit(centres[rng.integers(0, len(centres), count)] + noise)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _pct(values: list[float], q: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 2)


def measure(db: Path, queries: np.ndarray) -> dict:
    """Recall@10 and latency of IVF and today's path, interleaved query by query."""
    lists = ann.lists
    out: dict[str, dict[str, list]] = {p: {"vector_ms": [], "hybrid_ms": [], "recall": []} for p in ("ivf", "today")}
    with Store(db, readonly=True) as store:
        s = Searcher(store, None, None)
        for i, q in enumerate(queries):
            exact = {r[0] for r in store.conn.execute(
                "SELECT rowid FROM chunks_vec WHERE embedding MATCH ? AND k = 10", (q.tobytes(),))}
            for path in ("ivf", "today"):
                ann.lists = lists if path == "ivf" else (lambda _store: 0)
                t = time.perf_counter()
                got = s.find("handler", SearchOptions(limit=10, mode="vector"), query_vector=q)
                out[path]["vector_ms"].append((time.perf_counter() - t) * 1000)
                out[path]["recall"].append(len(exact & {r.id for r in got.results}) / 10)
                t = time.perf_counter()
                s.find(f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}", SearchOptions(limit=10),
                       query_vector=q)
                out[path]["hybrid_ms"].append((time.perf_counter() - t) * 1000)
        ann.lists = lists
        n_lists = ann.lists(store)
    return {"lists": n_lists, **{p: {"recall_at_10": round(statistics.mean(v["recall"]), 3),
                                     "vector_p50_ms": _pct(v["vector_ms"], 0.5),
                                     "vector_p95_ms": _pct(v["vector_ms"], 0.95),
                                     "hybrid_p50_ms": _pct(v["hybrid_ms"], 0.5)} for p, v in out.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("/work/ann-bench"))
    parser.add_argument("--vectors", type=Path, help="real vectors: an embedding cache .db (queries: held-out ones)")
    parser.add_argument("--nprobe", type=int, default=ann.NPROBE, help="lists probed per search")
    args = parser.parse_args()
    ann.NPROBE = args.nprobe
    args.work.mkdir(parents=True, exist_ok=True)
    kind = "real" if args.vectors else "synth"
    plain, db = args.work / f"{kind}{args.n}.db", args.work / f"{kind}{args.n}-ivf.db"
    t = time.perf_counter()
    if args.vectors:
        vectors, queries = real_vectors(args.vectors, args.n, args.queries)
    if not plain.exists():
        if args.vectors:
            synth(plain.with_suffix(".tmp"), len(vectors), given=vectors)
        else:
            synth(plain.with_suffix(".tmp"), args.n)
        plain.with_suffix(".tmp").rename(plain)
    build_s = time.perf_counter() - t
    shutil.copyfile(plain, db)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    with Store(db) as store:
        n_lists = ann.cluster(store)
        store.run("wal_checkpoint")
    cluster_s = time.perf_counter() - t
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if not args.vectors:
        centres = _unit(np.random.default_rng(0).standard_normal((max(1, args.n // 500), DIMS)))
        queries = _points(np.random.default_rng(1), centres, args.queries)
    result = {"vectors": kind, "n": args.n, "nprobe": args.nprobe, "load_before": os.getloadavg(), "build_s": round(build_s, 1),
              "cluster_s": round(cluster_s, 1), "lists": n_lists,
              "peak_rss_mb_before_cluster": rss_before // 1024, "peak_rss_mb_after_cluster": rss_after // 1024,
              "db_mb_plain": round(plain.stat().st_size / 2**20, 1), "db_mb_ivf": round(db.stat().st_size / 2**20, 1),
              **measure(db, queries), "load_after": os.getloadavg()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
