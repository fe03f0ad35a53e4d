"""``codii-sql eval git``: file localization from a repository's own commits, searched in an index built at HEAD.

Each usable commit is one query (its cleaned subject line); its gold files are the source
files it added or modified that the index at HEAD holds. The metrics come from ir-measures
(:func:`.metrics.score`, kind ``git``). This is a proxy: the index already holds every change,
so it measures finding where a change lives now, not retrieval before the change was made.
"""

from __future__ import annotations

import datetime
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..codebase import Codebase
from ..errors import UsageError
from ..languages import detect_language
from ..service import MODES, SearchOptions
from ..service.evaluation import indexed_roles, path_role
from .datasets import Log
from .gitlog import Commit, clean_subject, repository, subject_skip, walk
from .metrics import latency, mean_metrics, metric_names, require_metrics, score
from .runner import index_corpus, rank_queries

DEFAULT_COMMITS = 200
DEFAULT_MODES = ("hybrid", "bm25", "vector")
#: A commit touching more source files than this is a refactor or a sweep, not one place to find.
MAX_SOURCE_FILES = 5
#: Files per ranking: the CLI's ``--group-by file -n 10``.
TOP = 10
PROXY = ("proxy: the index is built at HEAD and already holds each change, so this measures finding where "
         "a change lives now, not retrieval before the change")
#: Languages of data, prose and build files: the role rules call ``go.mod``, ``CMakeLists``-style
#: build files and such "source", but a change there is not code to localize.
NOT_CODE = frozenset({"asciidoc", "cmake", "csv", "dockerfile", "dotenv", "gomod", "ini", "json", "latex", "make",
                      "markdown", "properties", "rst", "starlark", "text", "toml", "tsv", "xml", "yaml"})
#: Skip reasons, in report order.
REASONS = ("revert", "generic", "short", "no-source", "too-many-files", "gone-at-head")


@dataclass
class GitEvalConfig:
    """One ``eval git`` run: the repository ``path``, how many usable ``commits`` (newest first),
    the search ``modes``, the ``embedder`` of the index (None: the default), the role prior,
    and the ``work_dir`` whose ``runs/`` receives the saved records."""

    path: Path
    commits: int = DEFAULT_COMMITS
    modes: tuple[str, ...] = DEFAULT_MODES
    embedder: str | None = None
    role_prior: bool = True
    work_dir: Path = Path("~/.cache/codii-bench")


def evaluate_git(cfg: GitEvalConfig, log: Log | None = None) -> dict:
    """Index the repository at HEAD, turn its recent commits into queries, score every mode.

    Returns ``{"repository", "commits", "proxy", "index", "load_avg", "runs": {mode: run record}}``;
    each run record has the shape of :func:`.runner.evaluate`'s (``dataset``, ``kind`` ``git``,
    ``config``, ``metrics``, ``per_query`` with each gold file's rank), so ``eval --compare`` reads it.

    Raises:
        UsageError: not a git repository, no commits, a shallow clone shorter than ``commits``,
            no usable commit, or no ir-measures.
    """
    log = log or (lambda msg: None)
    require_metrics()
    bad = [m for m in cfg.modes if m not in MODES]
    if bad or not cfg.modes:
        raise UsageError(f"--mode must be some of {', '.join(MODES)}")
    repo = repository(Path(cfg.path).expanduser())
    if repo["shallow"] and repo["commits"] < cfg.commits:
        raise UsageError(f"{repo['root']} is a shallow clone with {repo['commits']} commits: run `git fetch "
                         f"--unshallow` there (or `git fetch --deepen N`), or pass --commits {repo['commits']} or fewer")
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    load_start = os.getloadavg()[0]
    codebase, info = index_corpus(Path(repo["root"]), Path(repo["root"]).name, log, cfg.embedder)
    queries, commits = collect_queries(codebase, cfg.commits)
    if not queries:
        raise UsageError(f"{repo['root']}: none of {commits['scanned']} commits gives a query "
                         f"({_skips(commits['skipped'])}); eval git needs commits that change 1-{MAX_SOURCE_FILES} "
                         "source files with a descriptive subject")
    runs = {}
    for mode in cfg.modes:
        log(f"searching {len(queries)} commit subjects ({mode}) ...")
        opts = SearchOptions(limit=TOP, mode=mode, role_prior=cfg.role_prior, group_by_file=True)
        runs[mode] = _run(repo, cfg, mode, started, info, queries, rank_queries(codebase, queries, opts))
    proxy = PROXY + ("; the work tree has uncommitted changes, and the index holds them, not HEAD"
                     if repo["dirty"] else "")
    return {"repository": repo, "commits": commits, "proxy": proxy, "index": info,
            "load_avg": [round(load_start, 2), round(os.getloadavg()[0], 2)], "runs": runs}


def collect_queries(codebase: Codebase, wanted: int) -> tuple[list[dict], dict]:
    """Up to ``wanted`` queries ``{"id", "query", "subject", "relevant"}`` from the newest commits,
    and ``{"scanned", "used", "skipped": {reason: count}, "history_end"}`` (``history_end``: git
    ran out of commits before ``wanted`` were found)."""
    roles = indexed_roles(codebase)
    queries, skipped, scanned = [], Counter(), 0
    for commit in walk(codebase.root):
        scanned += 1
        query, reason = commit_query(commit, roles)
        if reason:
            skipped[reason] += 1
            continue
        queries.append(query)
        if len(queries) == wanted:
            break
    return queries, {"scanned": scanned, "used": len(queries), "history_end": len(queries) < wanted,
                     "skipped": {r: skipped[r] for r in REASONS if skipped[r]}}


def commit_query(commit: Commit, roles: dict[str, str]) -> tuple[dict | None, str | None]:
    """``(query, None)`` for a usable commit, else ``(None, reason)`` (one of :data:`REASONS`).

    ``roles`` are the index's (:func:`indexed_roles`); see :func:`is_source`.
    """
    cleaned = clean_subject(commit.subject)
    reason = subject_skip(commit.subject, cleaned)
    if reason:
        return None, reason
    source = [f for f in commit.files if is_source(f, roles)]
    if not source:
        return None, "no-source"
    if len(source) > MAX_SOURCE_FILES:
        return None, "too-many-files"
    gold = [f for f in source if f in roles]
    if not gold:
        return None, "gone-at-head"
    return {"id": commit.sha, "query": cleaned, "subject": commit.subject, "relevant": gold}, None


def is_source(path: str, roles: dict[str, str]) -> bool:
    """Whether ``path`` is code: the source role (the index's, else the path rules' for a file the
    index does not hold) and a programming language (not an image, nor one of :data:`NOT_CODE`)."""
    language = detect_language(path)
    return (roles.get(path) or path_role(path)) == "source" and language is not None and language not in NOT_CODE


def _skips(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in skipped.items()) or "none skipped"


def _run(repo: dict, cfg: GitEvalConfig, mode: str, started: str, info: dict, queries: list[dict],
         ranked: list[dict]) -> dict:
    """One mode's run record (see :func:`evaluate_git`)."""
    names = metric_names("git")
    per_q = score("git", {q["id"]: q["relevant"] for q in queries}, {r["id"]: r["files"] for r in ranked})
    by_id = {r["id"]: r for r in ranked}
    return {"dataset": f"git-{Path(repo['root']).name}", "kind": "git", "path": repo["root"], "head": repo["head"],
            "config": {"mode": mode, "embedder": cfg.embedder, "role_prior": cfg.role_prior, "rerank": False,
                       "top": TOP, "commits": cfg.commits},
            "started_at": started, "queries": len(queries),
            "metrics": mean_metrics([per_q[q["id"]] for q in queries], names),
            "latency_ms": latency([r["ms"] for r in ranked]), "index": [info], "index_seconds": info["seconds"],
            "per_query": [_query_row(q, by_id[q["id"]], per_q[q["id"]]) for q in queries]}


def _query_row(q: dict, r: dict, metrics: dict) -> dict:
    """Per query: the commit, its cleaned subject, each gold file's 1-based rank (None: not in the top 10)."""
    ranks = {path: (r["files"].index(path) + 1 if path in r["files"] else None) for path in q["relevant"]}
    return {"id": q["id"], "query": q["query"], "subject": q["subject"], "ranks": ranks, "top": r["files"][:TOP],
            "ms": round(r["ms"], 2), "metrics": {k: round(v, 4) for k, v in metrics.items()}}


def format_git(result: dict) -> str:
    """The text report: repository and commit counts, then one row per mode (queries, metrics, p50 ms)."""
    repo, c, info = result["repository"], result["commits"], result["index"]
    embedder = next(iter(result["runs"].values()))["config"]["embedder"] or "local"
    lines = [f"repository: {repo['root']}  HEAD {repo['head'][:12]} ({repo['branch']})  embedder={embedder}",
             f"commits: {c['scanned']} scanned, {c['used']} used, skipped: {_skips(c['skipped'])}"
             + ("  (history ended)" if c["history_end"] else ""),
             (f"index: {info['files']} files, {info['chunks']} chunks, {info['build']} {info['seconds']:.1f} s;"
              f"  load average {result['load_avg'][0]:.2f} -> {result['load_avg'][1]:.2f}"),
             result["proxy"]]
    names = metric_names("git")
    lines.append(f"{'mode':<8}{'queries':>8}" + "".join(f"{n:>12}" for n in names) + f"{'p50 ms':>9}")
    for mode, run in result["runs"].items():
        lines.append(f"{mode:<8}{run['queries']:>8}" + "".join(f"{run['metrics'][n]:>12.3f}" for n in names)
                     + f"{run['latency_ms']['p50']:>9.1f}")
    return "\n".join(lines)


def git_summary(result: dict) -> dict:
    """``result`` without per-query rows (what ``--json`` prints)."""
    runs = {mode: {k: v for k, v in run.items() if k not in ("per_query", "index")}
            for mode, run in result["runs"].items()}
    return {**result, "runs": runs}
