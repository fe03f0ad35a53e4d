"""``codii-sql eval tokens``: the tokens an agent reads before the right code, grep against codii-sql.

For each query of a set (a git repository's commit subjects, as ``eval git`` takes them, or the
SWE-bench dev issues), the two scripted agents of :mod:`.agents` run with the same budget and the
same token count; a query succeeds within ``b`` tokens when a gold line was read by then. Gold
lines: for a commit, the lines of its changed source files that ``git blame`` at HEAD gives to
that commit (a commit none of whose lines survive is skipped); for a SWE-bench issue, its
``relevant_lines``. A proxy: scripted agents, not an LLM; it measures what each tool makes an
agent read, not what an agent would conclude.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import shutil
import statistics
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from ..codebase import Codebase
from ..errors import UsageError
from ..gitrepo import git
from .agents import Ledger, codii_agent, grep_agent
from .datasets import EvalConfig, Log, load_dataset, release_dirs, release_key
from .git import collect_queries
from .gitlog import repository
from .runner import index_corpus

#: Budgets a success is counted within (tokens): the issue's 2k / 5k / 10k / 20k; the largest is each agent's stop.
DEFAULT_BUDGETS = (2_000, 5_000, 10_000, 20_000)
#: ``max_tokens`` the codii-sql agent passes ``search_code``: a thrifty agent's first look.
DEFAULT_SEARCH_TOKENS = 2_000
AGENTS = ("grep", "codii")
PROXY = ("proxy: two scripted agents (no LLM), every tool output charged at 4 characters a token; success = a "
         "line the reference change touched was read")
_HEADER = re.compile(r"^([0-9a-f]{40}) \d+ (\d+)(?: (\d+))?$")


@dataclass
class TokensConfig:
    """One ``eval tokens`` run: ``dataset`` is ``git`` (the repository at ``path``, up to ``commits``
    subjects) or ``swebench`` (``bench_dir``, optionally ``repos`` and ``limit``); ``budgets`` in
    tokens, ascending; ``search_tokens`` the codii-sql agent's ``max_tokens``; ``work_dir`` receives
    the saved run."""

    dataset: str
    path: Path = Path(".")
    commits: int = 100
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    search_tokens: int = DEFAULT_SEARCH_TOKENS
    repos: tuple[str, ...] = ()
    limit: int | None = None
    bench_dir: Path | None = None
    work_dir: Path = Path("~/.cache/codii-bench")


def evaluate_tokens(cfg: TokensConfig, log: Log | None = None) -> dict:
    """Index the corpora, run both agents on every query, summarise.

    Returns ``{"dataset", "kind": "tokens", "config", "started_at", "proxy", "load_avg": [start, end],
    "index": [per-corpus build info], "queries", "skipped", "agents": {agent: summary}, "per_query"}``;
    a summary is ``{"success": {budget: fraction}, "median_first_gold": tokens or None (not reached
    by half), "mean_tokens", "mean_calls"}``.

    Raises:
        UsageError: no ripgrep, a bad dataset or path, no usable query.
    """
    log = log or (lambda msg: None)
    rg = shutil.which("rg")
    if rg is None:
        raise UsageError("eval tokens runs ripgrep for its grep agent: install it (apt-get install ripgrep, "
                         "brew install ripgrep) and run again")
    if not cfg.budgets or sorted(cfg.budgets) != list(cfg.budgets) or cfg.budgets[0] < 1:
        raise UsageError("--budgets must be ascending positive token counts, e.g. 2000,5000,10000,20000")
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    load_start = os.getloadavg()[0]
    corpora = list(_git_corpus(cfg, log) if cfg.dataset == "git" else _swebench_corpora(cfg, log))
    index = [info for _, info, _ in corpora]
    rows, skipped = asyncio.run(_run_all(corpora, cfg, rg, log))
    if not rows:
        raise UsageError(f"no query of {cfg.dataset} had gold lines to find ({skipped} skipped)")
    name = f"git-{Path(corpora[0][0].root).name}" if cfg.dataset == "git" else "swebench"
    return {"dataset": name, "kind": "tokens",
            "config": {"budgets": list(cfg.budgets), "search_tokens": cfg.search_tokens, "commits": cfg.commits,
                       "repos": list(cfg.repos), "limit": cfg.limit},
            "started_at": started, "proxy": PROXY, "load_avg": [round(load_start, 2), round(os.getloadavg()[0], 2)],
            "index": index, "queries": len(rows), "skipped": skipped,
            "agents": {a: summarise([r[a] for r in rows], cfg.budgets) for a in AGENTS}, "per_query": rows}


def summarise(outcomes: list[dict], budgets: tuple[int, ...]) -> dict:
    """Success within each budget, the median tokens to the first gold line (None when fewer than
    half reached one within the largest budget), mean tokens spent and mean tool calls."""
    reached = sorted(o["first_gold"] if o["first_gold"] is not None and o["first_gold"] <= budgets[-1]
                     else float("inf") for o in outcomes)
    median = statistics.median(reached) if outcomes else float("inf")
    return {"success": {str(b): round(sum(t <= b for t in reached) / len(outcomes), 4) for b in budgets},
            "median_first_gold": None if median == float("inf") else int(median),
            "mean_tokens": round(statistics.fmean(o["tokens"] for o in outcomes), 1),
            "mean_calls": round(statistics.fmean(o["calls"] for o in outcomes), 2)}


async def _run_all(corpora: list, cfg: TokensConfig, rg: str, log: Log) -> tuple[list[dict], int]:
    rows, skipped = [], 0
    async with _mcp_session() as session:
        for codebase, info, queries in corpora:
            log(f"running both agents on {len(queries)} queries in {info['corpus']} ...")
            for q in queries:
                if not any(q["gold"].values()):
                    skipped += 1
                    continue
                grep = Ledger(q["gold"], cfg.budgets[-1])
                terms = grep_agent(codebase.root, q["query"], grep, rg)
                codii = Ledger(q["gold"], cfg.budgets[-1])
                await codii_agent(session, codebase.root, q["query"], codii, cfg.search_tokens)
                rows.append({"id": q["id"], "corpus": info["corpus"], "query": q["query"][:200], "grep_terms": terms,
                             "gold_files": sorted(p for p, lines in q["gold"].items() if lines),
                             "grep": grep.outcome(), "codii": codii.outcome()})
    return rows, skipped


@asynccontextmanager
async def _mcp_session():
    """A fresh ``codii-sql-server --no-watch`` process over stdio (this Python, this environment)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-P", "-m", "codii_sql.mcp", "--no-watch"],
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _git_corpus(cfg: TokensConfig, log: Log) -> Iterator[tuple[Codebase, dict, list[dict]]]:
    repo = repository(Path(cfg.path).expanduser())
    codebase, info = index_corpus(Path(repo["root"]), Path(repo["root"]).name, log)
    queries, _ = collect_queries(codebase, cfg.commits)
    log(f"blaming the changed files of {len(queries)} commits ...")
    blamed: dict[str, dict[int, str]] = {}
    for q in queries:
        q["gold"] = {}
        for path in q["relevant"]:
            if path not in blamed:
                blamed[path] = blame_lines(codebase.root, path)
            q["gold"][path] = {n for n, sha in blamed[path].items() if sha == q["id"]}
    yield codebase, info, queries


def blame_lines(root: Path, path: str) -> dict[int, str]:
    """``{line: sha}`` for every line of ``path`` at HEAD, from ``git blame --porcelain`` (empty when git cannot)."""
    done = git(root, "blame", "--porcelain", "HEAD", "--", path)
    out: dict[int, str] = {}
    if done.returncode != 0:
        return out
    for row in done.stdout.decode("utf-8", "replace").split("\n"):
        m = _HEADER.match(row)
        if m:
            out[int(m.group(2))] = m.group(1)
    return out


def _swebench_corpora(cfg: TokensConfig, log: Log) -> Iterator[tuple[Codebase, dict, list[dict]]]:
    ds = load_dataset(EvalConfig("swebench", repos=list(cfg.repos), limit=cfg.limit, bench_dir=cfg.bench_dir,
                                 work_dir=cfg.work_dir))
    for key, root in release_dirs(ds, Path(cfg.work_dir).expanduser().absolute(), log).items():
        queries = [q for q in ds.queries if release_key(q) == key]
        for q in queries:
            q["gold"] = gold_ranges(q.get("relevant_lines", []))
        codebase, info = index_corpus(root, key, log)
        yield codebase, info, queries


def gold_ranges(ranges: list[str]) -> dict[str, set[int]]:
    """``["path:start-end", ...]`` (1-based inclusive) as ``{path: lines}``."""
    gold: dict[str, set[int]] = {}
    for item in ranges:
        path, _, span = item.rpartition(":")
        start, _, end = span.partition("-")
        if path and start.isdigit():
            gold.setdefault(path, set()).update(range(int(start), int(end or start) + 1))
    return gold


def format_tokens(run: dict) -> str:
    """The text report: what was asked, then one row per agent (success per budget, median tokens, means)."""
    budgets = run["config"]["budgets"]
    lines = [(f"{run['dataset']}: {run['queries']} queries ({run['skipped']} skipped: no gold line); "
              f"codii-sql agent: search_code max_tokens={run['config']['search_tokens']}; "
              f"load average {run['load_avg'][0]:.2f} -> {run['load_avg'][1]:.2f}"),
             run["proxy"],
             f"{'agent':<7}" + "".join(f"{'ok@' + _k(b):>9}" for b in budgets) + f"{'median':>9}{'mean tok':>10}{'calls':>7}"]
    for agent, s in run["agents"].items():
        median = "-" if s["median_first_gold"] is None else str(s["median_first_gold"])
        lines.append(f"{agent:<7}" + "".join(f"{s['success'][str(b)]:>9.3f}" for b in budgets)
                     + f"{median:>9}{s['mean_tokens']:>10.0f}{s['mean_calls']:>7.1f}")
    return "\n".join(lines)


def _k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)
