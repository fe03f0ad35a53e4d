"""Eval runs on disk and on screen: save and load run records, tables, and the deltas between two runs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..errors import UsageError


def save_run(run: dict, work_dir: Path) -> Path:
    """Write ``run`` to ``<work_dir>/runs/<dataset>-<mode or kind>[-rerank]-<YYYYmmdd-HHMMSS>[-n].json``."""
    runs = Path(work_dir).expanduser() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cfg = run["config"]
    stem = (f"{run['dataset']}-{cfg.get('mode', run['kind'])}{'-rerank' if cfg.get('rerank') else ''}"
            f"-{time.strftime('%Y%m%d-%H%M%S')}")
    path, n = runs / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = runs / f"{stem}-{n}.json"
    path.write_text(json.dumps(run, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def summary(run: dict) -> dict:
    """The run without its per-query rows (what ``--json`` prints)."""
    return {k: v for k, v in run.items() if k != "per_query"}


def format_run(run: dict) -> str:
    """A plain-text table: metrics (micro, macro and per repository for SWE-bench), latency, index time."""
    cfg = run["config"]
    lines = [f"{run['dataset']} ({run['kind']})  mode={cfg['mode']}  embedder={cfg.get('embedder') or 'local'}  "
             f"prior={'on' if cfg['role_prior'] else 'off'}  "
             f"rerank={'on' if cfg['rerank'] else 'off'}  top={cfg['top']}  queries={run['queries']}"]
    columns = [("all", run["metrics"])]
    if "macro" in run:
        columns.append(("macro", run["macro"]))
        columns += [(f"{repo.rpartition('/')[2]} ({v['queries']})", v["metrics"]) for repo, v in run["by_repo"].items()]
    width = max(10, *(len(c) for c, _ in columns))
    lines.append(f"{'metric':<12}" + "".join(f"{c:>{width + 2}}" for c, _ in columns))
    for name in run["metrics"]:
        lines.append(f"{name:<12}" + "".join(f"{vals[name]:>{width + 2}.4f}" for _, vals in columns))
    lat = run["latency_ms"]
    lines.append(f"query latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms (search call only)")
    cold = sum(i["build"] == "cold" for i in run["index"])
    embedded = sum(i["chunks_embedded"] for i in run["index"])
    chunks = sum(i["chunks"] for i in run["index"])
    lines.append(f"index: {len(run['index'])} corpora, {chunks} chunks, {run['index_seconds']:.1f} s "
                 f"({cold} cold, {len(run['index']) - cold} updates; {embedded} chunks embedded)")
    return "\n".join(lines)


def load_run(path: str | os.PathLike) -> dict:
    """A saved run record.

    Raises:
        UsageError: the file is not a run record.
    """
    try:
        run = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: not a saved eval run ({err})") from None
    if not isinstance(run, dict) or not {"dataset", "config", "metrics"} <= run.keys():
        raise UsageError(f"{path}: not a saved eval run (no dataset, config and metrics keys)")
    return run


def compare_runs(a: dict, b: dict) -> dict:
    """Metric deltas ``b - a``: ``{"a", "b", "rows": [{"section", "metric", "a", "b", "delta"}], "queries"}``.

    Sections: ``metrics`` (micro), ``macro`` when both have it, ``latency_ms`` (p50, p95).
    ``queries`` counts the common queries whose first relevant rank got better, worse or stayed.
    """
    rows = []
    for section in ("metrics", "macro", "latency_ms"):
        if section in a and section in b:
            for name in a[section]:
                if name in b[section]:
                    rows.append({"section": section, "metric": name, "a": a[section][name], "b": b[section][name],
                                 "delta": b[section][name] - a[section][name]})
    return {"a": _label(a), "b": _label(b), "rows": rows, "queries": _rank_changes(a, b)}


def _label(run: dict) -> str:
    cfg = run["config"]
    return (f"{run['dataset']} {cfg['mode']}{' +rerank' if cfg.get('rerank') else ''} "
            f"{cfg.get('embedder') or 'local'} {run.get('started_at', '')}")


def _first_rank(row: dict) -> float:
    found = [r for r in row["ranks"].values() if r is not None]
    return min(found) if found else float("inf")


def _rank_changes(a: dict, b: dict) -> dict:
    ra = {q["id"]: _first_rank(q) for q in a.get("per_query", [])}
    rb = {q["id"]: _first_rank(q) for q in b.get("per_query", [])}
    common = ra.keys() & rb.keys()
    return {"common": len(common), "better": sum(rb[q] < ra[q] for q in common),
            "worse": sum(rb[q] > ra[q] for q in common), "same": sum(rb[q] == ra[q] for q in common)}


def format_comparison(cmp: dict) -> str:
    """A plain-text table of :func:`compare_runs`."""
    lines = [f"A: {cmp['a']}", f"B: {cmp['b']}", f"{'':<11}{'metric':<12}{'A':>10}{'B':>10}{'B-A':>10}"]
    for r in cmp["rows"]:
        lines.append(f"{r['section']:<11}{r['metric']:<12}{r['a']:>10.4f}{r['b']:>10.4f}{r['delta']:>+10.4f}")
    q = cmp["queries"]
    lines.append(f"first relevant rank over {q['common']} common queries: {q['better']} better, "
                 f"{q['worse']} worse, {q['same']} same")
    return "\n".join(lines)
