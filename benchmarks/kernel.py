"""A kernel-size tree, lexical phase: build, no-change update, index size by table, and each answer's latency.

Prints numbers; not run in CI. The tree is Debian's ``linux-source-6.12`` (``apt-get install
linux-source-6.12``; unpack ``/usr/src/linux-source-6.12.tar.xz``: outside a Git repository its root
``.gitignore``, whose ``/*`` is the Debian packaging's, is not read; the figures of rounds before the tenth
dropped that line and kept the nested ones), built without vectors into a scratch ``$CODII_SQL_HOME`` (``--home``, kept between runs: ``--skip-build`` measures an index built before).

  python benchmarks/kernel.py TREE [--home DIR] [--skip-build] [--runs 3]

Every figure comes with the load average (``/proc/loadavg``) beside it: these machines are shared.
Whole commands are timed as a user runs them (a fresh process each, wall seconds, peak RSS of the
process tree sampled from /proc); in-process latencies are warm (each query asked once before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from procmon import run as run_tree  # noqa: E402

QUERIES = ["tcp_retransmit_timer", "pick_next_task", "page fault handler for x86", "kmalloc", "spin_lock_irqsave",
           "how are TCP retransmissions scheduled", "ext4 journal commit", "schedule a work item on a workqueue",
           "copy_from_user", "PCI device probe", "mutex_lock", "where is the OOM killer invoked", "list_for_each_entry",
           "parse the kernel command line", "GFP_KERNEL", "NULL", "return -EINVAL", "struct file_operations",
           "cgroup memory limit", "container_of"]
NAMES = ["tcp_retransmit_timer", "pick_next_task", "kmalloc", "container_of", "exc_page_fault", "schedule",
         "copy_from_user", "mutex_lock", "GFP_KERNEL", "list_for_each_entry"]
FILES = ["net/ipv4/tcp_timer.c", "kernel/sched/core.c", "mm/slub.c", "fs/ext4/inode.c", "arch/x86/mm/fault.c"]
CLI = [sys.executable, "-m", "codii_sql.cli"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cli(args: list[str], env: dict) -> tuple[float, int, str]:
    """One fresh ``codii-sql`` process: (wall seconds, peak tree RSS MB, stdout)."""
    done, wall, peak = run_tree([*CLI, *args], env=env)
    return wall, peak // (1 << 20), done.stdout


def build(tree: Path, env: dict) -> None:
    print(f"build --no-vectors of {tree} (load {load()}) ...", flush=True)
    wall, peak, out = cli(["build", str(tree), "--no-vectors", "--json"], env)
    report = json.loads(out.strip().splitlines()[-1])
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report["phase_seconds"].items())
    print(f"  {report['files']:,} files, {report['chunks']:,} chunks: {wall:.0f} s wall, peak RSS {peak:,} MB, "
          f"phases: {phases} (load after {load()})")


def no_change(tree: Path, env: dict, runs: int) -> None:
    rows = [cli(["build", str(tree), "--no-vectors", "--json"], env) for _ in range(runs)]
    print(f"no-change update: {', '.join(f'{w:.2f} s' for w, _, _ in rows)} wall, peak RSS "
          f"{max(p for _, p, _ in rows):,} MB (load {load()})")


def sizes(db: Path) -> None:
    conn = apsw.Connection(f"file:{db}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    rows = list(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"))
    total = sum(size for _, size in rows)
    print(f"index {db.stat().st_size / 1e9:.2f} GB; by table and index:")
    for name, size in rows[:12]:
        print(f"  {name:<28} {size / 1e6:9.1f} MB  {100 * size / total:5.1f}%")


def cli_answers(tree: Path, env: dict, runs: int) -> None:
    asks = {"search (update first)": ["search", "tcp_retransmit_timer", "--path", str(tree), "--mode", "bm25"],
            "search --no-update": ["search", "tcp_retransmit_timer", "--path", str(tree), "--mode", "bm25", "--no-update"],
            "symbol --no-update": ["symbol", "tcp_retransmit_timer", "--path", str(tree), "--no-update"],
            "symbol (update first)": ["symbol", "tcp_retransmit_timer", "--path", str(tree)],
            "refs --no-update": ["refs", "tcp_retransmit_skb", "--path", str(tree), "--no-update"],
            "outline": ["outline", "net/ipv4/tcp_timer.c", "--path", str(tree)],
            "grep --no-update": ["grep", r"tcp_retransmit_skb\(", str(tree), "--no-update"]}
    print(f"CLI, a fresh process each (median of {runs}; load {load()}):")
    for label, args in asks.items():
        rows = [cli(args, env) for _ in range(runs)]
        print(f"  {label:<24} {statistics.median(w for w, _, _ in rows):6.2f} s, peak RSS "
              f"{max(p for _, p, _ in rows):,} MB")


def cli_with_watch(tree: Path, env: dict, runs: int) -> None:
    """The update-first CLI answers again while ``codii-sql watch`` follows the tree: a fresh watcher
    stands for the walk (service/watchers.kept_fresh). Then edits: a function appended to a file, and
    the seconds until a no-update BM25 search in this process finds it (polled every 20 ms); each edit
    is taken back after (and that waited for) before the next."""
    import subprocess

    watch = subprocess.Popen([*CLI, "watch", str(tree), "--jsonl"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, env=env)
    try:
        for line in watch.stdout:
            if '"watching"' in line:
                break
        time.sleep(2)  # its note says fresh once the catch-up after the watches are set has committed
        print(f"CLI with `watch` running, update first (median of {runs}; load {load()}):")
        for label, args in {"search": ["search", "tcp_retransmit_timer", "--path", str(tree), "--mode", "bm25"],
                            "symbol": ["symbol", "tcp_retransmit_timer", "--path", str(tree)],
                            "refs": ["refs", "tcp_retransmit_skb", "--path", str(tree)],
                            "grep": ["grep", r"tcp_retransmit_skb\(", str(tree)]}.items():
            print(f"  {label:<24} {statistics.median(cli(args, env)[0] for _ in range(runs)):6.2f} s")
        seconds = [edit_searchable(tree, FILES[i % len(FILES)], i) for i in range(2 * runs)]
        print(f"  edit -> searchable by watch: {', '.join(f'{s:.2f}' for s in seconds)} s; median "
              f"{statistics.median(seconds):.2f} s (load {load()})")
    finally:
        watch.terminate()
        watch.wait(timeout=60)


def edit_searchable(tree: Path, rel: str, i: int) -> float:
    """Seconds from appending a function to ``rel`` until a search finds it (then the edit is taken back)."""
    from codii_sql import service
    from watch import searchable, wait_for  # benchmarks/watch.py's poll: a no-update BM25 search every 20 ms

    cb = service.open_codebase(tree)
    path, symbol = tree / rel, f"codii_watch_edit_{i}_{int(time.time())}"
    before = path.read_bytes()
    try:
        path.write_bytes(before + f"\nint {symbol}(void)\n{{\n\treturn {i};\n}}\n".encode())
        return wait_for(lambda: searchable(cb, symbol))
    finally:
        path.write_bytes(before)
        wait_for(lambda: not searchable(cb, symbol))
        time.sleep(0.5)


def timed(fn, items: list, reps: int) -> str:
    """p50 / p95 milliseconds of ``fn(item)`` over ``reps`` rounds of ``items``, after one warm round."""
    for item in items:
        fn(item)
    ms = []
    for _ in range(reps):
        for item in items:
            start = time.perf_counter()
            fn(item)
            ms.append((time.perf_counter() - start) * 1000)
    ms.sort()
    return f"p50 {statistics.median(ms):7.1f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:7.1f} ms (n={len(ms)})"


def in_process(tree: Path) -> None:
    from codii_sql import service
    from codii_sql.search import pruning
    from codii_sql.search.results import SearchOptions
    from codii_sql.service.indexes import open_searcher

    cb = service.open_codebase(tree)
    searcher = open_searcher(cb)
    print(f"in process, warm (load {load()}):")
    bm25 = lambda q: searcher.find(q, SearchOptions(limit=10, mode="bm25"))  # noqa: E731
    print("  bm25 search         ", timed(bm25, QUERIES, 3))
    floor, pruning.PRUNE_MIN_CHUNKS = pruning.PRUNE_MIN_CHUNKS, 10**12
    print("  bm25, plain OR query", timed(bm25, QUERIES, 3), "(search/pruning.py off)")
    pruning.PRUNE_MIN_CHUNKS = floor
    print("  symbol              ", timed(lambda n: service.find_symbol(cb, n), NAMES, 2))
    print("  refs, first 200     ", timed(lambda n: service.find_references(cb, n), NAMES[:6], 2))
    print("  outline             ", timed(lambda f: service.outline(cb, f), FILES, 3))
    print(f"  (load after {load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--home", type=Path, default=Path("/tmp/codii-kernel-home"))
    ap.add_argument("--skip-build", action="store_true", help="measure the index a run built before")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--parts", default="no-change,sizes,cli,watch,in-process",
                    help="comma-separated: which measurements after the build (default: all)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    tree = args.tree.resolve()
    env = {**os.environ, "CODII_SQL_HOME": str(args.home), "CODII_SQL_WATCH": "0"}
    os.environ["CODII_SQL_HOME"] = str(args.home)
    if not args.skip_build:
        build(tree, env)
    if "no-change" in parts:
        no_change(tree, env, args.runs)
    if "sizes" in parts:
        sizes(next((args.home / "indexes").glob(f"{tree.name}-*.db")))
    if "cli" in parts:
        cli_answers(tree, env, args.runs)
    if "watch" in parts:
        cli_with_watch(tree, {**env, "CODII_SQL_BACKGROUND": "0"}, args.runs)
    if "in-process" in parts:
        in_process(tree)


if __name__ == "__main__":
    main()
