"""Can a per-query fusion weight, learned from features the searcher has, beat the hand-set rules?

    python benchmarks/fusion_fit.py RUN.json [RUN.json ...] [--save rows.jsonl]

Each RUN.json is what ``codii-sql eval git PATH --json`` prints (or its hybrid run record alone): its
``per_query`` holds each commit subject and its gold files; the index it was measured on is found under ``$CODII_SQL_HOME``
from the record's ``path``. For every query the script runs, through ``Searcher.find``:

- the product as it is (hybrid, role prior, 10 chunks), BM25 alone and vectors alone;
- hybrid at each fixed BM25 weight of a grid (0.0 ... 1.0, every shape forced to it);
- the features the searcher could use: shape, named symbols and paths, term counts and rarity, the
  nearest cosine and its gap to the second, BM25's best raw score and its gap, the overlap of the
  two single-retriever lists.

It prints, per repository, hit@1, hit@5, all-gold@5 and MRR@10 of the product, of each single
retriever, of each fixed weight, of the per-query oracle (the best grid weight for each query), and of
a logistic regression (L2, Newton steps) fitted leave-one-repository-out on whether the BM25-leaning
weight (0.7) beats the vector-leaning one (0.3), used either to pick one of the two or to blend them.
Files are ranked by their best chunk, as ``eval git`` ranks them. Prints numbers; not run in CI.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codii_sql.codebase import Codebase  # noqa: E402
from codii_sql.models.registry import get_embedder  # noqa: E402
from codii_sql.search import searcher as searcher_module  # noqa: E402
from codii_sql.search.results import SearchOptions  # noqa: E402
from codii_sql.storage.store import Store  # noqa: E402

GRID = ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
SHAPES = ["identifier", "mixed", "natural", "long"]
LOW, HIGH = "0.3", "0.7"


def files(results) -> list[str]:
    return list(dict.fromkeys(r.path for r in results))


def measure(run: dict) -> list[dict]:
    """One row per query of the record ``run``: its gold, the lists of each system and its features."""
    embedder = get_embedder()
    store = Store(Codebase.open(run["path"]).db_path, create=False)
    s = searcher_module.Searcher(store, None, embedder)
    chunks = store.row("counts")["chunks"]
    usual, weak = dict(searcher_module.BM25_WEIGHT), searcher_module.WEAK_VECTORS_BM25
    opts = SearchOptions(limit=10, mode="hybrid", role_prior=True)
    rows = []
    for q in run["per_query"]:
        text, vec = q["query"], embedder.embed_query(q["query"])
        a = s.analyze(text)
        vector = s.find(text, SearchOptions(limit=10, mode="vector", role_prior=True), vec).results
        cosines = sorted((r.cosine for r in vector if r.cosine is not None), reverse=True) + [0.0, 0.0]
        raws = [r[0] for r in store.conn.execute(
            "SELECT -bm25(chunks_fts, 1.0, 0.5, 2.0, 1.0) FROM chunks_fts WHERE chunks_fts MATCH ? "
            "ORDER BY bm25(chunks_fts, 1.0, 0.5, 2.0, 1.0) LIMIT 2", (a.fts,))] if a.fts else []
        raws += [0.0, 0.0]
        counts = {r["term"]: r["doc"] for r in store.rows("term_doc_counts", {"terms": json.dumps(a.terms)})} \
            if a.terms else {}
        row = {"repo": Path(run["path"]).name, "query": text, "gold": sorted(q["ranks"]), "shape": a.shape,
               "names": len(a.named.names), "paths": len(a.named.paths), "terms": len(a.terms),
               "cos1": cosines[0], "cos2": cosines[1], "bm1": raws[0], "bm2": raws[1],
               "min_df": min(counts.values()) / chunks if counts else 1.0,
               "mean_idf": float(np.mean([math.log(chunks / (d + 1)) for d in counts.values()])) if counts else 0.0,
               "product": files(s.find(text, opts, vec).results),
               "bm25": files(s.find(text, SearchOptions(limit=10, mode="bm25", role_prior=True)).results),
               "vector": files(vector), "grid": {}}
        # Every shape's weight forced to w (and no floor for weak vectors): the fused list at that weight.
        searcher_module.WEAK_VECTORS_BM25 = 0.0
        for w in GRID:
            searcher_module.BM25_WEIGHT.update({shape: (float(w), float(w)) for shape in usual})
            row["grid"][w] = files(s.find(text, opts, vec).results)
        searcher_module.BM25_WEIGHT.update(usual)
        searcher_module.WEAK_VECTORS_BM25 = weak
        rows.append(row)
    store.close()
    return rows


def metrics(listed: list[str], gold: list[str]) -> dict[str, float]:
    rank = {f: i + 1 for i, f in enumerate(listed)}
    ranks = [rank.get(g) for g in gold]
    best = min((r for r in ranks if r), default=None)
    return {"hit@1": float(best == 1), "hit@5": float(bool(best and best <= 5)),
            "all-gold@5": float(all(r and r <= 5 for r in ranks)), "MRR@10": 1 / best if best else 0.0}


def utility(listed: list[str], gold: list[str]) -> float:
    m = metrics(listed, gold)
    return m["hit@5"] + m["all-gold@5"] + m["MRR@10"]


def features(r: dict) -> list[float]:
    gap = (r["bm1"] - r["bm2"]) / r["bm1"] if r["bm1"] > 0 else 0.0
    overlap = len(set(r["bm25"]) & set(r["vector"])) / 10.0
    agree = float(bool(r["bm25"]) and bool(r["vector"]) and r["bm25"][0] == r["vector"][0])
    return [r["cos1"], r["cos1"] - r["cos2"], gap, math.log1p(r["bm1"]), overlap, agree,
            *[float(r["shape"] == s) for s in SHAPES], float(r["names"] > 0), float(r["paths"] > 0),
            math.log1p(r["terms"]), math.log(max(r["min_df"], 1e-6)), r["mean_idf"] / 10]


def fit(rows: list[dict], c: float = 1.0):
    """Logistic regression of 'the 0.7 list beats the 0.3 list' (ties left out, weighted by the gap)."""
    x, y, w = [], [], []
    for r in rows:
        low, high = utility(r["grid"][LOW], r["gold"]), utility(r["grid"][HIGH], r["gold"])
        if low != high:
            x.append(features(r))
            y.append(float(high > low))
            w.append(abs(high - low))
    x, y, w = np.array(x), np.array(y), np.array(w)
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-z @ beta))
        gradient = z.T @ ((p - y) * w) + beta / c
        hessian = (z * (p * (1 - p) * w)[:, None]).T @ z + np.eye(len(beta)) / c
        beta -= np.linalg.solve(hessian, gradient)
    return lambda r: float(1 / (1 + np.exp(-np.append((np.array(features(r)) - mu) / sd, 1.0) @ beta)))


def report(rows: list[dict]) -> None:
    by = collections.defaultdict(list)
    for r in rows:
        by[r["repo"]].append(r)
    keys = ("hit@1", "hit@5", "all-gold@5", "MRR@10")
    print("| repo | system | " + " | ".join(keys) + " |\n|---|---|" + "---|" * len(keys))
    for repo, mine in by.items():
        model = fit([r for k, v in by.items() if k != repo for r in v])

        def blend(r):
            w = 0.3 + 0.4 * model(r)
            return r["grid"][min(GRID, key=lambda g: abs(float(g) - w))]

        systems = {"product": lambda r: r["product"], "bm25": lambda r: r["bm25"], "vector": lambda r: r["vector"],
                   **{f"w={w}": (lambda w: lambda r: r["grid"][w])(w) for w in ("0.3", "0.5", "0.7")},
                   "oracle w": lambda r: max((r["grid"][w] for w in GRID), key=lambda f: utility(f, r["gold"])),
                   "learned, pick": lambda r: r["grid"][HIGH if model(r) > 0.5 else LOW],
                   "learned, blend": blend}
        for name, pick in systems.items():
            m = {k: sum(metrics(pick(r), r["gold"])[k] for r in mine) / len(mine) for k in keys}
            print(f"| {repo} | {name} | " + " | ".join(f"{m[k]:.3f}" for k in keys) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="hybrid records of `codii-sql eval git --json`")
    ap.add_argument("--save", type=Path, help="write the measured rows here (JSON lines)")
    ap.add_argument("--rows", type=Path, help="read rows saved before instead of measuring")
    args = ap.parse_args()
    if args.rows:
        rows = [json.loads(line) for line in args.rows.open()]
    else:
        records = [json.loads(path.read_text()) for path in args.runs]
        rows = [row for rec in records for row in measure(rec["runs"]["hybrid"] if "runs" in rec else rec)]
    if args.save:
        args.save.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report(rows)


if __name__ == "__main__":
    main()
