"""Two phases in every build: every file searchable by BM25 first, vectors streaming in behind (real model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import apsw
import numpy as np
import pytest
from click.testing import CliRunner
from support.answers import last_json
from support.trees import REPO_ROOT, write_tree

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.ingest import embedding
from codii_sql.ingest.indexer import Indexer
from codii_sql.models.embedder import Embedder
from codii_sql.search.results import SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.service.vector_state import vector_progress
from codii_sql.storage import queries
from codii_sql.storage.store import Store


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def as_json(res) -> dict:
    assert res.exit_code == 0, res.output
    return last_json(res.stdout)


def test_a_build_with_vectors_off_that_reused_some_says_so(tmp_path, sample_repo):
    """helper 54: a copy of a tree built with --no-vectors took its chunks' vectors from the embedding cache, and
    the note said "holds vectors for 314 of 316 chunks (built with vectors off)"."""
    import shutil

    assert run("build", sample_repo).exit_code == 0  # with vectors: the cache holds every chunk text's
    copy = shutil.copytree(sample_repo, tmp_path / "copy")
    (copy / "extra.py").write_text("def brand_new_helper(x):\n    return x * 3 + 1\n")
    assert run("build", copy, "--no-vectors").exit_code == 0
    found = as_json(run("search", "retry", "--path", copy, "--json"))
    assert "chunks have a vector, reused (built with vectors off): the others rank by BM25 alone" in found["note"], \
        found["note"]


def test_no_vectors_is_bm25_only_and_a_later_build_with_vectors_fills_them_in(sample_repo):
    first = as_json(run("build", sample_repo, "--no-vectors", "--json"))
    assert first["chunks"] > 0 and first["vectors_pending"] == first["chunks"] and first["chunks_embedded"] == 0
    st = as_json(run("status", sample_repo, "--json"))
    assert st["status"] == "indexed" and st["vectors"] == {"done": 0, "total": first["chunks"], "state": "off"}
    found = as_json(run("search", "when does it give up retrying after attempts", "--path", sample_repo, "--json"))
    assert found["results"][0]["symbol"] == "retry_with_backoff"  # hybrid: BM25 in the vectors' place
    assert "built with vectors off" in found["note"] and "rank by BM25 alone" in found["note"]
    # no_good_match is judged by cosine: without vectors it is never true, and the note says so (a helper)
    assert "no_good_match cannot tell" in found["note"] and found["no_good_match"] is False
    assert f"`codii-sql build {sample_repo} --vectors` embeds them" in found["note"]
    assert as_json(run("build", sample_repo, "--json"))["vectors_pending"] == first["chunks"]  # kept off

    filled = as_json(run("build", sample_repo, "--vectors", "--json"))
    assert filled["vectors_pending"] == 0 and filled["added"] == filled["modified"] == 0
    assert filled["chunks_embedded"] == first["chunks"]  # the sample's chunk texts are distinct
    assert as_json(run("status", sample_repo, "--json"))["vectors"]["state"] == "complete"
    again = as_json(run("build", sample_repo, "--json"))
    assert again["chunks_embedded"] == 0 and again["vectors_pending"] == 0
    assert "note" not in as_json(run("search", "retry", "--path", sample_repo, "--json"))


def test_codii_yaml_can_turn_vectors_off(sample_repo):
    (sample_repo / ".codii.yaml").write_text("vectors: false\n")
    report = as_json(run("build", sample_repo, "--json"))
    assert report["vectors_pending"] == report["chunks"] > 0
    (sample_repo / ".codii.yaml").write_text("vectors: maybe\n")
    res = run("build", sample_repo)
    assert res.exit_code == 2 and "vectors must be true or false" in res.output and res.output.count("\n") == 1


def test_a_queued_chunk_ranks_by_bm25_in_the_vectors_place(sample_repo, embedder):
    """"No vector yet" is not "irrelevant": the chunk a question is about keeps its place while
    every other chunk has a vector and it has none."""
    cb = Codebase.open(sample_repo)
    Indexer(cb, embedder).build()
    query = "retry a call that raises IOError with exponential backoff"
    with Store(cb.db_path, create=False) as store:
        searcher = Searcher(store, cb.root, embedder)
        full = searcher.search(query, SearchOptions(limit=5))
        target = full[0]
        assert target.symbol == "retry_with_backoff"
        with store.transaction():  # as if the vector phase had not reached this chunk yet
            store.run("vectors_delete", {"id": target.id})
            store.run("vector_queue_add", {"id": target.id, "priority": 0})
        queued = searcher.search(query, SearchOptions(limit=5))
    assert queued[0].id == target.id and queued[0].knn_rank is None and queued[0].bm25_rank is not None
    assert queued[0].score == pytest.approx(target.score, rel=0.35)


def test_while_few_chunks_have_vectors_those_few_do_not_take_the_top(tmp_path, embedder):
    """With 4 of 144 chunks embedded, hybrid ranks as BM25 does: the embedded ones
    fill the KNN list and took near-full scores however poor the match (Django's .po files,
    embedded first, above middleware/csrf.py for "where is the CSRF token checked")."""
    files = {f"pkg/mod{i}.py": f'def handler_{i}(request):\n    """Handle request kind {i} for the service."""\n'
                               f'    return {i}\n' for i in range(139)}
    files["pkg/csrf.py"] = ('def check_csrf_token(request):\n    """Reject the request when its CSRF token does not '
                            'match the cookie."""\n    return request.token == request.cookie\n')
    for lang in ("de", "fr", "es", "it"):
        files[f"locale/{lang}/django.po"] = (f'msgid "CSRF token missing."\nmsgstr "CSRF ({lang}) fehlt."\n\n'
                                             f'msgid "CSRF verification failed."\nmsgstr "({lang}) failed."\n')
    repo = write_tree(tmp_path / "few", files)
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    query = "where is the CSRF token checked"
    with Store(cb.db_path, create=False) as store:
        searcher = Searcher(store, cb.root, embedder)
        bm25 = searcher.search(query, SearchOptions(limit=5, mode="bm25", role_prior=False))
        assert bm25[0].symbol == "check_csrf_token"
        embedded = {r["id"] for lang in ("de", "fr", "es", "it")
                    for r in store.rows("chunks_of_file", {"path": f"locale/{lang}/django.po"})}
        with store.transaction():  # the vector phase has reached the catalogues only
            for row in store.rows("files_all"):
                for chunk in store.rows("chunks_of_file", {"path": row["path"]}):
                    if chunk["id"] not in embedded:
                        store.run("vectors_delete", {"id": chunk["id"]})
                        store.run("vector_queue_add", {"id": chunk["id"], "priority": 0})
        # No role prior: the catalogues counted as source then, and tied with csrf.py on BM25.
        hybrid = searcher.search(query, SearchOptions(limit=5, role_prior=False))
    assert hybrid[0].symbol == "check_csrf_token", [(r.path, r.score) for r in hybrid]


def test_source_is_embedded_first_and_searched_files_before_it(tmp_path, embedder):
    repo = write_tree(tmp_path / "r", {"docs/guide.md": "# Guide\n\nHow to retry.\n",
                                       "tests/test_core.py": "def test_retry():\n    assert retry()\n",
                                       "src/core.py": "def retry():\n    return 1\n",
                                       "src/other.py": "def other():\n    return 2\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder, vectors=False).build()
    with Store(cb.db_path, create=False) as store:
        order = [r["path"] for r in embedding._next_batch(store, [], 10)]
        hot = [r["path"] for r in embedding._next_batch(store, ["docs/guide.md", "missing.py"], 10)]
        plan = " ".join(str(r) for r in store.conn.execute(f"EXPLAIN QUERY PLAN {queries.sql('vector_queue_next')}",
                                                           {"n": 10}))
    assert order == ["src/core.py", "src/other.py", "tests/test_core.py", "docs/guide.md"]
    assert hot == ["docs/guide.md", *order[:3]]
    assert "vector_queue_order" in plan and "TEMP B-TREE" not in plan  # no sort of the whole queue


class RewritingEmbedder(Embedder):
    """The real embedder; on its first call the file ``path`` is rewritten and re-indexed (lexical
    phase only), as a user's edit and a search's update would do while the vector phase runs."""

    def __init__(self, real, codebase: Codebase, path: str, text: str):
        self.real, self.codebase, self.path, self.text = real, codebase, path, text
        self.name, self.model_id, self.dims, self.sha256 = real.name, real.model_id, real.dims, real.sha256
        self.max_tokens = real.max_tokens
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.calls == 1:
            (self.codebase.root / self.path).write_text(self.text)
            Indexer(self.codebase, self.real, vectors=False).build()
        return self.real.embed(texts)


def test_a_file_replaced_during_the_vector_phase_gets_the_vectors_of_its_new_text(sample_repo, embedder):
    cb = Codebase.open(sample_repo)
    Indexer(cb, embedder, vectors=False).build()
    new_text = "def parse_cookie(line):\n    return dict(p.split('=', 1) for p in line.split(';'))\n"
    rewriting = RewritingEmbedder(embedder, cb, "app/parse.py", new_text)
    report = Indexer(cb, rewriting, vectors=True).build()
    assert report.vectors_pending == 0
    with Store(cb.db_path, create=False) as store:
        rows = store.rows("file_vectors", {"path": "app/parse.py", "start_line": None, "end_line": None})
        assert [r["start_line"] for r in rows] == [1]
        stored = np.frombuffer(rows[0]["embedding"], dtype=np.float32)
        assert float(stored @ embedder.embed([new_text])[0]) > 0.9999
    assert as_json(run("doctor", sample_repo, "--check-only", "--json"))["consistent"]


def test_vector_progress_states_and_eta():
    counts = {"chunks": 100, "pending": 40}
    assert vector_progress({"vectors_rate": 8.0}, counts, running=True) == \
        {"done": 60, "total": 100, "state": "running", "eta_seconds": 5}
    assert vector_progress({"vectors_enabled": False}, counts, running=False)["state"] == "off"
    assert vector_progress({"vectors_error": "boom"}, counts, running=False) == \
        {"done": 60, "total": 100, "state": "pending", "error": "boom"}
    assert vector_progress({}, {"chunks": 5, "pending": 0}, running=False)["state"] == "complete"


def test_the_time_left_for_vectors_counts_down_between_commits_by_the_text_left(tmp_path, codii_home, monkeypatch):
    """A helper saw "11 s left" for 50 s, and the phase took a minute more: the time left moved only at a
    commit of 512 chunks, and a rate in chunks, measured on a window's shortest chunks first, misjudged the rest."""
    import time as clock

    counts = {"chunks": 1000, "pending": 600}
    now = clock.time()
    meta = {"vectors_rate": 100.0, "vectors_char_rate": 2000.0, "vectors_pending_chars": 60_000,
            "vectors_updated_at": now}
    assert vector_progress(meta, counts, running=True)["eta_seconds"] == 30  # 60,000 characters at 2,000 a second
    later = vector_progress({**meta, "vectors_updated_at": now - 12}, counts, running=True)
    assert later["eta_seconds"] == 18  # counted down since the commit
    # past a batch's time since the commit, no more is taken as done: the phase slowed (an agent read "eta 1" with
    # 2,335 chunks, 70 s, left): 30 s less 512 of 600 chunks' 25.6 s
    assert vector_progress({**meta, "vectors_updated_at": now - 90}, counts, running=True)["eta_seconds"] == 4
    few = {"chunks": 1000, "pending": 100}  # one batch left: its whole time may pass
    assert vector_progress({**meta, "vectors_updated_at": now - 90}, few, running=True)["eta_seconds"] == 1
    # A real phase records the text it has left and its rate in characters at each commit.
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n" for i in range(6)})
    assert run("build", repo, "--no-vectors").exit_code == 0
    with Store(Codebase.open(repo).db_path, create=False) as store:
        queued = store.value("vector_queue_chars")
        assert queued == sum(len((repo / f"m{i}.py").read_text()) for i in range(6))
    assert run("build", repo, "--vectors").exit_code == 0
    with Store(Codebase.open(repo).db_path, create=False) as store:
        meta = store.meta()
        assert meta["vectors_pending_chars"] == 0 and meta["vectors_char_rate"] > 0


def test_dry_run_says_what_a_build_would_do_and_writes_nothing(sample_repo, codii_home):
    out = as_json(run("build", sample_repo, "--dry-run", "--json"))
    assert out["files"] == 4 and out["chunks"] > 0
    assert {r["name"] for r in out["languages"]} == {"python", "javascript", "markdown"}
    assert {r["name"] for r in out["roles"]} == {"source", "docs"}
    assert out["embed"]["texts"] == out["chunks"] and out["embed"]["estimated_seconds"] > 0
    assert not (codii_home / "indexes").exists() and not (codii_home / "cache").exists()
    text = run("build", sample_repo, "--dry-run")
    assert text.exit_code == 0 and "would be indexed" in text.output and "min on this machine" in text.output


def test_a_large_tree_s_dry_run_chunks_a_sample_and_says_it_estimates(tmp_path, codii_home, monkeypatch):
    """Above SAMPLE_FILES files the walk is whole but only a random sample is chunked; the estimate
    stays near the exact count and is the same on every run. Files found binary by their bytes are
    estimated so too (Django's 1,192 `.mo` catalogues were counted as files to index)."""
    from codii_sql.ingest import survey

    files = {f"src/m{i:03d}.py": "".join(f"def f_{i}_{j}(x):\n    return x + {j}\n\n\n" for j in range(1 + i % 9))
             for i in range(90)}
    files.update({f"docs/p{i}.md": f"# Page {i}\n\n" + "Some prose about the page.\n" * (5 + 40 * (i % 3))
                  for i in range(30)})
    files.update({f"locale/l{i:02d}.mo": "\x00\x01catalogue\x00" for i in range(30)})
    repo = write_tree(tmp_path / "wide", files)
    exact = as_json(run("build", repo, "--dry-run", "--json", "--no-vectors"))
    assert exact["estimate"] is None and exact["files"] == 120 and exact["skipped"]["binary"] == 30
    chunked = []
    prepared = survey.prepared_files
    monkeypatch.setattr(survey, "prepared_files", lambda root, todo, *a, **kw: chunked.append(len(todo)) or
                        prepared(root, todo, *a, **kw))
    monkeypatch.setattr(survey, "SAMPLE_FILES", 40)

    estimated = as_json(run("build", repo, "--dry-run", "--json", "--no-vectors"))

    assert chunked == [40] and estimated["estimate"] == {"sample_files": 40, "files": 150}
    assert estimated["files"] == 120 and estimated["skipped"]["binary"] == 30 and abs(estimated["chunks"] - exact["chunks"]) <= 0.25 * exact["chunks"]
    assert estimated == as_json(run("build", repo, "--dry-run", "--json", "--no-vectors"))  # the same sample
    text = run("build", repo, "--dry-run", "--no-vectors").output
    assert f"about 120 files and {estimated['chunks']:,} chunks would be indexed (estimated from a random sample of " \
           "40 of the 150 files the walk found)" in text


# -- real processes -------------------------------------------------------------------------


def _repo_of(tmp_path, files: int, functions: int):
    return write_tree(tmp_path / "big", {
        f"pkg{i % 4}/mod_{i}.py": "".join(f"def handler_{i}_{j}(request):\n    \"\"\"Handle kind {i}.{j}.\"\"\"\n"
                                          f"    return request.get('k{i}') + {j}\n\n\n" for j in range(functions))
        for i in range(files)})


def _env(home, **extra) -> dict:
    return {**os.environ, "CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), **extra}


def _wait(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_killed_vector_phase_resumes_and_embeds_nothing_twice(tmp_path, codii_home):
    repo = _repo_of(tmp_path, files=24, functions=12)
    db = Codebase.open(repo).db_path
    code = ("import sys, codii_sql.ingest.embedding as e; e.VECTOR_WINDOW = e.VECTOR_BATCH = e.EMBED_STEP = 32; "
            "from codii_sql.cli import cli; cli(sys.argv[1:], prog_name='codii-sql')")
    proc = subprocess.Popen([sys.executable, "-c", code, "build", str(repo)], env=_env(codii_home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def some_vectors() -> bool:
        if not db.is_file():
            return False
        with Store(db, create=False) as store:
            counts = store.row("vector_counts")
        return counts["chunks"] - counts["pending"] >= 64

    _wait(some_vectors)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    st = as_json(run("status", repo, "--json"))
    assert st["status"] == "indexed" and st["vectors"]["state"] == "pending" and st["files"] == 24
    assert as_json(run("doctor", repo, "--check-only", "--json"))["consistent"]
    cache = apsw.Connection(str(codii_home / "cache" / "embeddings.db"))
    cached = cache.execute("SELECT count(*) FROM vectors").fetchone()[0]  # every step embedded so far
    cache.close()
    resumed = as_json(run("build", repo, "--json"))
    assert resumed["vectors_pending"] == 0 and resumed["added"] == resumed["modified"] == 0
    assert resumed["chunks_embedded"] + cached == resumed["chunks"]  # every text embedded exactly once


@pytest.mark.slow
def test_build_daemon_returns_at_once_says_when_one_runs_and_finishes(tmp_path, codii_home):
    # 600 chunks: the first background build must outlast the second command's start (120 chunks
    # were embedded in ~1.5 s on an idle machine, and the second found the index up to date).
    repo = _repo_of(tmp_path, files=30, functions=20)
    env = _env(codii_home)
    cmd = [sys.executable, "-m", "codii_sql.cli", "build", str(repo), "--daemon", "--json"]
    started = time.monotonic()
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    info = json.loads(first.stdout)["daemon"]
    assert info["pid"] and time.monotonic() - started < 30
    second = subprocess.run(cmd[:-1], env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 3 and "already running" in second.stderr and second.stderr.count("\n") == 1
    st = as_json(run("status", repo, "--json"))
    assert st["daemon"]["pid"] == info["pid"]
    _wait(lambda: "daemon" not in as_json(run("status", repo, "--json")))
    st = as_json(run("status", repo, "--json"))
    assert st["status"] == "indexed" and st["vectors"]["state"] == "complete" and st["files"] == 30
    log = open(info["log"]).read()
    assert last_json(log[log.index("{"):])["vectors_pending"] == 0  # after its progress lines
    for _ in range(3):  # up to date: the background build may end before it is seen running; still a success
        again = subprocess.run(cmd[:-1], env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "Error" not in again.stderr, again.stderr


@pytest.mark.slow
def test_a_first_search_answers_at_once_and_leaves_the_vectors_to_a_background_build(tmp_path, codii_home):
    repo = _repo_of(tmp_path, files=16, functions=12)
    env = _env(codii_home, CODII_SQL_BACKGROUND="1")
    res = subprocess.run([sys.executable, "-m", "codii_sql.cli", "search", "handle kind 3.4", "--path", str(repo),
                          "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["results"][0]["symbol"] == "handler_3_4"
    assert out["note"].startswith("vectors are still being embedded"), out["note"]
    cb = Codebase.open(repo)
    _wait(lambda: "daemon" not in as_json(run("status", repo, "--json")))
    st = as_json(run("status", repo, "--json"))
    assert st["vectors"]["state"] == "complete" and cb.db_path.is_file()


def test_clear_refuses_while_another_process_embeds_or_builds_in_the_background(sample_repo, codii_home):
    """A background build writing into a deleted file would embed for nothing and block the next build."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    cb = Codebase.open(sample_repo)
    hold = ("import json, os, sys, time\nfrom codii_sql.codebase import Codebase\n"
            "from codii_sql.storage.lock import daemon_lock, vector_lock\n"
            "cb = Codebase.open(sys.argv[1])\n"
            "with daemon_lock(cb), vector_lock(cb):\n"
            "    cb.daemon_info_path.write_text(json.dumps({'pid': os.getpid()}))\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(sample_repo)], env=_env(codii_home), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == "held"
        res = run("clear", sample_repo, "--yes")
        assert res.exit_code != 0 and f"background build (pid {proc.pid}: `kill {proc.pid}` stops it)" in res.output
        assert "nothing was deleted" in res.output and cb.db_path.is_file()
    finally:
        proc.communicate("")
    assert run("clear", sample_repo, "--yes").exit_code == 0 and not cb.db_path.exists()
    assert not cb.vector_lock_path.exists() and not cb.daemon_info_path.exists()


def _holder(lock: str, repo, home) -> subprocess.Popen:
    """A separate process that takes ``lock`` (a codii_sql.storage.lock context manager) on ``repo``,
    prints ``held`` and keeps it until its stdin closes."""
    code = (f"import sys\nfrom codii_sql.codebase import Codebase\nfrom codii_sql.storage.lock import {lock}\n"
            f"with {lock}(Codebase.open(sys.argv[1])):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    return subprocess.Popen([sys.executable, "-c", code, str(repo)], env=_env(home), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def test_a_build_waiting_for_another_vector_phase_says_so_then_finishes_it(sample_repo, codii_home):
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    holder = _holder("vector_lock", sample_repo, codii_home)
    try:
        assert holder.stdout.readline().strip() == "held"
        build = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "build", str(sample_repo), "--vectors"],
                                 env=_env(codii_home), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        said = build.stderr.readline()
        assert "Every file is searchable; waiting for another process" in said and "0 of " in said
        assert build.poll() is None  # still waiting
    finally:
        holder.communicate("")
    out, _ = build.communicate(timeout=120)
    assert build.returncode == 0 and "embedded" in out
    assert as_json(run("status", sample_repo, "--json"))["vectors"]["state"] == "complete"


def test_find_similar_before_the_vectors_says_the_file_is_indexed_and_what_works_now(sample_repo):
    from codii_sql.errors import UsageError
    from codii_sql.service import Session

    from codii_sql.cli.words import message

    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    session = Session()
    cb = Codebase.open(sample_repo)
    try:
        # Built without vectors, it has none to wait for: a new user's agent was told they would come
        with pytest.raises(UsageError, match=r"app/parse.py is indexed without vectors") as refused:
            session.similar(cb, "app/parse.py", None, None, 5)
        assert "--vectors" in message(refused.value), message(refused.value)
        with Store(cb.db_path, create=False) as store, store.transaction():  # as while the vector phase runs
            store.set_meta(vectors=True)
        with pytest.raises(UsageError, match=r"app/parse.py is indexed but its chunks have no vectors yet \(0 of"):
            session.similar(cb, "app/parse.py", None, None, 5)
    finally:
        session.shutdown()


def test_status_and_list_agree_while_another_process_builds(sample_repo, tmp_path, codii_home):
    """list said indexed while status said indexing; a lexical phase's vectors said 'pending' (stopped)."""
    embedded = write_tree(tmp_path / "embedded", {"a.py": "def alpha():\n    return 1\n"})
    assert run("build", sample_repo, "--no-vectors").exit_code == 0 and run("build", embedded).exit_code == 0
    hold = ("import sys\nfrom codii_sql.codebase import Codebase\n"
            "from codii_sql.storage.lock import vector_lock, writer_lock\n"
            "cb = Codebase.open(sys.argv[1])\nlock = writer_lock if sys.argv[2] == 'writer' else vector_lock\n"
            "with lock(cb):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    for repo, which, vectors_state in ((sample_repo, "vector", "running"), (embedded, "writer", "waiting")):
        proc = subprocess.Popen([sys.executable, "-c", hold, str(repo), which], env=_env(codii_home),
                                text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert proc.stdout.readline().strip() == "held"
            st = as_json(run("status", repo, "--json"))
            row = next(r for r in as_json(run("list", "--json")) if r["root"] == str(repo.resolve()))
            assert st["status"] == row["status"] == "indexing", (which, st["status"], row["status"])
            assert st["vectors"]["state"] == vectors_state
            text = run("status", repo).output  # the last build's file counts are not the index's
            assert "files_done" not in text and "files_total" not in text and f"files: {st['files']}" in text
        finally:
            proc.communicate("")
    assert as_json(run("status", sample_repo, "--json"))["vectors"]["state"] == "off"
    assert as_json(run("status", embedded, "--json"))["vectors"]["state"] == "complete"


def test_an_agent_is_never_given_a_dead_process_as_the_indexer(sample_repo, codii_home):
    """A new user's agent read `indexer_pid` of a server that had exited in its vector phase."""
    from codii_sql.service import Session
    from codii_sql.storage.store import Store

    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    cb = Codebase.open(sample_repo)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with Store(cb.db_path, create=False) as store, store.transaction():
        store.set_meta(pid=int(gone.stdout))  # the snapshot's builder, exited
    hold = ("import sys\nfrom codii_sql.codebase import Codebase\nfrom codii_sql.storage.lock import vector_lock\n"
            "with vector_lock(Codebase.open(sys.argv[1])):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(sample_repo)], env=_env(codii_home), text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    session = Session()
    try:
        assert holder.stdout.readline().strip() == "held"
        st = session.indexing_status(cb)
        assert st["status"] == "indexing" and "indexer_pid" not in st, st
    finally:
        holder.communicate("")
        session.shutdown()


def test_an_agents_percent_never_goes_back_within_a_build():
    from codii_sql.service.session import _percent

    vec = lambda done, total, state="running": {"done": done, "total": total, "state": state}  # noqa: E731
    steps = [("indexing", {"phase": "scan", "done": 0, "total": 0}, vec(0, 0, "waiting")),
             ("indexing", {"phase": "chunk", "done": 50, "total": 100}, vec(0, 0, "waiting")),
             ("indexing", {"phase": "chunk", "done": 100, "total": 100}, vec(0, 900, "waiting")),
             ("indexing", {"phase": "vectors", "done": 100, "total": 100}, vec(0, 900)),
             ("indexing", {"phase": "vectors", "done": 100, "total": 100}, vec(450, 900)),
             ("indexed", {"phase": None, "done": 100, "total": 100}, vec(900, 900, "complete"))]
    seen = [_percent(*step) for step in steps]
    assert seen == sorted(seen) and seen[1] == 5 and seen[4] == 55 and seen[-1] == 100
    assert _percent("indexing", {"phase": "chunk", "done": 50, "total": 100}, vec(0, 0, "off")) == 50


def test_a_build_that_finishes_between_the_snapshot_read_and_the_lock_probe_is_not_called_dead(
        sample_repo, codii_home, monkeypatch):
    """CI saw a 4-file build reported 'failed ... stopped before it finished': status read the
    snapshot (indexing, phase scan), the build finished and let its lock go, then the probe found
    the lock free. The interleaving is forced here with the real lock and the real index file."""
    import importlib

    from codii_sql.storage.lock import is_locked, writer_lock

    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    cb = Codebase.open(sample_repo)
    build = writer_lock(cb)
    build.__enter__()
    with Store(cb.db_path, create=False) as store, store.transaction():
        store.set_meta(status="indexing", phase="scan")

    def build_finishes_first(codebase):
        if build is not None and is_locked(codebase):
            with Store(cb.db_path, create=False) as store, store.transaction():
                store.set_meta(status="indexed", phase="done")
            build.__exit__(None, None, None)
        return is_locked(codebase)

    status_module = importlib.import_module("codii_sql.service.status")
    monkeypatch.setattr(status_module, "is_locked", build_finishes_first)
    assert status_module.status(cb)["status"] == "indexed"
    build = None
    with Store(cb.db_path, create=False) as store, store.transaction():
        store.set_meta(status="indexing", phase="scan")  # and no process holds the lock: it died
    st = status_module.status(cb)
    assert st["status"] == "failed" and "stopped before it finished" in st["error"]


def test_a_background_build_that_cannot_write_is_failed_but_not_resumable(sample_repo, codii_home, monkeypatch):
    """A fresh user's read-only home: get_indexing_status said 'call index_codebase to resume',
    which cannot help. The failure is forced after the build started (its first progress call)."""
    import importlib

    from codii_sql.errors import ReadOnlyIndexError
    from codii_sql.service.session import Session

    jobs = importlib.import_module("codii_sql.service.jobs")

    def read_only_build(codebase, *, progress, **_):
        progress("scan", 0, 0)
        time.sleep(0.2)
        raise ReadOnlyIndexError(f"cannot write the index beside {codebase.db_path}: Read-only file system")

    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    monkeypatch.setattr(jobs, "build", read_only_build)
    session = Session()
    try:
        cb = Codebase.open(sample_repo)
        assert session.index(cb, force=True, extensions=[], ignore_patterns=[], reset_filters=False)[0]["status"] \
            == "started"
        deadline = time.monotonic() + 60  # a busy machine (load 7) passed 10 s
        while session.indexing_status(cb)["status"] == "indexing" and time.monotonic() < deadline:
            time.sleep(0.05)
        st = session.indexing_status(cb)
        assert st["status"] == "failed" and st["resumable"] is False and "Read-only" in st["last_error"]
    finally:
        session.shutdown()


def test_the_status_of_a_vector_phase_says_what_its_numbers_count(tmp_path, codii_home, monkeypatch):
    """A new user's get_indexing_status read "vectors 386/16616 chunks, 12%" (12% was the build's, 2% the
    vectors') and files "1 of 1 done" with 1,223 indexed (the vector phase's batches)."""
    import importlib
    import threading

    from codii_sql.mcp import indexing_tools
    from codii_sql.service.session import Session

    jobs = importlib.import_module("codii_sql.service.jobs")
    repo = write_tree(tmp_path / "repo", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(30)})
    real_build, seen, go_on = jobs.build, threading.Event(), threading.Event()

    def paused_build(codebase, *, progress, **kw):
        def observed(phase, done, total):
            progress(phase, done, total)
            if phase == "vectors" and done and not seen.is_set():
                seen.set()
                go_on.wait(60)
        return real_build(codebase, progress=observed, **kw)

    monkeypatch.setattr(jobs, "build", paused_build)
    session = Session()
    monkeypatch.setattr(indexing_tools, "SESSION", session)
    try:
        cb = Codebase.open(repo)
        session.index(cb, force=False, extensions=None, ignore_patterns=None, reset_filters=False)
        assert seen.wait(120)
        st = session.indexing_status(cb)
        assert st["phase"] == "vectors" and st["files"] == {"done": 30, "total": 30, "indexed": 30}, st
        text = indexing_tools.get_indexing_status(str(repo)).content[0].text
        v = st["vectors"]
        assert f"vectors {v['done']}/{v['total']} chunks embedded, the build {st['percent']}% done" in text, text
    finally:
        go_on.set()
        session.shutdown()


def test_a_vector_phase_running_elsewhere_is_indexing_in_every_listing(sample_repo, codii_home):
    """MCP list_codebases said 'failed' while `build --daemon` embedded (it asked only the writer
    lock); get_indexing_status, status and list said 'indexing'. All read both locks now."""
    from codii_sql import service
    from codii_sql.storage.lock import vector_lock

    cb = service.open_codebase(sample_repo)
    service.build(cb, vectors=False)
    session = service.Session()
    assert [r["status"] for r in session.list_codebases()["codebases"]] == ["indexed"]
    with vector_lock(cb):  # another process's vector phase, as its lock shows it
        assert [r["status"] for r in session.list_codebases()["codebases"]] == ["indexing"]
        assert [r["status"] for r in service.list_codebases()] == ["indexing"]
        assert session.indexing_status(cb)["status"] == "indexing"


def test_a_search_during_a_build_with_vectors_off_does_not_say_vectors_are_being_embedded(sample_repo, codii_home):
    """While `build --no-vectors` ran, searches and status said "vectors are still being embedded
    (0 of N chunks)": the build's writer lock was taken for a vector phase that never comes."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    holder = _holder("writer_lock", sample_repo, codii_home)
    try:
        assert holder.stdout.readline().strip() == "held"
        out = last_json(run("search", "handler", "--path", sample_repo, "--json").output)
        assert "built with vectors off" in out["note"] and "still being embedded" not in out["note"], out["note"]
    finally:
        holder.communicate("")


def test_a_background_build_started_inside_a_codebase_imports_none_of_its_files(tmp_path, codii_home):
    """A new user's `build --daemon` (and the vector phase a first search starts) from inside a folder holding
    `logging.py` and `inspect.py` (Django's django/utils has one) died at once: `python -m` put the folder
    first on sys.path, so the codebase's files were imported in place of the standard library's."""
    repo = write_tree(tmp_path / "shadow", {"logging.py": "raise SystemExit('the codebase was imported')\n",
                                            "inspect.py": "raise SystemExit('the codebase was imported')\n",
                                            "app.py": "def handler():\n    return 1\n"})
    res = subprocess.run([sys.executable, "-P", "-m", "codii_sql.cli", "build", ".", "--daemon", "--json"],
                         cwd=repo, env=_env(codii_home), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "imported" not in res.stderr, res.stderr
    _wait(lambda: "daemon" not in as_json(run("status", repo, "--json")))
    st = as_json(run("status", repo, "--json"))
    assert st["status"] == "indexed" and st["files"] == 3 and st["vectors"]["state"] == "complete", st


def test_code_like_a_line_range_includes_the_rest_of_its_own_file(tmp_path, codii_home):
    """An agent's stand-in asked for code like click's Option.resolve_envvar_value and never saw its near-twin
    Parameter.resolve_envvar_value: the whole file it lies in was left out, not just the lines asked about."""
    twin = ("def {name}(self, ctx):\n    \"\"\"Read the value of this parameter from its environment variable.\"\"\"\n"
            "    if self.envvar is None:\n        return None\n    rv = os.environ.get(self.envvar)\n"
            "    if rv:\n        return rv\n    return None\n")
    repo = write_tree(tmp_path / "r", {
        "core.py": "import os\n\n\n" + twin.format(name="resolve_envvar_value") + "\n\n" + "def render_table(rows):\n"
                   "    return '\\n'.join(' | '.join(map(str, row)) for row in rows)\n\n\n"
                   + twin.format(name="option_envvar_value"),
        "other.py": "def add(a, b):\n    return a + b\n",
        "report.py": "def render_long_report(rows):\n" + "".join(
            f"    total_{i} = sum(row[{i}] for row in rows)  # column {i} of the report\n" for i in range(120))})
    from codii_sql.service import Session

    assert run("build", repo).exit_code == 0  # with vectors: the real model
    session = Session()
    cb = Codebase.open(repo)
    try:
        found = session.similar(cb, "core.py", 4, 11, 5)[0]["results"]
        assert [(r["path"], r["symbol"]) for r in found][:1] == [("core.py", "option_envvar_value")], found
        assert all(r["start_line"] > 11 for r in found if r["path"] == "core.py")
        long = session.similar(cb, "report.py", 25, 30, 10)[0]["results"]  # a part of a long function:
        assert all(r["symbol"] != "render_long_report" for r in long), long  # not its other windows (a new user)
        whole = session.similar(cb, "core.py", None, None, 5)[0]["results"]
        assert "core.py" not in [r["path"] for r in whole]  # of a whole file, other files
    finally:
        session.shutdown()
