"""Workspace search: does one merged list rank each member's own answers as well as its own index? And how fast?

    python benchmarks/workspace_merge.py --corpora DIR/corpora.json --home /tmp/swehome
    python benchmarks/workspace_merge.py --corpora DIR/corpora.json --latency 1,3,10

``DIR`` comes from ``../shared/bench/swebench/get_corpus.py --dir DIR --json``. Quality: every
SWE-bench query of the chosen releases is asked of its own release's index and of a workspace
holding that release plus one release of every other project (the one with the most queries);
per-query Acc@k, MRR@10 and NDCG@10 count only the query's own release's files as relevant, so
another project's result above them costs. The members' answers are fetched once and merged
with each ``--temperatures`` value (``rrf``: by rank; ``inf``: members' fused scores as they
are); the product's own search (row ``product``: :func:`codii_sql.service.search`, which leaves
out members whose best result could not enter) is scored beside them, with how many members it
asked and how often a member it left out held a result of the all-members top 5 (``lost``: it
must be 0).
Latency: warm p50 of the product's search over the issues' titles at 1, 3 and 10 members
(indexes kept open, as the MCP server keeps them), beside a single index's own :meth:`Searcher.search`.

Releases are indexed with the product's build under ``--home`` (shared embedding cache) first.
pylint is GPL: its index stays on this machine (bench README).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import swe_dev  # noqa: E402

REPO = swe_dev.REPO


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    swe_dev.add_arguments(ap)
    ap.add_argument("--temperatures", default="0.01,0.02,0.03,0.05,0.1,0.2,inf,rrf")
    ap.add_argument("--latency", default="1,3,10", help="member counts to time ('' skips the latency run)")
    ap.add_argument("--runs", type=int, default=3, help="passes over the titles per member count")
    ap.add_argument("--out", type=Path, default=None, help="write the full record here as JSON")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.home:
        os.environ["CODII_SQL_HOME"] = str(args.home)
    sys.path.insert(0, str(REPO))
    from codii_sql import service
    from codii_sql.codebase import Codebase

    releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    dirs = {k: Path(v) for k, v in json.loads(args.corpora.read_text()).items()}
    missing = [r for r in releases if r not in dirs]
    if missing:
        sys.exit(f"not in {args.corpora}: {', '.join(missing)}")
    queries = [q for q in map(json.loads, args.queries.open()) if swe_dev.release_of(q) in releases]
    asked = [{**q, "query": q["query"].strip().splitlines()[0]} for q in queries] if args.titles else queries
    codebases = {}
    for rel in releases:
        cb = Codebase.open(dirs[rel])
        t = time.perf_counter()
        report = service.build(cb)
        print(f"# {rel}: {report.chunks} chunks, up to date in {time.perf_counter() - t:.1f} s", flush=True)
        codebases[rel] = cb
    record = {"releases": releases, "queries": len(queries), "load_avg": os.getloadavg()}
    record["quality"] = quality(codebases, asked, [t.strip() for t in args.temperatures.split(",")])
    counts = [int(n) for n in args.latency.split(",") if n.strip()]
    if counts:
        record["latency"] = latency(codebases, queries, counts, args.runs)
    record["load_avg_end"] = os.getloadavg()
    print(f"# load average {record['load_avg'][0]:.2f} at start, {record['load_avg_end'][0]:.2f} at end")
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))


def project(release: str) -> str:
    return release.split("==")[0]


def anchors(queries: list[dict], releases: list[str]) -> dict[str, str]:
    """Per project, its release with the most queries (ties: the first listed)."""
    counts = Counter(swe_dev.release_of(q) for q in queries)
    out = {}
    for rel in releases:
        best = out.get(project(rel))
        if best is None or counts[rel] > counts[best]:
            out[project(rel)] = rel
    return out


def quality(codebases: dict, queries: list[dict], temperatures: list[str]) -> dict:
    """Micro and per-repository means of Acc@1/3/5/10, MRR@10, NDCG@10: own index, and the workspace per temperature."""
    from codii_sql.eval.metrics import metric_names, score
    from codii_sql import service
    from codii_sql.search.merge import MERGE_TEMPERATURE, MemberAnswer, merge
    from codii_sql.service import SearchOptions, open_searcher

    opts = SearchOptions(limit=10, group_by_file=True)
    anchor = anchors(queries, list(codebases))
    searchers = {rel: open_searcher(cb) for rel, cb in codebases.items()}
    indexes = service.OpenIndexes()
    runs: dict[str, dict[str, list[str]]] = defaultdict(dict)
    relevant, disagreements, searched, lost, started = {}, 0, 0, 0, time.perf_counter()
    for q in queries:
        own = swe_dev.release_of(q)
        members = [own] + [r for p, r in anchor.items() if p != project(own)]
        vector = searchers[own].embedder.embed_query(q["query"])
        answers = [MemberAnswer(rel, searchers[rel].search(q["query"], opts, query_vector=vector),
                                searchers[rel].embedder.model_id) for rel in members]
        relevant[q["id"]] = [f"{own}::{p}" for p in q["relevant"]]
        runs["own"][q["id"]] = [f"{own}::{r.path}" for r in answers[0].results]
        for t in temperatures:
            merged = by_rank(answers) if t == "rrf" else merge(answers, opts.limit, temperature=float(t)).results
            runs[t][q["id"]] = list(dict.fromkeys(f"{r.codebase}::{r.path}" for r in merged))
        product = service.search(service.SearchRequest(q["query"], opts, [str(codebases[r].root) for r in members],
                                                       update=False), indexes=indexes)
        names = {str(codebases[r].root): r for r in members}
        got = list(dict.fromkeys(f"{names[r.codebase]}::{r.path}" for r in product.results))
        runs["product"][q["id"]] = got
        everyone = runs[str(MERGE_TEMPERATURE)].get(q["id"], got)
        disagreements += got != everyone
        left_out = {names[m.codebase] for m in product.members if m.status == "pruned"}
        lost += any(hit.split("::")[0] in left_out for hit in everyone[:5])
        searched += sum(m.status == "searched" for m in product.members)
    print(f"# {len(queries)} queries x {len(anchor)} members in {time.perf_counter() - started:.0f} s; the product "
          f"asked {searched / max(len(queries), 1):.1f} members per query, differed from the merge of all members "
          f"on {disagreements} and left out a member holding one of its top 5 on {lost} (lost)", flush=True)
    names = metric_names("swebench")
    repo_of = {q["id"]: q["repo"] for q in queries}
    table = {}
    own_rows = score("swebench", relevant, runs["own"])
    for label, run in runs.items():
        rows = score("swebench", relevant, run)
        table[label] = summary(rows, names, repo_of)
        table[label]["worse_acc5"] = sum(rows[i]["Acc@5"] < own_rows[i]["Acc@5"] for i in rows)
        table[label]["better_acc5"] = sum(rows[i]["Acc@5"] > own_rows[i]["Acc@5"] for i in rows)
        table[label]["worse_mrr10"] = sum(rows[i]["MRR@10"] < own_rows[i]["MRR@10"] - 1e-9 for i in rows)
    print_quality(table, anchor)
    for s in searchers.values():
        s.store.close()
    table["lost"], table["disagreements"] = lost, disagreements
    table["members_asked"] = searched / max(len(queries), 1)
    return table


def by_rank(answers) -> list:
    """Reciprocal-rank interleave of the members (RRF, k = 60), as the product merges different models."""
    from dataclasses import replace
    scored = [(1.0 / (60 + rank), -order, replace(r, codebase=a.codebase))
              for order, a in enumerate(answers) for rank, r in enumerate(a.results, 1)]
    scored.sort(key=lambda s: s[:2], reverse=True)
    return [r for *_, r in scored[:10]]


def summary(rows: dict[str, dict], names: list[str], repo_of: dict[str, str]) -> dict:
    micro = {n: statistics.mean(r[n] for r in rows.values()) for n in names}
    per_repo = defaultdict(list)
    for qid, r in rows.items():
        per_repo[repo_of[qid]].append(r)
    macro = {n: statistics.mean(statistics.mean(r[n] for r in rs) for rs in per_repo.values()) for n in names}
    return {"micro": micro, "macro": macro,
            "by_repo": {repo: statistics.mean(r["Acc@5"] for r in rs) for repo, rs in sorted(per_repo.items())}}


def print_quality(table: dict, anchor: dict) -> None:
    print(f"# workspace members: the query's release + {', '.join(anchor.values())} (one per other project)")
    cols = ["Acc@1", "Acc@5", "Acc@10", "MRR@10", "NDCG@10"]
    print(f"{'merge':>8} | " + " | ".join(f"{c:>7}" for c in cols) + " | macro Acc@5 | Acc@5 worse/better | MRR worse")
    for label, row in table.items():
        print(f"{label:>8} | " + " | ".join(f"{row['micro'][c]:7.3f}" for c in cols)
              + f" | {row['macro']['Acc@5']:11.3f} | {row['worse_acc5']:>5}/{row['better_acc5']:<12} | "
              f"{row['worse_mrr10']}")


def latency(codebases: dict, queries: list[dict], counts: list[int], runs: int) -> dict:
    """Warm p50/p95 (ms) of the product's search over the first n releases, and of one index's own search."""
    from codii_sql import service
    from codii_sql.service import SearchOptions, open_searcher

    titles = list(dict.fromkeys(q["query"].strip().splitlines()[0][:200] for q in queries))
    opts = SearchOptions(limit=10)
    releases = list(codebases)
    searchers = {rel: open_searcher(codebases[rel]) for rel in releases}
    indexes = service.OpenIndexes()
    out = {}
    first = searchers[releases[0]]
    for t in titles:  # warm every page cache and the ONNX session
        for s in searchers.values():
            s.search(t, opts)
    single = timed(lambda t: first.search(t, opts), titles, runs)
    out["single"] = single
    print(f"# latency over {len(titles)} titles x {runs} runs (ms); single index {releases[0]}: "
          f"p50 {single['p50']:.1f}, p95 {single['p95']:.1f}")
    for n in counts:
        members = [codebases[r] for r in releases[:n]]
        if len(members) < n:
            print(f"# only {len(members)} releases: no {n}-member row")
            continue
        roots = [str(cb.root) for cb in members]
        row = timed(lambda t: service.search(service.SearchRequest(t, opts, roots, update=False), indexes=indexes),
                    titles, runs)
        row["vs_single"] = round(row["p50"] / single["p50"], 2)
        out[str(n)] = row
        print(f"{n:>3} members: p50 {row['p50']:.1f} ms, p95 {row['p95']:.1f} ms, {row['vs_single']:.2f}x single")
    for s in searchers.values():
        s.store.close()
    return out


def timed(fn, titles: list[str], runs: int) -> dict:
    ms = []
    for _ in range(runs):
        for t in titles:
            start = time.perf_counter()
            fn(t)
            ms.append((time.perf_counter() - start) * 1000)
    ms.sort()
    return {"p50": statistics.median(ms), "p95": ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)], "n": len(ms)}


if __name__ == "__main__":
    main()
