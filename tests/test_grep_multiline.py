"""Multiline grep (rg's -U): matches across lines, on the CLI as rg 13 prints them, and over MCP and HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support import servers
from support.trees import REPO_ROOT, write_tree

from codii_sql import service
from codii_sql.cli import cli

RG = shutil.which("rg")

TREE = {
    "a.py": "def f(\n    x,\n    y,\n):\n    try:\n        go()\n    except ValueError:\n        pass\n\n\n\n"
            "class K:\n    pass\n",
    "b.go": "func f() error {\n\tif err != nil {\n\t\treturn err\n\t}\n\treturn nil\n}\n",
    "c.txt": "a1\nb\na2\nb\nzz\na3\nb\n",  # two matches on adjacent lines: one block, as rg groups them
    "d.txt": "xa\nba\nbq\nzz\n",  # two matches sharing a line
    "e.txt": "héllo wörld\nnaïve\ncafé ok\nend",  # non-ASCII, and a last line no line break ends
}

#: Patterns that can match a line break (a literal one, a class or \s that takes it): the first over every flag
#: set, the others over the first three. Left out: -A or -C with -m, where rg 13 prints a context line twice.
PATTERNS = [r"a\d\nb", r"ö\w+\n\w+", r"except \w+:\n\s+pass", r"a\nb", r"\n\n\n", r",\n\)", r"\{\n\s*if",
            r"ok\nend", r"[^;{}]\n\s*\)", r"[^x]+",  # this one runs into bytes that are not UTF-8 (f.txt)
            r"[^a-z]"]  # a block of a whole file, many matches a line, non-ASCII among them (byte offsets walked)
FLAGS = [[], ["--json"], ["-c"], ["--count-matches"], ["-o"], ["-C", "1"], ["-l"], ["-m", "1"], ["--column"],
         ["--vimgrep"], ["-b"], ["-o", "-b"], ["-v"]]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _cli(root, *args, home):
    return subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", *args], cwd=root,
                          capture_output=True, text=True, errors="surrogateescape", stdin=subprocess.DEVNULL,
                          check=False, env={**os.environ, "CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)})


def _comparable(stdout: str) -> list[str]:
    """Output lines with what differs by design dropped: --json's timings and byte counts, its summary."""
    out = []
    for line in stdout.splitlines():
        if line.startswith(('{"type":"summary"', '{"data"')):
            continue
        out.append(re.sub(r'"(elapsed|bytes_printed)":(\{[^}]*\}|\d+),?', "", line))
    return out


@pytest.fixture
def tree(tmp_path, codii_home):
    root = write_tree(tmp_path / "repo", TREE)
    # Latin-1 bytes in a UTF-8 file, which rg matches nothing against: `-U '[^x]+'` printed them as U+FFFD
    (root / "f.txt").write_bytes(b"h\xc3\xa9llo,\n  w\xc3\xb6rld)\n\xe9t\xe9,\n)\n")
    assert run("build", root, "--no-vectors").exit_code == 0
    return root


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_the_cli_prints_multiline_matches_as_rg_does(tree, codii_home):
    """rg -U's lines, counts, matches alone, context, JSON events, columns and offsets, match for match: each
    match's lines, matches on touching lines one block (rg's JSON event, -m's unit), -c counting matches."""
    differ = []
    for i, pattern in enumerate(PATTERNS):
        for flags in FLAGS if i < 2 else FLAGS[:3]:
            args = ["-U", "-n", "--sort", "path", *flags, "-e", pattern]
            ours = _cli(tree, *args, home=codii_home)
            theirs = subprocess.run([RG, "--no-config", *args], cwd=tree, capture_output=True, text=True,
                                    errors="surrogateescape", stdin=subprocess.DEVNULL, check=False)
            if flags == ["-v"] and theirs.returncode == 1 and ours.returncode == 0:
                continue  # rg 13 prints no line of -U -v for some patterns (its summary counts none); checked below
            if (ours.returncode, _comparable(ours.stdout)) != (theirs.returncode, _comparable(theirs.stdout)):
                differ.append((pattern, flags, ours.returncode, ours.stdout, ours.stderr, theirs.stdout))
    assert not differ, differ[:3]
    # the facts behind it, rg aside: three matches on c.txt; the first two, on adjacent lines, one block
    count = _cli(tree, "-U", "-c", r"a\d\nb", "c.txt", home=codii_home)
    assert count.stdout == "3\n"
    first = _cli(tree, "-U", "-n", "-m", "1", r"a\d\nb", "c.txt", home=codii_home)
    assert first.stdout == "1:a1\n2:b\n3:a2\n4:b\n"
    events = [json.loads(line) for line in _cli(tree, "-U", "--json", r"a\d\nb", "c.txt", home=codii_home).stdout.splitlines()]
    block = next(e["data"] for e in events if e["type"] == "match")
    assert block["lines"]["text"] == "a1\nb\na2\nb\n" and [s["match"]["text"] for s in block["submatches"]] == \
        ["a1\nb", "a2\nb"] and [(s["start"], s["end"]) for s in block["submatches"]] == [(0, 4), (5, 9)]
    # an empty match where the last one ended is none, as rg's regex finds none there (Python's finditer did: 18)
    empty = [json.loads(line) for line in _cli(tree, "-U", "--json", r"\n*", "c.txt", home=codii_home).stdout.splitlines()]
    assert [e["data"]["stats"]["matches"] for e in empty if e["type"] == "end"] == [12]
    inverted = _cli(tree, "-U", "-n", "-v", r"a\nb", "d.txt", home=codii_home)  # on from the match's last line
    assert inverted.stdout == "3:bq\n4:zz\n"


def test_a_line_break_needs_multiline_and_a_dot_needs_dotall(tree, codii_home):
    refused = _cli(tree, r"a1\nb", home=codii_home)
    assert refused.returncode == 2 and "-U" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert _cli(tree, "-U", r"a1.b", home=codii_home).returncode == 1  # `.` stays in its line
    dotall = _cli(tree, "-U", "--multiline-dotall", "-n", r"a1.b", "c.txt", home=codii_home)
    assert dotall.stdout == "1:a1\n2:b\n"
    # a -U pattern that cannot match a line break is matched line by line, as rg does
    assert _cli(tree, "-U", "-c", "b", "c.txt", home=codii_home).stdout == "3\n"


def test_max_count_keeps_a_block_whole_and_a_limit_cuts_it(tree):
    """-m counts blocks, as rg's, and never cuts one; --limit counts lines and cuts a block where it falls, its
    matches' parts kept within the lines kept (so its JSON event names none past them): a whole block of 8,997
    lines under a limit of 5 was a new user's 3 MB answer."""
    def grep(**options):
        found = service.grep(service.GrepRequest([r"a\d\nb"], paths=[str(tree / "c.txt")], update=False,
                                                 multiline=True, **options))
        return [(g.line, g.joined, g.block) for f in found.files for g in f.lines]

    whole = [(1, False, [(0, 4), (5, 9)]), (2, True, None), (3, True, None), (4, True, None), (6, False, [(0, 4)]),
             (7, True, None)]
    assert grep() == whole
    assert grep(max_count=1) == whole[:4] and grep(max_count=2) == whole
    assert grep(limit=1) == [(1, False, [(0, 3)])] and grep(limit=3) == [(1, False, [(0, 4), (5, 8)]), *whole[1:3]]


def _mcp_grep(home, root) -> dict:
    async def ask():
        params = StdioServerParameters(command=sys.executable, args=["-m", "codii_sql.mcp"], cwd=str(REPO_ROOT),
                                       env={"CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT),
                                            "CODII_SQL_THREADS": "1", "CODII_SQL_BACKGROUND": "0"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            res = await session.call_tool("grep_code", {"path": str(root), "pattern": r"except \w+:.\s+pass",
                                                        "multiline": True})
            assert not res.is_error, res.content[0].text
            return res.structured_content
    return asyncio.run(ask())


@pytest.mark.slow
def test_mcp_and_http_grep_across_lines_with_dot_taking_a_line_break(tree, codii_home):
    """An agent's multiline grep (Claude Code's Grep tool has `multiline`: rg -U --multiline-dotall) gives every
    line a match spans, the later ones joined, over a real MCP server and a real HTTP server alike."""
    answer = _mcp_grep(codii_home, tree)
    [f] = answer["files"]
    assert f["path"] == "a.py" and [(g["line"], g.get("joined", False)) for g in f["lines"]] == \
        [(7, False), (8, True)]
    assert f["lines"][0]["submatches"] == [[4, 22]] and f["lines"][1]["submatches"] == [[0, 12]]
    assert run("workspace", "add", "team", tree).exit_code == 0
    with servers.serving(["--workspace", "team"]) as (_, url):
        asked = {"q": r"except \w+:.\s+pass", "codebase": "repo"}
        got = httpx.get(f"{url}/grep", params={**asked, "multiline": "true"}, timeout=30).json()
        plain = httpx.get(f"{url}/grep", params=asked, timeout=30).json()
    assert got["files"] == answer["files"] and got["matched_lines"] == 2
    assert plain["files"] == []  # without it, `.` stays in its line


def test_a_limit_that_falls_inside_a_block_cuts_the_block(tree, codii_home):
    """A new user's `grep -U ... --limit 5` printed a block of 8,997 lines (HTTP: a 3 MB answer for limit=5) while
    the note said the limit kept 5. The block is cut at the limit; its JSON event holds the kept lines, and its
    matches' parts within them."""
    plain = _cli(tree, "-U", "-n", r"a\d\nb", "c.txt", "--limit", "3", home=codii_home)
    assert plain.stdout.splitlines() == ["1:a1", "2:b", "3:a2"], plain.stdout
    assert "the limit kept 3 of the 6 matching lines" in plain.stderr, plain.stderr
    events = [json.loads(line) for line in _cli(tree, "-U", "--json", r"a\d\nb", "c.txt", "--limit", "3",
                                                home=codii_home).stdout.splitlines()]
    [match] = [e["data"] for e in events if e["type"] == "match"]
    assert match["lines"]["text"] == "a1\nb\na2\n", match
    assert [(s["start"], s["end"], s["match"]["text"]) for s in match["submatches"]] == [(0, 4, "a1\nb"), (5, 8, "a2\n")]
