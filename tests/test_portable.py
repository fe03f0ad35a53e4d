"""Portable shards: an index file searched and read alone, without the source it was built from."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from support.answers import last_json
from support.trees import SAMPLE, write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.codebase import Codebase


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def as_json(res) -> dict:
    assert res.exit_code == 0, res.output
    return last_json(res.stdout)


def alone_copy(tmp_path, codii_home):
    """The sample repository built, its index copied out read-only, the source deleted."""
    repo = write_tree(tmp_path / "repo", SAMPLE)
    assert run("build", repo).exit_code == 0
    copy = tmp_path / "shelf" / "sample.db"
    copy.parent.mkdir()
    shutil.copy(Codebase.open(repo).db_path, copy)
    shutil.rmtree(repo)
    copy.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return copy


def exported_shard(tmp_path, *, keep_source: bool = False):
    """The sample repository built without vectors and exported to shelf/sample.db; the source deleted
    unless ``keep_source``. Returns the shard's path (and the repository's, when kept)."""
    repo = write_tree(tmp_path / "repo", SAMPLE)
    assert run("build", repo, "--no-vectors").exit_code == 0
    shard = tmp_path / "shelf" / "sample.db"
    shard.parent.mkdir()
    assert run("export", repo, "--to", shard).exit_code == 0
    if keep_source:
        return shard, repo
    shutil.rmtree(repo)
    return shard


def test_an_index_file_alone_is_searched_read_only_from_its_stored_chunks(tmp_path, codii_home):
    copy = alone_copy(tmp_path, codii_home)
    before = sorted(os.listdir(copy.parent)), copy.stat().st_mtime_ns
    found = as_json(run("search", "retry with exponential backoff", "--db", copy, "--json"))
    assert found["results"][0]["symbol"] == "retry_with_backoff"
    assert all(r["stale"] is None for r in found["results"]) and "source" in found["notes"]
    assert found["codebase"] == str(copy)
    st = as_json(run("status", "--db", copy, "--json"))
    assert st["status"] == "indexed" and st["stale"] is None and st["files"] == 4
    assert as_json(run("stats", "--db", copy, "--json"))["chunks"] > 4
    symbol = as_json(run("symbol", "parse_header", "--db", copy, "--json"))
    assert [d["path"] for d in symbol["definitions"]] == ["app/parse.py"] and "what the index stores" in symbol["note"]
    assert [d["symbol"] for d in as_json(run("symbol", "send", "--db", copy, "--json"))["definitions"]] == \
        ["Session.send"]  # parsed from the stored text: too small for a chunk of its own
    refs = as_json(run("refs", "send", "--db", copy, "--json"))
    assert [ln["line"] for f in refs["files"] for ln in f["lines"]] == [22]  # self.send(...), not def send
    outline = as_json(run("outline", "app/http.py", "--db", copy, "--json"))
    assert [s["symbol"] for s in outline["symbols"]] == ["retry_with_backoff", "Session"]
    assert [c["symbol"] for c in outline["symbols"][1]["children"]] == ["Session.resolve_redirects", "Session.send"]
    assert (sorted(os.listdir(copy.parent)), copy.stat().st_mtime_ns) == before  # nothing written, no -wal/-shm
    session = service.Session()
    cb = service.open_codebase(str(copy))
    content = session.content(cb, "app/http.py", None, None)
    assert "def retry_with_backoff" in content["content"] and content["not_stored"] == [] or "not stored" in \
        content["note"]
    assert content["content"].split("\n")[0] == SAMPLE["app/http.py"].strip("\n").split("\n")[0].strip()


QUERIES = ["retry with exponential backoff", "parse_header", "follow redirects until a final response", "debounce",
           "split a header line into name and value", "getUserName", "Session.send", "give up after attempts",
           "HTTP helpers", "the guide to retries", "timer", "clearTimeout", "resolve_redirects", "max_redirects",
           "lower case the name", "callback fires once after quiet time", "IOError", "exponential", "partition",
           "what happens when a request keeps failing"]


def test_an_export_answers_as_its_index_did_and_carries_nothing_of_the_machine(tmp_path, codii_home):
    repo = write_tree(tmp_path / "projects" / "sample", SAMPLE)
    assert run("build", repo).exit_code == 0
    before = {(q, m): [(r["id"], r["score"]) for r in as_json(run("search", q, "--path", repo, "--mode", m,
                                                                   "--no-update", "--json"))["results"]]
              for q in QUERIES for m in ("hybrid", "bm25", "vector")}
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    out = as_json(run("export", repo, "--to", shelf / "sample.db", "--json"))
    assert out["manifest"]["codebase"] == "sample" and out["manifest"]["chunks"] > 4
    assert sorted(os.listdir(shelf)) == ["sample.db"]  # written aside, renamed in: nothing else left
    raw = (shelf / "sample.db").read_bytes()
    assert str(tmp_path).encode() not in raw and str(codii_home).encode() not in raw
    # A target ending in a slash names a folder: one that does not exist is not made a file.
    folder = tmp_path / "not_yet"
    slash = run("export", repo, "--to", f"{folder}/")
    assert slash.exit_code == 2 and "names a folder, which does not exist" in slash.output and not folder.exists()
    # Only an earlier export is replaced (a new user's `--to /etc/passwd` replaced it), never a link.
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    os.symlink(shelf / "sample.db", tmp_path / "link.db")
    for other in (notes, tmp_path / "link.db", repo / "app" / "http.py"):
        kept = other.read_bytes()
        refused = run("export", repo, "--to", other)
        assert refused.exit_code == 2 and "is not a codii-sql index" in refused.output and other.read_bytes() == kept
    assert as_json(run("export", repo, "--to", shelf / "sample.db", "--json"))["file"] == str(shelf / "sample.db")
    # Never over another codebase's live index (a new user's replaced it: its searches answered the other's files).
    other_repo = write_tree(tmp_path / "other", {"b.py": "def b():\n    return 2\n"})
    assert run("build", other_repo, "--no-vectors").exit_code == 0
    live = service.open_codebase(other_repo).db_path
    kept = live.read_bytes()
    over = run("export", repo, "--to", live)
    assert over.exit_code == 2 and "own folder of indexes" in over.output and live.read_bytes() == kept
    # Nor over another codebase's export (a helper's replaced one, silently)
    assert run("export", other_repo, "--to", tmp_path / "other.db").exit_code == 0
    kept = (tmp_path / "other.db").read_bytes()
    over = run("export", repo, "--to", tmp_path / "other.db")
    assert over.exit_code == 2 and "is an export of another codebase (other)" in over.output, over.output
    assert (tmp_path / "other.db").read_bytes() == kept
    before_build = run("build", repo, "--export", notes)  # said before the build, the file untouched
    assert before_build.exit_code == 2 and "is not a codii-sql index" in before_build.output
    assert notes.read_text() == "mine\n"
    shutil.rmtree(repo)
    shelf.chmod(0o555)
    (shelf / "sample.db").chmod(0o444)
    try:
        after = {(q, m): [(r["id"], r["score"]) for r in as_json(run("search", q, "--db", shelf / "sample.db",
                                                                      "--mode", m, "--json"))["results"]]
                 for q in QUERIES for m in ("hybrid", "bm25", "vector")}
        assert after == before
        assert as_json(run("inspect", "--manifest", "--db", shelf / "sample.db", "--json"))["files"] == 4
        checked = as_json(run("doctor", "--db", shelf / "sample.db", "--check-only", "--json"))
        assert checked["consistent"], checked
        refused = run("doctor", "--db", shelf / "sample.db")
        assert refused.exit_code == 2 and "never written" in refused.output
        assert sorted(os.listdir(shelf)) == ["sample.db"]
    finally:
        shelf.chmod(0o755)


def test_an_export_on_a_read_only_mount_is_searched_and_read(tmp_path, codii_home):
    """Where even root cannot write (a read-only bind mount, as a CI artifact store or a container's
    volume can be): nothing may need a -wal, -shm, lock or marker file beside the index."""
    import subprocess

    repo = write_tree(tmp_path / "sample", SAMPLE)
    assert run("build", repo).exit_code == 0
    shelf, mounted = tmp_path / "shelf", tmp_path / "ro"
    shelf.mkdir()
    mounted.mkdir()
    assert run("export", repo, "--to", shelf / "sample.db").exit_code == 0
    bind = subprocess.run(["mount", "--bind", str(shelf), str(mounted)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"a read-only bind mount needs root with CAP_SYS_ADMIN: {bind.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.strip()}")
        shutil.rmtree(repo)
        found = as_json(run("search", "retry with exponential backoff", "--db", mounted / "sample.db", "--json"))
        assert found["results"][0]["symbol"] == "retry_with_backoff" and "source" in found["notes"]
        assert as_json(run("outline", "app/http.py", "--db", mounted / "sample.db", "--json"))["symbols"]
        assert as_json(run("doctor", "--db", mounted / "sample.db", "--check-only", "--json"))["consistent"]
        assert as_json(run("status", "--db", mounted / "sample.db", "--json"))["stale"] is None
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)


def _service(version: str) -> dict:
    return {"svc/alpha.py": f'''
        def alpha_handler(request):
            """Answer the alpha request: version {version} of the handler."""
            return {{"version": "{version}", "path": request.path}}
        ''', "svc/beta.py": '''
        def beta_handler(request):
            """Answer the beta request."""
            return request.body
        '''}


def _exported(tmp_path, name: str, files: dict) -> "os.PathLike":
    repo = write_tree(tmp_path / "src" / name, files)
    assert run("build", repo).exit_code == 0
    out = tmp_path / "built" / f"{name}.db"
    out.parent.mkdir(exist_ok=True)
    assert run("export", repo, "--to", out).exit_code == 0
    return out


@pytest.mark.slow
def test_a_served_folder_of_shards_swaps_a_file_under_load_without_a_failed_or_mixed_answer(tmp_path, codii_home):
    import concurrent.futures as cf
    import threading
    import time

    import httpx
    from support import servers
    one, two = _exported(tmp_path, "one", _service("one")), _exported(tmp_path, "two", _service("two"))
    other = _exported(tmp_path, "other", {"shop/cart.js": "// Sum the cart.\nexport function total(items) {\n"
                                                           "  return items.reduce((s, i) => s + i.price, 0);\n}\n"})
    shards = tmp_path / "shards"
    shards.mkdir()
    shutil.copy(one, shards / "svc.db")
    shutil.copy(other, shards / "other.db")
    port = servers.free_port()
    proc = servers.start(["--shards", str(shards)], port)
    url = f"http://127.0.0.1:{port}"
    try:
        health = httpx.get(f"{url}/healthz").json()
        assert health["shards"]["files"] == ["other.db", "svc.db"]
        got = httpx.get(f"{url}/search", params={"q": "alpha_handler", "codebase": "svc"}).json()
        assert got["results"][0]["symbol"] == "alpha_handler" and got["codebase"] == str(shards / "svc.db")
        # /grep takes the shard as the answers name it, as /search does (it said "not served here").
        for name in (got["codebase"], "svc.db"):  # as answers name it, and by its file's name as /search takes it
            grepped = httpx.get(f"{url}/grep", params={"q": "def alpha_handler", "codebase": name})
            assert grepped.status_code == 200 and grepped.json()["matched_lines"] == 1, grepped.text
        every = httpx.get(f"{url}/search", params={"q": "sum the prices of the cart"}).json()
        assert every["results"][0]["codebase"] == str(shards / "other.db")
        assert {m["codebase"] for m in every["codebases"]} == {str(shards / "svc.db"), str(shards / "other.db")}
        stop, answers, errors = threading.Event(), [], []

        def client():
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    r = http.get(f"{url}/search", params={"q": "alpha handler version", "limit": 5})
                    (answers if r.status_code == 200 else errors).append(r.json() if r.status_code == 200 else r.text)

        with cf.ThreadPoolExecutor(16) as pool:
            for _ in range(16):
                pool.submit(client)
            for i in range(20):  # a new file renamed over the served one, as a CI upload would
                part = shards / f".svc.db.part-{i}"
                shutil.copy(two if i % 2 == 0 else one, part)
                os.replace(part, shards / "svc.db")
                time.sleep(0.15)
            stop.set()
        assert not errors and len(answers) > 40, (errors[:3], len(answers))
        for a in answers:
            versions = {("one" if "version one" in r["content"] else "two") for r in a["results"]
                        if r["path"] == "svc/alpha.py"}
            assert len(versions) == 1, (a["codebases"], a.get("note"))  # the old file or the new one, never a mix
        assert {v for a in answers for r in a["results"] if r["path"] == "svc/alpha.py"
                for v in ("one", "two") if f"version {v}" in r["content"]} == {"one", "two"}
        (shards / "other.db").unlink()  # a shard removed is searched no more
        assert [m["codebase"] for m in httpx.get(f"{url}/search", params={"q": "cart"}).json()["codebases"]] == \
            [str(shards / "svc.db")]
    finally:
        servers.stop(proc)


@pytest.mark.slow
def test_an_agent_searches_and_reads_a_folder_of_shards_over_mcp(tmp_path, codii_home):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from support.trees import REPO_ROOT

    shards = tmp_path / "shards"
    shards.mkdir()
    shutil.copy(_exported(tmp_path, "svc", _service("one")), shards / "svc.db")
    params = StdioServerParameters(command=sys.executable, args=["-m", "codii_sql.mcp", "--no-watch", "--shards",
                                                                 str(shards)], cwd=str(REPO_ROOT),
                                   env={"CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT),
                                        "CODII_SQL_THREADS": "1", "CODII_SQL_BACKGROUND": "0"})

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            found = (await session.call_tool("search_code", {"query": "answer the alpha request"})).structured_content
            top = found["results"][0]
            assert top["symbol"] == "alpha_handler" and top["codebase"] == str(shards / "svc.db")
            assert top["stale"] is None and "source" in found["notes"]
            read_back = await session.call_tool("get_content", {"path": top["codebase"], "file": top["path"]})
            assert not read_back.is_error and "def alpha_handler" in read_back.structured_content["content"]
            chunk = await session.call_tool("get_chunk", {"path": top["codebase"], "chunk_id": top["id"]})
            assert chunk.structured_content["stale"] is None and "version one" in chunk.structured_content["content"]
            # A new user's agent was told "no such file" of a file the shard holds by these two.
            similar = await session.call_tool("find_similar_code", {"path": top["codebase"], "file": top["path"]})
            assert not similar.is_error and similar.structured_content["file"] == top["path"], similar.content
            why = await session.call_tool("explain_line", {"path": top["codebase"], "file": top["path"], "line": 1})
            assert why.is_error and "index file alone" in why.content[0].text, why.content
            listed = (await session.call_tool("list_workspaces", {})).structured_content["workspaces"]
            assert {"name": "shards", "source": "shards"}.items() <= listed[-1].items()
            # The folder itself is no codebase: a new user's agent was told to index it. search_code searches
            # every shard in it; the tools that read one codebase name its files.
            folder = await session.call_tool("grep_code", {"path": str(shards), "pattern": "alpha_handler"})
            assert folder.is_error and "svc.db" in folder.content[0].text and "index_codebase" not in \
                folder.content[0].text, folder.content
            # One of its files greps that shard's stored texts (its folder was taken for a codebase not indexed)
            grepped = await session.call_tool("grep_code", {"path": str(shards / "svc.db"), "pattern": "def alpha_\\w+"})
            assert not grepped.is_error and grepped.structured_content["matched_lines"] == 1, grepped.content
            # Every tool names the shard as search_code does, the path an agent passes back (find_symbol and
            # get_content said "svc", a new user).
            for tool, args in (("find_symbol", {"name": "alpha_handler"}), ("get_file_outline", {"file": top["path"]}),
                               ("find_references", {"name": "alpha_handler"}), ("get_content", {"file": top["path"]}),
                               ("get_indexing_status", {})):
                named = await session.call_tool(tool, {"path": top["codebase"], **args})
                assert named.structured_content["codebase"] == str(shards / "svc.db"), (tool, named.content)
                assert tool not in ("find_symbol", "find_references") or str(shards / "svc.db") in \
                    named.content[0].text, (tool, named.content[0].text)  # the summary too
            assert grepped.structured_content["codebase"] == str(shards / "svc.db")
            for tool, args in (("find_symbol", {"name": "alpha_handler"}), ("clear_index", {})):
                told = await session.call_tool(tool, {"path": str(shards), **args})
                assert told.is_error and "svc.db" in told.content[0].text, (tool, told.content)
            every = await session.call_tool("search_code", {"path": str(shards), "query": "answer the alpha request"})
            assert every.structured_content["results"][0]["symbol"] == "alpha_handler", every.content
            # A shard itself: a new user's agent was told to pass "the folder that contains it".
            shard = await session.call_tool("clear_index", {"path": str(shards / "svc.db")})
            assert shard.is_error and "index file searched alone" in shard.content[0].text and \
                "folder that contains" not in shard.content[0].text, shard.content
            assert (shards / "svc.db").is_file()

    asyncio.run(run())


def test_more_shards_than_open_connections_are_searched_in_one_pass(tmp_path, codii_home):
    """Past the open-connection bound, a new entry was the least recently used and closed at once:
    every search looked again forever (a folder of 1,000 shards hung its first search)."""
    from codii_sql.service.indexes import OpenIndexes

    shards = tmp_path / "shards"
    shards.mkdir()
    made = _exported(tmp_path, "svc", _service("one"))
    for i in range(6):
        shutil.copy(made, shards / f"s{i}.db")
    answer = service.search(service.SearchRequest("alpha_handler", service.SearchOptions(limit=3), shards=str(shards),
                                                  update=False), indexes=OpenIndexes(max_open=2))
    assert [m.status for m in answer.members] == ["searched"] * 6 and answer.results


def test_a_file_alone_is_never_built_and_its_notes_say_to_export_again(tmp_path, codii_home):
    """A shard's note once told users to `build SHARD.db --vectors`, which crashed with a traceback
    and left 'failed', a lock and a marker in the shard. Every way to build one is now refused in
    one line, in a fresh process and over MCP, and the file and its folder stay as they were."""
    import subprocess

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from support.trees import REPO_ROOT

    shard = exported_shard(tmp_path)
    before = sorted(os.listdir(shard.parent)), shard.read_bytes()
    found = as_json(run("search", "retry with exponential backoff", "--db", shard, "--json"))
    assert "vectors" in found["notes"] and "build SOURCE --vectors --export" in found["note"]
    assert f"build {shard}" not in found["note"]
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)}
    for args in (["build", shard, "--vectors"], ["build", "--db", shard], ["build", shard, "--dry-run"],
                 ["build", shard, "--daemon"], ["build", shard, "--json"]):
        res = subprocess.run([sys.executable, "-m", "codii_sql.cli", *map(str, args)], capture_output=True, text=True,
                             env=env, timeout=120)
        said = res.stdout + res.stderr
        assert res.returncode == 1 and "Traceback" not in said and "never built" in said, (args, said)
        assert len(res.stderr.strip().splitlines()) == 1, said
    params = StdioServerParameters(command=sys.executable, args=["-m", "codii_sql.mcp", "--no-watch"],
                                   cwd=str(REPO_ROOT), env={"CODII_SQL_HOME": str(codii_home),
                                                            "PYTHONPATH": str(REPO_ROOT), "CODII_SQL_THREADS": "1"})

    async def ask():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            res = await session.call_tool("index_codebase", {"path": str(shard)})
            assert res.is_error and "never built" in res.content[0].text and "--export" in res.content[0].text

    asyncio.run(ask())
    assert (sorted(os.listdir(shard.parent)), shard.read_bytes()) == before


def test_an_mcp_server_makes_nothing_beside_an_index_file_it_reads(tmp_path, codii_home):
    """Watching on (the default): reading a shard through get_content and find_symbol left a
    `svc.db.watch/` folder beside it (a new user's read-only shard folder); a file alone has no source
    to follow."""
    from test_mcp import call, server

    shard = tmp_path / "ro" / "svc.db"
    shard.parent.mkdir()
    shutil.copy(_exported(tmp_path, "svc", _service("one")), shard)

    async def run():
        async with server(codii_home) as s:
            assert "def alpha_handler" in (await call(s, "get_content", path=str(shard), file="svc/alpha.py"))["content"]
            assert (await call(s, "find_symbol", path=str(shard), name="alpha_handler"))["definitions"]
            await call(s, "search_code", path=str(shard), query="alpha request")
            assert (await call(s, "grep_code", path=str(shard), pattern="alpha_handler"))["matched_files"] == 1

    asyncio.run(run())
    assert sorted(p.name for p in shard.parent.iterdir()) == ["svc.db"]


def test_clear_leaves_a_shard_alone_even_when_its_source_is_here(tmp_path, codii_home):
    """A new user's `clear --db shard.db --yes` deleted an export (the only copy, say a CI artifact) although
    codii-sql only ever reads such a file; `build --db` refused it. clear now refuses too, in one line, in a
    fresh process, and the codebase's own index is still cleared by its folder."""
    import subprocess

    from support.trees import REPO_ROOT

    shard, repo = exported_shard(tmp_path, keep_source=True)
    before = shard.read_bytes()
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)}
    res = subprocess.run([sys.executable, "-m", "codii_sql.cli", "clear", "--db", str(shard), "--yes"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr and "only reads" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and shard.read_bytes() == before
    assert as_json(run("clear", repo, "--yes", "--json"))["removed"] == [str(Codebase.open(repo).db_path)]
    assert shard.read_bytes() == before


def test_a_served_shard_is_read_unmapped_so_a_copy_over_it_is_an_error_not_sigbus(tmp_path, codii_home, monkeypatch):
    """A new user's team server (serve --shards) died of SIGBUS, silently, when a shard was overwritten in
    place by cp: a read of a memory-mapped page past the truncated end is a bus error (SQLite's mmap
    documentation). A server's connections to files alone are not mapped; a truncated file read so is an
    error of that one search, and the process lives."""
    from codii_sql.service.indexes import open_searcher
    from support.trees import REPO_ROOT

    shard = exported_shard(tmp_path)
    alone = service.open_codebase(None, str(shard))
    cli_searcher = open_searcher(alone)  # a CLI process's one search keeps the mapping
    assert cli_searcher.store.conn.execute("PRAGMA mmap_size").fetchall()[0][0] > 0
    cli_searcher.store.close()
    service.serve_unmapped()  # as the MCP and HTTP servers do when they start
    with service.OpenIndexes().searcher(alone) as served:  # every read of a served process, grep's and the file
        assert served.store.conn.execute("PRAGMA mmap_size").fetchall()[0][0] == 0  # view's too (service.open_store)
    from codii_sql.service.status import open_store
    with open_store(alone) as grepped:
        assert grepped.conn.execute("PRAGMA mmap_size").fetchall()[0][0] == 0
    script = (  # read every chunk, cut the file under the reader (as cp does first), read again
        "import os, sys\n"
        "from codii_sql.storage.store import Store\n"
        "store = Store(sys.argv[1], readonly=True, mmap=sys.argv[2] == 'mapped')\n"
        "count = lambda: store.conn.execute('SELECT count(*), sum(length(content)) FROM chunks').fetchall()\n"
        "count()\n"
        "os.truncate(sys.argv[1], 8192)\n"
        "try:\n"
        "    count()\n"
        "except Exception as err:\n"
        "    print('refused:', type(err).__name__)\n"
        "print('alive')\n")
    for how, code in (("mapped", -signal.SIGBUS), ("unmapped", 0)):
        copy = tmp_path / f"{how}.db"
        shutil.copy(shard, copy)
        res = subprocess.run([sys.executable, "-c", script, str(copy), how], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert res.returncode == code and ("alive" in res.stdout) == (code == 0), (how, res.returncode, res.stderr)


def test_an_export_is_never_built_into_whatever_folder_comes_with_it(tmp_path, codii_home):
    """A new user's `build OTHER --db shard.db` replaced an exported shard's files by OTHER's (its manifest
    still naming the first codebase), where a copied home index is refused for another folder: an export
    is an index alone whatever path comes with it, only read."""
    shard = exported_shard(tmp_path)
    before = sorted(os.listdir(shard.parent)), shard.read_bytes()
    other = write_tree(tmp_path / "other", {"o.py": "def other():\n    return 0\n"})
    res = run("build", other, "--db", shard)
    assert res.exit_code == 1 and "only read" in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert (sorted(os.listdir(shard.parent)), shard.read_bytes()) == before
    found = as_json(run("search", "retry", "--path", other, "--db", shard, "--mode", "bm25", "--json"))
    assert found["results"] and all(r["path"] != "o.py" for r in found["results"])


def test_a_shards_file_is_read_whole_from_its_stored_text(tmp_path, codii_home):
    """A shard keeps each file's whole text (grep reads it); its file view rebuilt the file from chunks and
    marked every blank line "not stored" (a new user's web page of a Django shard)."""
    shard = exported_shard(tmp_path)
    read = service.file_text(service.open_codebase(None, str(shard)), "app/http.py")
    expected = textwrap.dedent(SAMPLE["app/http.py"]).lstrip("\n")  # as write_tree writes it
    assert read.not_stored == [] and "".join(read.lines) == expected and "\n" in read.lines


def test_a_served_shard_cut_in_place_fails_alone_until_it_is_whole_again(tmp_path, codii_home):
    """A new user's served shard, truncated in place (a cp over it, half done), was reported "searched" with
    no result in a folder's answer, depending on the pages the query reached: a server now checks the pages
    of a file alone that changed in place before it searches it again."""
    import httpx
    from support import servers
    shards = tmp_path / "shards"
    shards.mkdir()
    shutil.copy(_exported(tmp_path, "svc", _service("one")), shards / "svc.db")
    shutil.copy(_exported(tmp_path, "other", {"shop/cart.js": "// Sum the cart.\nexport function total(items) {\n"
                                                               "  return items.reduce((s, i) => s + i.price, 0);\n}\n"}),
                shards / "other.db")
    whole = (shards / "svc.db").read_bytes()
    port = servers.free_port()
    proc = servers.start(["--shards", str(shards)], port)
    url = f"http://127.0.0.1:{port}"

    def members(query: str) -> dict:
        got = httpx.get(f"{url}/search", params={"q": query, "mode": "bm25"}, timeout=60).json()
        return {os.path.basename(m["codebase"]): m for m in got["codebases"]}, got

    try:
        found, got = members("alpha_handler")
        assert found["svc.db"]["status"] == "searched" and got["results"][0]["symbol"] == "alpha_handler"
        with open(shards / "svc.db", "r+b") as fh:  # cut in place, as cp does before it writes
            fh.truncate(len(whole) // 3)
        for _ in range(2):  # checked once, then refused as it is until it changes
            found, got = members("alpha_handler")
            assert found["svc.db"]["status"] == "failed", found
            assert "svc.db" in got["note"] and "damaged" in got["note"], got
            assert found["other.db"]["status"] == "searched"
        for endpoint in ("grep", "symbol"):  # read unmapped too: a mapped read of the cut pages was SIGBUS (a new user)
            cut = httpx.get(f"{url}/{endpoint}", params={"q": "alpha_handler", "name": "alpha_handler",
                                                          "codebase": "svc"}, timeout=60)
            assert cut.status_code in (400, 404, 503), (endpoint, cut.status_code, cut.text[:300])
        health = httpx.get(f"{url}/healthz", timeout=60)  # the server lives, and says what /search says
        assert health.status_code == 200 and health.json()["status"] == "degraded", health.text
        assert list(health.json()["shards"]["failed"]) == ["svc.db"], health.text  # it said "ok" (a new user)
        with open(shards / "svc.db", "r+b") as fh:  # the copy finishes
            fh.write(whole)
        found, got = members("alpha_handler")
        assert found["svc.db"]["status"] == "searched" and got["results"][0]["symbol"] == "alpha_handler", found
        assert httpx.get(f"{url}/healthz", timeout=60).json()["status"] == "ok"
    finally:
        servers.stop(proc)


def test_both_servers_read_files_alone_unmapped_from_their_start(tmp_path, codii_home, monkeypatch):
    """A new user's team server died of SIGBUS on /grep, /symbol and /file while a shard was copied over in
    place: only its search connections were unmapped. The switch is now the process's, thrown by each server's
    start (a mapped reader dying and an unmapped one living is shown in the test above)."""
    import socket

    from codii_sql.cli.serving import serve_http
    from codii_sql.errors import UsageError
    from codii_sql.mcp import main as mcp_main
    from codii_sql.storage import store as store_module

    monkeypatch.setitem(store_module._MAP_ALONE, "on", True)
    with pytest.raises(SystemExit):  # the MCP server, stopped by a bad folder right after its start
        mcp_main(["--shards", str(tmp_path / "no-such-folder")])
    assert store_module._MAP_ALONE["on"] is False
    monkeypatch.setitem(store_module._MAP_ALONE, "on", True)
    (tmp_path / "shards").mkdir()
    with socket.socket() as busy:  # the HTTP server, stopped by a port in use before it listens
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(UsageError):
            serve_http([], "127.0.0.1", busy.getsockname()[1], None, None, str(tmp_path / "shards"))
    assert store_module._MAP_ALONE["on"] is False


def test_doctor_of_an_altered_export_says_to_export_it_again_not_to_build_a_folder_not_here(tmp_path, codii_home):
    """A new user's doctor --check-only of an export whose text was altered said "run doctor without --check-only
    to repair" (which then refused: an index alone is only read), and of a damaged one "`codii-sql build
    rich-13.7.1 --db ...` makes a new one", a folder that is not there."""
    import apsw

    shard = exported_shard(tmp_path)
    conn = apsw.Connection(str(shard))
    conn.execute("UPDATE chunks SET content = replace(content, 'def ', 'fed ') WHERE content LIKE '%def %'")
    conn.close()
    res = run("doctor", "--check-only", "--db", shard)
    last = res.output.strip().splitlines()[-1]
    assert res.exit_code == 1 and "export it again" in last and "without --check-only" not in last, res.output


def test_an_export_altered_in_place_is_refused_by_a_fresh_process_and_its_server_says_degraded(tmp_path, codii_home):
    """A new user's export whose text bytes were replaced in place (same size, its mtime put back: SQLite's page
    checks pass) reported "indexed" and served the altered text as the export's. An export carries the digest of
    its rows, checked with its pages once per change of the file (remembered in the home, as nothing is written
    beside a file read only)."""
    import httpx
    from support import servers

    shard = exported_shard(tmp_path)
    assert list((codii_home / "checked").glob("*.json")), "the export vouches for the file it wrote"
    altered = tmp_path / "shards" / "altered.db"
    altered.parent.mkdir()
    shutil.copy2(shard, altered)
    shutil.copy2(shard, tmp_path / "shards" / "intact.db")
    data = bytearray(altered.read_bytes())
    at = data.find(b"def parse_header")
    assert at > 0
    data[at:at + 16] = b"def PWNED_header"
    before = altered.stat()
    altered.write_bytes(data)
    os.utime(altered, ns=(before.st_atime_ns, before.st_mtime_ns))

    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "codii_sql.cli", *map(str, args)], env=env,
                              capture_output=True, text=True, timeout=120)

    intact = cli("search", "parse_header", "--db", tmp_path / "shards" / "intact.db", "--mode", "bm25", "--json")
    assert intact.returncode == 0 and "def parse_header" in intact.stdout, intact.stderr
    refused = cli("search", "parse_header", "--db", altered, "--mode", "bm25")
    assert refused.returncode != 0 and "PWNED" not in refused.stdout, refused.stdout
    assert "altered or damaged" in refused.stderr and "export it again" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    outlined = cli("outline", "app/parse.py", "--db", altered)  # helper 55: outline read it as true
    assert outlined.returncode != 0 and "export it again" in outlined.stderr and "PWNED" not in outlined.stdout
    status = cli("status", "--db", altered, "--json")
    assert json.loads(status.stdout)["status"] == "damaged", status.stdout

    port = servers.free_port()
    proc = servers.start(["--shards", str(tmp_path / "shards")], port)
    try:
        got = httpx.get(f"http://127.0.0.1:{port}/search", params={"q": "parse_header", "mode": "bm25"},
                        timeout=60).json()
        states = {os.path.basename(m["codebase"]): m["status"] for m in got["codebases"]}
        assert states == {"altered.db": "failed", "intact.db": "searched"}, got
        assert all("PWNED" not in r["content"] for r in got["results"]) and got["results"], got
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).json()
        assert health["status"] == "degraded" and list(health["shards"]["failed"]) == ["altered.db"], health
        # Altered in place while served, its mtime put back: its open connection is not trusted on (helper 55)
        intact = tmp_path / "shards" / "intact.db"
        before = intact.stat()
        data = bytearray(intact.read_bytes())
        at = data.find(b"def parse_header")
        data[at:at + 16] = b"def PWNED_header"
        with open(intact, "r+b") as fh:
            fh.write(data)
        os.utime(intact, ns=(before.st_atime_ns, before.st_mtime_ns))
        got = httpx.get(f"http://127.0.0.1:{port}/search", params={"q": "parse_header", "mode": "bm25"}, timeout=60)
        assert got.status_code == 503 and "PWNED" not in got.text and "intact.db" in got.text, got.text
    finally:
        servers.stop(proc)


def test_an_export_reports_the_index_size_with_what_its_log_still_holds(tmp_path, codii_home):
    """A new user's export during the vector phase said "(the index: 0.0 MB)": the phase's commits sat in the
    write-ahead log and only the file's bytes were counted."""
    import apsw

    repo = write_tree(tmp_path / "repo", SAMPLE)
    assert run("build", repo, "--no-vectors").exit_code == 0
    db = Codebase.open(repo).db_path
    writer = apsw.Connection(str(db))
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO meta(key, value) VALUES ('padding', json_quote(hex(zeroblob(1000000))))")
        in_file = db.stat().st_size
        out = service.export(Codebase.open(repo), tmp_path / "out.db")
        assert out["source_bytes"] >= in_file + 2_000_000, (out["source_bytes"], in_file)
    finally:
        writer.close()


def test_an_export_s_outline_is_the_live_outline_even_where_no_chunk_holds_a_line(tmp_path, codii_home):
    """helper 55: `outline token/ERC20/ERC20.sol --db oz.db` ended the contract at 304, the live outline at 305 (its
    closing brace, which no chunk holds, was read as an empty line); grpc's `service Health` disappeared and its rpcs
    became top-level functions. An index alone keeps each file's text for grep: its outline reads that."""
    methods = "".join(f"  /** Step {i} of the pipeline. */\n  step{i}(input) {{\n"
                      + "".join(f"    input = transform{i}_{k}(input, {k});\n" for k in range(12))
                      + "    return input;\n  }\n\n" for i in range(8))
    repo = write_tree(tmp_path / "repo", {"src/pipeline.js": f"export class Pipeline {{\n{methods}}}\n"})
    assert run("build", repo, "--no-vectors").exit_code == 0
    live = as_json(run("outline", repo / "src/pipeline.js", "--json"))
    shard = tmp_path / "pipeline.db"
    assert run("export", repo, "--to", shard).exit_code == 0
    alone = as_json(run("outline", "src/pipeline.js", "--db", shard, "--json"))
    assert alone["symbols"] == live["symbols"] and alone["symbols"][0]["end_line"] == 8 * 17 + 2, alone
    os.chdir(repo)  # from inside the checkout the shard was built from: its path was made absolute and not found
    try:
        assert as_json(run("outline", "src/pipeline.js", "--db", shard, "--json"))["symbols"] == live["symbols"]
    finally:
        os.chdir(tmp_path)


def test_an_export_whose_index_entry_was_altered_in_place_is_refused(tmp_path, codii_home):
    """helper 57: a name changed in place in the pages of the definitions_by_name index (the table's rows as they
    were, the mtime put back) answered `symbol` with "no definition" and status "indexed": quick_check does not
    compare an index with its table, and the rows' digest reads the table. A file read alone is checked whole."""
    import apsw

    shard = exported_shard(tmp_path)
    conn = apsw.Connection(str(shard), flags=apsw.SQLITE_OPEN_READONLY)
    (page,) = [n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'definitions_by_name'")][:1]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(shard.read_bytes())
    block = data[(page - 1) * size:page * size]
    at = block.find(b"parse_header")
    assert at >= 0
    block[at:at + 12] = b"parse_heaDER"
    data[(page - 1) * size:page * size] = block
    before = shard.stat()
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    res = run("symbol", "parse_header", "--db", shard)
    assert res.exit_code != 0 and "damaged" in res.output and "export it again" in res.output, res.output
    assert as_json(run("status", "--db", shard, "--json"))["status"] == "damaged"
