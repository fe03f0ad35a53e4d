"""codii-sql benchmark suite: index real corpora and print one table (run by hand, not in CI).

    python benchmarks/run.py --corpus small                  # requests, real model (~5 min)
    python benchmarks/run.py --corpus medium large --embedder fake
    python benchmarks/run.py --corpus none --tree 10000 --scale 50000,100000

Corpora are pinned PyPI sdists (see ``corpora.py``) cached under ``--cache-dir``. Every
measurement runs in a child process with ``CODII_SQL_HOME=<cache-dir>/home`` and without the
shared embedding cache, so a cold build is cold. ``--embedder fake`` swaps the model for a
hash-based stand-in (``fake_embed.py``): those rows measure the pipeline without the model and
are labelled so. Results are appended as JSON to ``<cache-dir>/results/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpora  # noqa: E402
import procmon  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CHILD = str(Path(__file__).resolve().parent / "child.py")
MiB = 1 << 20


class Bench:
    """Runs child tasks and CLI commands with the benchmark's environment."""

    def __init__(self, cache_dir: Path, runs: int):
        self.cache_dir = cache_dir
        self.runs = runs
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "CODII_SQL_HOME": str(cache_dir / "home")}

    def child(self, task: str, **kwargs) -> tuple[dict, float, int]:
        """``(json result, wall seconds, peak tree RSS bytes)`` of one child task."""
        done, wall, rss = procmon.run([sys.executable, CHILD, task, json.dumps(kwargs)], env=self.env)
        return json.loads(done.stdout.strip().splitlines()[-1]), wall, rss

    def cli(self, *args: str) -> tuple[float, int]:
        """``(wall seconds, peak RSS bytes)`` of one ``codii-sql`` command, process start to exit."""
        _, wall, rss = procmon.run([sys.executable, "-m", "codii_sql.cli", *args], env=self.env)
        return wall, rss


def median(values):
    return statistics.median(values) if values else None


def edit(path: Path, n: int) -> None:
    """Append one comment line: the file's last chunk changes, the others keep their vectors."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"\n# codii-bench edit {n}\n")


def bench_corpus(b: Bench, name: str, embedder: str, cold_runs: int, work: Path) -> dict:
    """Every per-corpus measurement; see the module docstring."""
    src = work / name
    shutil.copytree(corpora.fetch(name, b.cache_dir), src)
    db = work / f"{name}.db"
    out: dict = {"corpus": name, "pins": corpora.CORPORA[name], "embedder": embedder, "load_before": os.getloadavg()}
    ref, _, ref_rss = b.child("embed", root=str(src), embedder=embedder)
    out["reference"] = {**ref, "peak_tree_rss": ref_rss}
    builds = []
    for _ in range(cold_runs):
        db.unlink(missing_ok=True)
        res, wall, rss = b.child("build", root=str(src), db=str(db), embedder=embedder)
        builds.append({**res, "wall": wall, "peak_tree_rss": rss})
    out["cold_builds"] = builds
    out["db_bytes"] = db.stat().st_size + sum(p.stat().st_size for p in db.parent.glob(db.name + "-wal"))
    cli_build = ["build", str(src), "--db", str(db), "--no-cache", "--json"]
    b.cli(*cli_build)  # checkpoint state after the child build
    out["nochange"] = [b.cli(*cli_build)[0] for _ in range(b.runs)]
    py = sorted(p for p in src.rglob("*.py") if p.stat().st_size > 0)
    one = []
    for i in range(b.runs):
        edit(py[(i * 7919) % len(py)], i)
        one.append(b.cli(*cli_build)[0])
    out["one_edit"] = one
    step = max(1, len(py) // 100)
    for i, p in enumerate(py[::step][:100]):
        edit(p, 1000 + i)
    out["hundred_edit"], out["hundred_edit_rss"] = b.cli(*cli_build)
    out["hundred_edit_files"] = min(100, len(py[::step]))
    res, _, rss = b.child("search", root=str(src), db=str(db), repeats=b.runs)
    out["search"] = {**res, "peak_tree_rss": rss}
    query = ["search", "session authentication", "--path", str(src), "--db", str(db), "--json"]
    out["cli_search"] = [b.cli(*query)[0] for _ in range(b.runs)]
    out["cli_search_no_update"] = [b.cli(*query, "--no-update")[0] for _ in range(b.runs)]
    out["load_after"] = os.getloadavg()
    return out


def bench_tree(b: Bench, n: int, work: Path) -> dict:
    """No-change and one-edit rebuilds (CLI, process start included) of a generated ``n``-file tree."""
    src, db = work / f"tree{n}", work / f"tree{n}.db"
    b.child("tree", target=str(src), n=n)
    res, wall, rss = b.child("build", root=str(src), db=str(db), embedder="fake")
    cli_build = ["build", str(src), "--db", str(db), "--no-cache", "--json"]
    b.cli(*cli_build)
    nochange = [b.cli(*cli_build) for _ in range(b.runs)]
    files = sorted(src.rglob("*.py"))
    one = []
    for i in range(b.runs):
        edit(files[(i * 7919) % len(files)], i)
        one.append(b.cli(*cli_build)[0])
    return {"files": n, "fake_build_wall": wall, "fake_build_rss": rss, "build_report": res["report"],
            "nochange": [w for w, _ in nochange], "nochange_rss": max(r for _, r in nochange), "one_edit": one,
            "load": os.getloadavg()}


def bench_scale(b: Bench, n: int, work: Path) -> dict:
    """Warm search latency on a synthetic index of ``n`` chunks (real texts, random vectors)."""
    db = b.cache_dir / "synthetic" / f"chunks{n}.db"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        tmp = db.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        b.child("synth", source=str(corpora.fetch("medium", b.cache_dir)), db=str(tmp), n=n)
        tmp.rename(db)
    res, _, rss = b.child("search", root=str(work), db=str(db), repeats=b.runs)
    return {"chunks": n, "db_bytes": db.stat().st_size, "search": {**res, "peak_tree_rss": rss},
            "load": os.getloadavg()}


# -- the table ------------------------------------------------------------------------------

def corpus_rows(r: dict) -> dict[str, str]:
    """Table cells for one corpus result."""
    fake = r["embedder"] == "fake"
    builds = r["cold_builds"]
    wall = median([x["wall"] for x in builds])
    inner = median([x["report"]["seconds"] for x in builds])
    rep = builds[len(builds) // 2]["report"]
    chunks, files = rep["chunks"], rep["files"]
    ph = rep["phase_seconds"]
    ref = r["reference"]
    rows = {
        "files / chunks / distinct texts": f"{files} / {chunks} / {ref['chunks']}",
        "mean word pieces per chunk": f"{ref['tokens'] / max(1, ref['chunks']):.0f}",
        "cold build wall s (in-process s)": f"{wall:.1f} ({inner:.1f})",
        "cold build files/s, chunks/s": f"{files / inner:.0f}, {chunks / inner:.1f}",
        "phases s: scan/hash/chunk_wait/lookup/embed/write": "/".join(
            f"{ph.get(k, 0):.1f}" for k in ("scan", "hash", "chunk_wait", "lookup", "embed", "write")),
        "tokenize s (alone) / 1-proc read+hash+chunk s": f"{ref['tokenize']:.2f} / {ref['read_hash_chunk_1proc']:.1f}",
    }
    if not fake:
        rows["embedding alone: s, chunks/s, tokens/s"] = (
            f"{ref['embed']:.1f}, {ref['chunks'] / ref['embed']:.1f}, {ref['tokens'] / ref['embed']:.0f}")
        rows["cold build / embedding alone"] = f"{inner / ref['embed']:.2f}"
    rows |= {
        "rebuild s: no change / 1 file / 100 files (CLI)": (
            f"{median(r['nochange']):.2f} / {median(r['one_edit']):.2f} / {r['hundred_edit']:.2f}"),
        "search p50/p95 ms: bm25": _lat(r["search"]["bm25"]),
        "search p50/p95 ms: vector": _lat(r["search"]["vector"]),
        "search p50/p95 ms: hybrid": _lat(r["search"]["hybrid"]),
        "query embedding p50 ms": f"{r['search']['query_embed']['p50_ms']:.1f}",
        "CLI search s (with update check / --no-update)": (
            f"{median(r['cli_search']):.2f} / {median(r['cli_search_no_update']):.2f}"),
        "peak RSS MiB: build (tree) / search": (
            f"{median([x['peak_tree_rss'] for x in builds]) / MiB:.0f} / {r['search']['peak_tree_rss'] / MiB:.0f}"),
        ".db MiB, bytes/chunk": f"{r['db_bytes'] / MiB:.1f}, {r['db_bytes'] / max(1, chunks):.0f}",
        "load average (1 min) before/after": f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f}",
    }
    return rows


def _lat(x: dict) -> str:
    return f"{x['p50_ms']:.1f} / {x['p95_ms']:.1f}"


def print_table(results: dict) -> None:
    """Markdown tables: one column per corpus, then the tree and scale rows."""
    cols = {f"{r['corpus']} ({r['embedder']} embedder)": corpus_rows(r) for r in results.get("corpora", [])}
    if cols:
        names = list(cols)
        print("| metric | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for key in next(iter(cols.values())):
            print(f"| {key} | " + " | ".join(cols[n].get(key, "") for n in names) + " |")
    for t in results.get("trees", []):
        print(f"\ngenerated tree, {t['files']} files: fake-embedder build {t['fake_build_wall']:.1f} s, "
              f"no-change rebuild (CLI) {median(t['nochange']):.2f} s (peak RSS {t['nochange_rss'] / MiB:.0f} MiB), "
              f"one edited file (CLI, model load included) {median(t['one_edit']):.2f} s; load {t['load'][0]:.1f}")
    for s in results.get("scale", []):
        q = s["search"]
        print(f"\nsynthetic index, {s['chunks']} chunks ({s['db_bytes'] / MiB:.0f} MiB): p50/p95 ms "
              f"bm25 {_lat(q['bm25'])}, vector {_lat(q['vector'])}, hybrid {_lat(q['hybrid'])}; "
              f"query embedding p50 {q['query_embed']['p50_ms']:.1f} ms; load {s['load'][0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", default=["small"], choices=[*corpora.CORPORA, "none"])
    parser.add_argument("--embedder", choices=["real", "fake"], default="real",
                        help="fake: hash vectors, measures the pipeline without the model")
    parser.add_argument("--runs", type=int, default=3, help="repeats of cheap measurements (median)")
    parser.add_argument("--cold-runs", type=int, default=None, help="cold builds (default 1 real, 3 fake)")
    parser.add_argument("--tree", type=int, default=0, help="also time rebuilds of a generated N-file tree")
    parser.add_argument("--scale", default="", help="also time search on synthetic indexes, e.g. 50000,100000")
    parser.add_argument("--cache-dir", type=Path, default=corpora.DEFAULT_CACHE_DIR)
    parser.add_argument("--show", type=Path, default=None, help="only print the table of a saved JSON result")
    args = parser.parse_args()
    if args.show:
        print_table(json.loads(args.show.read_text()))
        return
    b = Bench(args.cache_dir.expanduser(), args.runs)
    cold_runs = args.cold_runs or (1 if args.embedder == "real" else 3)
    results: dict = {"started": dt.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                     "git": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip(),
                     "corpora": [], "trees": [], "scale": []}
    with tempfile.TemporaryDirectory(prefix="codii-bench-") as tmp:
        work = Path(tmp)
        for name in (c for c in args.corpus if c != "none"):
            results["corpora"].append(bench_corpus(b, name, args.embedder, cold_runs, work))
        if args.tree:
            results["trees"].append(bench_tree(b, args.tree, work))
        for n in (int(x) for x in args.scale.split(",") if x):
            results["scale"].append(bench_scale(b, n, work))
    out = b.cache_dir / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print_table(results)
    print(f"\nresults: {out}")


if __name__ == "__main__":
    main()
