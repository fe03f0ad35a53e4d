"""BM25 computed with less work on a large index answers exactly as the plain OR query (search/pruning.py)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search import pruning
from codii_sql.search.query import fts_query
from codii_sql.search.results import SearchOptions
from codii_sql.search.searcher import BM25_WEIGHTS, Searcher
from codii_sql.storage.store import Store

PROJECT = Path(__file__).resolve().parent.parent
#: The product takes 50 from millions of chunks; 10 of these few thousand prunes as often.
DEPTH = 10


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder):
    """A real index (no vectors) of this project's own code, tests and SQL: some thousands of chunks."""
    repo = tmp_path_factory.mktemp("corpus") / "repo"
    for part in ("codii_sql", "tests", "sql"):
        shutil.copytree(PROJECT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data"))
    cb = Codebase.open(repo)
    Indexer(cb, embedder, vectors=False).build()
    with Store(cb.db_path, create=False) as s:
        yield s


def plain(store: Store, phrases: list[str]) -> list[tuple[int, float]]:
    weights = ", ".join(str(w) for w in BM25_WEIGHTS.values())
    return [(r[0], r[1]) for r in store.conn.execute(
        f"SELECT rowid, -bm25(chunks_fts, {weights}) FROM chunks_fts WHERE chunks_fts MATCH ? "
        f"ORDER BY bm25(chunks_fts, {weights}) LIMIT {DEPTH}", (fts_query(phrases),))]


def vocabulary(store: Store) -> tuple[list[str], list[str]]:
    """Words of the index by how many chunks hold them: (common ones, rarer ones)."""
    rows = [(r[0], r[1]) for r in store.conn.execute(
        "SELECT term, doc FROM temp.chunks_fts_vocab WHERE term GLOB '[a-z]*' AND length(term) > 2")]
    total = store.row("counts")["chunks"]
    common = [t for t, d in rows if d >= total // 16]
    rare = [t for t, d in rows if 5 <= d < total // 30]
    return common, rare


def test_the_pruned_top_is_the_plain_top_and_is_taken_often(store, monkeypatch, embedder):
    """Random queries mixing common and rare words (and phrases): wherever the pruned list is taken, it
    holds the same chunks with the same scores, in the same order but among equal scores."""
    Searcher(store, None, embedder)  # creates the vocabulary view
    monkeypatch.setattr(pruning, "PRUNE_MIN_CHUNKS", 0)
    assert pruning.fts_rows(store) == store.row("counts")["chunks"]
    common, rare = vocabulary(store)
    assert len(common) >= 10 and len(rare) >= 200, (len(common), len(rare))
    rnd = random.Random(7)
    taken = 0
    queries = 300
    for i in range(queries):
        phrases = rnd.sample(common, rnd.randint(1, 3)) + rnd.sample(rare, rnd.randint(1, 3))
        if i % 5 == 0:
            phrases.insert(0, " ".join(phrases[:2]))  # a phrase of two words, as code queries have
        rnd.shuffle(phrases)
        want = plain(store, phrases)
        got = pruning.bm25_top(store, phrases, DEPTH, BM25_WEIGHTS)
        if got is None:
            continue
        taken += 1
        assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in want], phrases
        kth = want[-1][1]
        assert {i for i, s in got if s > kth + 1e-9} == {i for i, s in want if s > kth + 1e-9}, phrases
    assert taken >= queries // 10, taken  # the rule must actually be exercised (47 of 300 when written)


def test_a_search_answers_the_same_with_and_without_pruning(store, monkeypatch, embedder):
    s = Searcher(store, None, embedder)
    queries = ["parse the query into terms", "Store", "return None", "def search", "BM25 score of a chunk",
               "class Indexer", "self.store.rows", "json.dumps", "import pytest", "the index is stale"]
    answers = {}
    for label, floor in (("plain", 10**12), ("pruned", 0)):
        monkeypatch.setattr(pruning, "PRUNE_MIN_CHUNKS", floor)
        answers[label] = [[(r.id, r.score) for r in s.search(q, SearchOptions(limit=10, mode="bm25"))]
                          for q in queries]
    assert answers["plain"] == answers["pruned"]


def test_a_small_index_and_a_single_phrase_take_the_plain_query(store):
    assert pruning.PRUNE_MIN_CHUNKS > store.row("counts")["chunks"]
    assert pruning.bm25_top(store, ["store", "rows"], DEPTH, BM25_WEIGHTS) is None
    assert pruning.bm25_top(store, ["store"], DEPTH, BM25_WEIGHTS) is None
