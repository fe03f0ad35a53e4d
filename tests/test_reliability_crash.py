"""Crashes and faults lose nothing: SIGKILL mid-build, a failing model or parser, a model
change, a chunker change (re-chunks), a full disk and a read-only index directory, through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import torture
from support.answers import last_json
from support.trees import REPO_ROOT, write_tree

import codii_sql.ingest.embedding as embedding_mod
import codii_sql.ingest.indexer as index_mod
import codii_sql.ingest.lexical as lexical_mod
import codii_sql.ingest.prepare as prepare_mod
import codii_sql.ingest.settings as settings_mod
import codii_sql.service.embedders as embedders_mod
from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.models.embedder import Embedder
from codii_sql.storage.store import Store


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def assert_one_line_error(res):
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert res.output.startswith("Error: ") and res.output.strip().count("\n") == 0, res.output


def unprivileged(cmd: list[str]) -> list[str]:
    """``cmd`` run without root's power to ignore file modes (so chmod bites), or skip."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: file modes cannot be enforced")
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all", *cmd]


def cli_process(home: Path, *args) -> subprocess.CompletedProcess:
    """``python -m codii_sql.cli ARGS`` as a real process, without root privileges."""
    env = {**os.environ, "CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "CODII_SQL_THREADS": "1"}
    cmd = unprivileged([sys.executable, "-m", "codii_sql.cli", *map(str, args)])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_sigkill_at_20_points_loses_nothing_and_the_next_build_converges(tmp_path, codii_home):
    runs, failures = torture.run(tmp_path / "kill", codii_home, runs=20, seed=0)
    assert runs == 20 and failures == []


class FlakyEmbedder(Embedder):
    """The real embedder, except that call number ``fail_on`` (1-based) raises."""

    def __init__(self, real, fail_on: int | None):
        self.real, self.fail_on, self.calls = real, fail_on, 0
        self.name, self.model_id, self.dims, self.sha256 = real.name, real.model_id, real.dims, real.sha256
        self.max_tokens = real.max_tokens

    def embed(self, texts, **kw):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("onnxruntime session crashed")
        return self.real.embed(texts, **kw)


def chunk_texts(repo) -> dict[str, str]:
    with Store(Codebase.open(repo).db_path, create=False) as store:
        rows = store.conn.execute("SELECT c.path, group_concat(c.content, '') FROM chunks c "
                                  "JOIN chunks_vec v ON v.rowid = c.id GROUP BY c.path").fetchall()
    return dict(rows)


def test_embedding_or_parse_failure_mid_run_keeps_what_is_committed_and_is_retried(tmp_path, embedder, monkeypatch):
    """A parser failure keeps that file's old rows; a model failure in the vector phase keeps every
    file searchable by BM25 and every vector committed before it; the next build finishes both."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def old_{i}(x):\n    return x * {i}\n" for i in range(6)})
    assert run("build", repo).exit_code == 0
    write_tree(repo, {f"m{i}.py": f"def new_{i}(y):\n    return y + {i}\n" for i in range(6)})
    monkeypatch.setattr(embedding_mod, "VECTOR_BATCH", 2)  # commits of two chunks each
    flaky = FlakyEmbedder(embedder, fail_on=2)
    monkeypatch.setattr(embedders_mod, "get_embedder", lambda name: flaky)
    real_chunk = prepare_mod.index_source
    monkeypatch.setattr(prepare_mod, "index_source", lambda source, **kw: (
        (_ for _ in ()).throw(ValueError("parser exploded")) if "new_5" in source.regions[0].text else real_chunk(source, **kw)))

    res = run("build", repo)
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert res.output.startswith("Error: embedding failed: RuntimeError: onnxruntime session crashed"), res.output
    texts = chunk_texts(repo)  # files whose chunks have a vector
    assert sorted(texts) == ["m0.py", "m1.py", "m5.py"] and "old_5" in texts["m5.py"]
    found = json.loads(run("search", "new_3", "--path", repo, "--mode", "bm25", "--no-update", "--json").stdout)
    assert found["results"][0]["path"] == "m3.py"  # searchable by BM25 before its vector exists
    status = json.loads(run("status", repo, "--json").output)
    assert status["vectors"]["done"] == status["vectors"]["total"] - 3 and "onnxruntime" in status["vectors"]["error"]
    assert json.loads(run("doctor", repo, "--check-only", "--json").output)["consistent"]

    flaky.fail_on = None
    monkeypatch.setattr(prepare_mod, "index_source", real_chunk)
    again = last_json(run("build", repo, "--json").output)
    assert again["modified"] == 1 and again["failed"] == {} and again["vectors_pending"] == 0
    assert again["chunks_embedded"] == 4  # the three left over and the re-chunked m5, nothing twice
    assert all(f"new_{i}" in t and "old_" not in t for i, t in enumerate(v for _, v in sorted(chunk_texts(repo).items())))


def test_an_interrupted_force_rebuild_keeps_every_file_searchable(tmp_path, monkeypatch):
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(x):\n    return x * {i}\n" for i in range(6)})
    assert run("build", repo).exit_code == 0
    monkeypatch.setattr(lexical_mod, "BATCH_FILES", 2)  # three transactions: m0-m1, m2-m3, m4-m5
    real_chunk = prepare_mod.index_source
    monkeypatch.setattr(prepare_mod, "index_source", lambda source, **kw: (
        (_ for _ in ()).throw(KeyboardInterrupt) if "handler_3" in source.regions[0].text else real_chunk(source, **kw)))

    res = run("build", repo, "--force")
    assert res.exit_code == 130 and "Interrupted" in res.output
    assert sorted(chunk_texts(repo)) == [f"m{i}.py" for i in range(6)]  # nothing was emptied
    assert json.loads(run("doctor", repo, "--check-only", "--json").output)["consistent"]
    found = json.loads(run("search", "handler_5", "--path", repo, "--no-update", "--json").stdout)
    assert found["results"][0]["path"] == "m5.py" and "the last build stopped before it finished (interrupted after 2" \
        " of 6 files)" in found["note"]
    assert json.loads(run("status", repo, "--json").output)["status"] == "stale"  # a Ctrl-C is no failure

    monkeypatch.setattr(prepare_mod, "index_source", real_chunk)
    again = last_json(run("build", repo, "--json").output)
    assert (again["reindexed"], again["added"], again["modified"]) == (4, 0, 0)  # m2.. m5 were still marked
    assert last_json(run("build", repo, "--json").output)["reindexed"] == 0


def test_a_chunker_change_rechunks_and_a_model_change_needs_force(sample_repo, embedder, monkeypatch):
    assert run("build", sample_repo).exit_code == 0
    for module in (index_mod, settings_mod):  # each binds the chunker's version at import
        monkeypatch.setattr(module, "CHUNKER_VERSION", 99)
    res = run("search", "retry", "--path", sample_repo, "--no-update", "--json")
    assert res.exit_code == 0 and json.loads(res.output)["results"]  # older chunks stay searchable
    rebuilt = last_json(run("build", sample_repo, "--json").output)
    assert rebuilt["reindexed"] == 4 and rebuilt["files"] == 4 and rebuilt["added"] == 0
    assert rebuilt["chunks_embedded"] == 0  # every chunk text kept its vector
    assert json.loads(run("inspect", sample_repo, "--json").output)["snapshot"]["chunker_version"] == 99
    again = last_json(run("build", sample_repo, "--json").output)
    assert again["added"] == again["modified"] == again["reindexed"] == 0
    forced = last_json(run("build", sample_repo, "--force", "--json").output)
    assert forced["reindexed"] == 4 and forced["files"] == 4 and forced["chunks_embedded"] == 0
    again = last_json(run("build", sample_repo, "--force", "--no-cache", "--json").output)
    assert again["vectors_reused"] == 0 and again["chunks_embedded"] > 0  # the way to embed everything again
    assert json.loads(run("search", "retry", "--path", sample_repo, "--json").output)["results"]

    other = FlakyEmbedder(embedder, fail_on=None)
    other.dims = 512
    monkeypatch.setattr(embedders_mod, "get_embedder", lambda name: other)
    res = run("build", sample_repo)
    assert_one_line_error(res)
    assert "dims=384, this version uses 512" in res.output


@contextlib.contextmanager
def full_disk(directory: Path, free_bytes: int):
    """``directory`` on a small tmpfs with about ``free_bytes`` left, or skip (mounting needs root)."""
    directory.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(directory)],
                                           capture_output=True).returncode != 0:
        pytest.skip("emulating a full disk needs a tmpfs mount (root with CAP_SYS_ADMIN)")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill(directory: Path, free_bytes: int) -> Path:
    """Leave about ``free_bytes`` free on the file system of ``directory``; returns the filler file."""
    filler = directory / "filler"
    st = os.statvfs(directory)
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - free_bytes))
    return filler


def test_disk_full_is_a_one_line_error_and_the_old_index_survives(tmp_path, sample_repo):
    mnt = tmp_path / "small-disk"
    with full_disk(mnt, 0):
        db = mnt / "index.db"
        assert run("build", sample_repo, "--db", db).exit_code == 0
        filler = fill(mnt, 8 * 1024)
        write_tree(sample_repo, {"app/big.py": "".join(
            f"def handler_{i}(request):\n    return request.get('key_{i}', {i})\n\n\n" for i in range(300))})
        res = run("build", sample_repo, "--db", db)
        assert_one_line_error(res)
        filler.unlink()
        old = json.loads(run("search", "parse_header", "--path", sample_repo, "--db", db, "--no-update",
                             "--json").output)
        assert old["results"][0]["path"] == "app/parse.py"
        assert json.loads(run("doctor", sample_repo, "--db", db, "--check-only", "--json").output)["consistent"]
        assert last_json(run("build", sample_repo, "--db", db, "--json").output)["added"] == 1


def test_read_only_index_directory_is_a_one_line_error_and_the_index_survives(tmp_path, sample_repo, codii_home):
    assert run("build", sample_repo).exit_code == 0
    db = Codebase.open(sample_repo).db_path
    write_tree(sample_repo, {"app/extra.py": "def extra_handler():\n    return 1\n"})
    modes = {p: p.stat().st_mode for p in db.parent.iterdir()}
    for p in modes:
        p.chmod(0o444)
    db.parent.chmod(0o555)
    try:
        res = cli_process(codii_home, "build", sample_repo)
        assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith("Error: ") and res.stderr.strip().count("\n") == 0, res.stderr
        # Where the WAL index (-shm) cannot be created, the quiescent .db is read as immutable.
        searched = cli_process(codii_home, "search", "parse_header", "--path", sample_repo, "--no-update")
        assert searched.returncode == 0 and "app/parse.py" in searched.stdout, searched.stderr
        updating = cli_process(codii_home, "search", "extra_handler", "--path", sample_repo)
        assert updating.returncode == 0 and "could not be updated (the index is read-only)" in updating.stdout + \
            updating.stderr, updating
        doctored = cli_process(codii_home, "doctor", sample_repo)
        assert doctored.stderr.startswith("Error: ") and doctored.stderr.strip().count("\n") == 0, doctored.stderr
    finally:
        db.parent.chmod(0o755)
        for p, mode in modes.items():
            p.chmod(mode)
    old = json.loads(run("search", "parse_header", "--path", sample_repo, "--no-update", "--json").output)
    assert old["results"][0]["path"] == "app/parse.py"
    assert json.loads(run("doctor", sample_repo, "--check-only", "--json").output)["consistent"]
    assert last_json(run("build", sample_repo, "--json").output)["added"] == 1


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, parent in parents.items() if parent == p}
        todo += kids - found
        found |= kids
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_killed_build_leaves_no_chunker_workers_behind(tmp_path):
    """kill -9 mid lexical phase: the worker pool cannot be shut down, so its workers must notice alone."""
    repo = write_tree(tmp_path / "many", {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(80)})
    proc = _pool_process(repo, "time.sleep(60)", window=2)
    assert proc.stdout.readline().strip() == "ready"
    workers = _children(proc.pid)
    assert workers  # the pool is up
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(workers), f"orphaned: {_alive(workers)}"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("again", [False, True], ids=["once", "again-in-the-wait"])
def test_an_interrupt_in_the_write_phase_stops_the_chunking_processes_before_it_leaves_the_build(
        tmp_path, embedder, monkeypatch, again):
    """Ctrl-C while a batch is written (most of a build's time) left the pool for the interpreter's exit to stop:
    Python 3.11's exit handler raced the pool's own shutdown, printed "Exception ignored ... Bad file descriptor"
    (1 in 80 Ctrl-Cs) and once waited on the workers for good. The pool is stopped on the way out now, a second
    Ctrl-C during that wait held till it ends."""
    import concurrent.futures as cf
    import concurrent.futures.process as cf_process
    import signal
    from multiprocessing import forkserver

    from codii_sql.ingest.indexer import Indexer

    repo = write_tree(tmp_path / "many", {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(300)})
    seen: set[int] = set()

    def write_files(*args, **kwargs):
        seen.update(_children(forkserver._forkserver._forkserver_pid))  # the workers are the fork server's
        raise KeyboardInterrupt

    monkeypatch.setattr(lexical_mod, "write_files", write_files)
    monkeypatch.setattr(lexical_mod, "BATCH_FILES", 16)  # the first batch written with files still to prepare
    if again:
        shutdown = cf.ProcessPoolExecutor.shutdown

        def interrupted(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C as the wait starts: to the process, any thread
            return shutdown(self, *args, **kwargs)

        monkeypatch.setattr(cf.ProcessPoolExecutor, "shutdown", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background run of the suite ignores it
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            Indexer(Codebase.open(repo), embedder, progress=lambda *a: None, workers=2).build()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen, "the pool was not up when the batch was written"
    # Still inside the exception's life: its traceback holds the build's frames, as a CLI's exit path does.
    assert raised.value.__traceback__ is not None
    assert not _alive(seen), f"chunking processes still running: {_alive(seen)}"
    assert not list(cf_process._threads_wakeups), "the pool's manager thread is still running"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_sigterm_to_the_chunking_workers_leaves_them_to_the_build(tmp_path):
    """A SIGTERM to the build's process group reaches its workers too: one killed while sending a result left the
    pool's manager thread waiting for the rest of that message, and the build with it, for good (3 of 38 group
    SIGTERMs, a new user). The workers leave the signal to the build, which stops them itself."""
    repo = write_tree(tmp_path / "many", {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(200)})
    proc = _pool_process(repo, "sys.stdin.readline()\nprint(1 + sum(1 for p in it if p.chunks), flush=True)",
                         window=4, workers=2)
    assert proc.stdout.readline().strip() == "ready"
    server = [p for p in _children(proc.pid) if "forkserver" in Path(f"/proc/{p}/cmdline").read_text()
              and _parent(p) == proc.pid]
    workers = _children(server[0]) if server else set()  # the workers are the fork server's children
    assert workers, "no worker running"
    deadline = time.monotonic() + 30  # a worker forked a moment ago may not have run its start-up yet (a loaded CI)
    while not all(_ignores(pid, signal.SIGTERM) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    out, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 0 and out.strip() == "200", (out, err[-500:])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_the_chunking_workers_of_a_build_that_died_leave_before_its_parent_reaps_it(tmp_path):
    """`$(codii-sql build ...)` and subprocess.run read the build's output to its end before they reap it, and
    the workers hold that output: they took their dead build's zombie for alive and waited on it for good."""
    repo = write_tree(tmp_path / "many", {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(200)})
    proc = _pool_process(repo, "sys.stdin.readline()\nos._exit(0)", window=4, workers=2)
    try:
        assert proc.stdout.readline().strip() == "ready"
        workers = _children(proc.pid)
        assert workers
        proc.stdin.write("go\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 15
        while _alive(workers) and time.monotonic() < deadline:  # the build not reaped meanwhile: a zombie
            time.sleep(0.2)
        assert not _alive(workers), f"still running beside their build's zombie: {_alive(workers)}"
    finally:
        proc.kill()
        proc.wait()


def _pool_process(repo: Path, then: str, **options) -> subprocess.Popen:
    """A process whose chunking pool (``prepared_files`` over ``repo``, ``options`` its keywords) has given one file:
    it prints 'ready', then runs ``then`` (lines of Python; ``it`` the files still to come) inside the pool's context.
    Its stdin, stdout and stderr are pipes."""
    keywords = "".join(f", {k}={v!r}" for k, v in options.items())
    code = ("import os, sys, time\nfrom pathlib import Path\nfrom codii_sql.ingest.walk import scan\n"
            "from codii_sql.ingest.prepare import prepared_files\n"
            "files = scan(Path(sys.argv[1])).files\n"
            f"with prepared_files(Path(sys.argv[1]), files, 10**6{keywords}) as it:\n"
            "    next(it)\n    print('ready', flush=True)\n" + textwrap.indent(then, "    ") + "\n")
    return subprocess.Popen([sys.executable, "-c", code, str(repo)], cwd=REPO_ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _ignores(pid: int, sig: int) -> bool:
    """Whether process ``pid`` ignores signal ``sig`` (the SigIgn mask of /proc/PID/status; False once it is gone)."""
    with contextlib.suppress(OSError, StopIteration):
        mask = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn:"))
        return bool(int(mask.split()[1], 16) >> (sig - 1) & 1)
    return False


def _alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (not gone, not a zombie awaiting its parent)."""
    out = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.add(pid)
    return out


def test_a_search_after_a_killed_build_says_it_finishes_that_build_first(tmp_path, codii_home):
    """kill -9 during a first build, then a search in a fresh process: it finished the build in silence
    (a new user waited 37 s on Django, then read "2 results in 526 ms"; under --json, 24 s unsaid). A text
    search says so first (tests/test_watch.py), every answer says so in its note."""
    import apsw

    from codii_sql.codebase import Codebase

    repo = write_tree(tmp_path / "many", {f"pkg{i % 20}/m{i}.py": "".join(
        f"def f{i}_{j}(x):\n    return x * {j}\n\n" for j in range(8)) for i in range(2000)})
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
    cli = [sys.executable, "-m", "codii_sql.cli"]
    build = subprocess.Popen([*cli, "build", str(repo), "--no-vectors"], cwd=REPO_ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db, done = Codebase.open(repo).db_path, 0
    deadline = time.monotonic() + 120
    while not done and time.monotonic() < deadline and build.poll() is None:
        time.sleep(0.05)
        with contextlib.suppress(apsw.Error):
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            row = conn.execute("SELECT value FROM meta WHERE key = 'files_done'").fetchone()
            conn.close()
            done = json.loads(row[0]) if row else 0
    build.kill()
    build.wait()
    assert done, "the build ended before it committed a batch"
    out = subprocess.run([*cli, "search", "f1999_7", "--path", str(repo), "--mode", "bm25", "--json"], cwd=REPO_ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    found = json.loads(out.stdout)
    assert out.returncode == 0 and found["results"][0]["path"] == "pkg19/m1999.py", out.stdout[-300:]
    assert "the last build of this codebase had not finished (it stopped after " in found["note"], found["note"]
    assert " of 2,000 files): this search finished it" in found["note"] and "update" in found["notes"]


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_in_the_chunk_phase_is_one_line_and_leaves_the_index_usable(tmp_path, codii_home, how):
    """A terminal's Ctrl-C reaches the build's whole process group: each chunking worker printed its own
    KeyboardInterrupt traceback (~38 lines, a new user) above the build's one-line note. A SIGTERM to the build
    alone (a supervisor's, `kill`) ended `build --json` with no last line and 'leaked semaphore objects'."""
    import os
    import signal

    repo = write_tree(tmp_path / "many", {f"pkg{i % 9}/m{i}.py": "".join(
        f"def f{i}_{j}(x):\n    return x + {j}\n\n\n" for j in range(40)) for i in range(600)})
    # A terminal's Ctrl-C reaches a build started in the foreground: a run of this suite in the background (a shell's
    # `&` ignores SIGINT, and a child keeps an ignored signal) would start the build deaf to it. A handled signal is
    # at its default in a child, so SIGINT is handled here while the build starts.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "build", str(repo), "--no-vectors", "--json"],
                                cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    for line in proc.stdout:
        if '"chunk"' in line and '"done": 0' not in line:
            break
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to every process of the group
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    code, word = (130, "interrupted") if how == "ctrl-c" else (143, "terminated")
    assert proc.returncode == code and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert word.capitalize() in err and "leaked" not in err, err
    said = json.loads(out.strip().splitlines()[-1])  # under --json an error object too (helper 2: none came)
    assert said["exit_code"] == code and said["error"].startswith(word) and said["hint"], said
    assert json.loads(run("doctor", repo, "--check-only", "--json").output)["consistent"]
    assert last_json(run("build", repo, "--no-vectors", "--json").output)["files"] == 600
