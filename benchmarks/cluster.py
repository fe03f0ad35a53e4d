"""Ray: build throughput of the plain CLI against Ray with 1 and 2 workers, and search latency through Ray Serve.

    python benchmarks/cluster.py --repo ~/src/gin --repo ~/src/requests --repo ~/src/axios
    python benchmarks/cluster.py --repo ~/src/gin --workers 1,2 --queries 40 --json

Builds: every configuration builds the same codebases from nothing, each in a fresh
``$CODII_SQL_HOME`` (no embedding cache to reuse), with the bundled model: ``plain`` is
``codii-sql build A B C`` in one process (the model on every core), ``ray-N`` is
``build --ray local --ray-cpus N`` (N workers, the model on one thread each). Ray's own
start-up is timed apart from the build. Chunks/s counts chunks embedded over the build's wall time.
Search: warm latency of ``GET /search`` over the workspace of those codebases, answered in this
process (the handler alone), by the one-process HTTP server, and by a Ray Serve replica; the
queries are the subjects of each repository's last commits (``git log``), so they are real.
Needs the ``[ray]`` extra. The machine's load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from codii_sql import cluster, http, service
from codii_sql.codebase import Codebase


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", required=True, help="a codebase to build (repeatable)")
    ap.add_argument("--workers", default="1,2", help="Ray CPU counts to time, comma-separated (default 1,2)")
    ap.add_argument("--queries", type=int, default=30, help="queries for the latency runs (default 30)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return ap.parse_args()


def build_plain(repos: list[Path]) -> dict:
    """Every codebase built in this process, one after the other (what ``build A B C`` does)."""
    started = time.perf_counter()
    reports = [service.build(Codebase.open(r), use_cache=False) for r in repos]
    seconds = time.perf_counter() - started
    return {"config": "plain", "ray_start_seconds": 0.0, "build_seconds": seconds,
            "chunks_embedded": sum(r.chunks_embedded for r in reports)}


def build_ray(repos: list[Path], cpus: int) -> dict:
    """The same codebases as Ray tasks on a Ray of ``cpus`` CPUs started here."""
    started = time.perf_counter()
    with cluster.connected("local", cpus=cpus):
        up = time.perf_counter()
        rows = cluster.build_on_ray("local", [Codebase.open(r) for r in repos], cluster.Options(use_cache=False))
        seconds = time.perf_counter() - up
    failed = [r for r in rows if not r["ok"]]
    if failed:
        raise SystemExit(f"ray-{cpus}: {failed[0]['codebase']}: {failed[0]['error']}")
    return {"config": f"ray-{cpus}", "ray_start_seconds": up - started, "build_seconds": seconds,
            "chunks_embedded": sum(r["chunks_embedded"] for r in rows)}


def in_fresh_home(work, *args) -> dict:
    with tempfile.TemporaryDirectory(prefix="codii-bench-home-") as home:
        os.environ["CODII_SQL_HOME"] = home
        out = work(*args)
        out["chunks_per_second"] = out["chunks_embedded"] / out["build_seconds"]
        return out


def commit_subjects(repos: list[Path], n: int) -> list[str]:
    """Up to ``n`` recent commit subjects, taken in turn from each repository."""
    per = [subprocess.run(["git", "-C", str(r), "log", "--no-merges", "--format=%s", f"-{n}"], capture_output=True,
                          text=True).stdout.splitlines() for r in repos]
    mixed = [q for group in zip(*per) for q in group if q.strip()]
    return mixed[:n] or ["where are errors handled"]


def latency(ask, queries: list[str]) -> dict:
    """p50/p95 milliseconds of ``ask(query)``, after one warm-up pass."""
    for q in queries[:5]:
        ask(q)
    times = []
    for q in queries:
        t = time.perf_counter()
        ask(q)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))], "n": len(times)}


def search_latencies(repos: list[Path], queries: list[str]) -> list[dict]:
    """The handler in this process, the one-process server, and one Ray Serve replica."""
    home = tempfile.mkdtemp(prefix="codii-bench-home-")
    os.environ["CODII_SQL_HOME"] = home
    for r in repos:
        service.build(Codebase.open(r))
    service.add_paths("bench", [str(r) for r in repos])
    handler = http.SearchHandler(["bench"])
    rows = [{"face": "in-process handler", **latency(lambda q: handler.answer("/search", {"q": [q]}), queries)}]
    for face, extra in (("HTTP, one process", []), ("HTTP, Ray Serve (1 replica, local Ray)", ["--ray", "local"])):
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--http", str(port), "--workspace",
                                 "bench", *extra], stderr=subprocess.DEVNULL)
        try:
            started = time.perf_counter()
            _wait(port)
            ready = time.perf_counter() - started
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                rows.append({"face": face, "ready_seconds": ready,
                             **latency(lambda q: client.get("/search", params={"q": q}).raise_for_status(), queries)})
        finally:
            proc.send_signal(2)
            proc.wait(timeout=60)
    return rows


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(port: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"the server on port {port} did not answer in {timeout} s")


def main() -> None:
    args = parse_args()
    repos = [Path(r).expanduser().resolve() for r in args.repo]
    before = os.getloadavg()
    builds = [in_fresh_home(build_plain, repos)]
    builds += [in_fresh_home(build_ray, repos, int(n)) for n in args.workers.split(",")]
    searches = search_latencies(repos, commit_subjects(repos, args.queries))
    out = {"repos": [str(r) for r in repos], "load_before": before, "load_after": os.getloadavg(),
           "builds": builds, "searches": searches}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"codebases: {', '.join(r.name for r in repos)}; load average {before[0]:.2f} -> {out['load_after'][0]:.2f}")
    print("| config | Ray start (s) | build (s) | chunks embedded | chunks/s |")
    print("|---|---|---|---|---|")
    for b in builds:
        print(f"| {b['config']} | {b['ray_start_seconds']:.1f} | {b['build_seconds']:.1f} | {b['chunks_embedded']:,} | "
              f"{b['chunks_per_second']:.1f} |")
    print("| search face | ready (s) | p50 (ms) | p95 (ms) | queries |")
    print("|---|---|---|---|---|")
    for s in searches:
        print(f"| {s['face']} | {s.get('ready_seconds', 0):.1f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['n']} |")


if __name__ == "__main__":
    main()
