"""An intact index on a full disk or a read-only file system: reads work, writes say why they cannot.

The disk is a real tmpfs of a few MiB mounted for the test (root only; skipped elsewhere), filled to
its last byte with a file of zeros.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_mcp import call, refused, server

from support.answers import last_json

from codii_sql.cli import cli
from codii_sql.codebase import Codebase

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    # 48 MiB: the home holds the optimised model (~22 MiB), the embedding cache and the index.
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Write zeros until the file system has no byte left."""
    with open(disk / "filler", "wb", buffering=0) as out:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)


def remount(disk: Path, mode: str, timeout: float = 60.0) -> None:
    """``mount -o remount,MODE`` once no process holds a file of ``disk`` open for writing.

    A server process the MCP client just stopped, or a background build it left, can still hold
    the index open for a moment under load ("mount point is busy", seen once in CI); past
    ``timeout`` seconds the failure names the processes that hold files there.
    """
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()  # a connection only a cycle of frames still holds (a failed open's traceback) lets go
        done = subprocess.run(["mount", "-o", f"remount,{mode}", str(disk)], capture_output=True, text=True)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"remount,{mode} failed: {done.stderr.strip()}; open there: {holders(disk)}")
        time.sleep(0.2)


def holders(disk: Path) -> list[str]:
    """``pid command: path`` of every open file under ``disk``, from /proc."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(str(disk)):
                        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        found.append(f"{proc.name} {cmd[:120]}: {target}")
    return found


def cli_json(*args) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    return res.exit_code, last_json(res.stdout)


def test_an_intact_index_is_read_on_a_full_disk_and_a_read_only_one(small_disk, sample_repo, monkeypatch):
    monkeypatch.setenv("CODII_SQL_HOME", str(small_disk / "home"))
    monkeypatch.setenv("CODII_SQL_WATCH", "0")
    code, report = cli_json("build", sample_repo, "--json")
    assert code == 0, report
    db = Codebase.open(sample_repo).db_path
    # The last connection removed the WAL index: reading must not need to create it again.
    assert not Path(f"{db}-shm").exists()
    code, before = cli_json("search", "retry with backoff", "--path", sample_repo, "--json", "--no-update")
    fill(small_disk)

    code, after = cli_json("search", "retry with backoff", "--path", sample_repo, "--json", "--no-update")
    assert code == 0 and [r["id"] for r in after["results"]] == [r["id"] for r in before["results"]], after
    (sample_repo / "app" / "http.py").write_text((sample_repo / "app" / "http.py").read_text() + "\n# edited\n")
    code, updating = cli_json("search", "retry with backoff", "--path", sample_repo, "--json")
    assert code == 0 and updating["results"], updating
    assert updating["note"].startswith("the index could not be updated (the disk is full)"), updating["note"]
    code, st = cli_json("status", sample_repo, "--json")
    assert code == 0 and st["files"] == report["files"], st
    code, failed = cli_json("build", sample_repo, "--json")
    assert code != 0 and "disk is full" in failed["error"] and "free some space" in failed["hint"], failed

    async def agent():
        async with server(small_disk / "home", CODII_SQL_WATCH="0") as s:
            found = await call(s, "search_code", path=str(sample_repo), query="retry with backoff")
            assert found["results"][0]["path"] == before["results"][0]["path"], found
            assert (await call(s, "get_indexing_status", path=str(sample_repo)))["files"]["indexed"] == st["files"]
            msg = await refused(s, "index_codebase", path=str(sample_repo))
            assert "the disk is full" in msg and "call the tool again" in msg and "codii-sql" not in msg, msg

    asyncio.run(agent())

    (small_disk / "filler").unlink()
    remount(small_disk, "ro")
    code, ro = cli_json("search", "retry with backoff", "--path", sample_repo, "--json")
    assert code == 0 and ro["results"] and "(the index is read-only)" in ro["note"], ro

    async def read_only_agent():  # a build that fails on a read-only disk: building again cannot help
        async with server(small_disk / "home", CODII_SQL_WATCH="0") as s:
            res = await s.call_tool("index_codebase", {"path": str(sample_repo)})
            if res.is_error:
                assert "read-only" in res.content[0].text.lower(), res.content[0].text
                return
            for _ in range(100):
                st = await s.call_tool("get_indexing_status", {"path": str(sample_repo)})
                if st.structured_content["status"] != "indexing":
                    break
                await asyncio.sleep(0.1)
            assert st.structured_content["status"] == "failed" and st.structured_content["resumable"] is False, st
            assert "to resume" not in st.content[0].text and "read-only" in st.content[0].text

    asyncio.run(read_only_agent())
    other = sample_repo.parent / "other"  # a first index in a read-only home, with no indexes/ folder yet: a
    other.mkdir()  # helper was told "check the path and free disk space", not where to put it instead
    (other / "a.py").write_text("def alpha():\n    return 1\n")
    monkeypatch.setenv("CODII_SQL_HOME", str(small_disk / "empty_home"))
    code, new = cli_json("build", other, "--json")
    assert code != 0 and "CODII_SQL_HOME to a writable folder" in new["hint"], new
    monkeypatch.setenv("CODII_SQL_HOME", str(small_disk / "home"))
    remount(small_disk, "rw")
    code, rebuilt = cli_json("build", sample_repo, "--json")  # space again: the edit is indexed
    assert code == 0 and rebuilt["modified"] == 1, rebuilt


def test_a_first_build_on_a_full_disk_leaves_nothing_that_blocks_the_next(small_disk, sample_repo, monkeypatch):
    """A new user's first build on a full disk left a 0-byte index; once space was freed every command, clear too,
    called it "not a codii-sql index", and only deleting it by hand helped."""
    monkeypatch.setenv("CODII_SQL_HOME", str(small_disk / "home"))
    (small_disk / "home" / "indexes").mkdir(parents=True)
    fill(small_disk)
    run = CliRunner().invoke
    failed = run(cli, ["build", str(sample_repo), "--no-vectors"])
    assert failed.exit_code != 0 and "disk is full" in failed.output, failed.output
    (small_disk / "filler").unlink()
    assert "not_indexed" in run(cli, ["status", str(sample_repo)]).output
    assert run(cli, ["clear", str(sample_repo), "--yes"]).exit_code == 0
    fill(small_disk)
    run(cli, ["build", str(sample_repo), "--no-vectors"])
    (small_disk / "filler").unlink()
    built = run(cli, ["build", str(sample_repo), "--no-vectors"])
    assert built.exit_code == 0, built.output
    assert not list((small_disk / "home" / "indexes").glob("*.tmp"))


def test_a_log_the_full_disk_cannot_fold_is_kept_not_reported_as_a_failed_build(small_disk, sample_repo, monkeypatch):
    """A new user's build committed every file, then its last step (folding the WAL into the file, which grows it)
    met the full disk and the build said "the disk is full". The log holds the index: it waits for the next fold."""
    from codii_sql.storage.copies import fold_log
    from codii_sql.storage.store import Store

    monkeypatch.setenv("CODII_SQL_HOME", str(small_disk / "home"))
    assert CliRunner().invoke(cli, ["build", str(sample_repo), "--no-vectors"]).exit_code == 0
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        store.conn.execute("PRAGMA wal_autocheckpoint = 0")  # the commit folds nothing itself
        with store.transaction():
            store.set_meta(padding="x" * (16 << 20))  # pages past the file's end, in the log
        fill(small_disk)
        fold_log(store)
        assert len(store.meta()["padding"]) == 16 << 20
