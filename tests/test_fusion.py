"""Results by file: a file's score is its best chunk's plus SECOND_CHUNK_WEIGHT times its second best."""

from __future__ import annotations

from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search.fusion import SECOND_CHUNK_WEIGHT, by_file
from codii_sql.search.results import Result, SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage.store import Store


def hit(path: str, score: float, cid: int, tier: int = 0) -> Result:
    return Result(path=path, start_line=1, end_line=2, score=score, language="python", kind="function",
                  symbol=None, content="", stale=False, id=cid, role="source", tier=tier)


def test_a_file_matching_twice_beats_one_matching_once_about_as_well():
    chunks = [hit("one.py", 1.0, 1), hit("two.py", 0.9, 2), hit("two.py", 0.5, 3), hit("far.py", 0.2, 4)]
    files = by_file(chunks)
    assert [r.path for r in files] == ["two.py", "one.py", "far.py"]
    assert files[0].score == round(0.9 + SECOND_CHUNK_WEIGHT * 0.5, 6) and files[0].id == 2  # its best chunk
    assert files[1].score == 1.0  # one chunk: its own score
    assert [r.path for r in by_file(chunks, aggregate=False)] == ["one.py", "two.py", "far.py"]  # re-ranked scores


def test_named_tiers_keep_the_statements_order():
    chunks = [hit("named.py", 0.3, 1, tier=2), hit("two.py", 0.9, 2), hit("two.py", 0.8, 3)]
    files = by_file(chunks)
    assert [(r.path, r.score) for r in files] == [("named.py", 0.3), ("two.py", 0.9)]


def test_search_by_file_ranks_by_the_two_best_chunks(tmp_path, embedder):
    """Real index: the file scores are those of the chunk results, combined as by_file does."""
    body = "def {name}(rows):\n    return [r for r in rows if r.{name}]\n\n\n"
    repo = write_tree(tmp_path / "r", {
        "jobs/report.py": "".join(body.format(name=f"report_{i}") for i in range(4)),
        "jobs/mailer.py": body.format(name="mail_report"),
    })
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        s = Searcher(store, cb.root, embedder)
        chunks = s.search("report rows", SearchOptions(limit=50, role_prior=False))
        files = s.search("report rows", SearchOptions(limit=10, group_by_file=True, role_prior=False))
    best: dict[str, list[float]] = {}
    for r in chunks:
        best.setdefault(r.path, []).append(r.score)
    assert max(len(v) for v in best.values()) > 1  # report.py matches in several chunks
    want = {p: round(v[0] + SECOND_CHUNK_WEIGHT * v[1], 6) if len(v) > 1 else v[0] for p, v in best.items()}
    assert {r.path: r.score for r in files} == want
    assert [r.path for r in files] == sorted(want, key=lambda p: -want[p])
