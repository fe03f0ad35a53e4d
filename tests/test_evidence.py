"""Implementation over its tests and declarations (search/evidence.py): the rule on hand-made results, then
whole searches over real indexes (real tree-sitter, the real model) where the test or the header led before."""

from __future__ import annotations

import pytest
from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search.evidence import LIFT, implementation_first
from codii_sql.search.results import Result, SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage.store import Store


def hit(path: str, score: float, role: str = "source", symbol: str | None = None, content: str = "x", tier: int = 0):
    return Result(path=path, start_line=1, end_line=1, score=score, language=None, kind="function", symbol=symbol,
                  content=content, stale=None, id=hash((path, symbol)) & 0xFFFF, role=role, tier=tier)


def test_a_source_chunk_the_test_calls_rises_above_it_and_the_rest_keep_their_order():
    results = [hit("tests/test_retry.py", 0.9, "test", "test_delay", "assert compute_delay(2) == 4"),
               hit("docs/retry.md", 0.8, "docs"),
               hit("src/other.py", 0.7, symbol="unrelated"),
               hit("src/retry.py", 0.5, symbol="Backoff.compute_delay")]
    out = implementation_first(results, ["retry", "delay"])
    assert [r.path for r in out] == ["src/retry.py", "tests/test_retry.py", "docs/retry.md", "src/other.py"]
    assert out[0].score == round(0.9 + LIFT, 6) and out[3].score == 0.7
    # A question about the tests, or a named tier leading, keeps the order.
    assert implementation_first(results, ["retry", "test"]) == results
    named = [hit("tests/test_retry.py", 0.9, "test", "t", "compute_delay()", tier=2), *results[1:]]
    assert implementation_first(named, ["compute_delay"]) == named


def test_a_definition_rises_above_the_prototype_of_another_file_but_not_above_an_inline_header_body():
    proto = hit("include/config.h", 0.9, symbol="parse_config", content="int parse_config(const char *path);")
    inline = hit("include/inline.h", 0.85, symbol="clamp", content="static inline int clamp(int x) { return x; }")
    results = [proto, inline, hit("src/clamp.c", 0.6, symbol="clamp"), hit("src/config.c", 0.4, symbol="parse_config")]
    assert [r.path for r in implementation_first(results, ["parse", "config"])] == [
        "src/config.c", "include/config.h", "include/inline.h", "src/clamp.c"]
    typed = [hit("types/index.d.ts", 0.9, symbol="retryDelay"), hit("src/retry.ts", 0.3, symbol="retryDelay")]
    assert [r.path for r in implementation_first(typed, ["retry"])] == ["src/retry.ts", "types/index.d.ts"]


RETRY = '''import random


def compute_delay(attempt, base=0.5):
    """Seconds before the next attempt: exponential, with full jitter."""
    return random.uniform(0, base * 2 ** attempt)
'''
TESTS = "".join(f'''def test_retry_waits_longer_after_failure_{i}():
    """After failure {i} the retry is scheduled later: the retry delay grows with each failure."""
    assert compute_delay({i}) >= 0  # retry scheduled after a failure


''' for i in range(6))


@pytest.fixture
def searcher(tmp_path, embedder):
    repo = write_tree(tmp_path / "r", {"client/retry.py": RETRY, "tests/test_retry.py": TESTS,
                                       "include/config.h": "int parse_config_file(const char *path);\n",
                                       "src/config.c": "#include <stdio.h>\n\nint parse_config_file(const char *path)\n"
                                                       "{\n    FILE *f = fopen(path, \"r\");\n    return f ? 0 : -1;\n}\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        yield Searcher(store, cb.root, embedder)


def test_a_behaviour_question_finds_the_implementation_first_and_its_test_next(searcher):
    query = "how is the retry scheduled after a failure"
    for group in (False, True):
        res = searcher.search(query, SearchOptions(limit=5, group_by_file=group))
        assert res[0].path == "client/retry.py", [(r.path, r.score) for r in res]
        assert res[1].path == "tests/test_retry.py"
    plain = searcher.search(query, SearchOptions(limit=5, role_prior=False))
    assert plain[0].path == "tests/test_retry.py"  # without the prior the tests' words win, as they did before
    asked = searcher.search("tests of the retry after a failure", SearchOptions(limit=5))
    assert asked[0].path == "tests/test_retry.py"


def test_the_definition_ranks_above_its_header_prototype(searcher):
    res = searcher.search("parse_config_file prototype path", SearchOptions(limit=5, mode="bm25"))
    paths = [r.path for r in res]
    assert paths.index("src/config.c") < paths.index("include/config.h"), [(r.path, r.score) for r in res]
