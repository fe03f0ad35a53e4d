"""Distributed builds and serving on a real local Ray (one per test session): issue 18's end-to-end checks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import apsw
import httpx
import numpy as np
import pytest
import sqlite_vec
from support import servers
from support.trees import SAMPLE, SHOP, write_tree

from codii_sql import cluster, service
from codii_sql.codebase import Codebase

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")


@pytest.fixture(scope="session")
def ray_address():
    """A local Ray with 2 CPUs for the whole session; its address for other processes to join."""
    import logging

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codii_sql.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def _chunks(db: Path) -> dict[tuple, bytes | None]:
    """``{(path, start line, end line, symbol, content): float32 blob or None}`` of an index."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    rows = conn.execute("SELECT c.path, c.start_line, c.end_line, c.symbol, c.content, v.embedding "
                        "FROM chunks c LEFT JOIN chunks_vec v ON v.rowid = c.id").fetchall()
    conn.close()
    return {tuple(r[:5]): r[5] for r in rows}


def _kill_first_embedding_worker(stop: threading.Event, task: bytes = b"ray::embed_batch") -> list[int]:
    """SIGKILL the first process running ``task`` (Ray names the task in its command line)."""
    killed: list[int] = []
    while not stop.is_set() and not killed:
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(task):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                break
        time.sleep(0.01)
    return killed


def test_a_killed_worker_is_retried_and_the_index_equals_a_plain_build(ray_address, tmp_path):
    repo = write_tree(tmp_path / "repo", {**SAMPLE, **SHOP})
    target = Codebase.open(repo)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=lambda: killed.extend(_kill_first_embedding_worker(stop)))
    killer.start()
    try:
        rows = cluster.build_on_ray(ray_address, [target], cluster.Options(), batch=2)
    finally:
        stop.set()
        killer.join()
    assert killed, "no embedding worker was running to kill"
    assert rows[0]["ok"], rows
    assert rows[0]["embedded_elsewhere"] == rows[0]["chunks_embedded"] > 0 and rows[0]["vectors_pending"] == 0

    plain = Codebase.open(repo, db=tmp_path / "plain.db")
    service.build(plain, use_cache=False)  # the model runs here for every chunk: no vector from the Ray build
    ours, theirs = _chunks(target.db_path), _chunks(plain.db_path)
    assert ours.keys() == theirs.keys() and len(ours) == rows[0]["chunks"]
    for key, blob in ours.items():
        # Batches of 2 against the vector phase's 128: the same vectors to float32 rounding.
        np.testing.assert_allclose(np.frombuffer(blob, np.float32), np.frombuffer(theirs[key], np.float32), atol=2e-6)

    again = cluster.build_on_ray(ray_address, [target], cluster.Options(), batch=2)[0]
    assert again["ok"] and again["unchanged"] == again["files"] and again["chunks_embedded"] == 0
    assert not again["published"] and again["filters"] == {"extensions": [], "ignore_patterns": []}


def test_a_killed_codebase_task_is_retried_and_its_scratch_folder_swept(ray_address, tmp_path):
    repo = write_tree(tmp_path / "repo", SHOP)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=lambda: killed.extend(_kill_first_embedding_worker(stop, b"ray::build_codebase")))
    killer.start()
    try:
        rows = cluster.build_on_ray(ray_address, [Codebase.open(repo)], cluster.Options(), batch=2)
    finally:
        stop.set()
        killer.join()
    assert killed and rows[0]["ok"] and rows[0]["vectors_pending"] == 0, rows
    left = [p for p in Path(tempfile.gettempdir()).glob("codii-sql-aside-*") if p.name.split("-")[3] == str(killed[0])]
    assert left == []  # the retry swept the folder of the process that was killed


def test_cli_builds_a_workspace_on_ray_and_the_plain_cli_searches_it(ray_address, tmp_path):
    http, shop = write_tree(tmp_path / "http", SAMPLE), write_tree(tmp_path / "shop", SHOP)
    assert _cli("workspace", "add", "team", str(http), str(shop), str(tmp_path / "gone")).returncode == 0
    built = _cli("build", "--workspace", "team", "--ray", ray_address, "--json")
    assert built.returncode == 1, built.stderr  # one member is gone: the others still build
    out = json.loads(built.stdout)
    assert out["built"] == 2 and out["failed"] == 1
    rows = {Path(r["codebase"]).name: r for r in out["codebases"]}
    assert not rows["gone"]["ok"] and "gone" in rows["gone"]["error"]
    assert rows["http"]["ok"] and rows["http"]["vectors_pending"] == 0 and rows["http"]["chunks_embedded"] > 0

    found = _cli("search", "reserve stock for an order", "--workspace", "team", "--json", "--no-update")
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["results"][0]
    assert top["path"] == "inventory/stock.go" and top["codebase"] == str(shop.resolve())

    text = _cli("build", str(http), "--ray", ray_address)
    assert text.returncode == 0, text.stderr
    assert f"Built {http.resolve()} on " in text.stdout and "0 embedded" in text.stdout
    assert "nothing changed, the index in place is left as it was" in text.stdout
    assert "1 of 1 codebases built" in text.stdout and "Traceback" not in text.stderr


def test_ray_serve_replicas_answer_as_the_cli_does(ray_address, tmp_path):
    http, shop = write_tree(tmp_path / "http", SAMPLE), write_tree(tmp_path / "shop", SHOP)
    assert _cli("build", str(http), str(shop)).returncode == 0
    assert _cli("workspace", "add", "team", str(http), str(shop)).returncode == 0
    port = servers.free_port()
    proc = servers.start(["--workspace", "team", "--ray", ray_address, "--replicas", "2"], port, timeout=180)
    try:
        for query in ("retry with exponential backoff", "checkoutTotal"):
            got = httpx.get(f"http://127.0.0.1:{port}/search", params={"q": query, "limit": 5}, timeout=60)
            assert got.status_code == 200, got.text
            cli = json.loads(_cli("search", query, "--workspace", "team", "--json", "--no-update", "-n", "5").stdout)
            # Equal but for the time and the words of the notes' hints, each face's own (`--path ROOT`, `codebase=ROOT`).
            assert {k: v for k, v in got.json().items() if k not in ("seconds", "note")} == \
                   {k: v for k, v in cli.items() if k not in ("seconds", "note")}
            assert ("note" in got.json()) == ("note" in cli)
        bad = httpx.get(f"http://127.0.0.1:{port}/search", params={"q": "x", "workspace": "other"}, timeout=60)
        assert bad.status_code == 400 and "not served here" in bad.json()["error"]
        # One Serve proxy port a cluster, one app at "/": a second server would take this one's place.
        other = _cli("serve", "--http", str(servers.free_port()), "--workspace", "team", "--ray", ray_address)
        assert other.returncode == 2 and f"already listens on port {port} (one HTTP port per cluster)" in other.stderr
        same = _cli("serve", "--http", str(port), "--workspace", "team", "--ray", ray_address)
        assert same.returncode == 2 and "a codii-sql server already runs on this cluster's port" in same.stderr
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).status_code == 200
    finally:
        code, err = servers.stop(proc)
    assert code == 0 and "from 2 Ray Serve replicas" in err and "Traceback" not in err
    # It started Serve, so it stopped it: the port is free again.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_ray_local_starts_and_stops_a_ray_of_its_own(tmp_path):
    repo = write_tree(tmp_path / "repo", SAMPLE)
    built = _cli("build", str(repo), "--ray", "local", "--ray-cpus", "1", "--json")
    assert built.returncode == 0, built.stderr
    row = json.loads(built.stdout)["codebases"][0]
    assert row["ok"] and row["vectors_pending"] == 0 and row["embedded_elsewhere"] > 0
    assert _cli("build", str(repo), "--ray-cpus", "2").returncode == 2


def test_a_failing_embedder_is_one_line_and_the_index_in_place_is_kept(ray_address, tmp_path, monkeypatch):
    repo = write_tree(tmp_path / "repo", SAMPLE)
    assert _cli("build", str(repo), "--no-vectors").returncode == 0
    db = Codebase.open(repo).db_path
    before = _chunks(db)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{servers.free_port()}/v1")  # nobody listens
    monkeypatch.setenv("CODII_SQL_HTTP_RETRIES", "0")
    failed = _cli("build", str(repo), "--ray", ray_address, "--force", "--vectors", "--embedder", "openai:some-model")
    assert failed.returncode == 1, failed.stderr
    error = [line for line in failed.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "127.0.0.1" in error[0] and "Traceback" not in failed.stderr
    assert _chunks(db) == before
