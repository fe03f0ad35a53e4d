"""`codii-sql watch` against the freshness targets: edit-to-searchable latency, idle CPU and writes, a burst.

    python benchmarks/watch.py --work /tmp/watch-bench                    # generated 10,000-file tree
    python benchmarks/watch.py --work /tmp/watch-bench --repo ~/src/proj  # a copy of a real repository

The generated tree (``child.py tree``: 3 functions per file) is built with ``--no-vectors`` (30k
chunks would take the model ~15 minutes here): its figures measure the watcher and the lexical
update. With ``--repo`` the copy is built with the bundled model and an edit's figure includes
embedding its chunks. Then, with ``codii-sql watch --jsonl`` running in a child process:

* idle: the watcher's CPU time (``/proc/PID/stat``) over ``--idle`` seconds, as % of one core,
  and whether the index file or its WAL changed at all;
* edits: ``--edits`` times, a new function appended to an existing file; seconds from the write
  until a no-update BM25 search in this process finds it (polled every 20 ms), and until the
  index has every chunk's vector again (the new chunk's embedding: with ``--repo``);
* burst: ``--burst`` new files written at once; seconds until every one is in the index and the
  last one's function is found.

Targets (issue: fresh by itself): edit < 2 s on 10,000 files, idle CPU < 1%, 300 files < 60 s,
zero index writes over an idle minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from child import task_tree  # noqa: E402

from codii_sql import service  # noqa: E402
from codii_sql.search.results import SearchOptions  # noqa: E402


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (trees, CODII_SQL_HOME)")
    ap.add_argument("--files", type=int, default=10_000, help="files of the generated tree")
    ap.add_argument("--repo", type=Path, default=None, help="copy this repository instead of generating a tree")
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--idle", type=float, default=60.0, help="seconds of idle measurement")
    ap.add_argument("--burst", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None, help="write the record here as JSON")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    home = args.work / "home"
    os.environ["CODII_SQL_HOME"] = str(home)
    tree = args.work / ("repo" if args.repo else f"tree{args.files}")
    if tree.exists():
        shutil.rmtree(tree)
    shutil.rmtree(home, ignore_errors=True)
    if args.repo:
        shutil.copytree(args.repo, tree, symlinks=True)
    else:
        task_tree(str(tree), args.files)
    record = {"tree": str(tree), "load_avg": os.getloadavg()}
    t = time.perf_counter()
    build = [sys.executable, "-m", "codii_sql.cli", "build", str(tree)] + ([] if args.repo else ["--no-vectors"])
    subprocess.run(build, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "CODII_SQL_BACKGROUND": "0"})
    record["build_seconds"] = round(time.perf_counter() - t, 2)
    cb = service.open_codebase(tree)
    record["files"] = service.status(cb, check_stale=False)["files"]
    print(f"# {tree}: {record['files']} files built in {record['build_seconds']} s", flush=True)
    watcher = Watch(tree)
    try:
        record["idle"] = idle(watcher.pid, cb, args.idle)
        print(f"idle {args.idle:.0f} s: CPU {record['idle']['cpu_percent']:.3f}% of a core, "
              f"index writes: {record['idle']['index_changed']}", flush=True)
        record["edits"] = edits(tree, cb, args.edits)
        e = record["edits"]
        print(f"edit -> searchable, {args.edits} edits: p50 {e['p50']:.2f} s, max {e['max']:.2f} s; "
              f"-> its vectors in: p50 {e['embedded_p50']:.2f} s, max {e['embedded_max']:.2f} s", flush=True)
        record["burst"] = burst(tree, cb, args.burst, record["files"], watcher)
        print(f"{args.burst} new files -> all searchable: {record['burst']['seconds']:.2f} s "
              f"({record['burst']['updates']} updates)", flush=True)
    finally:
        watcher.stop()
    record["load_avg_end"] = os.getloadavg()
    print(f"# load average {record['load_avg'][0]:.2f} at start, {record['load_avg_end'][0]:.2f} at end")
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))


class Watch:
    """``codii-sql watch TREE --jsonl`` in a child process; counts its update lines."""

    def __init__(self, tree: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "watch", str(tree), "--jsonl"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pid = self.proc.pid
        self.updates = 0
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(600):
            raise SystemExit("the watcher did not start in 600 s")

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line).get("event")
            self.updates += event == "update"
            if event == "watching":
                self.ready.set()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (``/proc/PID/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def index_state(cb) -> tuple:
    return tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else None
                 for p in (cb.db_path, Path(f"{cb.db_path}-wal")))


def idle(pid: int, cb, seconds: float) -> dict:
    time.sleep(2.0)  # let the start-up settle
    before, state = cpu_seconds(pid), index_state(cb)
    time.sleep(seconds)
    used = cpu_seconds(pid) - before
    return {"seconds": seconds, "cpu_seconds": round(used, 3), "cpu_percent": round(100 * used / seconds, 3),
            "index_changed": index_state(cb) != state}


def searchable(cb, symbol: str) -> bool:
    resp = service.search(service.SearchRequest(symbol, SearchOptions(limit=3, mode="bm25"), [str(cb.root)],
                                                db=str(cb.db_path), update=False))
    return any(r.symbol == symbol for r in resp.results)


def wait_for(check, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"not searchable after {timeout} s")
        time.sleep(0.02)
    return time.perf_counter() - start


def edits(tree: Path, cb, n: int) -> dict:
    files = sorted(p for p in tree.rglob("*.py") if ".git" not in p.parts)
    seconds, embedded = [], []
    for i in range(n):
        symbol = f"watch_bench_edit_{i}_{int(time.time())}"
        path = files[(i * 7919) % len(files)]
        with path.open("a") as fh:
            fh.write(f"\n\ndef {symbol}(value):\n    return value * {i + 2}\n")
        start = time.perf_counter()
        seconds.append(wait_for(lambda: searchable(cb, symbol)))
        wait_for(lambda: service.status(cb, check_stale=False)["vectors"]["state"] in ("complete", "off"))
        embedded.append(time.perf_counter() - start)
        time.sleep(0.5)
    return {"seconds": [round(s, 3) for s in seconds], "p50": statistics.median(seconds), "max": max(seconds),
            "embedded_p50": statistics.median(embedded), "embedded_max": max(embedded)}


def burst(tree: Path, cb, n: int, files_before: int, watcher: Watch) -> dict:
    updates = watcher.updates
    folder = tree / "watch_bench_burst"
    folder.mkdir()
    start = time.perf_counter()
    for i in range(n):
        (folder / f"new{i:04d}.py").write_text(f"def burst_new_{i}(x):\n    return x + {i}\n")
    last = f"burst_new_{n - 1}"
    wait_for(lambda: service.status(cb, check_stale=False)["files"] >= files_before + n and searchable(cb, last))
    seconds = round(time.perf_counter() - start, 3)
    time.sleep(2.0)  # updates still under way count too
    return {"files": n, "seconds": seconds, "updates": watcher.updates - updates}


if __name__ == "__main__":
    main()
