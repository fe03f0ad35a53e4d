"""A long grep's forked child: the same answer as one process, whatever the child does, in a real CLI process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from codii_sql.processes import cpus
from codii_sql.search.grep import GrepLine
from codii_sql.service import grep_split

RG = shutil.which("rg")
ROWS = [{"path": f"f{i:03}.txt", "size": 100} for i in range(300)]


def verified(row: dict, fail_in_child=None) -> tuple:
    """A stand-in for reading and matching a file: row i has i % 4 lines (a count of 0 or 1 for the odd)."""
    i = int(row["path"][1:4])
    time.sleep(0.002)  # long enough that the child, once forked, takes its part
    if fail_in_child is not None and os.getpid() != PARENT and i == fail_in_child[0]:
        fail_in_child[1]()
    if i % 7 == 3:
        return None, [], []  # unreadable
    return b"", [], [GrepLine(n, f"{row['path']} line {n}", [(0, 4)]) for n in range(1, i % 4 + 1)]


PARENT = os.getpid()


def answers(helper) -> list:
    return [(row["path"], text, [(g.line, g.text, g.spans) for g in matched]) for row, text, _, matched in helper]


def split(verify) -> list:
    helper = grep_split.Helper(verify, ROWS, keep_text=False)
    try:
        got = answers(helper.results())
    finally:
        helper.stop()
    assert helper._ends[0] < 250, "the child took no part"  # where the two met: the child verified the rest
    return got


ONE_PROCESS = [(row["path"], text, [(g.line, g.text, g.spans) for g in matched])
               for row in ROWS for text, _, matched in [verified(row)]]


def test_the_child_and_parent_meet_and_answer_in_order_as_one_process():
    assert split(verified) == ONE_PROCESS


@pytest.mark.parametrize("failure", ["raises", "dies"])
def test_a_child_that_fails_or_dies_leaves_its_rows_to_the_parent(failure):
    def fail():
        if failure == "raises":
            raise MemoryError("child out of memory")
        os._exit(9)  # killed mid-way: its spool may end mid-batch

    assert split(lambda row: verified(row, (200, fail))) == ONE_PROCESS


def test_a_consumer_that_stops_early_ends_the_child():
    helper = grep_split.Helper(verified, ROWS, keep_text=False)
    first = next(helper.results())
    helper.stop()
    assert first[0]["path"] == "f000.txt" and helper._process.exitcode is not None


def in_order(verify, threads: int, monkeypatch, processes: int | None = None, idle: bool = True) -> tuple[list, int]:
    monkeypatch.setattr(grep_split.threading, "active_count", lambda: threads)
    monkeypatch.setattr(grep_split, "_idle_cpu", lambda: idle)
    forks = []
    got = [(row["path"], text, [(g.line, g.text, g.spans) for g in matched])
           for row, text, _, matched in grep_split.verified(verify, ROWS, False, lambda: forks.append(1), processes)]
    return got, len(forks)


@pytest.mark.skipif(len(cpus()) < 2, reason="needs two CPUs")
def test_a_child_is_forked_only_when_it_saves_time_a_cpu_is_free_and_no_thread_runs(monkeypatch):
    assert in_order(verified, 1, monkeypatch) == (ONE_PROCESS, 1)  # ~0.6 s of work, few lines: worth a child
    assert in_order(verified, 2, monkeypatch) == (ONE_PROCESS, 0)  # a server's threads: never
    assert in_order(verified, 1, monkeypatch, idle=False) == (ONE_PROCESS, 0)  # every CPU busy
    assert in_order(verified, 1, monkeypatch, processes=2, idle=False) == (ONE_PROCESS, 1)  # -j 2: whatever the load
    assert in_order(verified, 1, monkeypatch, processes=1) == (ONE_PROCESS, 0)  # -j 1
    quick = [(row["path"], b"", []) for row in ROWS]
    assert in_order(lambda row: (b"", [], []), 1, monkeypatch) == (quick, 0)  # done before a first look


def test_the_lines_a_split_would_carry_can_outweigh_the_work_it_shares():
    """Half of 300 ms left is saved; 100k lines left cost more than that (Django's `self` lost 10-45%)."""
    assert grep_split._gain(0.03, 10, 110, lines=100) > 0.1
    assert grep_split._gain(0.03, 10, 110, lines=10_000) < 0


@pytest.mark.skipif(RG is None or len(cpus()) < 2, reason="needs the rg binary and two CPUs")
def test_a_long_cli_grep_with_two_processes_prints_what_rg_prints(tmp_path, codii_home):
    """The real process boundary: a long CLI grep with -j 2 uses two processes and prints what rg prints (which
    takes -j too), for lines, counts, context, inverted and only-matching answers."""
    root = tmp_path / "repo"
    root.mkdir()
    filler = "".join(f"    value_{n} = compute(value_{n - 1})  # plain filler\n" for n in range(1, 600))
    for i in range(320):
        hits = "".join(f"    needle_{i}_{n}()\n" for n in range(i % 5))  # later files hold more lines
        (root / f"m{i:03}.py").write_text(f"def f{i}():\n{hits}{filler}    return needle\n")
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
    cli = [sys.executable, "-m", "codii_sql.cli"]
    assert subprocess.run([*cli, "build", str(root), "--no-vectors"], env=env, capture_output=True).returncode == 0

    slow = "\\w+_599 = \\w+\\(\\w+_598\\)"  # ~0.9 s of matching here (a word tried at every letter), a line a file
    summary = subprocess.run([*cli, "grep", "--no-update", "--json", "-j", "2", slow], cwd=root, env=env,
                             capture_output=True, text=True)
    codii = json.loads(summary.stdout.splitlines()[-1])["data"]["codii"]
    assert codii["processes"] == 2 and codii["files_read"] == 320, codii
    theirs = subprocess.run([RG, "--no-config", "--json", "--sort", "path", slow], cwd=root, capture_output=True,
                            text=True)
    offsets = [[(e["data"]["line_number"], e["data"]["absolute_offset"]) for e in map(json.loads, out.splitlines())
                if e["type"] == "match"] for out in (summary.stdout, theirs.stdout)]
    assert offsets[0] == offsets[1] and len(offsets[0]) == 320  # the child's files keep their offsets
    for args in ([slow], ["-c", "needle_"], ["-C", "1", slow], ["-v", "-c", slow], ["-o", "value_\\d+9 "]):
        args = ["-j", "2", *args]
        ours = subprocess.run([*cli, "grep", "--no-update", *args], cwd=root, env=env, capture_output=True, text=True)
        theirs = subprocess.run([RG, "--no-config", "-n", "--no-heading", "--sort", "path", *args], cwd=root,
                                capture_output=True, text=True)
        assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout), args
        assert ours.stderr == "", ours.stderr
