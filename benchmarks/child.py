"""Measurements that run in their own process (so peak RSS and model load belong to one task).

Usage: ``python benchmarks/child.py TASK JSON_ARGS``; prints one JSON object. Tasks:
``build`` (cold build), ``embed`` (the same chunks through the model alone), ``search``
(warm in-process latency), ``synth`` (a generated index of N chunks), ``tree`` (a generated
tree of N small files).
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from codii_sql.ingest import walk as scan  # noqa: E402
from codii_sql.ingest.config import DEFAULT_MAX_FILE_BYTES  # noqa: E402
from codii_sql.codebase import Codebase  # noqa: E402
from codii_sql.ingest.indexer import Indexer  # noqa: E402
from codii_sql.ingest.prepare import prepare_file  # noqa: E402
from codii_sql.models.wordpiece import MAX_TOKENS, get_tokenizer  # noqa: E402

#: Queries for latency: natural-language and identifier queries of the kinds users type.
QUERIES = [
    "send a request with a timeout", "parse cookie header", "url routing rules", "render a template with context",
    "session authentication", "retry on connection error", "HTTPAdapter", "def dispatch_request",
    "escape html in output", "read configuration from environment variables", "middleware exception handling",
    "get_user_model", "database transaction rollback", "json response encoder", "stream a large file download",
    "redirect after login", "cache control headers", "test client fixture", "multipart form data upload",
    "SSL certificate verification",
]


def embedder_for(kind: str):
    """The real embedder (fused graph, default threads) or the labelled fake one."""
    if kind == "fake":
        from fake_embed import FakeEmbedder
        return FakeEmbedder()
    from codii_sql.models.minilm import MiniLM
    return MiniLM()


def peak_rss_self() -> int:
    """Peak resident bytes of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


#: Chunks per transaction when writing a synthetic index.
SYNTH_BATCH = 10_000


def task_build(root: str, db: str, embedder: str) -> dict:
    """One cold build of ``root`` into a new ``db`` without the shared cache."""
    emb = embedder_for(embedder)
    if embedder == "real":
        emb._get_session()  # model load is not part of the pipeline's cost
    cpu0 = time.process_time()
    report = Indexer(Codebase(Path(root), Path(db)), emb, cache=None).build(force=True)
    return {"report": report.to_dict(), "main_cpu_seconds": time.process_time() - cpu0,
            "main_peak_rss": peak_rss_self()}


def corpus_chunks(root: Path) -> tuple[list[str], dict]:
    """Distinct chunk texts of ``root`` in file order, chunked in this process, with stage times."""
    t = time.perf_counter()
    files = scan.scan(root).files
    times = {"scan": time.perf_counter() - t}
    t = time.perf_counter()
    texts: dict[str, None] = {}
    for f in files:
        for c in prepare_file(str(root), f, DEFAULT_MAX_FILE_BYTES).chunks:
            texts.setdefault(c.content)
    times["read_hash_chunk_1proc"] = time.perf_counter() - t
    return list(texts), {"files": len(files), **times}


def task_embed(root: str, embedder: str) -> dict:
    """Chunk ``root`` in one process, then tokenize and embed its distinct chunks alone."""
    texts, out = corpus_chunks(Path(root))
    tok = get_tokenizer()
    t = time.perf_counter()
    encoded = tok.encode_batch(texts)
    out["tokenize"] = time.perf_counter() - t
    out["chunks"] = len(texts)
    out["tokens"] = sum(min(len(e.ids), MAX_TOKENS) for e in encoded)
    if embedder == "real":
        emb = embedder_for("real")
        t = time.perf_counter()
        emb.embed(["warm up"])
        out["model_load"] = time.perf_counter() - t
        t = time.perf_counter()
        emb.embed(texts)
        out["embed"] = time.perf_counter() - t
        out["graph"] = emb.graph_path.name
        out["threads"] = emb.threads
    out["peak_rss"] = peak_rss_self()
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def task_search(root: str, db: str, repeats: int) -> dict:
    """Warm in-process latency (ms) per mode over :data:`QUERIES`, and query-embedding latency."""
    from codii_sql.search.results import SearchOptions
    from codii_sql.search.searcher import Searcher
    from codii_sql.storage.store import Store

    emb = embedder_for("real")
    emb.embed(["warm up"])
    out: dict = {}
    with Store(Path(db)) as store:
        searcher = Searcher(store, Path(root), emb)
        out["chunks"] = store.row("counts")["chunks"]
        for mode in ("bm25", "vector", "hybrid"):
            opts = SearchOptions(mode=mode)
            for q in QUERIES:  # warm: page cache, mmap, statement cache
                searcher.search(q, opts)
            ms = []
            for _ in range(repeats):
                for q in QUERIES:
                    t = time.perf_counter()
                    searcher.search(q, opts)
                    ms.append(1000 * (time.perf_counter() - t))
            out[mode] = {"p50_ms": statistics.median(ms), "p95_ms": _pct(ms, 0.95), "n": len(ms)}
    ms = []
    for q in QUERIES:
        t = time.perf_counter()
        emb.embed([q])
        ms.append(1000 * (time.perf_counter() - t))
    out["query_embed"] = {"p50_ms": statistics.median(ms), "p95_ms": _pct(ms, 0.95)}
    out["peak_rss"] = peak_rss_self()
    return out


def task_synth(source: str, db: str, n: int) -> dict:
    """An index of ``n`` chunks: real chunk texts of ``source`` cycled, random unit vectors.

    Files hold 20 chunks each. Vectors are Gaussian (seeded), so KNN cost is realistic
    (a linear scan does not depend on the values) but vector rankings are meaningless. Written
    in transactions of :data:`SYNTH_BATCH` chunks, so a million chunks fit in memory.
    """
    from codii_sql.ingest import roles
    from codii_sql.ingest.indexer import index_settings
    from codii_sql.models.minilm import DIMS
    from codii_sql.storage.store import Store
    from codii_sql.text import identifier_subtokens
    from fake_embed import FakeEmbedder

    texts, _ = corpus_chunks(Path(source))
    subtokens = [identifier_subtokens(t) for t in texts]
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    with Store(Path(db)) as store:
        store.run("pragma_write_cache")
        with store.transaction():
            store.set_meta(**index_settings(FakeEmbedder()), root=source, status="indexed", embedder="local")
        for first in range(0, n, SYNTH_BATCH):
            chunks, vec_rows = [], []
            for start in range(first, min(n, first + SYNTH_BATCH), 20):
                path = f"synthetic/pkg{start // 2000}/mod{start // 20}.py"
                count = min(20, n - start)
                fid = store.value("file_upsert", {"path": path, "size": 0, "mtime_ns": 0, "hash": "0" * 64,
                                                  "language": "python", "role": roles.classify(path),
                                                  "chunk_count": count, "indexed_at": 0.0})
                vecs = rng.standard_normal((count, DIMS)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                for j, vec in enumerate(vecs):
                    k = (start + j) % len(texts)
                    chunks.append({"id": start + j + 1, "file_id": fid, "path": path, "start_line": 1,
                                   "end_line": 1, "start_byte": 0, "end_byte": 0, "kind": "function",
                                   "symbol": None, "language": "python", "content": texts[k],
                                   "subtokens": subtokens[k], "text_hash": f"{start + j}"})
                    vec_rows.append({"id": start + j + 1, "embedding": vec.tobytes()})
            # The indexer's bulk statements (ingest/write.py) on ids first+1..: one transaction per batch.
            with store.transaction():
                store.many("chunk_insert_with_id", chunks)
                store.run("chunks_insert_fts_range", {"first": first + 1, "last": first + len(chunks)})
                store.many("chunk_insert_vec", vec_rows)
        store.run("wal_checkpoint")
    return {"chunks": n, "seconds": time.perf_counter() - t, "db_bytes": Path(db).stat().st_size}


def task_tree(target: str, n: int) -> dict:
    """``n`` small Python files (3 functions each) in 100 packages under ``target``."""
    rnd = random.Random(0)
    for i in range(n):
        path = Path(target) / f"pkg{i % 100:03d}" / f"mod{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def handler_{i}_{j}(request, limit={rnd.randint(1, 99)}):\n"
                       f"    \"\"\"Handle request {i}.{j}.\"\"\"\n    return request.get('k{j}', limit)\n\n\n"
                       for j in range(3))
        path.write_text(body)
    return {"files": n}


TASKS = {"build": task_build, "embed": task_embed, "search": task_search, "synth": task_synth, "tree": task_tree}

if __name__ == "__main__":
    print(json.dumps(TASKS[sys.argv[1]](**json.loads(sys.argv[2]))))
