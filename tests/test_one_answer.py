"""One answer for every face: the CLI (its own process), the MCP server (a real client over stdio) and
the HTTP server (a real process on 127.0.0.1) answer one request with the same answer, field by field,
and every text listing numbers each line as the file on disk has it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support import servers
from support.clients import GARDEN, PY_CLIENT, TS_CLIENT
from support.providers import Server
from support.trees import REPO_ROOT, write_tree

from codii_sql.mcp.app import DEFAULT_MAX_TOKENS

pytestmark = pytest.mark.slow

#: What differs between faces by design: the time taken, and the hints' words (each face names its
#: own command, tool or parameter); ``notes`` (the note kinds) stay compared.
FACE_OWN = ("seconds", "note")


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    """``codii-sql ARGS`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "codii_sql.cli", *map(str, args)], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A Python client, a TypeScript client and a garden controller, built with the bundled model in a
    home of their own, as workspace ``team``; a fourth codebase built through an Ollama-compatible
    server that is then stopped, as workspace ``down``; an HTTP server over both workspaces."""
    base = tmp_path_factory.mktemp("one-answer")
    env = {**os.environ, "CODII_SQL_HOME": str(base / "home"), "CODII_SQL_BACKGROUND": "0",
           "CODII_SQL_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    env = {k: v for k, v in env.items() if not k.upper().startswith("WORKSPACE_")}
    repos = {name: write_tree(base / name, files).resolve()
             for name, files in (("py", PY_CLIENT), ("ts", TS_CLIENT), ("garden", GARDEN))}
    for repo in repos.values():
        assert cli(env, "build", repo).returncode == 0
    provider = Server()
    env.update(provider.env)
    repos["prov"] = write_tree(base / "prov", PY_CLIENT).resolve()
    built = cli(env, "build", repos["prov"], "--embedder", "ollama:nomic-embed-text")
    provider.stop()  # from here on every face finds the embedding server down
    assert built.returncode == 0, built.stderr
    assert cli(env, "workspace", "add", "team", repos["py"], repos["ts"], repos["garden"]).returncode == 0
    assert cli(env, "workspace", "add", "down", repos["prov"]).returncode == 0
    port = servers.free_port()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        http = servers.start(["--workspace", "team", "--workspace", "down"], port)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield {"env": env, "repos": repos, "url": f"http://127.0.0.1:{port}"}
    servers.stop(http)


def ask_all(world: dict, query: str, *, path: Path | None = None, workspace: str | None = None, limit: int = 5,
            max_tokens: int | None = None) -> dict:
    """The same request through each face: ``{"cli", "mcp", "http"}`` JSON answers, and their text
    listings ``{"cli_text", "mcp_text"}`` (plus the MCP summary). Without ``max_tokens`` every face gets
    the MCP server's default budget, which an agent's request has when it names none."""
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS
    where = ["--path", path] if path else ["--workspace", workspace]
    budget = ["--max-tokens", max_tokens] if max_tokens else []
    common = ["search", query, *where, "--limit", limit, *budget]
    out = {}
    done = cli(world["env"], *common, "--json")
    assert done.returncode == 0, done.stderr
    out["cli"] = json.loads(done.stdout)
    text = cli(world["env"], *common)
    assert text.returncode == 0, text.stderr
    out["cli_text"], out["cli_stderr"] = text.stdout, text.stderr
    args = {"query": query, "limit": limit, **({"path": str(path)} if path else {"workspace": workspace}),
            **({"max_tokens": max_tokens} if max_tokens else {})}
    out["mcp"], out["mcp_summary"], out["mcp_text"] = asyncio.run(_mcp(world["env"], args))
    params = {"q": query, "limit": limit, **({"codebase": str(path)} if path else {"workspace": workspace}),
              **({"max_tokens": max_tokens} if max_tokens else {})}
    if path:  # the codebase's workspace serves it
        params["workspace"] = next(name for name, members in (("team", ("py", "ts", "garden")), ("down", ("prov",)))
                                   if path.name in members)
    got = httpx.get(f"{world['url']}/search", params=params, timeout=120)
    assert got.status_code == 200, got.text
    out["http"] = got.json()
    return out


async def _mcp(env: dict, args: dict) -> tuple[dict, str, str]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "codii_sql.mcp", "--no-watch"],
                                   cwd=str(REPO_ROOT), env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        res = await session.call_tool("search_code", args)
        assert not res.is_error, res.content[0].text
        return res.structured_content, res.content[0].text, res.content[1].text if len(res.content) > 1 else ""


def assert_same(answers: dict) -> None:
    """The CLI's, the MCP server's and the HTTP server's answers are equal but for :data:`FACE_OWN`."""
    cli_, mcp_, http_ = ({k: v for k, v in answers[face].items() if k not in FACE_OWN}
                         for face in ("cli", "mcp", "http"))
    assert cli_ == mcp_, _diff(cli_, mcp_)
    assert cli_ == http_, _diff(cli_, http_)
    notes = [bool(answers[face].get("note")) for face in ("cli", "mcp", "http")]
    assert len(set(notes)) == 1, notes


def _diff(a: dict, b: dict) -> str:
    return "; ".join(f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


_CLI_HEAD = re.compile(r"^\d+\. (.+):(\d+)-(\d+)  ")
_CLI_LINE = re.compile(r"^  +(\d+)  (.*)$")
_MCP_HEAD = re.compile(r"^\d+\. (.+):(\d+)-(\d+) ")
_MCP_LINE = re.compile(r"^ *(\d+)\t(.*)$")


def numbered_as_on_disk(text: str, head: re.Pattern, line: re.Pattern, root_of) -> int:
    """Every numbered line of a listing equals that line of its file; returns how many were checked."""
    checked, lines = 0, None
    for row in text.splitlines():
        if m := head.match(row):
            lines = root_of(m.group(1)).read_text(encoding="utf-8").split("\n")
            span = range(int(m.group(2)), int(m.group(3)) + 1)
        elif (m := line.match(row)) and lines is not None:
            n = int(m.group(1))
            assert n in span and lines[n - 1] == m.group(2), (row, n, lines[n - 1])
            checked += 1
    return checked


def check_listings(answers: dict, root: Path | None = None) -> None:
    def file_of(shown: str) -> Path:
        return root / shown if root is not None else Path(shown)

    assert numbered_as_on_disk(answers["cli_text"], _CLI_HEAD, _CLI_LINE, file_of) > 0
    assert numbered_as_on_disk(answers["mcp_text"], _MCP_HEAD, _MCP_LINE, file_of) > 0


@pytest.mark.parametrize("max_tokens", [None, 600])
def test_one_codebase_answers_alike_on_every_face(world, max_tokens):
    ts = world["repos"]["ts"]
    answers = ask_all(world, "how is the Retry-After header parsed", path=ts, limit=3, max_tokens=max_tokens)
    assert_same(answers)
    got = answers["cli"]
    assert got["codebase"] == str(ts) and got["results"][0]["symbol"] == "parseRetryAfter"
    [member] = got["codebases"]
    assert (member["codebase"], member["status"], member["results"]) == (str(ts), "searched", len(got["results"]))
    assert member["match"] > 0.2 and member["model_id"]
    if max_tokens:
        assert got["budget"]["max_tokens"] == 600 and "budget" in got["notes"]
        assert "--max-tokens" in answers["cli"]["note"] and "get_content" in answers["mcp"]["note"]
    check_listings(answers, ts)


@pytest.mark.parametrize("max_tokens", [None, 900])
def test_a_workspace_answers_alike_with_its_members_states(world, max_tokens):
    answers = ask_all(world, "retry a failed request with exponential backoff", workspace="team", limit=5,
                      max_tokens=max_tokens)
    assert_same(answers)
    got = answers["cli"]
    assert got["workspace"] == "team" and "no_good_match" in got and got["best_cosine"] > 0.33
    assert {m["codebase"] for m in got["codebases"]} == {str(world["repos"][n]) for n in ("py", "ts", "garden")}
    assert {r["codebase"] for r in got["results"]} <= {str(world["repos"]["py"]), str(world["repos"]["ts"])}
    check_listings(answers)


def test_a_member_left_out_is_named_with_how_to_search_it(world):
    garden = world["repos"]["garden"]
    answers = assert_pruned = ask_all(world, "parse the Retry-After header of a response", workspace="team", limit=2)
    assert_same(assert_pruned)
    states = {m["codebase"]: m for m in answers["cli"]["codebases"]}
    assert states[str(garden)]["status"] == "pruned" and states[str(garden)]["probe"] < 0.3
    assert "pruned" in answers["cli"]["notes"]
    assert f"{garden} was left out" in answers["cli_stderr"] and f"--path {garden}" in answers["cli_stderr"]
    assert f"search_code with path='{garden}'" in answers["mcp_summary"]
    # Left out without loss: asking it alone gives nothing that would enter these two.
    alone = json.loads(cli(world["env"], "search", "parse the Retry-After header of a response", "--path", garden,
                           "--json").stdout)
    assert alone["no_good_match"]


def test_an_unrelated_query_says_no_good_match_over_a_workspace(world):
    answers = ask_all(world, "chocolate cake recipe with buttercream frosting", workspace="team", limit=3)
    assert_same(answers)
    assert answers["cli"]["no_good_match"] and "no_good_match" in answers["cli"]["notes"]
    assert "no good match" in answers["cli_stderr"] and "no good match" in answers["mcp_summary"]
    assert "may not be in these codebases" in answers["cli"]["note"]  # a workspace is not "this codebase"
    # No result at all says why too (an empty answer said nothing on any face, a new user).
    empty = json.loads(cli(world["env"], "search", "zzqxflib", "--path", world["repos"]["py"], "--mode", "bm25",
                           "--json").stdout)
    assert empty["results"] == [] and empty["no_good_match"] and empty["notes"] == ["no_good_match"]
    assert "no match: no chunk holds a word of the query" in empty["note"]
    # Under a filter that keeps nothing of the words, the filter is named, not the query (a --grep that matched
    # nothing was blamed on the query, a new user).
    kept_out = json.loads(cli(world["env"], "search", "retry", "--path", world["repos"]["py"], "--mode", "bm25",
                              "--grep", "ZZQQXX_NOPE", "--json").stdout)
    assert kept_out["results"] == [] and "no chunk the filters keep" in kept_out["note"]


def test_the_embedding_server_down_answers_from_bm25_in_every_fresh_process(world):
    prov = world["repos"]["prov"]
    answers = ask_all(world, "parse_retry_after", path=prov, limit=3)
    assert_same(answers)
    got = answers["cli"]
    assert got["results"][0]["symbol"] == "parse_retry_after" and got["notes"] == ["embedder"]
    assert "did not answer" in got["note"] and "BM25" in got["note"]
    check_listings(answers, prov)
    over = ask_all(world, "retry with backoff", workspace="down", limit=3)
    assert_same(over)
    assert over["cli"]["results"] and "embedder" in over["cli"]["notes"]
    # Beside a member of the bundled model, the note names the member whose results are BM25 only.
    py = world["repos"]["py"]
    mixed = json.loads(cli(world["env"], "search", "retry with backoff", "--path", prov, "--path", py, "--json").stdout)
    assert f"the results of {prov} are BM25 results only" in mixed["note"] and "these are BM25" not in mixed["note"]
    assert any(r["knn_rank"] for r in mixed["results"] if r["codebase"] == str(py))


def test_a_team_server_is_a_shard_of_another_search(world):
    """A search names the HTTP server as it names a folder: its answer merges with local ones."""
    url, py, garden = world["url"], world["repos"]["py"], world["repos"]["garden"]
    query = "retry a failed request with exponential backoff"
    direct = httpx.get(f"{url}/search", params={"q": query, "limit": 4, "workspace": "team"}, timeout=120).json()
    through = json.loads(cli(world["env"], "search", query, "--path", f"{url}?workspace=team", "--limit", 4,
                             "--json").stdout)
    assert [(r["id"], r["score"]) for r in through["results"]] == [(r["id"], r["score"]) for r in direct["results"]]
    host = url.removeprefix("http://")
    assert [r["codebase"] for r in through["results"]] == [f"{host}:{r['codebase']}" for r in direct["results"]]
    local = write_tree(world["repos"]["py"].parent / "local", {"cache.py": (
        "def evict_least_recently_used(entries, limit):\n"
        "    \"\"\"Drop the least recently used cache entries beyond the limit.\"\"\"\n"
        "    return sorted(entries, key=lambda e: e.used_at)[-limit:]\n")}).resolve()
    assert cli(world["env"], "build", local).returncode == 0
    mixed = cli(world["env"], "search", "evict the least recently used cache entries", "--path",
                f"{url}?workspace=team", "--path", local, "--limit", 3, "--json")
    assert mixed.returncode == 0, mixed.stderr
    got = json.loads(mixed.stdout)
    assert got["results"][0]["codebase"] == str(local) and got["results"][0]["symbol"] == "evict_least_recently_used"
    assert any(r["codebase"].startswith(f"{host}:/") for r in got["results"])
    states = {m["codebase"]: m["status"] for m in got["codebases"]}
    assert states == {f"{url}?workspace=team": "searched", str(local): "searched"}
    gone = cli(world["env"], "search", "retry", "--path", f"http://127.0.0.1:{servers.free_port()}", "--path", py,
               "--json")
    assert gone.returncode == 0, gone.stderr
    answer = json.loads(gone.stdout)
    assert answer["results"] and "did not answer" in answer["note"]
    assert [m["status"] for m in answer["codebases"]] == ["searched", "failed"]


def test_an_answer_lists_members_while_their_roots_fit_an_agents_share():
    """60 members under an 820-character root made a workspace answer 41k tokens at max_tokens 8000 (a new user)."""
    from codii_sql.search.answer import LISTED_MEMBER_CHARS, Member, first_members

    members = [Member("/" + "q" * 820 + f"/m{i}", "searched", results=i % 2) for i in range(60)]
    shown, others = first_members(members, 50)
    assert sum(len(m.codebase) for m in shown) <= LISTED_MEMBER_CHARS and len(shown) == 19
    assert all(m.results for m in shown) and sum(others.values()) == 60 - len(shown)
    assert first_members(members[:3], 50) == (members[:3], {})
