"""Several real processes on one codebase: one writer at a time, readers never see a
half-written file, no duplicate chunks, and no other codebase's index is touched."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import torture
from support.answers import last_json
from support.trees import REPO_ROOT

from codii_sql.cli import cli
from codii_sql.storage.store import Store

pytestmark = pytest.mark.slow


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def start(loop: torture.KillLoop, *args: str) -> subprocess.Popen:
    """A real ``codii-sql`` process (``build`` with two files per transaction, else the plain CLI)."""
    cmd = loop.command(*args) if not args or args[0].startswith("--") else [
        loop.command()[0], "-m", "codii_sql.cli", *args]
    return subprocess.Popen(cmd, env=loop.env(), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def half_written_files(db) -> list[str]:
    """Files whose chunk rows or vectors disagree with their row, as a reader sees them now."""
    with Store(db, create=False) as store:
        bad = store.rows("chunk_count_mismatch") + store.rows("chunks_without_vector")
    return [r["path"] for r in bad]


def test_writers_wait_their_turn_readers_see_whole_files_others_untouched(tmp_path, codii_home):
    other = torture.KillLoop(tmp_path / "other", codii_home, seed=1)
    other.build()
    other_db = other.codebase.db_path
    other_bytes = hashlib.sha256(other_db.read_bytes()).hexdigest()

    loop = torture.KillLoop(tmp_path / "main", codii_home, seed=2)
    loop.warm_up()
    for _ in range(3):
        loop.mutate()
    writers = [start(loop, "--force"), start(loop, "--force"), start(loop)]
    searcher = None
    reads = 0
    while any(w.poll() is None for w in writers):
        assert half_written_files(loop.codebase.db_path) == []
        reads += 1
        if searcher is None:
            searcher = start(loop, "search", "handle request kind", "--path", str(loop.repo), "--json")
        time.sleep(0.01)
    outs = [w.communicate() for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], [e for _, e in outs]
    reports = [last_json(o) for o, _ in outs]
    # One writer at a time: each --force build wrote every file itself.
    assert [r["added"] + r["modified"] + r["reindexed"] == r["files"] > 0 for r in reports[:2]] == [True, True]
    s_out, s_err = searcher.communicate()
    assert searcher.returncode == 0, s_err
    assert json.loads(s_out)["results"]
    assert reads > 0

    problems = loop.check()
    assert problems == []
    rows = loop.rows("SELECT path, start_line, end_line, content FROM chunks", loop.codebase.db_path)
    assert len(rows) == len(set(rows))  # no duplicate chunks
    assert hashlib.sha256(other_db.read_bytes()).hexdigest() == other_bytes


def _hold_writer_lock(root: str, db: str, held, release) -> None:
    """In a child process: take the codebase's writer lock, say so, keep it until ``release``."""
    from codii_sql.codebase import Codebase
    from codii_sql.storage.lock import writer_lock

    with writer_lock(Codebase(Path(root), Path(db))):
        held.set()
        release.wait(120)


def test_a_search_during_a_build_answers_from_committed_state(tmp_path, codii_home):
    """A search does not wait for a running build (it waits at most 1 s for the writer lock) and says so."""
    loop = torture.KillLoop(tmp_path / "busy", codii_home, seed=3)
    loop.warm_up()
    for _ in range(4):
        loop.mutate()
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_writer_lock, args=(str(loop.codebase.root), str(loop.codebase.db_path),
                                                         held, release))
    holder.start()
    try:
        assert held.wait(60), "the lock holder did not start"
        res = run("search", "handle request kind", "--path", loop.repo, "--json")
    finally:
        release.set()
        holder.join(60)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["note"].startswith("another process is indexing"), out
    assert out["results"] and any(r["stale"] for r in out["results"])  # the files changed since the last commit
    loop.complete_chunks(problems := [])
    assert problems == []


def _open_at_once(db: str, barrier, results) -> None:
    """In a child process: wait for the others at ``barrier``, then open (create) the index ``db``."""
    barrier.wait(60)
    try:
        Store(Path(db)).close()
        results.put("ok")
    except Exception as err:  # noqa: BLE001 - reported to the test
        results.put(repr(err))


def test_processes_opening_one_new_index_at_once_all_succeed(tmp_path):
    # Before: switching a new file to WAL returned SQLITE_BUSY without waiting, and the two
    # shape checks could straddle another process's schema commit (about 1 open in 20 failed).
    dbs = [str(tmp_path / f"new{i}.db") for i in range(12)]
    ctx = multiprocessing.get_context("spawn")
    for db in dbs:
        barrier, results = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(db, barrier, results)) for _ in range(3)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(60)
        assert outcomes == ["ok"] * 3, (db, outcomes)
    for db in dbs:
        with Store(Path(db), create=False) as store:
            assert store.meta() == {} and store.row("index_shape")["ours"] == 3


def test_a_reader_in_another_process_does_not_hold_an_update_after_its_commit(tmp_path, codii_home, monkeypatch):
    """A build ends by folding the write-ahead log into the file. It waited (the busy timeout, 10 s) for
    every reader to let go of the log: a watcher's kernel edit took 11 s instead of 0.7 while an agent
    searched, and the next edit waited behind it. It now folds what it can and keeps the log; the next
    build with no reader empties it. The log folded in later (by the last connection to close) is not
    taken for another writer's change: that sent the next build to read every page (13-15 s on the
    kernel's 4.5 GB) after each such commit."""
    import sys
    import threading

    from support.trees import write_tree

    from codii_sql import service

    repo = write_tree(tmp_path / "r", {"a.py": "def alpha():\n    return 1\n", "b.py": "def beta():\n    return 2\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    (repo / "a.py").write_text("def alpha():\n    return 10\n")
    service.build(cb, vectors=False)  # a commit, so that the log has pages a reader's snapshot reads
    hold = ("import apsw, sys\n"
            f"c = apsw.Connection({str(cb.db_path)!r}, flags=apsw.SQLITE_OPEN_READONLY)\n"
            "c.execute('BEGIN'); print(list(c.execute('SELECT count(*) FROM files'))[0][0], flush=True)\n"
            "sys.stdin.read()\n")
    reader = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "2"  # its snapshot is held
        (repo / "b.py").write_text("def beta_renamed():\n    return 3\n")
        done = threading.Event()
        threading.Thread(target=lambda: (service.build(cb, vectors=False), done.set()), daemon=True).start()
        assert done.wait(6.0), "the update waited on the reader after its commit"
        assert service.find_symbol(cb, "beta_renamed", update=False)["definitions"]
        assert Path(f"{cb.db_path}-wal").stat().st_size > 0  # kept: the reader still reads from it
    finally:
        reader.stdin.close()
        reader.wait(30)
    Store(cb.db_path, create=False).close()  # the last connection to close folds the log into the file
    checks = []
    rows = Store.rows
    monkeypatch.setattr(Store, "rows", lambda self, name, params=None: checks.append(name) or rows(self, name, params))
    service.build(cb, vectors=False)  # nothing to do, and no reader: the log is emptied
    wal = Path(f"{cb.db_path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert "pragma_quick_check" not in checks
