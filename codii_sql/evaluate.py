"""Retrieval evaluation over the dev benchmarks (``codii-sql eval``).

Each corpus is indexed with the real pipeline (:func:`api.build`, shared embedding cache), every
query runs through :meth:`search.Searcher.search` exactly as ``codii-sql search`` runs it, and the
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
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import api
from .codebase import Codebase
from .errors import CodiiError, UsageError
from .search.results import MAX_LIMIT, SearchOptions

Log = Callable[[str], None]

#: Results asked of the search per query. CoSQA: 100 chunks so Recall@100 is defined (a snippet
#: file may yield several chunks, so a little under 100 distinct files). SWE-bench: 10 files,
#: the CLI's default ``--group-by file -n 10``; a larger limit would also deepen the per-retriever
#: candidate pools (``search.DEPTH``) and so change the top 10 an agent actually sees.
DEFAULT_TOP = {"cosqa": 100, "swebench": 10}
#: Acc@k cut-offs: LocAgent/SweRank convention, as in the bench README.
ACC_KS = (1, 3, 5, 10)
#: The bench location used when neither --bench-dir nor $CODII_SQL_BENCH is given.
DEFAULT_BENCH = Path("../shared/bench")


class EvalError(CodiiError):
    """The benchmark data could not be prepared (e.g. get_corpus.py failed to fetch a release)."""


def require_metrics() -> None:
    """Check that ir-measures (the ``bench`` extra) imports, before any indexing or query runs.

    Raises:
        UsageError: it is missing; the message says how to install it.
    """
    try:
        import ir_measures  # noqa: F401
    except ImportError:
        raise UsageError('eval needs ir-measures for its metrics: install it with `pip install "codii-sql[bench]"` '
                         '(from a checkout: `pip install ".[bench]"`)') from None


def _measures(kind: str) -> dict:
    """Report name -> ir-measures measure. MRR@10 is the mean of ir-measures' per-query RR@10."""
    from ir_measures import RR, R, nDCG

    if kind == "cosqa":
        return {"NDCG@10": nDCG @ 10, "MRR@10": RR @ 10, "Recall@1": R @ 1, "Recall@5": R @ 5,
                "Recall@10": R @ 10, "Recall@100": R @ 100}
    return {"Recall@5": R @ 5, "Recall@10": R @ 10, "MRR@10": RR @ 10, "NDCG@10": nDCG @ 10}


def metric_names(kind: str) -> list[str]:
    """The metrics reported for a dataset kind, in table order."""
    acc = [f"Acc@{k}" for k in ACC_KS] if kind == "swebench" else []
    return acc + list(_measures(kind))


@dataclass
class EvalConfig:
    """One evaluation run's settings.

    Attributes:
        dataset: ``cosqa``, ``swebench`` (under ``bench_dir``) or a dataset directory.
        mode: search mode: ``hybrid``, ``bm25`` or ``vector``.
        rerank: ``SearchOptions.rerank``: the cross-encoder re-scores the top fused chunks.
        rerank_model: the cross-encoder path for ``rerank``; None: ``$CODII_SQL_RERANK_MODEL``.
        role_prior: the search's soft source-over-tests/docs prior.
        repos: SWE-bench only: keep queries of these repositories (``requests``, ``psf/requests``
            or the PyPI name; case-insensitive). Empty keeps all.
        limit: keep the first ``limit`` queries (after ``repos``); None keeps all.
        top: search limit per query; None: :data:`DEFAULT_TOP` of the kind.
        bench_dir: the folder holding ``cosqa/`` and ``swebench/`` (the CLI fills it from
            ``--bench-dir`` or ``$CODII_SQL_BENCH``); None: :data:`DEFAULT_BENCH` if it exists.
        work_dir: where snippets, downloaded releases and saved runs go.
    """

    dataset: str
    mode: str = "hybrid"
    rerank: bool = False
    rerank_model: str | None = None
    role_prior: bool = True
    repos: list[str] = field(default_factory=list)
    limit: int | None = None
    top: int | None = None
    bench_dir: Path | None = None
    work_dir: Path = Path("~/.cache/codii-bench")


@dataclass
class Dataset:
    """A loaded dataset: ``kind`` is ``cosqa`` or ``swebench``; ``queries`` are its JSONL rows."""

    name: str
    kind: str
    path: Path
    queries: list[dict]


# -- datasets -----------------------------------------------------------------------------


def resolve_dataset(dataset: str, bench_dir: Path | None) -> tuple[str, Path]:
    """``(name, directory)`` for ``cosqa``/``swebench`` or a dataset directory path.

    Raises:
        UsageError: no bench directory for a named dataset, or the path is not a directory.
    """
    if dataset in DEFAULT_TOP:
        bench = bench_dir or (DEFAULT_BENCH if DEFAULT_BENCH.is_dir() else None)
        if bench is None:
            raise UsageError(f"where is the bench? pass --bench-dir or set CODII_SQL_BENCH (no {DEFAULT_BENCH} here)")
        path = Path(bench).expanduser() / dataset
    else:
        path = Path(dataset).expanduser()
    if not path.is_dir():
        raise UsageError(f"{path}: no such dataset directory; use cosqa, swebench or a directory with queries.jsonl")
    return path.resolve().name, path.resolve()


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_dataset(cfg: EvalConfig) -> Dataset:
    """The dataset of ``cfg`` with its queries filtered by ``repos`` and cut to ``limit``.

    Raises:
        UsageError: unknown dataset layout, ``repos`` on a CoSQA dataset, or an unknown repository.
    """
    name, path = resolve_dataset(cfg.dataset, cfg.bench_dir)
    if not (path / "queries.jsonl").is_file():
        raise UsageError(f"{path} has no queries.jsonl")
    kind = "cosqa" if (path / "corpus.jsonl").is_file() else "swebench"
    queries = _read_jsonl(path / "queries.jsonl")
    if cfg.repos:
        if kind == "cosqa":
            raise UsageError("--repos applies to SWE-bench datasets only")
        queries = _filter_repos(queries, cfg.repos)
    return Dataset(name, kind, path, queries[: cfg.limit] if cfg.limit else queries)


def _repo_names(q: dict) -> set[str]:
    repo = q["repo"].lower()
    return {repo, repo.rpartition("/")[2], q["pypi"]["name"].lower()}


def _filter_repos(queries: list[dict], repos: list[str]) -> list[dict]:
    wanted = {r.strip().lower() for r in repos if r.strip()}
    known = set().union(*(_repo_names(q) for q in queries)) if queries else set()
    unknown = wanted - known
    if unknown:
        short = sorted({q["repo"].rpartition("/")[2] for q in queries})
        raise UsageError(f"unknown repository {', '.join(sorted(unknown))}: use some of {', '.join(short)}")
    return [q for q in queries if _repo_names(q) & wanted]


def write_snippets(corpus: Path, root: Path) -> int:
    """Write each ``code`` of ``corpus`` (JSONL ``{"id", "code"}``) to ``root/<id>`` as UTF-8 bytes.

    A file already holding the same bytes is left alone: a rewrite would change its mtime and
    make the next build re-hash it. Returns the number of files written.

    Raises:
        UsageError: an id is absolute or climbs out of ``root`` with ``..``.
    """
    written = 0
    for row in _read_jsonl(corpus):
        rel = Path(row["id"])
        if rel.is_absolute() or ".." in rel.parts:
            raise UsageError(f"{corpus}: corpus id {row['id']!r} must be a relative path inside the corpus")
        target = root / rel
        data = row["code"].encode("utf-8")
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    return written


def release_key(q: dict) -> str:
    """``NAME==VERSION`` of a SWE-bench query's distribution (the key of ``corpora.json``)."""
    return f"{q['pypi']['name']}=={q['pypi']['version']}"


def release_dirs(ds: Dataset, work_dir: Path, log: Log) -> dict[str, Path]:
    """``{NAME==VERSION: directory}`` for every release the queries of ``ds`` need.

    From ``ds.path/corpora.json`` when present, else from ``get_corpus.py`` (which skips
    releases already unpacked). With a subset of the queries, get_corpus.py gets only theirs
    (``--queries``) and no ``--json``, so a shared ``corpora.json`` is never shrunk.

    Raises:
        EvalError: get_corpus.py failed, or a needed release has no directory.
    """
    needed = sorted({release_key(q) for q in ds.queries})
    if (ds.path / "corpora.json").is_file():
        mapping = {k: ds.path / v for k, v in json.loads((ds.path / "corpora.json").read_text()).items()}
    else:
        mapping = _run_get_corpus(ds, work_dir / "swe", log)
    missing = [k for k in needed if k not in mapping or not Path(mapping[k]).is_dir()]
    if missing:
        raise EvalError(f"no source tree for {', '.join(missing)}: check the get_corpus.py output above")
    return {k: Path(mapping[k]).resolve() for k in needed}


def _run_get_corpus(ds: Dataset, dest: Path, log: Log) -> dict[str, Path]:
    script = ds.path / "get_corpus.py"
    if not script.is_file():
        raise EvalError(f"{ds.path} has neither corpora.json nor get_corpus.py: cannot find the source trees")
    everything = len(ds.queries) == len(_read_jsonl(ds.path / "queries.jsonl"))
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as subset:
        subset.writelines(json.dumps(q) + "\n" for q in ds.queries)
        subset.flush()
        args = ["--json"] if everything else ["--queries", subset.name]
        log(f"fetching source trees with {script} into {dest} ...")
        # stderr passes through: the script reports fetch progress and per-release errors there.
        proc = subprocess.run([sys.executable, str(script), "--dir", str(dest), *args],
                              stdout=subprocess.PIPE, text=True)
    out = {}
    for line in proc.stdout.splitlines():
        key, tab, directory = line.partition("\t")
        if tab:
            out[key] = Path(directory)
    return out


# -- indexing and searching -----------------------------------------------------------------


def index_corpus(root: Path, label: str, log: Log) -> tuple[Codebase, dict]:
    """Build or update the index of ``root`` (waiting for another builder) and say what it cost.

    Returns:
        the codebase and ``{"corpus", "root", "build": "cold"|"update", "seconds", "files",
        "chunks", "chunks_embedded", "vectors_reused", "failed"}``; ``seconds`` is the build's wall
        time, ``failed`` the files it could not index.
    """
    codebase = Codebase.open(root)
    cold = not codebase.db_path.is_file()
    log(f"indexing {label} ({'cold build' if cold else 'update'}) ...")
    report = api.build(codebase)
    return codebase, {"corpus": label, "root": str(codebase.root), "build": "cold" if cold else "update",
                      "seconds": round(report.seconds, 3), "files": report.files, "chunks": report.chunks,
                      "chunks_embedded": report.chunks_embedded, "vectors_reused": report.vectors_reused,
                      "failed": len(report.failed)}


def check_reranker(model_path: str | None) -> None:
    """Load the cross-encoder now, so a missing model fails before any indexing and its load
    time stays out of the query latency.

    Raises:
        UsageError: ``codii_sql.rerank`` cannot be imported, or it has no usable model.
    """
    try:
        from .search.rerank import rerank
    except ImportError as err:
        raise UsageError(f"rerank unavailable: {err}") from None
    rerank("model check", [], model_path=model_path)


def rank_queries(codebase: Codebase, queries: list[dict], opts: SearchOptions) -> list[dict]:
    """Run each query and return ``{"id", "files", "ms"}`` per query.

    ``files`` are distinct paths in rank order (a file's rank is that of its best chunk);
    ``ms`` is the wall time of :meth:`Searcher.search` alone (re-rank included), in milliseconds.
    """
    searcher = api.open_searcher(codebase)
    out = []
    try:
        if opts.mode != "bm25" and queries:
            # The ONNX session loads on first use (~0.5 s): keep that one-time cost out of p95.
            searcher.embedder.embed([queries[0]["query"]])
        for q in queries:
            t = time.perf_counter()
            results = searcher.search(q["query"], opts)
            ms = (time.perf_counter() - t) * 1000
            out.append({"id": q["id"], "ms": ms, "files": list(dict.fromkeys(r.path for r in results))})
    finally:
        searcher.store.close()
    return out


# -- scoring --------------------------------------------------------------------------------


def score(kind: str, relevant: dict[str, list[str]], ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per-query metrics from ir-measures: ``{query id: {metric name: value in [0, 1]}}``.

    Args:
        kind: ``cosqa`` or ``swebench`` (selects :func:`metric_names`).
        relevant: query id -> relevant doc ids (binary relevance).
        ranked: query id -> distinct doc ids, best first.

    Acc@k (all relevant files in the top k) has no ir-measures measure: it is the library's
    per-query ``R@k`` equal to 1.0 (exact in floating point: |G| / |G|).
    """
    import ir_measures
    from ir_measures import R, Qrel, ScoredDoc

    named = _measures(kind)
    wanted = set(named.values()) | ({R @ k for k in ACC_KS} if kind == "swebench" else set())
    qrels = [Qrel(qid, doc, 1) for qid, docs in relevant.items() for doc in docs]
    # Scores decrease with rank so the library keeps our order (it sorts by score).
    run = [ScoredDoc(qid, doc, float(len(docs) - i)) for qid, docs in ranked.items() for i, doc in enumerate(docs)]
    raw: dict[str, dict] = {}
    for m in ir_measures.iter_calc(wanted, qrels, run):
        raw.setdefault(m.query_id, {})[m.measure] = m.value
    out = {}
    for qid in relevant:
        # A query with no results at all may be absent from the library's output: it scores 0.
        got = raw.get(qid, {})
        row = {f"Acc@{k}": float(got.get(R @ k, 0.0) == 1.0) for k in ACC_KS} if kind == "swebench" else {}
        row.update({name: got.get(m, 0.0) for name, m in named.items()})
        out[qid] = row
    return out


def mean_metrics(rows: list[dict[str, float]], names: list[str]) -> dict[str, float]:
    """The arithmetic mean of each metric over ``rows`` (empty rows: all 0)."""
    return {n: float(np.mean([r[n] for r in rows])) if rows else 0.0 for n in names}


def latency(ms: list[float]) -> dict[str, float]:
    """``{"p50", "p95", "mean"}`` of per-query times in milliseconds (numpy linear interpolation)."""
    if not ms:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2),
            "mean": round(float(np.mean(ms)), 2)}


# -- the run --------------------------------------------------------------------------------


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
        check_reranker(cfg.rerank_model)
    work = Path(cfg.work_dir).expanduser().absolute()
    opts = SearchOptions(limit=top, mode=cfg.mode, role_prior=cfg.role_prior, group_by_file=ds.kind == "swebench",
                         rerank=cfg.rerank, rerank_model=cfg.rerank_model)
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    index, ranked = [], []
    for label, root, queries in _corpora(ds, work, log):
        codebase, info = index_corpus(root, label, log)
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


def save_run(run: dict, work_dir: Path) -> Path:
    """Write ``run`` to ``<work_dir>/runs/<dataset>-<mode>[-rerank]-<YYYYmmdd-HHMMSS>[-n].json``."""
    runs = Path(work_dir).expanduser() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cfg = run["config"]
    stem = f"{run['dataset']}-{cfg['mode']}{'-rerank' if cfg['rerank'] else ''}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = runs / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = runs / f"{stem}-{n}.json"
    path.write_text(json.dumps(run, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def summary(run: dict) -> dict:
    """The run without its per-query rows (what ``--json`` prints)."""
    return {k: v for k, v in run.items() if k != "per_query"}


# -- output ---------------------------------------------------------------------------------


def format_run(run: dict) -> str:
    """A plain-text table: metrics (micro, macro and per repository for SWE-bench), latency, index time."""
    cfg = run["config"]
    lines = [f"{run['dataset']} ({run['kind']})  mode={cfg['mode']}  prior={'on' if cfg['role_prior'] else 'off'}  "
             f"rerank={'on' if cfg['rerank'] else 'off'}  top={cfg['top']}  queries={run['queries']}"]
    columns = [("all", run["metrics"])]
    if "macro" in run:
        columns.append(("macro", run["macro"]))
        columns += [(f"{repo.rpartition('/')[2]} ({v['queries']})", v["metrics"]) for repo, v in run["by_repo"].items()]
    width = max(10, *(len(c) for c, _ in columns))
    lines.append(f"{'metric':<12}" + "".join(f"{c:>{width + 2}}" for c, _ in columns))
    for name in run["metrics"]:
        lines.append(f"{name:<12}" + "".join(f"{vals[name]:>{width + 2}.4f}" for _, vals in columns))
    lat = run["latency_ms"]
    lines.append(f"query latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms (search call only)")
    cold = sum(i["build"] == "cold" for i in run["index"])
    embedded = sum(i["chunks_embedded"] for i in run["index"])
    chunks = sum(i["chunks"] for i in run["index"])
    lines.append(f"index: {len(run['index'])} corpora, {chunks} chunks, {run['index_seconds']:.1f} s "
                 f"({cold} cold, {len(run['index']) - cold} updates; {embedded} chunks embedded)")
    return "\n".join(lines)


def load_run(path: str | os.PathLike) -> dict:
    """A saved run record.

    Raises:
        UsageError: the file is not a run record.
    """
    try:
        run = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: not a saved eval run ({err})") from None
    if not isinstance(run, dict) or not {"dataset", "config", "metrics"} <= run.keys():
        raise UsageError(f"{path}: not a saved eval run (no dataset, config and metrics keys)")
    return run


def compare_runs(a: dict, b: dict) -> dict:
    """Metric deltas ``b - a``: ``{"a", "b", "rows": [{"section", "metric", "a", "b", "delta"}], "queries"}``.

    Sections: ``metrics`` (micro), ``macro`` when both have it, ``latency_ms`` (p50, p95).
    ``queries`` counts the common queries whose first relevant rank got better, worse or stayed.
    """
    rows = []
    for section in ("metrics", "macro", "latency_ms"):
        if section in a and section in b:
            for name in a[section]:
                if name in b[section]:
                    rows.append({"section": section, "metric": name, "a": a[section][name], "b": b[section][name],
                                 "delta": b[section][name] - a[section][name]})
    return {"a": _label(a), "b": _label(b), "rows": rows, "queries": _rank_changes(a, b)}


def _label(run: dict) -> str:
    cfg = run["config"]
    return f"{run['dataset']} {cfg['mode']}{' +rerank' if cfg.get('rerank') else ''} {run.get('started_at', '')}"


def _first_rank(row: dict) -> float:
    found = [r for r in row["ranks"].values() if r is not None]
    return min(found) if found else float("inf")


def _rank_changes(a: dict, b: dict) -> dict:
    ra = {q["id"]: _first_rank(q) for q in a.get("per_query", [])}
    rb = {q["id"]: _first_rank(q) for q in b.get("per_query", [])}
    common = ra.keys() & rb.keys()
    return {"common": len(common), "better": sum(rb[q] < ra[q] for q in common),
            "worse": sum(rb[q] > ra[q] for q in common), "same": sum(rb[q] == ra[q] for q in common)}


def format_comparison(cmp: dict) -> str:
    """A plain-text table of :func:`compare_runs`."""
    lines = [f"A: {cmp['a']}", f"B: {cmp['b']}", f"{'':<11}{'metric':<12}{'A':>10}{'B':>10}{'B-A':>10}"]
    for r in cmp["rows"]:
        lines.append(f"{r['section']:<11}{r['metric']:<12}{r['a']:>10.4f}{r['b']:>10.4f}{r['delta']:>+10.4f}")
    q = cmp["queries"]
    lines.append(f"first relevant rank over {q['common']} common queries: {q['better']} better, "
                 f"{q['worse']} worse, {q['same']} same")
    return "\n".join(lines)
