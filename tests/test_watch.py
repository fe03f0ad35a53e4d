"""`codii-sql watch` and the MCP server's watchers, driven by real file-system events, the real model and real indexes."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.trees import REPO_ROOT, SAMPLE, write_tree
from test_mcp import call, server, wait_indexed

from codii_sql import service
from codii_sql.search.results import SearchOptions
from codii_sql.service.watching import Follow

pytestmark = pytest.mark.slow

#: Seconds a test waits for a watcher to react (the targets are ~1-2 s; a loaded CI core is slower).
PATIENCE = 60.0


class WatchProcess:
    """``codii-sql watch ROOT --jsonl`` in a child process; its JSON lines arrive on a queue."""

    def __init__(self, home: Path, *roots: Path) -> None:
        env = {**os.environ, "CODII_SQL_HOME": str(home), "CODII_SQL_BACKGROUND": "0", "CODII_SQL_THREADS": "1",
               "PYTHONPATH": str(REPO_ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "watch", *map(str, roots), "--jsonl"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self, timeout: float = PATIENCE) -> dict:
        return self.lines.get(timeout=timeout)

    def quiet_for(self, seconds: float) -> list[dict]:
        """Every line printed over ``seconds`` (none is the expectation of an idle watcher)."""
        got, deadline = [], time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(self.lines.get(timeout=left))
            except queue.Empty:
                break
        return got

    def updates_until(self, done, timeout: float = PATIENCE) -> list[dict]:
        """Update lines until ``done(lines so far)`` holds."""
        got, deadline = [], time.monotonic() + timeout
        while not done(got):
            got.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
        return got

    def stop(self, sig=signal.SIGTERM, timeout: float = 30.0) -> tuple[int, str]:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err


def found(root: Path, query: str) -> list[str]:
    """``path:symbol`` of the no-update search results for ``query``."""
    resp = service.search(service.SearchRequest(query, SearchOptions(limit=5), [str(root)], update=False))
    return [f"{r.path}:{r.symbol}" for r in resp.results]


def summed(lines: list[dict], key: str) -> int:
    return sum(x.get(key, 0) for x in lines if x.get("event") == "update")


def test_watch_follows_saves_renames_deletes_bursts_and_ignores_ignored_trees(codii_home, tmp_path):
    repo = write_tree(tmp_path / "repo", SAMPLE)
    w = WatchProcess(codii_home, repo)
    try:
        first = w.next()
        assert first["event"] == "update" and first["added"] == len(SAMPLE), first  # the first build
        assert w.next() == {"event": "watching", "codebases": [str(repo.resolve())]}
        st = service.status(service.open_codebase(repo))
        assert [x["by"] for x in st["watched_by"]] == ["cli"] and st["watched_by"][0]["pid"] == w.proc.pid

        (repo / "app" / "zebra.py").write_text("def stripe_the_zebra(zebra):\n    return zebra.stripes + 1\n")
        assert summed(w.updates_until(lambda got: summed(got, "added")), "added") == 1
        assert found(repo, "stripe_the_zebra")[0] == "app/zebra.py:stripe_the_zebra"

        tmp = repo / "app" / ".zebra.py.swp~"  # an editor's save: write beside, then rename over
        tmp.write_text("def paint_the_zebra(zebra):\n    return zebra.paint()\n")
        os.replace(tmp, repo / "app" / "zebra.py")
        w.updates_until(lambda got: summed(got, "modified"))
        assert found(repo, "paint_the_zebra")[0] == "app/zebra.py:paint_the_zebra"
        assert not any(r.startswith("app/zebra.py:stripe") for r in found(repo, "stripe_the_zebra"))

        (repo / "app" / "zebra.py").unlink()
        w.updates_until(lambda got: summed(got, "removed"))
        assert not any(r.startswith("app/zebra.py") for r in found(repo, "paint_the_zebra"))

        (repo / "later").mkdir()  # an empty folder first, its file some time after
        assert w.quiet_for(2.5) == []
        (repo / "later" / "late.py").write_text("def arrives_later():\n    return 2\n")
        w.updates_until(lambda got: summed(got, "added"))
        assert found(repo, "arrives_later")[0] == "later/late.py:arrives_later"

        burst = repo / "burst"
        burst.mkdir()
        for i in range(40):
            (burst / f"b{i}.py").write_text(f"def burst_function_{i}():\n    return {i}\n")
        lines = w.updates_until(lambda got: summed(got, "added") >= 40)
        assert summed(lines, "added") == 40 and len(lines) <= 5, lines  # a few builds, not one per file
        assert found(repo, "burst_function_37")[0] == "burst/b37.py:burst_function_37"

        db = service.open_codebase(repo).db_path
        (repo / ".git" / "objects").mkdir(parents=True)
        (repo / "node_modules" / "left-pad").mkdir(parents=True)  # a folder left out: listed once by status
        w.quiet_for(2.0)
        listed = service.status(service.open_codebase(repo))["skipped_files"]["files"]
        assert {"path": "node_modules/", "reason": "default-excluded"} in listed, listed
        before = db.stat().st_mtime_ns
        for i in range(20):
            (repo / ".git" / "objects" / f"o{i}").write_text("x")
            (repo / "node_modules" / "left-pad" / f"m{i}.js").write_text(f"function pad{i}() {{}}\n")
        assert w.quiet_for(4.0) == []
        assert db.stat().st_mtime_ns == before  # no write at all

        (repo / ".ignore").write_text("burst/\n")  # rules change: re-read, the ignored files leave
        assert summed(w.updates_until(lambda got: summed(got, "removed") >= 40), "removed") == 40
    finally:
        code, err = w.stop()
    assert code == 0 and "Stopped watching" in err, err
    assert service.doctor(service.open_codebase(repo), repair=False)["consistent"]
    assert "watched_by" not in service.status(service.open_codebase(repo))


def test_follow_wants_walked_directories_and_indexed_files_only(codii_home, tmp_path):
    repo = write_tree(tmp_path / "r", {**SAMPLE, ".ignore": "dist/\n", "dist/out.js": "x()\n",
                                       "node_modules/p/i.js": "y()\n"})
    follow = Follow(service.open_codebase(repo))
    follow.rescan()
    root = str(repo.resolve())
    assert follow.wants(f"{root}/app/http.py") and follow.wants(f"{root}/app/new.py") and follow.wants(f"{root}/x.py")
    assert follow.wants(f"{root}/.ignore") and follow.wants(f"{root}/newdir")
    assert not follow.wants(f"{root}/dist/out.js") and not follow.wants(f"{root}/node_modules/p/i.js")
    assert not follow.wants(f"{root}/.git/HEAD") and not follow.wants(f"{tmp_path}/elsewhere.py")
    assert follow.wants(f"{root}/.git/index") and follow.wants(f"{root}/.git/info/exclude")


def test_a_watcher_sees_a_force_added_file_and_an_exclude_and_the_cli_trusts_it_rightly(codii_home, tmp_path):
    """`git add -f` of an ignored file, and a path added to .git/info/exclude, change no walked folder:
    a new user's watcher never saw them, and as it vouched for the CLI's update check, grep answered
    without the forced file."""
    repo = write_tree(tmp_path / "g", {"a.py": "x = 1\n", ".gitignore": "*.log\n", "z.log": "FORCED_TOKEN\n"})
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    (repo / "untracked.txt").write_text("EXCLUDED_TOKEN\n")  # info/exclude applies to untracked files only
    assert service.build(service.open_codebase(repo), vectors=False).files == 3
    watch = WatchProcess(codii_home, repo)
    try:
        watch.updates_until(lambda lines: lines and lines[-1]["event"] == "watching")
        cmd = [sys.executable, "-m", "codii_sql.cli", "grep"]
        env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)}

        def eventually(pattern: str, code: int) -> None:
            deadline = time.monotonic() + PATIENCE
            while subprocess.run([*cmd, pattern, str(repo)], env=env, capture_output=True).returncode != code:
                assert time.monotonic() < deadline, pattern
                time.sleep(0.2)
        subprocess.run([*git, "add", "-f", "z.log"], cwd=repo, check=True)
        eventually("FORCED_TOKEN", 0)
        with open(repo / ".git" / "info" / "exclude", "a") as fh:
            fh.write("untracked.txt\n")
        eventually("EXCLUDED_TOKEN", 1)
    finally:
        watch.stop()


def test_a_cli_grep_of_a_watched_subfolder_of_a_work_tree_sees_what_git_add_f_takes_in(codii_home, tmp_path):
    """Git's index lies above a subfolder's root: its watcher heard nothing of `git add -f`, and said fresh,
    so the CLI's grep trusted it and missed the file for as long as it ran (a new user). The watcher now
    follows the work tree's index too, and the CLI does its own update check for such a root."""
    repo = write_tree(tmp_path / "g", {"src/a.py": "x = 1\n", ".gitignore": "*.log\n"})
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    src = repo / "src"
    service.build(service.open_codebase(src), vectors=False)
    watch = WatchProcess(codii_home, src)
    try:
        watch.updates_until(lambda lines: lines and lines[-1]["event"] == "watching")
        (src / "z.log").write_text("FORCED_SUB_TOKEN\n")  # heard, and left out: ignored
        time.sleep(1.5)
        subprocess.run([*git, "add", "-f", "src/z.log"], cwd=repo, check=True)  # outside the root
        assert summed(watch.updates_until(lambda got: summed(got, "added")), "added") == 1  # the watcher's own update
        subprocess.run([*git, "rm", "-q", "--cached", "src/z.log"], cwd=repo, check=True)
        assert summed(watch.updates_until(lambda got: summed(got, "removed")), "removed") == 1
        subprocess.run([*git, "add", "-f", "src/z.log"], cwd=repo, check=True)
        env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)}
        done = subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "FORCED_SUB_TOKEN", str(src)], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0 and "z.log" in done.stdout, (done.stdout, done.stderr)
    finally:
        watch.stop()


def test_sigterm_mid_build_stops_cleanly_and_the_next_build_finishes(codii_home, tmp_path):
    files = {f"pkg/m{i}.py": "".join(f"def f{i}_{j}(x):\n    return x + {j}\n\n\n" for j in range(6))
             for i in range(150)}
    repo = write_tree(tmp_path / "big", files)
    w = WatchProcess(codii_home, repo)
    db = service.open_codebase(repo).db_path
    deadline = time.monotonic() + PATIENCE
    while not db.is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    code, err = w.stop()
    assert code == 0 and "Traceback" not in err, err
    cb = service.open_codebase(repo)
    assert service.doctor(cb, repair=False)["consistent"]
    service.build(cb)
    assert service.status(cb, check_stale=True)["status"] == "indexed"
    assert found(repo, "f149_5")[0] == "pkg/m149.py:f149_5"


def test_the_mcp_server_keeps_what_it_indexed_fresh_and_forgets_what_it_cleared(codii_home, tmp_path):
    repo = write_tree(tmp_path / "live", SAMPLE)

    async def searched(s, query):
        out = await call(s, "search_code", path=str(repo), query=query, limit=3)
        return [f"{r['path']}:{r['symbol']}" for r in out["results"]]

    async def eventually(s, query, want, timeout=PATIENCE):
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if want in await searched(s, query):
                return
            await asyncio.sleep(0.25)
        raise AssertionError(f"{want} not found for {query!r} in {timeout} s")

    async def run():
        async with server(codii_home, CODII_SQL_BACKGROUND="0") as s:
            await call(s, "index_codebase", path=str(repo))
            st = await wait_indexed(s, repo)
            assert [x["by"] for x in st["watched_by"]] == ["mcp"], st
            (repo / "app" / "llama.py").write_text("def shear_the_llama(llama):\n    return llama.wool\n")
            await eventually(s, "shear_the_llama", "app/llama.py:shear_the_llama")
            await call(s, "clear_index", path=str(repo))
            (repo / "app" / "alpaca.py").write_text("def feed_the_alpaca():\n    return 1\n")
            await asyncio.sleep(3.0)
            assert not service.open_codebase(repo).db_path.exists()  # cleared stays cleared

    asyncio.run(run())


def test_no_watch_turns_the_servers_watchers_off(codii_home, tmp_path):
    repo = write_tree(tmp_path / "still", SAMPLE)

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            st = await wait_indexed(s, repo)
            assert st["watched_by"] == []

    asyncio.run(run())


def test_two_watchers_of_one_codebase_share_its_writer(codii_home, tmp_path):
    repo = write_tree(tmp_path / "shared", SAMPLE)
    service.build(service.open_codebase(repo))
    a, b = WatchProcess(codii_home, repo), WatchProcess(codii_home, repo)
    try:
        for w in (a, b):
            assert w.next()["event"] == "watching"  # the index was current: no update first
        assert len(service.status(service.open_codebase(repo))["watched_by"]) == 2
        (repo / "app" / "otter.py").write_text("def float_the_otter():\n    return 'afloat'\n")
        lines = a.quiet_for(6.0) + b.quiet_for(1.0)
        assert summed(lines, "added") == 1, lines  # one of them built it; the other found it done
        assert found(repo, "float_the_otter")[0] == "app/otter.py:float_the_otter"
    finally:
        for w in (a, b):
            assert w.stop()[0] == 0
    assert service.doctor(service.open_codebase(repo), repair=False)["consistent"]


def test_a_full_os_watch_table_falls_back_to_polling_and_says_so(codii_home, tmp_path, monkeypatch):
    import watchfiles

    real = watchfiles.watch

    def limited(*paths, force_polling=None, **kw):  # what notify raises when inotify's table is full
        if not force_polling:
            raise OSError('OS file watch limit reached. about ["/x"] (Error { kind: MaxFilesWatch })')
        return real(*paths, force_polling=force_polling, **kw)

    monkeypatch.setattr(watchfiles, "watch", limited)
    repo = write_tree(tmp_path / "full", SAMPLE)
    stop, notices, updates = threading.Event(), [], []
    watcher = service.Watcher([service.open_codebase(repo)], stop=stop, on_notice=notices.append,
                              on_update=updates.append)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while not notices and time.monotonic() < deadline:
        time.sleep(0.05)
    (repo / "app" / "late.py").write_text("def arrived_late():\n    return 1\n")
    while not any(u.report and u.report.added == 1 and u.report.files == len(SAMPLE) + 1 for u in updates) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    assert watcher.poll and "limit of file watches" in notices[0] and "polling" in notices[0]
    assert found(repo, "arrived_late")[0] == "app/late.py:arrived_late"


def test_a_build_stopped_on_request_leaves_the_index_stale_not_failed(codii_home, tmp_path):
    """A watcher (the MCP session's, when the client closes) stops a build from its progress
    callback; the index was then 'failed' (WatchStopped) until the next search repaired it. What
    the stopped build committed is kept, the index is stale, and the next build finishes it."""
    from codii_sql.errors import BuildStopped

    files = {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(40)}
    repo = write_tree(tmp_path / "repo", files)
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    for i in range(40):
        (repo / f"pkg/m{i}.py").write_text(f"def g{i}(x):\n    return x - {i}\n")

    def stop(phase: str, done: int, total: int | None) -> None:
        if phase == "chunk":
            raise BuildStopped("the watcher stopped")

    with pytest.raises(BuildStopped):
        service.build(cb, progress=stop)
    st = service.status(cb, check_stale=True)
    assert st["status"] == "stale" and not st.get("error"), st
    # What it left is said (a new user's MCP client closed during a first build: "stale, 100%", no note)
    assert st["stopped"].startswith("the watcher stopped after ") and st["stopped"].endswith(" of 40 files")
    told = service.Session().indexing_status(cb)
    assert told["percent"] < 100 and told["last_error"] == st["stopped"], told
    kept = service.search(service.SearchRequest("g39", SearchOptions(mode="bm25"), [str(repo)], update=False))
    assert "the last build stopped before it finished (the watcher stopped after" in kept.note(lambda hint: None)
    # A search that finishes it says so first (a new user's waited 37 s in silence after a killed build)
    from click.testing import CliRunner
    from codii_sql.cli import cli
    out = CliRunner().invoke(cli, ["search", "g39", "--path", str(repo), "--mode", "bm25"])
    assert out.exit_code == 0 and out.stderr.startswith(f"Finishing the last build of {repo} first (the watcher "
                                                        "stopped after 0 of 40 files)"), out.output
    assert service.status(cb)["stopped"] is None and "pkg/m39.py" in out.stdout
    assert service.status(cb, check_stale=True)["status"] == "indexed"
    assert found(repo, "g39")[0] == "pkg/m39.py:g39"


def test_clearing_a_watched_index_says_the_watcher_will_build_it_again(codii_home, tmp_path):
    """A new user cleared an index while `watch` ran, and the next edit silently built it whole again."""
    repo = write_tree(tmp_path / "watched", SAMPLE)
    service.build(service.open_codebase(repo), vectors=False)
    w = WatchProcess(codii_home, repo)
    try:
        assert w.next()["event"] == "watching"
        env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
        done = subprocess.run([sys.executable, "-m", "codii_sql.cli", "clear", str(repo), "--yes"], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith("Removed 1 index file"), done
        assert f"is watched by pid {w.proc.pid} (codii-sql watch)" in done.stderr and "stop it" in done.stderr
    finally:
        assert w.stop()[0] == 0


def test_an_mcp_build_cancelled_at_shutdown_leaves_the_index_stale_not_failed(codii_home, tmp_path):
    """A client that exits mid-build cancels the server's build: what it committed stays, and the index
    reads as stale (it read 'failed: BuildCancelled: the MCP server shut down...')."""
    from codii_sql.service.jobs import Jobs

    repo = write_tree(tmp_path / "big", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(300)})
    cb = service.open_codebase(repo)
    jobs = Jobs()
    jobs.cancel.set()  # the server is shutting down: the first progress report stops the build
    jobs.start(cb, False, None, None)
    jobs.shutdown()
    st = service.status(cb, check_stale=False)
    assert st["status"] != "failed" and not st.get("error"), st
    assert jobs.status(cb)[1].outcome == "cancelled"


def test_a_search_trusts_a_fresh_watcher_instead_of_walking_the_tree(codii_home, tmp_path):
    """A CLI search (its own process) skips its update's walk while a live watcher says it has committed
    every change it was told of, and said so lately; a stopped one's word goes stale, and the search walks."""
    from codii_sql.service.watchers import TRUST_SECONDS, watchers

    repo = write_tree(tmp_path / "repo", SAMPLE)
    cb = service.open_codebase(repo)
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_BACKGROUND": "0", "PYTHONPATH": str(REPO_ROOT)}

    def cli_search(query: str) -> list[str]:
        out = subprocess.run([sys.executable, "-m", "codii_sql.cli", "search", query, "--path", str(repo), "--mode", "bm25",
                              "--json"], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode in (0, 1), out.stderr
        return [f"{r['path']}:{r['symbol']}" for r in json.loads(out.stdout)["results"]]

    w = WatchProcess(codii_home, repo)
    try:
        assert w.next()["event"] == "update" and w.next()["event"] == "watching"
        deadline = time.monotonic() + PATIENCE
        while not (watchers(cb) and watchers(cb)[0].get("fresh")):
            assert time.monotonic() < deadline, watchers(cb)
            time.sleep(0.1)
        os.kill(w.proc.pid, signal.SIGSTOP)  # alive, fresh by its word, and told of nothing more
        try:
            (repo / "app" / "otter.py").write_text("def feed_the_otter(otter):\n    return otter.fish\n")
            assert "app/otter.py:feed_the_otter" not in cli_search("feed_the_otter")  # no walk: not seen yet
            # Stopped, it says nothing more: past TRUST_SECONDS of silence its word is stale, and the search walks
            # (a new user's Ctrl-Z'd watch kept every CLI answer on the old index, for ever).
            note = next((codii_home / "indexes").glob("*.db.watch")) / f"{w.proc.pid}.json"
            time.sleep(max(0.0, json.loads(note.read_text())["at"] + TRUST_SECONDS + 0.5 - time.time()))
            assert watchers(cb)[0]["fresh"] is False
            assert cli_search("feed_the_otter")[0] == "app/otter.py:feed_the_otter"  # walked and indexed
        finally:
            os.kill(w.proc.pid, signal.SIGCONT)
        (repo / "app" / "otter.py").write_text("def groom_the_otter(otter):\n    return otter.fur\n")
        w.updates_until(lambda got: summed(got, "modified"))
        deadline = time.monotonic() + PATIENCE
        while not watchers(cb)[0].get("fresh"):  # committed: fresh again
            assert time.monotonic() < deadline, watchers(cb)
            time.sleep(0.1)
        assert cli_search("groom_the_otter")[0] == "app/otter.py:groom_the_otter"
    finally:
        w.stop()


def test_an_agent_that_edits_a_file_and_greps_at_once_finds_its_edit(codii_home, tmp_path):
    """A tool answers only once this server's watcher has heard of every change made before the call
    and committed it: a new user's grep_code, called just after writing a file, found nothing (3 of 3),
    its event still in watchfiles' 50 ms group. Each call here comes at once after the write."""
    repo = write_tree(tmp_path / "agent", SAMPLE)

    async def run():
        async with server(codii_home, CODII_SQL_BACKGROUND="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            await call(s, "search_code", path=str(repo), query="zebra", limit=1)  # followed from now on
            for i in range(3):
                (repo / "app" / f"kiwi{i}.py").write_text(f"def peel_the_kiwi_{i}(kiwi):\n    return kiwi.skin\n")
                found = await call(s, "grep_code", path=str(repo), pattern=f"peel_the_kiwi_{i}")
                assert found["matched_lines"] == 1, found
                with (repo / "app" / "http.py").open("a") as fh:
                    fh.write(f"\ndef slice_the_mango_{i}(mango):\n    return mango.stone\n")
                hits = await call(s, "search_code", path=str(repo / "app"), query=f"slice_the_mango_{i}", mode="bm25",
                                  limit=1)
                assert hits["results"][0]["path"] == "app/http.py" and \
                    f"slice_the_mango_{i}" in hits["results"][0]["content"], hits
                (repo / "app" / f"fig{i}.py").write_text(f"class Fig{i}Tree:\n    pass\n")
                symbol = await call(s, "find_symbol", path=str(repo), name=f"Fig{i}Tree")
                assert [d["path"] for d in symbol["definitions"]] == [f"app/fig{i}.py"], symbol

    asyncio.run(run())


def test_a_write_right_after_a_fresh_servers_first_call_is_found_by_the_next(codii_home, tmp_path):
    """The first call starts the watcher; a file written while its watches are being set up is found by the
    check at its first wake, not by an event, and a tool now waits for that check too (a new user's agent:
    find_symbol right after such a write missed it in 5 of 26 fresh sessions). Four fresh servers here."""
    # Many folders: the watches take long enough to set up for the write to land before they are in place.
    repo = write_tree(tmp_path / "agent", {**SAMPLE, **{f"pkg/m{k:03d}/mod.py": f"def f{k}():\n    return {k}\n"
                                                        for k in range(300)}})
    service.build(service.open_codebase(repo), vectors=False)

    async def run(i):
        async with server(codii_home) as s:
            await call(s, "find_symbol", path=str(repo), name="nothing_here")
            (repo / "app" / f"pear{i}.py").write_text(f"def ripen_the_pear_{i}(pear):\n    return pear\n")
            found = await call(s, "find_symbol", path=str(repo), name=f"ripen_the_pear_{i}")
            assert [d["path"] for d in found["definitions"]] == [f"app/pear{i}.py"], found

    for i in range(4):
        asyncio.run(run(i))


def test_a_fresh_servers_first_search_sees_files_added_while_no_server_ran(codii_home, tmp_path):
    """symbol and grep brought a codebase up to date before a fresh server first read it; search did not,
    so a new user's first search_code missed a file added while no server ran (and found deleted ones)."""
    repo = write_tree(tmp_path / "agent", SAMPLE)
    service.build(service.open_codebase(repo), vectors=False)
    (repo / "app" / "melon.py").write_text("def slice_the_melon(melon):\n    return melon.halves\n")

    async def run():
        async with server(codii_home) as s:
            found = await call(s, "search_code", path=str(repo), query="slice_the_melon", mode="bm25", limit=1)
            assert found["results"] and found["results"][0]["path"] == "app/melon.py", found

    asyncio.run(run())


def test_a_tool_does_not_wait_for_a_watcher_whose_last_update_failed(tmp_path, codii_home, monkeypatch):
    """A new user's agent paid 5 s on every tool call over a damaged index: each waited for this server's
    watcher to commit, which a failing update never does. A real watcher thread over a real, damaged index."""
    from codii_sql.service import following as following_module
    from codii_sql.service.following import Following
    from codii_sql.service.jobs import Jobs

    repo = write_tree(tmp_path / "r", {"a.py": "def a():\n    return 1\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    follow = Following(Jobs(), enabled=True)
    try:
        follow.follow(cb)
        deadline = time.monotonic() + 60
        while follow._watchers.get(cb) is None and time.monotonic() < deadline:  # following it
            time.sleep(0.05)
        time.sleep(1.0)  # its first update (the index was current) and its first wait for events
        with open(cb.db_path, "r+b") as fh:  # break its pages, then change a file: the update fails on them
            fh.seek(8192)
            fh.write(os.urandom(16384))
        (repo / "a.py").write_text("def a():\n    return 2\n")
        while (cb not in follow.last or follow.last[cb].error is None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert follow.last[cb].error, follow.last[cb]
        monkeypatch.setattr(following_module, "SETTLE_SECONDS", 60.0)
        started = time.monotonic()
        follow.settle(cb)
        assert time.monotonic() - started < 10  # not the 60 s a commit that never comes would take
    finally:
        follow.shutdown()


def test_an_event_of_a_name_that_is_not_utf8_does_not_end_the_watch(codii_home, tmp_path):
    """notify cannot decode such a name: the first event of `caf\\xe9.py` (a write, even a read) ended
    `codii-sql watch` with a traceback, and every later edit was missed."""
    repo = write_tree(tmp_path / "r", {"app/a.py": "def alpha():\n    return 1\n"})
    odd = repo / "app" / os.fsdecode(b"caf\xe9.py")
    odd.write_text("def latin():\n    return 2\n")
    w = WatchProcess(codii_home, repo)
    try:
        w.updates_until(lambda lines: lines and lines[-1]["event"] == "watching")
        odd.write_text("def latin():\n    return 3\n")
        time.sleep(1.0)
        (repo / "app" / "b.py").write_text("def after_the_odd_name():\n    return 4\n")
        deadline = time.monotonic() + PATIENCE
        while "app/b.py:after_the_odd_name" not in found(repo, "after_the_odd_name") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "app/b.py:after_the_odd_name" in found(repo, "after_the_odd_name") and w.proc.poll() is None
    finally:
        code, err = w.stop()
    assert "Traceback" not in err, err
