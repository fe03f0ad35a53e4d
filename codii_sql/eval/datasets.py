"""Benchmark datasets: CoSQA-style (NL query -> snippet) and SWE-bench-style (issue -> files over releases)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CodiiError, UsageError

Log = Callable[[str], None]

#: Results asked of the search per query. CoSQA: 100 chunks so Recall@100 is defined (a snippet
#: file may yield several chunks, so a little under 100 distinct files). SWE-bench: 10 files,
#: the CLI's default ``--group-by file -n 10``; a larger limit would also deepen the per-retriever
#: candidate pools (``search.DEPTH``) and so change the top 10 an agent actually sees.
DEFAULT_TOP = {"cosqa": 100, "swebench": 10}


class EvalError(CodiiError):
    """The benchmark data could not be prepared (e.g. get_corpus.py failed to fetch a release)."""


@dataclass
class EvalConfig:
    """One evaluation run's settings.

    Attributes:
        dataset: ``cosqa``, ``swebench`` (under ``bench_dir``) or a dataset directory.
        mode: search mode: ``hybrid``, ``bm25`` or ``vector``.
        rerank: ``SearchOptions.rerank``: the cross-encoder re-scores the top fused chunks.
        rerank_model: the cross-encoder path for ``rerank``; None: ``$CODII_SQL_RERANK_MODEL``.
        embedder: the embedder name the corpora are indexed with (each gets an index of its own,
            so two embedders can be compared on one dataset); None: the default.
        role_prior: the search's soft source-over-tests/docs prior.
        repos: SWE-bench only: keep queries of these repositories (``requests``, ``psf/requests``
            or the PyPI name; case-insensitive). Empty keeps all.
        limit: keep the first ``limit`` queries (after ``repos``); None keeps all.
        top: search limit per query; None: :data:`DEFAULT_TOP` of the kind.
        bench_dir: the folder holding ``cosqa/`` and ``swebench/`` (the CLI fills it from
            ``--bench-dir`` or ``$CODII_SQL_BENCH``); needed for the named datasets only.
        work_dir: where snippets, downloaded releases and saved runs go.
    """

    dataset: str
    mode: str = "hybrid"
    rerank: bool = False
    rerank_model: str | None = None
    embedder: str | None = None
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


def resolve_dataset(dataset: str, bench_dir: Path | None) -> tuple[str, Path]:
    """``(name, directory)`` for ``cosqa``/``swebench`` or a dataset directory path.

    Raises:
        UsageError: no bench directory for a named dataset, or the path is not a directory.
    """
    if dataset in DEFAULT_TOP:
        if bench_dir is None:
            raise UsageError(f"where is the bench for {dataset}? pass --bench-dir DIR (the folder holding cosqa/ and "
                             "swebench/) or set CODII_SQL_BENCH")
        path = Path(bench_dir).expanduser() / dataset
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
