"""``codii-sql eval tokens``: the grep agent's reads counted by hand on a real tree with real ripgrep, and a
whole run in a fresh process (real git, the real model, the MCP server over stdio).

The repository (oldest commit first):

1. ``Initial import``: too short to be a query; brings ``notes/retries.py`` and
   ``client/test_backoff.py``, which say "retry", "delay" and "jitter" far more often than the code.
2. ``Compute the retry backoff delay with jitter``: adds ``client/backoff.py`` (gold: its lines).
3. ``Round the connection timeout to whole seconds``: edits one line of ``client/timeouts.py``,
   which commit 4 rewrites again: no line of commit 3 survives at HEAD, so it is skipped.
4. ``Clamp the connection timeout between limits``: its lines are HEAD's.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.history_repo import commit, git

from codii_sql.eval.agents import (
    WINDOW_LINES,
    Ledger,
    grep_agent,
    grep_terms,
    numbered,
    window,
)
from codii_sql.eval.tokens import blame_lines, gold_ranges, summarise

pytestmark = pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep (apt-get install ripgrep)")

BACKOFF = '''import random

# Exponential backoff: compute the delay before each retry, with jitter.


def backoff_delay(attempt, base=0.5, cap=30.0):
    """Seconds to wait before retry number ``attempt``: capped, with full jitter."""
    return random.uniform(0, min(cap, base * 2 ** attempt))
'''
NOTES = "".join(f"# retry {i}: the delay before a retry grows; jitter spreads each retry delay\nR{i} = {i}\n"
                for i in range(150))
TESTS = "".join(f"def test_retry_delay_{i}():\n    assert retry_delay_ok({i})  # retry, delay\n\n" for i in range(60))
TIMEOUT_V1 = "def connect_timeout(seconds):\n    return float(seconds)\n"
TIMEOUT_V2 = "def connect_timeout(seconds):\n    return float(round(seconds))\n"
TIMEOUT_V3 = "def connect_timeout(seconds, low=1, high=60):\n    return float(min(max(seconds, low), high))\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tokens") / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"client/__init__.py": "", "client/timeouts.py": TIMEOUT_V1, "notes/retries.py": NOTES,
                  "client/test_backoff.py": TESTS}, "Initial import", 0)
    commit(root, {"client/backoff.py": BACKOFF}, "Compute the retry backoff delay with jitter", 1)
    commit(root, {"client/timeouts.py": TIMEOUT_V2}, "Round the connection timeout to whole seconds", 2)
    commit(root, {"client/timeouts.py": TIMEOUT_V3}, "Clamp the connection timeout between limits", 3)
    return root


def test_ledger_charges_every_output_whole_and_stops_at_the_first_gold_line():
    ledger = Ledger({"a.py": {7}}, budget=100)
    assert not ledger.charge("x" * 41, {"a.py": range(1, 5)})  # 11 tokens, no gold line
    assert ledger.charge("y" * 8, {"a.py": range(5, 9)})  # line 7: found, after 13 tokens
    assert (ledger.spent, ledger.first_gold, ledger.calls) == (13, 13, 2)
    assert ledger.outcome() == {"tokens": 13, "first_gold": 13, "calls": 2, "files": 1}
    spent = Ledger({"a.py": {7}}, budget=10)
    assert spent.charge("z" * 44, {}) and spent.first_gold is None  # the budget is gone
    assert window(120, 1000) == (70, 70 + WINDOW_LINES - 1) and window(3, 20) == (1, 20)


def test_summary_counts_success_within_each_budget_and_the_median_only_when_half_succeed():
    rows = [{"first_gold": t, "tokens": t or 900, "calls": 2} for t in (100, 400, None, 3000)]
    s = summarise(rows, (500, 5000))
    assert s["success"] == {"500": 0.5, "5000": 0.75}
    assert s["median_first_gold"] == 1700  # (400 + 3000) / 2
    assert summarise(rows[2:3] * 3 + rows[:1], (500, 5000))["median_first_gold"] is None
    assert gold_ranges(["a/b.py:3-4", "a/b.py:9", "c.py:1-1"]) == {"a/b.py": {3, 4, 9}, "c.py": {1}}


def test_grep_agent_reads_files_in_order_of_match_count_and_pays_for_every_window(repo):
    query = "Compute the retry backoff delay with jitter"
    # No identifier; words by how many files hold them: backoff and compute 1 (backoff.py), jitter 2, ...
    assert grep_terms(repo, query) == ["backoff", "compute", "jitter"]
    gold = {"client/backoff.py": set(range(1, 9))}
    ledger = Ledger(gold, budget=20_000)
    grep_agent(repo, query, ledger)
    # By hand: rg -c lists notes/retries.py (150 lines hold "jitter"), backoff.py (2), test_backoff.py (none:
    # it says retry and delay, not the three terms): so notes first, one 200-line window per unread match line.
    lines = (repo / "notes/retries.py").read_text().splitlines()
    listing = "$ rg -c -i -w -F -e backoff -e compute -e jitter\nnotes/retries.py:150\nclient/backoff.py:2"
    cost = math.ceil(len(listing) / 4)
    read, hit = set(), 1
    while hit <= len(lines):
        start, end = window(hit, len(lines))
        cost += math.ceil(len(numbered("notes/retries.py", lines, start, end)) / 4)
        read.update(range(start, end + 1))
        hit = next((n for n in range(1, len(lines) + 1, 2) if n not in read), len(lines) + 1)
    backoff = (repo / "client/backoff.py").read_text().splitlines()
    cost += math.ceil(len(numbered("client/backoff.py", backoff, 1, len(backoff))) / 4)
    assert ledger.first_gold == ledger.spent == cost
    assert ledger.calls == 1 + 2 + 1  # the listing, notes' two windows (1-200, 201-300), backoff.py


def test_blame_gives_each_line_the_commit_that_last_wrote_it(repo):
    head = git(repo, "rev-parse", "HEAD")
    assert set(blame_lines(repo, "client/timeouts.py").values()) == {head}  # commit 4 rewrote both lines
    assert set(blame_lines(repo, "client/backoff.py").values()) == {git(repo, "rev-parse", "HEAD~2")}
    assert blame_lines(repo, "no/such/file.py") == {}


def test_a_whole_run_in_a_fresh_process_compares_both_agents(repo, codii_home, tmp_path):
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "codii_sql.cli", "eval", "tokens", str(repo), "--json",
                           "--work-dir", str(tmp_path), "--budgets", "500,2000,20000"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(done.stdout)
    assert (run["queries"], run["skipped"]) == (2, 1)  # the rounding commit has no line left at HEAD
    saved = json.loads(Path(run["saved"]).read_text())
    rows = {r["query"]: r for r in saved["per_query"]}
    assert set(rows) == {"Compute the retry backoff delay with jitter", "Clamp the connection timeout between limits"}
    assert rows["Clamp the connection timeout between limits"]["gold_files"] == ["client/timeouts.py"]
    for agent in ("grep", "codii"):
        outcomes = [r[agent] for r in saved["per_query"]]
        assert run["agents"][agent] == summarise(outcomes, (500, 2000, 20000))
    # The search's first answer shows backoff_delay: found with the search_code output alone.
    codii = rows["Compute the retry backoff delay with jitter"]["codii"]
    assert codii["first_gold"] == codii["tokens"] and codii["calls"] == 1 and codii["tokens"] <= 2000 + 200
    assert rows["Compute the retry backoff delay with jitter"]["grep"]["first_gold"] > codii["first_gold"]
    bad = subprocess.run([sys.executable, "-m", "codii_sql.cli", "eval", "tokens", str(repo), "--budgets", "5k"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "--budgets '5k'" in bad.stderr and "Traceback" not in bad.stderr
