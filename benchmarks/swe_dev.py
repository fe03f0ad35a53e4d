"""The SWE-bench dev issues the token-budget and workspace benchmarks ask: where they are, which releases, shared options."""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = REPO.parent / "shared" / "bench" / "swebench" / "queries.jsonl"
#: The releases both benchmarks index and ask (48 dev issues), as NAME==VERSION.
DEFAULT_RELEASES = ("Sphinx==3.4.3,Sphinx==3.5.4,Sphinx==4.1.2,pytest==5.4.3,pytest==6.0.2,pylint==2.15.10,"
                    "seaborn==0.12.2,Flask==2.3.3,requests==2.3.0,requests==2.0.1")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """``--corpora``, ``--queries``, ``--home``, ``--releases`` and ``--titles``, as both benchmarks take them."""
    ap.add_argument("--corpora", type=Path, required=True, help="corpora.json written by get_corpus.py --json")
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument("--home", type=Path, default=None, help="CODII_SQL_HOME for the indexes (default: as set)")
    ap.add_argument("--releases", default=DEFAULT_RELEASES, help="comma-separated NAME==VERSION to index and ask")
    ap.add_argument("--titles", action="store_true", help="ask each issue's first line only (short queries)")


def release_of(query: dict) -> str:
    """``NAME==VERSION`` of the release a query row is asked of."""
    return f"{query['pypi']['name']}=={query['pypi']['version']}"
