"""Retrieval evaluation over the dev benchmarks (``codii-sql eval``).

Each corpus is indexed with the real pipeline (:func:`codii_sql.service.build`, shared embedding cache), every
query runs through :func:`codii_sql.service.search`'s use case exactly as ``codii-sql search`` runs it, and the
rankings are scored by ir-measures (the ``[bench]`` extra), not by hand-rolled formulas.

Two dataset kinds, in the formats of ``../shared/bench/README.md``:

- ``cosqa``: a directory with ``corpus.jsonl`` (``{"id": "snippets/<idx>.py", "code"}``) and
  ``queries.jsonl`` (``{"id", "query", "relevant": [id]}``). Each ``code`` is written to
  ``<work>/<dataset>/<id>`` and that folder is indexed as one codebase.
- ``swebench``: a directory with ``queries.jsonl`` (``{"id", "repo", "pypi": {"name", "version"},
  "query", "relevant": [path]}``). Each ``NAME==VERSION`` release is its own codebase; its
  directory comes from ``corpora.json`` in the dataset directory (``{"NAME==VERSION": dir}``, dirs
  relative to it) when present, else from running the dataset's ``get_corpus.py`` into ``<work>/swe``.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import asdict
from pathlib import Path

from .. import service
from ..codebase import Codebase
from ..errors import UsageError
from ..service import MAX_LIMIT, SearchOptions
from .datasets import (
    DEFAULT_TOP,
    Dataset,
    EvalConfig,
    Log,
    load_dataset,
    release_dirs,
    release_key,
    write_snippets,
)
from .metrics import latency, mean_metrics, metric_names, require_metrics, score


def index_corpus(root: Path, label: str, log: Log, embedder: str | None = None) -> tuple[Codebase, dict]:
    """Build or update the index of ``root`` (waiting for another builder) and say what it cost.

    Returns:
        the codebase and ``{"corpus", "root", "build": "cold"|"update", "seconds", "files",
        "chunks", "chunks_embedded", "vectors_reused", "failed"}``; ``seconds`` is the build's wall
        time, ``failed`` the files it could not index.
    """
    codebase = Codebase.open(root)
    if embedder and embedder != "local":  # an index per embedder: comparing two rebuilds nothing
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder)
        codebase = Codebase(codebase.root, codebase.db_path.with_name(f"{codebase.db_path.stem}.{slug}.db"))
    cold = not codebase.db_path.is_file()
    log(f"indexing {label} ({'cold build' if cold else 'update'}{f', {embedder}' if embedder else ''}) ...")
    report = service.build(codebase, embedder_name=embedder)
    return codebase, {"corpus": label, "root": str(codebase.root), "build": "cold" if cold else "update",
                      "seconds": round(report.seconds, 3), "files": report.files, "chunks": report.chunks,
                      "chunks_embedded": report.chunks_embedded, "vectors_reused": report.vectors_reused,
                      "failed": len(report.failed)}


def rank_queries(codebase: Codebase, queries: list[dict], opts: SearchOptions) -> list[dict]:
    """Run each query through the search use case, as every face does, and return ``{"id", "files",
    "ms"}`` per query.

    ``files`` are distinct paths in rank order (a file's rank is that of its best chunk);
    ``ms`` is the wall time of the search alone (re-rank included, no index update), in milliseconds.
    """
    request = service.SearchRequest("", opts, [str(codebase.root)], db=str(codebase.db_path), update=False)
    out = []
    with service.opened(request) as ask:
        if opts.mode != "bm25" and queries:
            # The ONNX session loads on first use (~0.5 s): keep that one-time cost out of p95.
            ask(queries[0]["query"])
        for q in queries:
            t = time.perf_counter()
            answer = ask(q["query"])
            ms = (time.perf_counter() - t) * 1000
            out.append({"id": q["id"], "ms": ms, "files": list(dict.fromkeys(r.path for r in answer.results))})
    return out


def evaluate(cfg: EvalConfig, log: Log | None = None) -> dict:
    """Index the dataset's corpora, run its queries, score them; return the run record.

    The record: ``{"dataset", "kind", "config", "started_at", "queries", "metrics" (micro means),
    "latency_ms", "index" (one entry per corpus), "index_seconds", "per_query"}``; SWE-bench adds
    ``"macro"`` (mean of per-repository means) and ``"by_repo"``.

    Raises:
        UsageError: bad dataset, options, ``rerank`` without ``codii_sql.rerank``, or no
            ir-measures (the ``[bench]`` extra).
        EvalError: a corpus could not be prepared.
    """
    log = log or (lambda msg: None)
    # Scoring comes last: without this check a missing extra surfaced after every query had run.
    require_metrics()
    ds = load_dataset(cfg)
    if not ds.queries:
        raise UsageError("no queries left to evaluate: check --repos and --limit")
    top = cfg.top or DEFAULT_TOP[ds.kind]
    if not 1 <= top <= MAX_LIMIT:
        raise UsageError(f"--top must be between 1 and {MAX_LIMIT}")
    if cfg.rerank:
        service.check_reranker(cfg.rerank_model)
    work = Path(cfg.work_dir).expanduser().absolute()
    opts = SearchOptions(limit=top, mode=cfg.mode, role_prior=cfg.role_prior, group_by_file=ds.kind == "swebench",
                         rerank=cfg.rerank, rerank_model=cfg.rerank_model)
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    index, ranked = [], []
    for label, root, queries in _corpora(ds, work, log):
        codebase, info = index_corpus(root, label, log, cfg.embedder)
        index.append(info)
        log(f"searching {len(queries)} queries in {label} ...")
        ranked.extend(rank_queries(codebase, queries, opts))
    return _record(ds, cfg, top, started, index, ranked)


def _corpora(ds: Dataset, work: Path, log: Log):
    """``(label, root, queries)`` per codebase to index, in build order (a project's releases in
    version order, so later releases reuse the first one's cached embeddings)."""
    if ds.kind == "cosqa":
        root = work / ds.name
        n = write_snippets(ds.path / "corpus.jsonl", root)
        if n:
            log(f"wrote {n} snippet files under {root}")
        yield ds.name, root, ds.queries
        return
    dirs = release_dirs(ds, work, log)
    for key, root in dirs.items():
        yield key, root, [q for q in ds.queries if release_key(q) == key]


def _record(ds: Dataset, cfg: EvalConfig, top: int, started: str, index: list[dict], ranked: list[dict]) -> dict:
    names = metric_names(ds.kind)
    by_id = {q["id"]: q for q in ds.queries}
    per_q = score(ds.kind, {q["id"]: q["relevant"] for q in ds.queries}, {r["id"]: r["files"] for r in ranked})
    config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    run = {"dataset": ds.name, "kind": ds.kind, "path": str(ds.path), "config": {**config, "top": top},
           "started_at": started, "queries": len(ranked),
           "metrics": mean_metrics([per_q[r["id"]] for r in ranked], names),
           "latency_ms": latency([r["ms"] for r in ranked])}
    if ds.kind == "swebench":
        repos = sorted({by_id[r["id"]]["repo"] for r in ranked})
        run["by_repo"] = {repo: {"queries": sum(by_id[r["id"]]["repo"] == repo for r in ranked),
                                 "metrics": mean_metrics([per_q[r["id"]] for r in ranked
                                                          if by_id[r["id"]]["repo"] == repo], names)}
                          for repo in repos}
        run["macro"] = mean_metrics([v["metrics"] for v in run["by_repo"].values()], names)
    run["index"] = index
    run["index_seconds"] = round(sum(i["seconds"] for i in index), 3)
    run["per_query"] = [_query_row(by_id[r["id"]], r, per_q[r["id"]]) for r in ranked]
    return run


def _query_row(q: dict, r: dict, metrics: dict) -> dict:
    """Per-query detail: each relevant file's 1-based rank (None: not in the results) and the top 10."""
    ranks = {path: (r["files"].index(path) + 1 if path in r["files"] else None) for path in q["relevant"]}
    row = {"id": q["id"], "ranks": ranks, "top": r["files"][:10], "ms": round(r["ms"], 2),
           "metrics": {k: round(v, 4) for k, v in metrics.items()}}
    if "repo" in q:
        row["repo"] = q["repo"]
    return row
