"""History search measured: quality against git log -G and BM25 alone, and the cost of the history index and of why.

Usage::

    python benchmarks/history.py quality REPO [--commits 1000] [--queries 200]
    python benchmarks/history.py cost REPO [--commits 5000] [--why-file PATH]
    python benchmarks/history.py why REPO PATH

``quality`` indexes the newest ``--commits`` commits of REPO with every subject left out (body and
hunks only), then asks each usable subject (cleaned as ``eval git`` cleans it) and looks for its
own commit: hit@1/5 for the hybrid statement, for BM25 alone, and for ``git log -G`` on the
subject's rarest identifier (rarest by how many indexed hunks hold it) over the same commits.
``cost`` times the history phase and its vectors on ``--commits`` commits, the index growth, an
update after 10 new commits, and ``why`` on ``--why-file`` (a file with a long history; ``why`` times
that alone). REPO is a
work tree (a clone); its checkout is moved for the update and put back. Prints JSON with ``uptime``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codii_sql.codebase import Codebase  # noqa: E402
from codii_sql.eval.gitlog import clean_subject, subject_skip  # noqa: E402
from codii_sql.ingest.config import HISTORY_OFF, HistoryBound  # noqa: E402
from codii_sql.ingest.history import update_history  # noqa: E402
from codii_sql.ingest.history_rules import HistoryRules  # noqa: E402
from codii_sql.ingest.history_vectors import embed_history, fit_history_vec  # noqa: E402
from codii_sql.ingest.indexer import Indexer  # noqa: E402
from codii_sql.models.minilm import MiniLM  # noqa: E402
from codii_sql.search.history import HistorySearcher  # noqa: E402
from codii_sql.search.query import STOP_WORDS  # noqa: E402
from codii_sql.service.why import explain_line  # noqa: E402
from codii_sql.storage.store import Store  # noqa: E402

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


class Bm25Only(HistorySearcher):
    """The same statement with no query vector: BM25 over commits and hunks, fused by RRF."""

    def _query_vector(self, query):
        return None, None


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def fresh_index(root: Path, home: Path, embedder) -> tuple[Codebase, Store]:
    """The code index of ``root`` (BM25 only: its files decide which hunks the rules keep), no history."""
    os.environ["CODII_SQL_HOME"] = str(home)
    codebase = Codebase.open(root)
    Indexer(codebase, embedder, vectors=False, history=HISTORY_OFF).build()
    store = Store(codebase.db_path)
    with store.transaction():
        fit_history_vec(store, store.vector_dims(), embedder.name)
    return codebase, store


def rules_of(store: Store, root: Path) -> HistoryRules:
    return HistoryRules(root, {r["path"] for r in store.rows("files_all")}, [], None)


def index_history(store: Store, root: Path, commits: int, embedder, *, keep_subjects: bool = True) -> dict:
    """The history phase then its vectors, timed apart (seconds)."""
    t = time.perf_counter()
    out = update_history(store, root, HistoryBound(commits, None), rules_of(store, root), keep_subjects=keep_subjects)
    lexical = time.perf_counter() - t
    t = time.perf_counter()
    embedded = embed_history(store, embedder, None, lambda *a: None)
    return {"commits": out["commits"], "hunks": out["hunks"], "added": out["added"], "lexical_s": round(lexical, 2),
            "vectors_s": round(time.perf_counter() - t, 2), "embedded": embedded}


def rarest_identifier(store: Store, query: str) -> str | None:
    """The query word held by the fewest indexed hunks (at least one), as ``git log -G`` would be asked."""
    best = None
    for word in dict.fromkeys(w for w in _WORD.findall(query) if w.lower() not in STOP_WORDS):
        n = store.conn.execute("SELECT count(*) FROM history_hunks_fts WHERE history_hunks_fts MATCH ?",
                               ['"' + word.replace('"', '""') + '"']).fetchone()[0]
        if n and (best is None or n < best[0]):
            best = (n, word)
    return best[1] if best else None


def git_g(root: Path, word: str, shas: list[str]) -> list[str]:
    """The newest 5 of ``shas`` whose diff adds or removes a line matching ``word`` (git log -G)."""
    done = subprocess.run(["git", "-C", str(root), "log", "--no-walk=unsorted", "--stdin", f"-G{re.escape(word)}",
                           "--format=%H", "--max-count=5"], input="\n".join(shas), capture_output=True, text=True)
    return done.stdout.split()


def quality(args) -> dict:
    root = Path(args.repo).resolve()
    embedder = MiniLM()
    with tempfile.TemporaryDirectory() as home:
        _, store = fresh_index(root, Path(home), embedder)
        built = index_history(store, root, args.commits, embedder, keep_subjects=False)
        shas = subprocess.run(["git", "-C", str(root), "rev-list", "--no-merges", f"--max-count={args.commits}", "HEAD"],
                              capture_output=True, text=True).stdout.split()
        subjects = subprocess.run(["git", "-C", str(root), "log", "--no-walk=unsorted", "--stdin", "--format=%H%x1f%s"],
                                  input="\n".join(shas), capture_output=True, text=True).stdout.splitlines()
        queries = []
        for line in subjects:
            sha, _, subject = line.partition("\x1f")
            cleaned = clean_subject(subject)
            if not subject_skip(subject, cleaned):
                queries.append((sha, cleaned))
        queries = queries[:args.queries]
        hybrid, bm25 = HistorySearcher(store, embedder), Bm25Only(store, embedder)
        ranks = {"hybrid": [], "bm25": [], "git_log_G": []}
        ms = {"hybrid": [], "bm25": [], "git_log_G": []}
        for sha, query in queries:
            for name, searcher in (("hybrid", hybrid), ("bm25", bm25)):
                t = time.perf_counter()
                found = [h.sha for h in searcher.search(query, limit=5, hunks=1)[0]]
                ms[name].append((time.perf_counter() - t) * 1000)
                ranks[name].append(found.index(sha) + 1 if sha in found else None)
            word = rarest_identifier(store, query)
            t = time.perf_counter()
            found = git_g(root, word, shas) if word else []
            ms["git_log_G"].append((time.perf_counter() - t) * 1000)
            ranks["git_log_G"].append(found.index(sha) + 1 if sha in found else None)
        store.close()
    n = len(queries)
    return {"repo": root.name, "index": built, "queries": n, "uptime": uptime(),
            "modes": {name: {"hit@1": round(sum(r == 1 for r in rs) / n, 3),
                             "hit@5": round(sum(r is not None for r in rs) / n, 3),
                             "p50_ms": round(statistics.median(ms[name]), 1)} for name, rs in ranks.items()}}


def db_bytes(store: Store) -> int:
    store.run("wal_checkpoint")
    return store.path.stat().st_size


def cost(args) -> dict:
    root = Path(args.repo).resolve()
    embedder = MiniLM()
    branch = subprocess.run(["git", "-C", str(root), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    older = subprocess.run(["git", "-C", str(root), "rev-list", "--no-merges", "--skip=10", "--max-count=1", "HEAD"],
                           capture_output=True, text=True).stdout.strip()
    out: dict = {"repo": root.name, "uptime_start": uptime()}
    with tempfile.TemporaryDirectory() as home:
        _, store = fresh_index(root, Path(home), embedder)
        before = db_bytes(store)
        subprocess.run(["git", "-C", str(root), "checkout", "-q", older], check=True)
        try:
            out["full"] = index_history(store, root, args.commits, embedder)
            out["growth_bytes"] = db_bytes(store) - before
            out["code_index_bytes"] = before
            subprocess.run(["git", "-C", str(root), "checkout", "-q", branch], check=True)
            out["update_10"] = index_history(store, root, args.commits, embedder)
            t = time.perf_counter()
            update_history(store, root, HistoryBound(args.commits, None), rules_of(store, root))
            out["noop_update_s"] = round(time.perf_counter() - t, 3)
        finally:
            subprocess.run(["git", "-C", str(root), "checkout", "-q", branch], check=True)
        store.close()
    if args.why_file:
        out["why"] = why_latency(root, args.why_file)
    out["uptime_end"] = uptime()
    return out


def why_latency(root: Path, file: str) -> dict:
    """``why`` on 10 lines spread over ``file``, with the default limit and with 50 commits."""
    commits = len(subprocess.run(["git", "-C", str(root), "log", "--format=%H", "--", file], capture_output=True,
                                 text=True).stdout.split())
    lines = (root / file).read_text(encoding="utf-8").count("\n")
    picks = [max(1, lines * i // 10) for i in range(1, 11)]
    result = {"file": file, "file_commits": commits, "lines": lines}
    for limit in (5, 50):
        times, told = [], []
        for line in picks:
            t = time.perf_counter()
            told.append(len(explain_line(file, line, root=str(root), limit=limit).results))
            times.append(time.perf_counter() - t)
        result[f"limit_{limit}"] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                                    "commits_told_median": statistics.median(told)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="task", required=True)
    q = sub.add_parser("quality")
    q.add_argument("repo")
    q.add_argument("--commits", type=int, default=1000)
    q.add_argument("--queries", type=int, default=200)
    c = sub.add_parser("cost")
    c.add_argument("repo")
    c.add_argument("--commits", type=int, default=5000)
    c.add_argument("--why-file", default=None)
    w = sub.add_parser("why")
    w.add_argument("repo")
    w.add_argument("file")
    args = parser.parse_args()
    if args.task == "why":
        out = {"uptime_start": uptime(), **why_latency(Path(args.repo).resolve(), args.file), "uptime_end": uptime()}
    else:
        out = quality(args) if args.task == "quality" else cost(args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
