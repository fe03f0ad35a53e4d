"""Search quality while the vector phase runs: SWE-bench queries against indexes only partly embedded.

    python benchmarks/partial_vectors.py --corpora DIR/corpora.json --home /tmp/swehome \\
        --releases Sphinx==3.4.3,pytest==5.4.3 --coverage 0.01,0.05,0.2,0.5,1

Each release's finished index (built under ``--home``) is copied, and in the copy the chunks
past the first ``coverage`` share of the vector phase's order (file role, then chunk id, as
``vector_queue_next`` walks it) lose their vectors and go back to the queue: the index as a
search sees it that far into its vector phase. Every query of the release then runs in hybrid
and in BM25 mode (``--titles``: its first line only, a short query); with ``--cosqa`` the
CoSQA snippets' index and queries instead (one role: the order is the chunks' own). File-level
Acc@5, MRR@10 and NDCG@10 (ir-measures) are printed per coverage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = REPO.parent / "shared" / "bench" / "swebench" / "queries.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, help="SWE-bench: corpora.json written by get_corpus.py --json")
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--releases", default="", help="SWE-bench: comma-separated NAME==VERSION")
    ap.add_argument("--cosqa", type=Path, default=None,
                    help="CoSQA instead: the folder `codii-sql eval cosqa` wrote the snippets to (WORK/cosqa)")
    ap.add_argument("--coverage", default="0.01,0.05,0.2,0.5,1")
    ap.add_argument("--titles", action="store_true", help="SWE-bench: each issue's first line only (short queries)")
    args = ap.parse_args()
    if args.home:
        os.environ["CODII_SQL_HOME"] = str(args.home)
    sys.path.insert(0, str(REPO))
    from codii_sql.eval.metrics import score

    cases = list(cosqa_cases(args.cosqa) if args.cosqa else swebench_cases(args))
    coverages = [float(c) for c in args.coverage.split(",")]
    ranked = {(c, mode): {} for c in coverages for mode in ("hybrid", "bm25")}
    relevant = {q["id"]: q["relevant"] for _, qs in cases for q in qs}
    with tempfile.TemporaryDirectory() as tmp:
        for cb, queries in cases:
            for c in coverages:
                run_at(cb, queries, c, Path(tmp), ranked)
    print(f"{'coverage':>8} {'mode':>6} | {'Acc@5':>6} {'MRR@10':>6} {'NDCG@10':>7}")
    for (c, mode), run in ranked.items():
        per = score("swebench", relevant, run)
        mean = {m: statistics.mean(r[m] for r in per.values()) for m in ("Acc@5", "MRR@10", "NDCG@10")}
        print(f"{c:>8.0%} {mode:>6} | {mean['Acc@5']:6.3f} {mean['MRR@10']:6.3f} {mean['NDCG@10']:7.3f}")
    print(f"# {len(relevant)} queries, load average {os.getloadavg()[0]:.2f}")


def swebench_cases(args):
    """``(codebase, queries)`` per release, each brought up to date (roles included) first."""
    from codii_sql import service
    from codii_sql.codebase import Codebase

    releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    dirs = {k: Path(v) for k, v in json.loads(args.corpora.read_text()).items()}
    every = [q for q in map(json.loads, args.queries.open())]
    for rel in releases:
        cb = Codebase.open(dirs[rel])
        service.build(cb)
        mine = [q for q in every if f"{q['pypi']['name']}=={q['pypi']['version']}" == rel]
        if args.titles:
            mine = [{**q, "query": q["query"].strip().splitlines()[0]} for q in mine]
        yield cb, mine


def cosqa_cases(root: Path):
    """The CoSQA snippets' index and its 500 queries (relevant: ``snippets/<idx>.py``)."""
    from codii_sql import service
    from codii_sql.codebase import Codebase

    cb = Codebase.open(root)
    service.build(cb)
    queries = [json.loads(line) for line in (REPO.parent / "shared" / "bench" / "cosqa" / "queries.jsonl").open()]
    yield cb, queries


def run_at(cb, queries: list[dict], coverage: float, tmp: Path, ranked: dict) -> None:
    """Ask ``queries`` of a copy of ``cb``'s index cut back to ``coverage``; file rankings go to ``ranked``."""
    from codii_sql import service
    from codii_sql.codebase import Codebase

    copy = Codebase(cb.root, tmp / f"{cb.db_path.stem}-{coverage}.db")
    shutil.copy(cb.db_path, copy.db_path)
    left = unembed(copy.db_path, coverage)
    print(f"# {cb.root.name} at {coverage:.0%}: {left:,} chunks back in the queue", flush=True)
    for mode in ("hybrid", "bm25"):
        opts = service.SearchOptions(limit=10, mode=mode, group_by_file=True)
        for q in queries:
            resp = service.search(service.SearchRequest(q["query"], opts, [str(copy.root)], db=str(copy.db_path),
                                                        update=False))
            ranked[(coverage, mode)][q["id"]] = list(dict.fromkeys(r.path for r in resp.results))
    copy.db_path.unlink()


def unembed(db: Path, coverage: float) -> int:
    """Put every chunk past the first ``coverage`` of the vector phase's order back in the queue."""
    import apsw
    import sqlite_vec

    from codii_sql.ingest.roles import classify
    from codii_sql.ingest.write import VECTOR_PRIORITY

    conn = apsw.Connection(str(db))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    rows = list(conn.execute("SELECT c.id, f.path FROM chunks c JOIN files f ON f.id = c.file_id"))
    order = sorted(rows, key=lambda r: (VECTOR_PRIORITY.get(classify(r[1]), 0), r[0]))
    tail = [(i, VECTOR_PRIORITY.get(classify(p), 0)) for i, p in order[round(coverage * len(order)):]]
    with conn:
        conn.executemany("DELETE FROM chunks_vec WHERE rowid = ?", [(i,) for i, _ in tail])
        conn.executemany("DELETE FROM chunks_bits WHERE rowid = ?", [(i,) for i, _ in tail])
        conn.executemany("INSERT OR REPLACE INTO vector_queue(chunk_id, priority) VALUES (?, ?)", tail)
    conn.close()
    return len(tail)


if __name__ == "__main__":
    main()
