"""Timeline of a cold build: when each file is searchable by BM25, when by vector, and how fast search is meanwhile.

    python benchmarks/timeline.py PATH [--interval 10] [--out timeline.json] [--markdown docs/timeline.md]

Starts ``codii-sql build PATH --daemon`` in a fresh ``$CODII_SQL_HOME`` (no embedding cache, so
the build is cold; a background build, as a first search or an agent's index_codebase leaves it,
at low CPU priority) and, every ``--interval`` seconds while it runs, samples the index through a
read connection of its own: files and chunks committed (searchable by BM25, symbol and path),
chunks with a vector, and the warm latency of a few hybrid queries (the query embedding
included, as an agent searching during the build pays it). The build and the sampler share the
machine, as they would for a user. Prints a table and writes JSON (and Markdown if asked).
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUERIES = ["where are database connections opened", "how is the request body parsed", "render a template",
           "QuerySet filter", "password hashing", "cache backend", "migration operations", "url resolver",
           "middleware", "form validation errors"]


def sample(db: Path, root: Path, searcher_box: list) -> dict | None:
    """One row: committed files/chunks, chunks with a vector, and hybrid p50/p95 over :data:`QUERIES` (ms)."""
    from codii_sql.errors import CodiiError
    from codii_sql.models.registry import get_embedder
    from codii_sql.search.results import SearchOptions
    from codii_sql.search.searcher import Searcher
    from codii_sql.storage.store import Store

    if not db.is_file():
        return None
    try:
        if not searcher_box:
            searcher_box.append(Searcher(Store(db, create=False), root, get_embedder()))
        searcher = searcher_box[0]
        counts = searcher.store.row("vector_counts")
        files = searcher.store.row("counts")["files"]
        times = []
        for q in QUERIES:
            t = time.perf_counter()
            searcher.search(q, SearchOptions(limit=10))
            times.append((time.perf_counter() - t) * 1000)
    except CodiiError as err:  # the schema is not there yet in the first instant
        return {"error": str(err)}
    times.sort()
    return {"files": files, "chunks": counts["chunks"], "with_vector": counts["chunks"] - counts["pending"],
            "hybrid_p50_ms": round(statistics.median(times), 1),
            "hybrid_p95_ms": round(times[int(0.95 * (len(times) - 1))], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--out", type=Path, default=Path("timeline.json"))
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="codii-timeline-"))
    env = {**os.environ, "CODII_SQL_HOME": str(home), "PYTHONPATH": str(REPO)}
    os.environ["CODII_SQL_HOME"] = str(home)
    root = args.path.resolve()
    from codii_sql.paths import default_db_path

    db = default_db_path(root)
    started = time.monotonic()
    started_daemon = subprocess.run([sys.executable, "-m", "codii_sql.cli", "build", str(root), "--daemon", "--json"],
                                    env=env, capture_output=True, text=True, check=True)
    log = Path(json.loads(started_daemon.stdout)["daemon"]["log"])
    from codii_sql.codebase import Codebase
    from codii_sql.storage.lock import daemon_running

    codebase = Codebase(root, db)
    rows, box = [], []
    print(f"{'s':>7} {'files':>6} {'chunks':>7} {'vectors':>7} {'p50 ms':>7} {'p95 ms':>7}", flush=True)
    while daemon_running(codebase):
        time.sleep(args.interval)
        row = sample(db, root, box)
        if row is None or "error" in row:
            continue
        row["seconds"] = round(time.monotonic() - started, 1)
        rows.append(row)
        print(f"{row['seconds']:>7} {row['files']:>6} {row['chunks']:>7} {row['with_vector']:>7} "
              f"{row['hybrid_p50_ms']:>7} {row['hybrid_p95_ms']:>7}", flush=True)
    text = log.read_text()
    report = json.loads(text[text.index("{"):]) if "{" in text else {}
    out = {"path": str(root), "interval": args.interval, "build_seconds": round(time.monotonic() - started, 1),
           "report": report, "samples": rows, "load_average": os.getloadavg()}
    args.out.write_text(json.dumps(out, indent=1))
    if args.markdown:
        lines = ["| seconds | files (BM25) | chunks (BM25) | chunks with a vector | hybrid p50 / p95 ms |",
                 "|---|---|---|---|---|"]
        lines += [f"| {r['seconds']} | {r['files']} | {r['chunks']} | {r['with_vector']} | "
                  f"{r['hybrid_p50_ms']} / {r['hybrid_p95_ms']} |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    print(f"build {out['build_seconds']} s; phases {report.get('phase_seconds')}")


if __name__ == "__main__":
    main()
