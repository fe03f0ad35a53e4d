"""A served folder of shards: start-up time and memory with many files, and swaps under load.

    python benchmarks/shards.py --shards 1000            # start-up and RSS, then one search over all
    python benchmarks/shards.py --shards 50 --swaps 20 --clients 16

Each shard is an export (``codii-sql export``) of a small generated codebase; two versions of one
of them are swapped into the folder by rename while ``--clients`` threads search it over HTTP. It
counts failed requests and answers that mix the old and the new file (both must be 0), and prints
latencies. Start-up is the time from the process's start to ``/healthz`` answering 200; memory
the server's resident set (``VmRSS``) then, and after searching every shard (at most 128 stay open).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def cli(home: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "codii_sql.cli", *args], check=True, capture_output=True,
                   env={**os.environ, "CODII_SQL_HOME": str(home), "CODII_SQL_BACKGROUND": "0"})


def exported(work: Path, home: Path, name: str, version: str) -> Path:
    """An export of a small codebase whose handler says ``version``."""
    src = work / "src" / name
    src.mkdir(parents=True, exist_ok=True)
    for i in range(8):
        (src / f"mod{i}.py").write_text(
            f'def handler_{i}(request):\n    """Answer request kind {i}: version {version}."""\n'
            f'    return {{"kind": {i}, "version": "{version}"}}\n\n\n'
            f'def helper_{i}(values):\n    """Sum the values of kind {i}."""\n    return sum(values)\n')
    out = work / "built" / f"{name}-{version}.db"
    out.parent.mkdir(exist_ok=True)
    cli(home, "build", str(src))
    cli(home, "export", str(src), "--to", str(out))
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve(home: Path, shards: Path, port: int) -> tuple[subprocess.Popen, float]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--http", str(port), "--shards",
                             str(shards)], env={**os.environ, "CODII_SQL_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc, time.perf_counter() - started
        except httpx.HTTPError:
            if proc.poll() is not None:
                sys.exit(f"the server exited: {proc.stderr.read().decode()}")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=50)
    ap.add_argument("--swaps", type=int, default=20)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--port", type=int, default=18931)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="codii-shards-"))
    home = work / "home"
    try:
        one, two = exported(work, home, "svc", "one"), exported(work, home, "svc", "two")
        other = exported(work, home, "other", "zero")
        folder = work / "shards"
        folder.mkdir()
        shutil.copy(one, folder / "svc.db")
        for i in range(args.shards - 1):
            shutil.copy(other, folder / f"other{i:04d}.db")
        print(f"# {args.shards} shards of {one.stat().st_size / 1e6:.2f} MB; load average {os.getloadavg()[0]:.2f}")
        proc, ready = serve(home, folder, args.port)
        url = f"http://127.0.0.1:{args.port}"
        print(f"start-up to /healthz: {ready:.2f} s, RSS {rss_mb(proc.pid):.0f} MB")
        try:
            t = time.perf_counter()
            first = httpx.get(f"{url}/search", params={"q": "handler version", "limit": 5}, timeout=600).json()
            print(f"first search over every shard: {time.perf_counter() - t:.2f} s "
                  f"({len(first['codebases'])} shards), RSS {rss_mb(proc.pid):.0f} MB")
            swap(url, folder, one, two, args)
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


def swap(url: str, folder: Path, one: Path, two: Path, args) -> None:
    """``--swaps`` renames of svc.db while ``--clients`` threads search it: failures, mixes, latency."""
    stop, ms, errors, mixed, seen = threading.Event(), [], [], [], set()

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while not stop.is_set():
                t = time.perf_counter()
                r = http.get(f"{url}/search", params={"q": "answer request kind 3 version", "codebase": "svc",
                                                      "limit": 5})
                ms.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    errors.append(r.text)
                    continue
                versions = {v for res in r.json()["results"] for v in ("one", "two") if f"version {v}" in res["content"]}
                seen.update(versions)
                if len(versions) > 1:
                    mixed.append(versions)

    with cf.ThreadPoolExecutor(args.clients) as pool:
        for _ in range(args.clients):
            pool.submit(client)
        for i in range(args.swaps):
            part = folder / f".svc.db.part-{i}"
            shutil.copy(two if i % 2 == 0 else one, part)
            os.replace(part, folder / "svc.db")
            time.sleep(0.25)
        stop.set()
    ms.sort()
    print(f"{args.swaps} swaps under {args.clients} clients: {len(ms)} requests, {len(errors)} failed, "
          f"{len(mixed)} mixed old and new, versions seen {sorted(seen)}; p50 {statistics.median(ms):.1f} ms, "
          f"p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms")


if __name__ == "__main__":
    main()
