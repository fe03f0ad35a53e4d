"""Tokens an agent reads before the right code: a grep agent against a codii-sql agent, over several sets.

    python benchmarks/tokens.py --git ~/src/requests ~/src/zod ... [--swebench requests,flask] \\
        [--bench-dir ../shared/bench] [--commits 100] [--search-tokens 2000] [--home DIR] [--json OUT]

Each git repository gives up to ``--commits`` commit subjects (``codii-sql eval tokens PATH``); each
``--swebench`` group its SWE-bench dev issues (``codii-sql eval tokens swebench --repos ...``). It prints
one row per set and agent (success within 2k / 5k / 10k / 20k tokens, median tokens to the first gold
line), then the pooled rows over every query and the two ratios issue 28 sets: codii-sql's success
within 5k over grep's, and grep's median over codii-sql's. The agents and the rules are
codii_sql/eval/agents.py's; see docs/eval.md "Tokens to the right code".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git", nargs="*", type=Path, default=[], help="git repositories (work trees with history)")
    ap.add_argument("--swebench", nargs="*", default=[], help="SWE-bench repository groups, e.g. requests,flask pytest")
    ap.add_argument("--bench-dir", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "bench")
    ap.add_argument("--work-dir", type=Path, default=Path("~/.cache/codii-bench"))
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--search-tokens", type=int, default=2000)
    ap.add_argument("--home", type=Path, default=None, help="CODII_SQL_HOME for the indexes (default: as set)")
    ap.add_argument("--json", type=Path, default=None, help="write every run's summary here")
    args = ap.parse_args()
    if args.home:
        os.environ["CODII_SQL_HOME"] = str(args.home)
    from codii_sql.eval import TokensConfig, evaluate_tokens, summary
    from codii_sql.eval.tokens import AGENTS, DEFAULT_BUDGETS, summarise

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    configs = [TokensConfig("git", path=p, commits=args.commits, search_tokens=args.search_tokens, work_dir=args.work_dir)
               for p in args.git]
    configs += [TokensConfig("swebench", repos=tuple(g.split(",")), bench_dir=args.bench_dir, work_dir=args.work_dir,
                             search_tokens=args.search_tokens) for g in args.swebench]
    runs, rows = [], []
    for cfg in configs:
        run = evaluate_tokens(cfg, log)
        run["label"] = run["dataset"] if cfg.dataset == "git" else "swebench:" + ",".join(cfg.repos)
        runs.append(run)
        rows.extend(run["per_query"])
    budgets = DEFAULT_BUDGETS
    print(f"# search_code max_tokens={args.search_tokens}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'set':<28}{'queries':>8} {'agent':<6}" + "".join(f"{'ok@' + str(b // 1000) + 'k':>8}" for b in budgets)
          + f"{'median':>8}")
    pooled = {a: summarise([r[a] for r in rows], budgets) for a in AGENTS}
    for label, n, agents in [(r["label"], r["queries"], r["agents"]) for r in runs] + [("pooled", len(rows), pooled)]:
        for agent in AGENTS:
            s = agents[agent]
            median = "-" if s["median_first_gold"] is None else str(s["median_first_gold"])
            print(f"{label:<28}{n:>8} {agent:<6}" + "".join(f"{s['success'][str(b)]:>8.3f}" for b in budgets)
                  + f"{median:>8}")
    grep5, codii5 = pooled["grep"]["success"]["5000"], pooled["codii"]["success"]["5000"]
    print(f"success within 5k tokens, codii-sql / grep: {codii5:.3f} / {grep5:.3f}"
          + (f" = {codii5 / grep5:.2f}x" if grep5 else ""))
    gm, cm = pooled["grep"]["median_first_gold"], pooled["codii"]["median_first_gold"]
    print(f"median tokens to the first gold line, grep / codii-sql: {gm if gm is not None else '> 20000'} / "
          f"{cm if cm is not None else '> 20000'}")
    if args.json:
        args.json.write_text(json.dumps({"runs": [summary(r) for r in runs], "pooled": pooled}, indent=1))


if __name__ == "__main__":
    main()
