"""The MCP server driven over stdio by the SDK's own client, with the real model and real files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.providers import Server
from support.trees import REPO_ROOT, write_tree

from codii_sql import service
from codii_sql.codebase import Codebase
from codii_sql.storage.store import Store

pytestmark = pytest.mark.slow

TOOLS = {"index_codebase", "get_indexing_status", "search_code", "clear_index", "list_codebases",
         "find_similar_code", "get_content", "get_chunk", "list_workspaces", "get_file_outline", "find_symbol",
         "find_references", "search_history", "explain_line", "grep_code"}


@asynccontextmanager
async def server(home: Path, **env: str):
    """A fresh ``python -m codii_sql.mcp`` process (with ``env`` added) and an initialised client session."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "codii_sql.mcp"], cwd=str(REPO_ROOT),
                                   env={"CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT),
                                        "CODII_SQL_THREADS": "1", "CODII_SQL_BACKGROUND": "0", **env})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args) -> dict:
    """Call a tool that must succeed; returns its structured content."""
    res = await session.call_tool(tool, args)
    assert not res.is_error, res.content[0].text
    assert res.content[0].text and res.structured_content is not None
    return res.structured_content


async def refused(session: ClientSession, tool: str, **args) -> str:
    """Call a tool that must fail; returns the message the client sees."""
    res = await session.call_tool(tool, args)
    assert res.is_error, res.content
    return res.content[0].text


async def wait_indexed(session: ClientSession, path: Path, timeout: float = 120.0) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        st = await call(session, "get_indexing_status", path=str(path))
        assert st["status"] in ("indexing", "indexed"), (st["status"], st.get("last_error"), st)
        if st["status"] == "indexed":
            return st
        await asyncio.sleep(0.2)
    raise AssertionError(f"{path} not indexed after {timeout} s")


def consistency(root: Path) -> dict:
    """Row counts of the index's chunk, FTS5 and vec0 tables, and duplicated chunks."""
    with Store(Codebase.open(root).db_path, create=False) as store:
        one = lambda sql: next(iter(store.conn.execute(sql)))[0]  # noqa: E731
        return {"chunks": one("SELECT count(*) FROM chunks"),
                "fts": one("SELECT count(*) FROM chunks_fts_docsize"),
                "vec": one("SELECT count(*) FROM chunks_vec"),
                "duplicates": one("SELECT count(*) FROM (SELECT 1 FROM chunks GROUP BY path, start_byte, end_byte "
                                  "HAVING count(*) > 1)"),
                "files": one("SELECT count(*) FROM files")}


def assert_consistent(root: Path) -> dict:
    c = consistency(root)
    assert c["chunks"] == c["fts"] == c["vec"] > 0 and c["duplicates"] == 0, c
    return c


def generated_repo(root: Path, n_files: int, funcs_per_file: int, tag: str) -> Path:
    """Many small, distinct Python functions (distinct texts: no embedding-cache hits across tests)."""
    files = {}
    for i in range(n_files):
        body = "\n\n".join(textwrap.dedent(f'''
            def {tag}_handler_{i}_{j}(request, retries={j}):
                """Handle request kind {i}.{j} for the {tag} service, retrying {j} times."""
                total = {i} * {j} + len(request)
                return {{"kind": "{tag}-{i}-{j}", "total": total, "retries": retries}}
            ''').strip() for j in range(funcs_per_file))
        files[f"pkg{i % 4}/mod_{tag}_{i}.py"] = body + "\n"
    return write_tree(root, files)


def test_tools_list_fast_with_schemas_and_descriptions(codii_home):
    async def run():
        async with server(codii_home) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():
            assert len(t.description) > 60 and t.input_schema["type"] == "object"
        search = tools["search_code"].input_schema["properties"]
        assert search["limit"]["default"] == 10 and search["limit"]["maximum"] == 50
        assert search["mode"]["enum"] == ["hybrid", "bm25", "vector"] and search["rerank"]["default"] is False
        assert set(tools["index_codebase"].input_schema["properties"]) == {"path", "force", "customExtensions",
                                                                          "ignorePatterns", "resetFilters", "embedder", "workspace",
                                                                          "workers"}
        assert "LIMITS" in tools["index_codebase"].description

    asyncio.run(run())


def test_index_poll_search_similar_content_chunk(codii_home, sample_repo):
    root = str(sample_repo)

    async def run():
        # Watching off: this test checks what a search says about files changed since indexing.
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            msg = await refused(s, "search_code", path=root, query="retry")
            assert "not indexed" in msg and "index_codebase" in msg
            assert (await call(s, "get_indexing_status", path=root))["status"] == "not_indexed"
            assert (await call(s, "index_codebase", path=root))["status"] in ("started", "already up to date")
            st = await wait_indexed(s, sample_repo)
            assert st["percent"] == 100 and st["files"]["indexed"] == 4 and st["chunks"]["indexed"] > 4
            assert st["skipped_files"] == {"files": [], "more": 0} or "files" in st["skipped_files"]
            assert st["last_indexed_at"] and st["last_error"] is None
            assert (await call(s, "index_codebase", path=root))["status"] == "already up to date"

            res = await call(s, "search_code", path=root, query="retry with exponential backoff", limit=3)
            top = res["results"][0]
            listed = await s.call_tool("search_code", {"path": root, "query": "retry with exponential backoff",
                                                       "limit": 1})
            listing = "\n".join(c.text for c in listed.content)
            numbers = [int(m) for m in re.findall(r"(?m)^ *(\d+)\t", listing)]  # each code line's file line
            assert numbers == list(range(top["start_line"], top["end_line"] + 1)), listing
            assert (top["path"], top["symbol"]) == ("app/http.py", "retry_with_backoff")
            assert {"path", "start_line", "end_line", "score", "language", "kind", "symbol", "content",
                    "stale"} <= set(top) and len(res["results"]) <= 3
            bm25 = await call(s, "search_code", path=root, query="debounce", mode="bm25", extensionFilter=[".js"])
            assert [r["path"] for r in bm25["results"]] == ["web/util.js"]
            # The filters the CLI and HTTP take (a new user: MCP had none of these four).
            docs = await call(s, "search_code", path=root, query="retry with exponential backoff", role="docs")
            assert {r["path"] for r in docs["results"]} == {"docs/guide.md"}
            js = await call(s, "search_code", path=root, query="retry with exponential backoff", language="javascript")
            assert js["results"] and {r["language"] for r in js["results"]} == {"javascript"}
            files = await call(s, "search_code", path=root, query="retry backoff header", group_by="file", limit=10)
            assert len({r["path"] for r in files["results"]}) == len(files["results"]) > 1
            grepped = await call(s, "search_code", path=root, query="retry", grep=r"def retry_\w+\(")
            assert [(r["path"], r["symbol"]) for r in grepped["results"]] == [("app/http.py", "retry_with_backoff")]
            assert "role" in await refused(s, "search_code", path=root, query="retry", role="tests")
            sub = await call(s, "search_code", path=f"{root}/web", query="retry with exponential backoff")
            assert sub["scope"] == "web" and [r["path"] for r in sub["results"]] == ["web/util.js"]
            pasted = "retry with exponential backoff " + "x" * 60_000  # an issue pasted whole
            long = await s.call_tool("search_code", {"path": root, "query": pasted, "limit": 1})
            assert long.structured_content["query"] == pasted[:200] + "…"
            assert len(long.content[0].text) < 5_000 and "1 result for " in long.content[0].text
            rr = await call(s, "search_code", path=root, query="redirects", rerank=True, limit=2)
            assert len(rr["results"]) <= 2 and rr["rerank"]

            sim = await call(s, "find_similar_code", path=root, file="app/http.py", start_line=5, end_line=13)
            past = await refused(s, "find_similar_code", path=root, file="app/http.py", start_line=9000)
            assert "its indexed chunks end at line" in past and "index_codebase" not in past
            paths = [r["path"] for r in sim["results"]]
            assert len(paths) == len(set(paths)) > 0  # one a file; of app/http.py, none of the lines asked about
            assert all(r["end_line"] < 5 or r["start_line"] > 13 for r in sim["results"] if r["path"] == "app/http.py")

            content = await call(s, "get_content", path=root, file="app/parse.py", start_line=1, end_line=2)
            assert content["content"] == 'def parse_header(line):\n    """Split one \'Name: value\' header line."""\n'
            assert content["total_lines"] == 8
            raw = await s.call_tool("get_content", {"path": root, "file": "app/parse.py", "start_line": 2,
                                                    "end_line": 2})
            assert raw.content[1].text == '     2\t    """Split one \'Name: value\' header line."""'
            chunk = await call(s, "get_chunk", path=root, chunk_id=top["id"])
            assert chunk["content"] == top["content"] and chunk["stale"] is False

            nothing = await s.call_tool("search_code", {"path": root, "query": "bake sourdough bread with a starter"})
            assert nothing.structured_content["no_good_match"] is True and "no good match" in nothing.content[0].text
            assert (await call(s, "search_code", path=root, query="parse_header"))["no_good_match"] is False

            listed = (await call(s, "list_codebases"))["codebases"]
            assert [(c["root"], c["status"]) for c in listed] == [(root, "indexed")]

            (sample_repo / "app" / "parse.py").write_text("def parse_header(line):\n    return line\n")
            assert (await call(s, "get_indexing_status", path=root))["status"] == "stale"
            stale = await call(s, "search_code", path=root, query="parse_header", mode="bm25", limit=1)
            assert stale["results"][0]["stale"] is True
            assert (await call(s, "index_codebase", path=root))["status"] == "started"
            await wait_indexed(s, sample_repo)

            # An extension filter narrows every later search: the answer says so until reset.
            assert "not a file-name ending" in await refused(s, "index_codebase", path=root, customExtensions=["*"])
            assert (await call(s, "index_codebase", path=root, customExtensions=[".js"]))["status"] == "started"
            await wait_indexed(s, sample_repo)
            narrowed = await s.call_tool("search_code", {"path": root, "query": "parse header"})
            assert "only .js files" in narrowed.structured_content["note"] and "resetFilters" in narrowed.content[0].text
            assert (await call(s, "index_codebase", path=root, resetFilters=True))["status"] == "started"
            await wait_indexed(s, sample_repo)
            assert "note" not in await call(s, "search_code", path=root, query="parse header")

            assert (await call(s, "clear_index", path=root))["cleared"] is True
            assert (await call(s, "get_indexing_status", path=root))["status"] == "not_indexed"

    asyncio.run(run())


def test_every_escape_is_refused(codii_home, tmp_path, sample_repo):
    outside = write_tree(tmp_path / "outside", {"secret.py": "TOPSECRET = 'do not read'\n"})
    os.symlink(outside / "secret.py", sample_repo / "app" / "leak.py")
    os.symlink(outside, sample_repo / "outdir")
    write_tree(sample_repo, {".ignore": "*.env\n", "creds.env": "TOPSECRET=1\n"})
    os.mkfifo(sample_repo / "app" / "pipe.py")
    write_tree(sample_repo, {"app/blob.py": b"x = 1\n\0\0\0TOPSECRET\xff\n"})  # skipped as binary
    root = str(sample_repo)
    escapes = {
        "../outside/secret.py": "'..' is not allowed",
        "app/../../outside/secret.py": "'..' is not allowed",
        str(outside / "secret.py"): "outside the codebase root",
        "/etc/passwd": "outside the codebase root",
        "app/leak.py": "resolves outside the codebase root",
        "outdir/secret.py": "resolves outside the codebase root",
        "app/http.py\0": "NUL byte",
        "app/pipe.py": "not a regular file",
        "creds.env": "ignore rules",
    }

    async def run():
        async with server(codii_home) as s:
            msg = await refused(s, "get_content", path=root, file="app/http.py")
            assert "not indexed" in msg
            await call(s, "index_codebase", path=root)
            await wait_indexed(s, sample_repo)
            for file, reason in escapes.items():
                for tool in ("get_content", "find_similar_code"):
                    msg = await refused(s, tool, path=root, file=file)
                    assert reason in msg and "TOPSECRET" not in msg, (tool, file, msg)
            msg = await refused(s, "get_content", path=root, file="app/blob.py")
            assert "is binary" in msg and "TOPSECRET" not in msg, msg
            msg = await refused(s, "search_code", path=root, query="x", limit=51)
            assert "limit" in msg
            hits = await call(s, "search_code", path=root, query="TOPSECRET do not read", mode="bm25")
            assert all("TOPSECRET" not in r["content"] for r in hits["results"])
            # An agent cannot take back what the rules leave out (a new user read .env this way).
            for pattern in ("!creds.env", " !*.env"):
                msg = await refused(s, "index_codebase", path=root, ignorePatterns=[pattern])
                assert "negation" in msg and ".codiiignore" in msg, msg
            for pattern in ("*", "/**", "**/*"):  # nor empty the index for every later build
                assert "every file" in await refused(s, "index_codebase", path=root, ignorePatterns=["docs/", pattern])
            assert "ignore rules" in await refused(s, "get_content", path=root, file="creds.env")

    asyncio.run(run())


def test_concurrent_index_calls_make_one_build(codii_home, tmp_path):
    repo = generated_repo(tmp_path / "conc", n_files=12, funcs_per_file=4, tag="conc")

    async def run():
        async with server(codii_home) as a, server(codii_home) as b:
            answers = await asyncio.gather(*(call(s, "index_codebase", path=str(repo)) for s in (a, a, b)))
            statuses = [x["status"] for x in answers]
            # One server starts at most one build, and some build starts. The other process's
            # call either sees it running, or (on a loaded machine, when its probe or its 1 s wait
            # for the writer lock falls outside that build) runs its own update after it; the
            # writer lock keeps them from ever writing at once (checked below: a consistent index).
            assert statuses[:2].count("started") <= 1 and "started" in statuses, statuses
            assert set(statuses) <= {"started", "already indexing", "already up to date"}, statuses
            await wait_indexed(a, repo)
            # b's call may have started its own update after a's build, and its watcher's first check may hold
            # the index a moment after: b's status comes to "indexed" (one snapshot right after a's "indexed"
            # read "indexing" in a CI run on a loaded machine)
            await wait_indexed(b, repo)
        c = assert_consistent(repo)
        assert c["chunks"] == 12 * 4 and c["files"] == 12

    asyncio.run(run())


def test_a_forced_call_during_another_build_says_its_options_were_not_applied(codii_home, tmp_path):
    import filelock

    repo = write_tree(tmp_path / "busy", {"a.py": "def a():\n    return 1\n"})
    lock = filelock.FileLock(str(Codebase.open(repo).lock_path))  # another process's build

    async def run():
        async with server(codii_home) as s:
            with lock:
                res = await s.call_tool("index_codebase", {"path": str(repo), "force": True})
            assert res.structured_content["status"] == "already indexing"
            assert res.structured_content["options_applied"] is False and "not applied" in res.content[0].text

    asyncio.run(run())


def test_server_killed_mid_build_leaves_a_repairable_index(codii_home, tmp_path):
    # 150 files: the kill must land in the lexical phase (with 40 it sometimes came after it, in
    # the vector phase, which leaves an indexed index with vectors pending, not a failed one).
    repo = generated_repo(tmp_path / "killed", n_files=150, funcs_per_file=2, tag="kill")
    seen = {}

    async def run_and_kill():
        with pytest.raises(BaseException):  # the client sees its server vanish
            async with server(codii_home) as s:
                assert (await call(s, "index_codebase", path=str(repo)))["status"] == "started"
                seen.update(await call(s, "get_indexing_status", path=str(repo)))
                os.kill(seen["indexer_pid"], signal.SIGKILL)
                await call(s, "get_indexing_status", path=str(repo))

    async def recover():
        async with server(codii_home) as s:
            st = await call(s, "get_indexing_status", path=str(repo))
            assert st["status"] == "failed" and "stopped before it finished" in st["last_error"], st
            listed = (await call(s, "list_codebases"))["codebases"]
            assert [c["status"] for c in listed] == ["failed"]
            assert (await call(s, "index_codebase", path=str(repo)))["status"] == "started"
            await wait_indexed(s, repo)

    asyncio.run(run_and_kill())
    assert seen["status"] == "indexing" and seen["phase"] != "vectors", seen  # not hidden by pytest.raises
    asyncio.run(recover())
    c = assert_consistent(repo)
    assert c["chunks"] == 150 * 2 and c["files"] == 150


def test_search_during_a_first_build_does_not_blame_filters(codii_home, tmp_path):
    import filelock

    repo = write_tree(tmp_path / "first", {"a.py": "def alpha():\n    return 1\n"})
    cb = Codebase.open(repo)
    # Another process's first build before its first commit: the new file, its schema, its snapshot.
    with Store(cb.db_path) as store, store.transaction():
        store.set_meta(root=str(repo), status="indexing", phase="scan", pid=os.getpid(), started_at=time.time())

    async def run():
        # Watching off: a follower would start building the searched codebase and hold its lock.
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            with filelock.FileLock(str(cb.lock_path)):
                res = await s.call_tool("search_code", {"path": str(repo), "query": "alpha", "mode": "bm25"})
                note = res.structured_content["note"]
                assert "being indexed for the first time" in note and "get_indexing_status" in note, note
                assert "filters" not in note and res.structured_content["results"] == []
                assert "first time" in res.content[0].text
            # That build died before committing anything: filters are not blamed either.
            note = (await call(s, "search_code", path=str(repo), query="alpha", mode="bm25"))["note"]
            assert "no build of it has finished" in note and "filters" not in note, note

    asyncio.run(run())


def test_an_empty_path_is_refused_not_taken_as_the_servers_folder(codii_home):
    calls = {"get_indexing_status": {}, "search_code": {"query": "x"}, "get_content": {"file": "README.md"},
             "find_similar_code": {"file": "README.md"}, "get_chunk": {"chunk_id": 1}, "clear_index": {},
             "index_codebase": {}, "search_history": {"query": "x"}, "explain_line": {"file": "README.md", "line": 1}}

    async def run():
        async with server(codii_home) as s:
            for tool, args in calls.items():
                for empty in ("", "  "):
                    msg = await refused(s, tool, path=empty, **args)
                    assert msg.endswith(": path is empty: pass the codebase's absolute path"), (tool, msg)
                for relative in (".", "./", "src"):  # the server's folder, not the agent's
                    msg = await refused(s, tool, path=relative, **args)
                    assert msg.endswith("is relative to the server's folder, not yours: pass the codebase's "
                                        "absolute path"), (tool, msg)
        assert not (codii_home / "indexes").exists()  # nothing was indexed, not even the server's folder

    asyncio.run(run())


def test_an_agent_indexes_with_a_provider_and_still_searches_when_it_is_down(codii_home, sample_repo):
    """index_codebase(embedder=...) through a real Ollama-speaking server; with the server gone,
    search_code answers from BM25 and says why."""
    provider = Server()

    async def scenario():
        async with server(codii_home, OLLAMA_HOST=provider.url, CODII_SQL_HTTP_RETRIES="2") as s:
            root = str(sample_repo)
            started = await call(s, "index_codebase", path=root, embedder="ollama:nomic-embed-text")
            assert started["status"] == "started"
            st = await wait_indexed(s, sample_repo)
            assert st["vectors"]["state"] == "complete" and st["vectors"]["done"] == st["chunks"]["indexed"]
            found = await call(s, "search_code", path=root, query="parse a header line", mode="vector")
            assert found["results"][0]["symbol"] == "parse_header" and "note" not in found
            provider.stop()
            down = await call(s, "search_code", path=root, query="parse_header")
            assert down["results"][0]["symbol"] == "parse_header"
            assert "did not answer" in down["note"] and "BM25" in down["note"]
            refused = await refused_call(s)
            assert "holds vectors of the embedder 'ollama:nomic-embed-text'" in refused

    async def refused_call(s):
        return await refused(s, "index_codebase", path=str(sample_repo), embedder="local")

    try:
        asyncio.run(scenario())
    finally:
        provider.stop()


def test_an_agent_searches_a_workspace_from_the_servers_environment(codii_home, tmp_path, sample_repo):
    """WORKSPACE_DUO in the server's environment: index_codebase(workspace), list_workspaces, search_code(workspace)."""
    shop = write_tree(tmp_path / "shop", {"cart/checkout.js": (
        "// Compute the order total with tax and apply a discount code.\n"
        "export function checkoutTotal(items, taxRate) {\n"
        "  return items.reduce((s, i) => s + i.price, 0) * (1 + taxRate);\n}\n")})
    gone = tmp_path / "gone"

    async def scenario():
        members = f"{sample_repo},{shop},{gone}"
        async with server(codii_home, WORKSPACE_DUO=members) as s:
            started = await call(s, "index_codebase", workspace="Duo")
            assert [row["status"] for row in started["codebases"]][:2] == ["started", "started"]
            assert started["codebases"][2]["status"] == "missing" and "the folder is gone" in started["note"]
            for root in (sample_repo, shop):
                await wait_indexed(s, root)
            listed = (await call(s, "list_workspaces"))["workspaces"]
            assert [w["name"] for w in listed] == ["duo"] and listed[0]["source"] == "env"
            rows = {m["codebase"]: m for m in listed[0]["members"]}
            assert rows[str(shop)]["status"] == "indexed" and rows[str(shop)]["chunks"] >= 1
            assert rows[str(shop)]["size_bytes"] > 0 and rows[str(gone)]["status"] == "missing"
            found = await call(s, "search_code", workspace="duo", query="order total with tax")
            assert found["results"][0]["codebase"] == str(shop) and found["results"][0]["symbol"] == "checkoutTotal"
            assert {r["codebase"] for r in found["results"]} == {str(shop), str(sample_repo)}
            assert "the folder is gone" in found["note"]
            retry = await call(s, "search_code", workspace="duo", query="retry with exponential backoff")
            assert retry["results"][0]["symbol"] == "retry_with_backoff"
            assert "no workspace 'nope'" in await refused(s, "search_code", workspace="nope", query="x")

    asyncio.run(scenario())


def test_a_workspace_of_hundreds_of_gone_members_answers_within_an_agent_s_limit(codii_home, tmp_path):
    """A new user's workspace of 2 codebases and 400 gone folders made search_code answer 102k tokens at
    max_tokens 8000 (a note and a member row each) and index_codebase 106k: Claude Code refuses over 25k."""
    shop = write_tree(tmp_path / "shop", {"cart.js": "// order total with tax\nexport function total() {}\n"})
    gone = [str(tmp_path / ("very_long_folder_name_" * 5 + str(i))) for i in range(300)]

    async def scenario():
        async with server(codii_home, CODII_SQL_WATCH="0", WORKSPACE_BIG=json.dumps([str(shop), *gone])) as s:
            res = await s.call_tool("index_codebase", {"workspace": "big"})
            started = res.structured_content
            assert tokens(res) <= 20_000 and started["codebases"][0]["status"] == "started"
            assert len(started["codebases"]) == 50 and started["codebases_left_out"] == {"missing": 251}
            assert started["note"].startswith(f"300 codebases ({gone[0]}, {gone[1]}, {gone[2]} and 297 more): the "
                                              "folder is gone")
            await wait_indexed(s, shop)
            res = await s.call_tool("search_code", {"workspace": "big", "query": "order total", "limit": 50,
                                                    "max_tokens": 8000})
            found = res.structured_content
            assert tokens(res) <= 20_000 and found["results"][0]["path"] == "cart.js"
            assert found["codebases"][0] == {"codebase": str(shop), "status": "searched", "results": 1} | {
                k: v for k, v in found["codebases"][0].items() if k not in ("codebase", "status", "results")}
            assert len(found["codebases"]) == 50 and found["codebases_left_out"] == {"missing": 251}
            assert found["note"].count("the folder is gone") == 1 and "and 297 more" in found["note"]
            assert "and 291 more missing" in res.content[0].text

    asyncio.run(scenario())


def test_search_code_holds_max_tokens_in_each_view_an_agent_reads(codii_home, tmp_path):
    """The text blocks alone and the structured JSON alone each fit max_tokens: a new user's answers were
    2.5-3x a small budget (the answer's own fields and each result's keys were not counted) and 8,590 at
    8,000."""
    files = {f"svc/handler_{i}.py": "".join(
        f"def retry_request_{i}_{j}(session, attempts={j}):\n    \"\"\"Retry the request with backoff.\"\"\"\n"
        f"    for n in range(attempts):\n        session.retry(n, backoff={j})\n    return session\n\n\n"
        for j in range(15)) for i in range(12)}
    repo = write_tree(tmp_path / "budget", files)

    def counted(text: str) -> int:
        return len(text) // 4 + sum(1 for ch in text if ord(ch) > 127)

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo, timeout=600)
            for budget in (600, 1000, 3000, 8000):
                res = await s.call_tool("search_code", {"path": str(repo), "query": "retry the request with backoff",
                                                        "limit": 50, "mode": "bm25", "max_tokens": budget})
                assert not res.is_error
                text = counted("".join(block.text for block in res.content))
                data = counted(json.dumps(res.structured_content, ensure_ascii=False))
                lines = counted("".join(r["content"] for r in res.structured_content["results"]))
                assert text <= budget and data <= budget, (budget, text, data, lines)
                assert res.structured_content["budget"]["used_tokens"] <= budget
                assert text + data >= budget // 2  # the budget is used, not wasted
                assert res.structured_content["results"][0]["path"].startswith("svc/handler_")

    asyncio.run(run())


def test_clear_index_finds_the_index_of_a_deleted_folder(codii_home, tmp_path):
    import shutil

    repo = write_tree(tmp_path / "doomed", {"a.py": "def a():\n    return 1\n"})

    async def run():
        async with server(codii_home) as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            db = Codebase.open(repo).db_path
            shutil.rmtree(repo)
            assert (await call(s, "clear_index", path=str(repo)))["cleared"] is True
            assert not db.exists()

    asyncio.run(run())


def test_out_of_range_and_mistyped_arguments_get_one_line_messages(codii_home, sample_repo):
    """2**63 overflowed SQLite's binding inside the tool: the agent saw a bare 'Error executing tool'."""
    cases = {("get_chunk", "chunk_id", 2**63): "chunk_id should be less than or equal to 9223372036854775807",
             ("get_content", "start_line", 2**64): "start_line should be less than or equal to",
             ("find_similar_code", "end_line", 2**63): "end_line should be less than or equal to",
             ("search_code", "limit", -1): "limit should be greater than or equal to 1 (got -1)",
             ("search_code", "query", 5): "query should be a valid string (got 5)",
             ("get_chunk", "chunk_id", "abc"): "chunk_id should be a valid integer"}
    given = {"get_content": {"file": "app/http.py"}, "find_similar_code": {"file": "app/http.py", "start_line": 1},
             "search_code": {"query": "retry"}, "get_chunk": {}}

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(sample_repo))
            await wait_indexed(s, sample_repo)
            for (tool, arg, value), expected in cases.items():
                msg = await refused(s, tool, path=str(sample_repo), **{**given[tool], arg: value})
                assert msg.startswith(f"{tool}: ") and expected in msg and "\n" not in msg, msg
                assert msg.endswith("fix the arguments as the tool's input schema says"), msg
            msg = await refused(s, "search_code", path=str(sample_repo))
            assert msg == "search_code: query is required: fix the arguments as the tool's input schema says", msg
            biggest = await refused(s, "get_chunk", path=str(sample_repo), chunk_id=2**63 - 1)
            assert "no chunk 9223372036854775807 in the index" in biggest, biggest
            # A new user's misspelled filters were dropped without a word, the results unfiltered.
            misspelled = await refused(s, "search_code", path=str(sample_repo), query="retry", pathglob="app/*")
            assert misspelled.startswith("search_code: unknown argument 'pathglob' (did you mean pathGlob?); it "
                                         "takes query, path,"), misspelled
            case = await refused(s, "grep_code", path=str(sample_repo), pattern="retry", ignoreCase=True)
            assert "unknown argument 'ignoreCase' (did you mean ignore_case?)" in case, case
            # Names agents bring from elsewhere (HTTP's /grep glob, a symbol for find_symbol's name).
            for tool, args, meant in (("grep_code", {"pattern": "retry", "glob": "*.py"}, "pathGlob"),
                                      ("find_symbol", {"symbol": "retry"}, "name"),
                                      ("get_content", {"file_path": "app/http.py"}, "file")):
                said = await refused(s, tool, path=str(sample_repo), **args)
                assert f"(did you mean {meant}?)" in said, said

    asyncio.run(run())


def tokens(res) -> int:
    """An answer's tokens as the client receives it: its text blocks and its structured JSON, 4 characters each."""
    text = sum(len(block.text) for block in res.content)
    return (text + len(json.dumps(res.structured_content or {}))) // 4


def strict_tokens(res) -> int:
    """An answer's tokens counted as a tokenizer sees text an estimate of characters / 4 misses: a
    character outside ASCII a token (CJK), a JSON-escaped control character three."""
    text = "".join(block.text for block in res.content) + json.dumps(res.structured_content or {}, ensure_ascii=False)
    wide = sum(1 for ch in text if ord(ch) > 127)
    escapes = len(re.findall(r"\\u00[01][0-9a-f]", text))
    return (len(text) - wide - 6 * escapes) // 4 + wide + 3 * escapes


def test_cjk_and_control_characters_count_against_the_budget(codii_home, tmp_path):
    """A new user's files of CJK strings and of terminal escapes made get_content answer 38k-47k tokens
    at max_tokens 8000: every character counted a quarter of a token."""
    cjk = "".join(f'MESSAGES_{i} = "{"获取用户名称并检查权限" * 20}"\n' for i in range(300))
    ctl = "".join(f"line {i}: " + "\x1b[31m\x01\x02" * 40 + "\n" for i in range(300))
    repo = write_tree(tmp_path / "odd", {"messages.py": cjk, "colours.txt": ctl})

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo, timeout=600)
            for tool, args in (("get_content", {"file": "messages.py"}), ("get_content", {"file": "colours.txt"}),
                               ("get_content", {"file": "messages.py", "max_tokens": 8000}),
                               ("get_content", {"file": "colours.txt", "max_tokens": 8000}),
                               ("search_code", {"query": "MESSAGES", "limit": 50, "max_tokens": 8000}),
                               ("grep_code", {"pattern": ".", "max_tokens": 8000, "limit": 2000}),
                               ("get_file_outline", {"file": "messages.py", "max_tokens": 8000})):
                res = await s.call_tool(tool, {"path": str(repo), **args})
                assert not res.is_error and strict_tokens(res) <= 20_000, (tool, args, strict_tokens(res))

    asyncio.run(run())


def test_every_default_answer_fits_an_agents_limit(codii_home, tmp_path):
    """Claude Code refuses a tool result over 25,000 tokens: a generated file of 3,000 functions, a file of
    long lines and a name used everywhere must each answer well under it by default, and say what was cut."""
    big = "".join(f"def generated_handler_{i}(request, limit={i}):\n    return route(request, 'handler-{i}', limit)\n\n\n"
                  for i in range(3000))
    wide = "".join(f"ROW_{i} = '{'x' * 900}{i}'\n" for i in range(120))
    repo = write_tree(tmp_path / "huge", {"gen/handlers.py": big, "data/rows.py": wide,
                                          "app/main.py": "from gen.handlers import route\n\n\ndef route(r, k, n):\n"
                                                         "    return (r, k, n)\n"})

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            init = await s.initialize()
            assert init.server_info.name == "codii-sql" and init.server_info.version
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo, timeout=600)
            asks = {
                "get_file_outline": {"path": str(repo), "file": "gen/handlers.py"},
                "get_content": {"path": str(repo), "file": "data/rows.py"},
                "search_code": {"path": str(repo), "query": "route the request to a handler", "limit": 50},
                "find_references": {"path": str(repo), "name": "route"},
                "grep_code": {"path": str(repo), "pattern": "route|x+", "limit": 2000, "context": 10},
                "find_symbol": {"path": str(repo), "name": "generated_handler", "prefix": True, "limit": 100},
                "find_similar_code": {"path": str(repo), "file": "app/main.py", "limit": 50},
                "list_codebases": {},
            }
            for tool, args in asks.items():
                res = await s.call_tool(tool, args)
                assert not res.is_error, (tool, res.content[0].text)
                assert tokens(res) <= 20_000, (tool, tokens(res))
            # A cut answer says how many it found (a new user read "1 definition" beside a note of 22)
            cut = await s.call_tool("find_symbol", {**asks["find_symbol"], "max_tokens": 100})
            assert cut.content[0].text.startswith(f"1 of {cut.structured_content['total']:,} definitions of"), \
                cut.content[0].text
            outline = await call(s, "get_file_outline", **asks["get_file_outline"])
            shown = len(outline["symbols"])  # cut by the default max_tokens before the limit of 300
            assert outline["truncated"] and outline["total"] == 3000 and 100 < shown < 300
            more = await call(s, "get_file_outline", **asks["get_file_outline"], start_line=outline["next_start_line"])
            assert more["symbols"][0]["symbol"] == f"generated_handler_{shown}"
            content = await call(s, "get_content", **asks["get_content"])
            assert content["next_start_line"] > 1
            found = await call(s, "search_code", **asks["search_code"])
            assert found["budget"]["max_tokens"] == 6000  # the default budget of an agent's search
            grepped = await call(s, "grep_code", **asks["grep_code"])
            assert grepped["truncated"] and grepped["matched_lines"] == 3000 + 2 + 120  # every one counted, few shown
            # A match per character: each line's submatches count against the budget too (84k tokens before).
            for args in ({"pattern": "."}, {"pattern": r"\S", "context": 10},
                         {"pattern": ".", "limit": 2000, "max_tokens": 8000}):
                res = await s.call_tool("grep_code", {"path": str(repo), "pathGlob": ["data/*"], **args})
                assert not res.is_error and tokens(res) <= 20_000, (args, tokens(res))
                assert res.structured_content["truncated"] and res.structured_content["files"], args

    asyncio.run(run())


def test_an_agent_greps_exact_lines_and_gets_a_bad_pattern_as_one_line(codii_home, sample_repo):
    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(sample_repo))
            await wait_indexed(s, sample_repo)
            found = await call(s, "grep_code", path=str(sample_repo), pattern=r"def (send|parse_header)\(")
            expected = [(str(p.relative_to(sample_repo)), [n for n, line in enumerate(p.read_text().split("\n"), 1)
                                                           if re.search(r"def (send|parse_header)\(", line)])
                        for p in sorted(sample_repo.rglob("*.py"))]
            assert [(f["path"], [ln["line"] for ln in f["lines"]]) for f in found["files"]] == \
                [(path, numbers) for path, numbers in expected if numbers]
            assert found["matched_lines"] == 2
            same = service.grep(service.GrepRequest([r"def (send|parse_header)\("], paths=[str(sample_repo)], limit=100,
                                                    update=False, max_columns=300, max_tokens=6000))
            assert {k: v for k, v in found.items() if k != "seconds"} == {
                k: v for k, v in same.to_dict(lambda h: h).items() if k != "seconds"}  # one answer, every face
            literal = await call(s, "grep_code", path=str(sample_repo), pattern="(self", literal=True, context=1)
            assert literal["matched_lines"] >= 1 and any(ln.get("context") for f in literal["files"]
                                                         for ln in f["lines"])
            msg = await refused(s, "grep_code", path=str(sample_repo), pattern="(self")
            assert "grep_code: pattern '(self' is not a valid regular expression" in msg and "at position 0" in msg
            assert "\n" not in msg, msg
            # One glob as a string, as search_code takes it (an agent's first try was refused as no list).
            one = await call(s, "grep_code", path=str(sample_repo), pattern="def ", pathGlob="*/parse.py")
            assert {f["path"] for f in one["files"]} == {"app/parse.py"}
            # and search_code takes grep_code's list of one (an agent's reused argument was refused)
            listed = await call(s, "search_code", path=str(sample_repo), query="parse", mode="bm25", pathGlob=["*/parse.py"])
            assert listed["results"] and {r["path"] for r in listed["results"]} == {"app/parse.py"}
            two = await refused(s, "search_code", path=str(sample_repo), query="parse", pathGlob=["a/*", "b/*"])
            assert "pathGlob" in two and "\n" not in two, two
            # A file as the path greps it, as the CLI's PATH does (an agent was told to pass its folder)
            in_file = await call(s, "grep_code", path=str(sample_repo / "app" / "parse.py"), pattern="def ")
            assert {f["path"] for f in in_file["files"]} == {"app/parse.py"} and in_file["matched_lines"] >= 1

    asyncio.run(run())


def test_every_answer_at_the_maximum_limits_fits_an_agents_limit(codii_home, tmp_path):
    """Each tool at its largest limit and max_tokens, on hostile input (900-character lines, 6,000 definitions
    with long names under a long path, a name on every line, 250 skipped files and 90 codebases with long
    paths, one workspace of them and 90 missing folders, a chunk of 100,000 characters of one line): every answer stays under 20,000 tokens, says it was cut, and its next offset or line goes on.
    Built without vectors (find_similar_code is bounded as search_code is, above)."""
    deep = "/".join(["a_rather_long_folder_name_for_paths"] * 4)
    big = "".join(f"def handler_with_a_rather_long_generated_name_{i}(request, first_parameter=None, second={i}, "
                  f"**keywords):\n    return {i}\n" for i in range(6000))  # 0.7 MB: under the 1 MiB file cap
    wide = "".join(f'zz_{i} = zz + "{"q" * 900}"\n' for i in range(600))
    files = {f"{deep}/big.py": big, f"{deep}/wide.py": wide, "zz.py": "def zz():\n    return 1\n",
             "one_line.py": f'x = 1\nlong_value = "{"q" * 200_000}"\nz = 2\n',
             # the largest chunks a codebase may ask for: pieces of 100,000 characters of that line
             ".codii.yaml": "max_chunk_size: 100000\n"}
    files.update({f"{deep}/blobs/a_binary_file_with_a_long_name_{i:04}.dat": b"x\0" * 10 for i in range(250)})  # binary: skipped
    repo = write_tree(tmp_path / "hostile", files)
    service.build(service.open_codebase(repo), vectors=False)
    members = [str(repo)]
    for i in range(90):
        small = write_tree(tmp_path / ("another_codebase_with_a_long_folder_name_" * 3 + str(i)), {"m.py": "x = 1\n"})
        service.build(service.open_codebase(small), vectors=False)
        members += [str(small), str(tmp_path / f"a_member_folder_that_is_not_there_with_a_long_name_{i}")]
    root = str(repo)
    asks = {
        "get_file_outline": {"path": root, "file": f"{deep}/big.py", "limit": 1000, "max_tokens": 8000},
        "find_references": {"path": root, "name": "zz", "limit": 500, "max_tokens": 8000},
        "find_symbol": {"path": root, "name": "handler_with", "prefix": True, "limit": 100, "max_tokens": 8000},
        "list_codebases": {"limit": 1000, "max_tokens": 8000},
        "get_indexing_status": {"path": root, "max_tokens": 8000},
        "get_content": {"path": root, "file": f"{deep}/wide.py", "max_tokens": 8000},
        "search_code": {"path": root, "query": "zz handler request", "limit": 50, "max_tokens": 8000, "mode": "bm25"},
        "list_workspaces": {"max_tokens": 8000},
    }

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0", WORKSPACE_EVERYTHING=json.dumps(members)) as s:
            answers = {}
            for tool, args in asks.items():
                res = await s.call_tool(tool, args)
                assert not res.is_error, (tool, res.content[0].text)
                assert tokens(res) <= 20_000, (tool, tokens(res))
                answers[tool] = res.structured_content
            for query, glob in (("zz", "*wide.py"), ("long_value", "one_line.py")):
                chunk = (await call(s, "search_code", path=root, query=query, mode="bm25", pathGlob=glob))["results"][0]
                res = await s.call_tool("get_chunk", {"path": root, "chunk_id": chunk["id"], "max_tokens": 8000})
                assert tokens(res) <= 20_000, ("get_chunk", glob, tokens(res))
            assert res.structured_content["truncated"] and res.structured_content["next_start_line"] == 3  # the window holds line 2 alone
            outline, refs, defs, listed, status = (answers[t] for t in ("get_file_outline", "find_references",
                                                                        "find_symbol", "list_codebases",
                                                                        "get_indexing_status"))
            assert outline["truncated"] and outline["total"] == 6000 and len(outline["symbols"]) < 1000
            more = await call(s, "get_file_outline", **{**asks["get_file_outline"], "start_line": outline["next_start_line"]})
            assert more["symbols"][0]["start_line"] == outline["next_start_line"]
            shown = sum(len(f["lines"]) for f in refs["files"])
            assert refs["truncated"] and refs["total"] == 600 and shown < 500 and refs["next_offset"] == shown
            rest = await call(s, "find_references", **{**asks["find_references"], "offset": refs["next_offset"]})
            assert rest["files"][0]["lines"][0]["line"] == refs["files"][-1]["lines"][-1]["line"] + 1
            assert defs["truncated"] and defs["total"] == 6000 and defs["next_offset"] == len(defs["definitions"]) < 100
            assert listed["truncated"] and listed["total"] == 91 and listed["next_offset"] == len(listed["codebases"])
            skipped = status["skipped_files"]
            assert len(skipped["files"]) + skipped["more"] == 250 and skipped["more"] > 0 and "left out" in status["note"]
            everything = answers["list_workspaces"]["workspaces"][0]
            assert everything["more_members"] > 0 and len(everything["members"]) + everything["more_members"] == 181

    asyncio.run(run())


def test_a_file_name_or_line_cannot_forge_or_colour_an_agents_text(codii_home, tmp_path):
    """A new user's file named `new\\nline.py` split the grep text into a forged `line.py:1:...` hit, and a
    line's escape sequences reached the client raw; the JSON was exact, the text must be too."""
    repo = write_tree(tmp_path / "ctl", {"new\nline.py": "nlname_marker = 1\n",
                                         "ctrl.txt": "esc \x1b[31mred nlname_marker\x07\n"})

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            for tool, args in (("grep_code", {"pattern": "nlname_marker"}),
                               ("search_code", {"query": "nlname_marker", "mode": "bm25"}),
                               ("find_references", {"name": "nlname_marker"})):
                res = await s.call_tool(tool, {"path": str(repo), **args})
                text = "\n".join(block.text for block in res.content)
                assert not res.is_error and "\x1b" not in text and "\x07" not in text, (tool, text)
                assert not any(line.startswith("line.py") for line in text.splitlines()), (tool, text)
                assert "\\x1b[31mred" in text, (tool, text)
                if tool != "find_references":  # there `nlname_marker = 1` is its definition, no use
                    assert "new\\nline.py" in text, (tool, text)

    asyncio.run(run())


def test_a_refused_build_no_longer_stands_for_the_index_once_it_is_found_current(codii_home, tmp_path):
    """A new user's index_codebase(embedder="ollama:nothing") was refused (right), and then get_indexing_status
    said "failed" for the rest of the session, even after index_codebase answered "already up to date".
    Another's refused index_codebase (another embedder, no force) read as "failed" at once: an agent then
    forced a full rebuild. A refusal before any work leaves the index's own state."""
    from codii_sql.errors import BuildFailedError
    from codii_sql.service import Session

    repo = write_tree(tmp_path / "ok", {"a.py": "def f():\n    return 1\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    session = Session()
    try:
        with pytest.raises(BuildFailedError):
            session.index(cb, force=False, extensions=[], ignore_patterns=[], reset_filters=False,
                          embedder="ollama:nothing-here")
        assert session.indexing_status(cb)["status"] == "indexed"
        data, _ = session.index(cb, force=False, extensions=[], ignore_patterns=[], reset_filters=False)
        assert data["status"] == "already up to date"
        assert session.indexing_status(cb)["status"] == "indexed"
    finally:
        session.shutdown()


def test_an_agent_asks_symbols_and_uses_from_a_subfolder(codii_home, tmp_path):
    """A new user's find_symbol(path=<repo>/tests) was refused ("pass path=<repo>") where the CLI keeps to
    the subfolder's files."""
    repo = write_tree(tmp_path / "mono", {
        "pkg/a/core.py": "def helper(x):\n    return x\n\n\ndef use_a():\n    return helper(1)\n",
        "pkg/b/core.py": "def helper(x):\n    return x * 2\n\n\ndef use_b():\n    return helper(2) + helper(3)\n",
    })
    service.build(service.open_codebase(repo), vectors=False)

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            sub = str(repo / "pkg" / "b")
            defs = await call(s, "find_symbol", path=sub, name="helper")
            assert [d["path"] for d in defs["definitions"]] == ["pkg/b/core.py"]
            uses = await call(s, "find_references", path=sub, name="helper")
            assert uses["total"] == 1 and [f["path"] for f in uses["files"]] == ["pkg/b/core.py"]
            whole = await call(s, "find_references", path=str(repo), name="helper")
            assert whole["total"] == 2

    asyncio.run(run())


def test_get_content_shows_a_crlf_file_without_its_line_ends_cr(codii_home, tmp_path):
    """A new user's agent read a Windows file through get_content and saw `\\r` at the end of every line,
    which it would copy into an edit; the line view drops the CR of the line end, the structured content
    keeps the exact text."""
    repo = write_tree(tmp_path / "w", {"crlf.py": "def crlf_func():\r\n    return 1\r\n"})

    async def run():
        async with server(codii_home) as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, str(repo))
            res = await s.call_tool("get_content", {"path": str(repo), "file": "crlf.py"})
            assert not res.is_error
            text = res.content[-1].text  # the summary, then the numbered lines
            assert "\\r" not in text and "\r" not in text and "     1\tdef crlf_func():\n     2\t    return 1" in text
            assert res.structured_content["content"] == "def crlf_func():\r\n    return 1\r\n"
            # grep_code's lines too (a new user's agent read `return request.walrus_1()\r`)
            grepped = await s.call_tool("grep_code", {"path": str(repo), "pattern": "return"})
            assert grepped.content[-1].text == "crlf.py:2:    return 1", grepped.content
            assert grepped.structured_content["files"][0]["lines"][0]["text"] == "    return 1"

    asyncio.run(run())


def test_search_code_counts_long_paths_in_its_budget(codii_home, tmp_path):
    """40 results at 1,390-character paths were 127k characters (~32k tokens) at max_tokens 8000, past an agent's
    25k limit: the budget counted their lines, not the path each shows twice (a new user)."""
    deep = "/".join(["d" * 100] * 12)
    repo = write_tree(tmp_path / "huge", {f"{deep}/m{i}.py": f"def frobnicate_{i}(x):\n    return x + {i}\n"
                                          for i in range(40)})

    async def scenario():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            res = await s.call_tool("search_code", {"path": str(repo), "query": "frobnicate", "limit": 50,
                                                    "max_tokens": 8000, "mode": "bm25"})
            found = res.structured_content
            assert tokens(res) <= 20_000, tokens(res)
            assert 1 <= len(found["results"]) < 40 and "dropped" in found["note"]

    asyncio.run(scenario())


def _handlers_repo(root: Path) -> Path:
    """120 modules of 3 handlers each: 360 chunks, a vector phase of some seconds."""
    return write_tree(root, {
        f"pkg/mod_{i}.py": "".join(f"def handler_{i}_{j}(request, retries={j}):\n"
                                   f"    \"\"\"Handle request kind {j} of module {i} with backoff.\"\"\"\n"
                                   f"    return request.get({i * 10 + j}) or retries\n\n\n" for j in range(3))
        for i in range(120)})


async def _until_vector_phase(s: ClientSession, repo: Path) -> dict:
    """Index ``repo`` and poll its status until its vector phase runs (or the build ended); that status."""
    assert (await call(s, "index_codebase", path=str(repo)))["status"] == "started"
    deadline = asyncio.get_running_loop().time() + 120
    while asyncio.get_running_loop().time() < deadline:
        st = await call(s, "get_indexing_status", path=str(repo))
        if st.get("phase") == "vectors" or st["status"] == "indexed":
            return st
        await asyncio.sleep(0.1)
    raise AssertionError("no vector phase")


def _vectors_completed(cb: Codebase, seconds: float = 180) -> dict:
    """``cb``'s vector counts once complete, or as they stand after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (vectors := service.status(cb)["vectors"])["state"] != "complete" and time.monotonic() < deadline:
        time.sleep(0.5)
    return vectors


def test_vectors_an_agent_s_session_left_go_on_in_a_background_process(codii_home, tmp_path):
    """index_codebase runs the vector phase in the MCP server: an agent's session that ended first stopped it
    (a new user's 131 of 2,454), and nothing went on until a later search. The server now hands what is left
    to a background build as it exits."""
    repo = _handlers_repo(tmp_path / "many")

    async def run():
        async with server(codii_home, CODII_SQL_BACKGROUND="1", CODII_SQL_WATCH="0") as s:
            return await _until_vector_phase(s, repo)

    st = asyncio.run(run())
    assert st["status"] == "indexing", "the vector phase ended before the session: nothing to hand over"
    cb = Codebase.open(repo)
    vectors = _vectors_completed(cb)
    assert vectors["state"] == "complete" and vectors["done"] == vectors["total"] == 360, vectors
    logs = list((codii_home / "logs").glob(f"{cb.db_path.stem}*.log"))
    assert logs, "no background build wrote a log"


def _server_pid(mark: str) -> int:
    """The pid of the MCP server started with ``CODII_TEST_MARK=mark`` in its environment."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"CODII_TEST_MARK={mark}".encode() in (proc / "environ").read_bytes().split(b"\0") and \
                        b"codii_sql.mcp" in (proc / "cmdline").read_bytes():
                    return int(proc.name)
            except OSError:
                continue
    raise AssertionError("the server's process was not found")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the server's pid in /proc")
def test_a_server_ended_by_sigterm_hands_its_vector_phase_to_a_background_process(codii_home, tmp_path):
    """The mcp SDK's client ends a server by SIGTERM to its process group 2 s after closing stdin; a new user's
    server, waiting up to 5 s for its batch before handing over, was killed first and left its vectors pending
    for good. A server SIGTERMed in its vector phase now hands over at once."""
    repo = _handlers_repo(tmp_path / "many")
    mark = f"sigterm-{os.getpid()}-{time.monotonic_ns()}"

    async def run():
        async with server(codii_home, CODII_SQL_BACKGROUND="1", CODII_SQL_WATCH="0", CODII_TEST_MARK=mark) as s:
            seen["status"] = (await _until_vector_phase(s, repo))["status"]
            if seen["status"] != "indexing":
                return
            pid = _server_pid(mark)
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            seen["gone"] = not Path(f"/proc/{pid}").exists()

    seen: dict = {}
    with contextlib.suppress(Exception):  # the client finds its server gone
        asyncio.run(run())
    assert seen.get("status") == "indexing", f"the vector phase ended before the signal: nothing to hand over {seen}"
    assert seen.get("gone"), seen
    vectors = _vectors_completed(Codebase.open(repo))
    assert vectors["state"] == "complete" and vectors["done"] == vectors["total"] == 360, vectors


def test_grep_code_lists_source_lines_first_by_default(codii_home, tmp_path):
    """helper 56: `grep_code use` on sinatra, limit 100 in path order, came back with CHANGELOG, README and examples
    only, none of the source that defines and calls it. An agent's default is source first (sort=path: rg's)."""
    repo = write_tree(tmp_path / "repo", {
        "CHANGELOG.md": "".join(f"* use_middleware: fix {i}\n" for i in range(30)),
        "README.md": "Call use_middleware(app) first.\n",
        "lib/app.rb": "def use_middleware(app)\n  app.use(Logger)\nend\n"})

    async def main():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            first = await call(s, "grep_code", path=str(repo), pattern="use_middleware", literal=True, limit=5)
            assert first["files"][0]["path"] == "lib/app.rb" and first["truncated"], first
            rg_order = await call(s, "grep_code", path=str(repo), pattern="use_middleware", literal=True, limit=5,
                                  sort="path")
            assert [f["path"] for f in rg_order["files"]] == ["CHANGELOG.md"], rg_order

    asyncio.run(main())


def test_ctrl_c_stops_a_server_whose_stdin_is_still_open(codii_home):
    """A new user's Ctrl-C left `codii-sql serve` running until Ctrl-D: asyncio's handler cancelled the server's
    task, which waited for the thread reading stdin."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background run of the suite ignores it
    try:
        proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--no-watch"], cwd=REPO_ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "CODII_SQL_HOME": str(codii_home)})
    finally:
        signal.signal(signal.SIGINT, previous)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    proc.stdin.write(json.dumps(hello) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1  # serving
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=15)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert code == 130 and err.strip() == "Interrupted.", (code, err[-500:])
