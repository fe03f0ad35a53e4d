"""Tokens an agent reads per search, against what it finds: whole results vs ``max_tokens`` budgets.

    python benchmarks/token_budget.py --corpora DIR/corpora.json [--budgets 500,1000,2000,4000] [--titles]

``DIR`` comes from ``../shared/bench/swebench/get_corpus.py --dir DIR --json``. Each SWE-bench dev
issue (or its first line, ``--titles``) is asked of its own release's index (built if needed),
10 results, hybrid. Per budget it prints the mean estimated tokens of the answer (the results'
lines at 4 characters a token plus a header each, as search/budget.py counts), Acc@5 and Acc@10
(a file the issue's fix touched among the first 5 / 10 distinct files) and MRR@10 over files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import swe_dev  # noqa: E402

sys.path.insert(0, str(swe_dev.REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    swe_dev.add_arguments(ap)
    ap.add_argument("--budgets", default="500,1000,2000,4000")
    args = ap.parse_args()
    if args.home:
        os.environ["CODII_SQL_HOME"] = str(args.home)
    from codii_sql import service
    from codii_sql.search.budget import result_overhead, tokens
    from codii_sql.search.results import SearchOptions

    dirs = json.loads(args.corpora.read_text())
    wanted = {r.strip() for r in args.releases.split(",") if r.strip()}
    queries = [q for q in map(json.loads, args.queries.open()) if swe_dev.release_of(q) in dirs and swe_dev.release_of(q) in wanted]
    budgets = [None] + [int(b) for b in args.budgets.split(",") if b.strip()]
    rows = {b: {"tokens": [], "acc5": [], "acc10": [], "rr": []} for b in budgets}
    for rel in sorted({swe_dev.release_of(q) for q in queries}):
        cb = service.open_codebase(dirs[rel])
        service.build(cb)
        for q in (q for q in queries if swe_dev.release_of(q) == rel):
            text = q["query"].strip().splitlines()[0] if args.titles else q["query"]
            for b in budgets:
                res = service.search(service.SearchRequest(text, SearchOptions(limit=10, max_tokens=b), [str(cb.root)],
                                                           update=False)).results
                files = list(dict.fromkeys(r.path for r in res))
                hit = [i for i, f in enumerate(files[:10]) if f in set(q["relevant"])]
                row = rows[b]
                row["tokens"].append(sum(tokens(r.content) + result_overhead(r) for r in res))
                row["acc5"].append(bool(hit and hit[0] < 5))
                row["acc10"].append(bool(hit))
                row["rr"].append(1 / (hit[0] + 1) if hit else 0.0)
    print(f"# {len(queries)} SWE-bench issues{' (titles)' if args.titles else ''}, 10 results, hybrid; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'max_tokens':>10} | {'tokens/query':>12} | {'Acc@5':>6} | {'Acc@10':>6} | {'MRR@10':>6}")
    for b, row in rows.items():
        print(f"{b or 'none':>10} | {statistics.mean(row['tokens']):12.0f} | {statistics.mean(row['acc5']):6.3f} | "
              f"{statistics.mean(row['acc10']):6.3f} | {statistics.mean(row['rr']):6.3f}")


if __name__ == "__main__":
    main()
