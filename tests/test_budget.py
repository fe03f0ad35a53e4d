"""Token budgets: fitting answers into max_tokens (the fitting rules, and real searches over a real index)."""

from __future__ import annotations

import pytest
from support.trees import write_tree

from codii_sql import service
from codii_sql.errors import UsageError
from codii_sql.search.budget import RESULT_OVERHEAD, fit, tokens
from codii_sql.search.results import Result, SearchOptions


def _r(path: str, start: int, lines: list[str], score: float = 1.0) -> Result:
    return Result(path, start, start + len(lines) - 1, score, "python", "function", None, "\n".join(lines), False, 1,
                  "source")


def test_fit_merges_a_files_overlapping_chunks_trims_around_matches_and_drops_the_lowest():
    body = [f"    step_{i} = compute({i})" for i in range(60)]
    body[40] = "    retry_count = backoff(retry_count)"
    results = [_r("a.py", 1, ["def a():"] + body), _r("a.py", 50, body[48:58]), _r("b.py", 1, ["x = 1"] * 80),
               _r("c.py", 1, ["y = 2"] * 80, 0.1)]
    out, report = fit(results, ["retry_count"], 120)
    assert report.merged == 1 and [r.path for r in out][:2] == ["a.py", "b.py"]
    assert "retry_count" in out[0].content and out[0].start_line > 1  # the lines around the match
    assert sum(tokens(r.content) + RESULT_OVERHEAD for r in out) <= 120
    assert report.trimmed >= 1 and report.dropped >= 1 and "dropped" in report.note()
    first = out[0].content.split("\n")
    assert first == ["def a():", *body][out[0].start_line - 1:out[0].end_line]  # its lines, numbered right
    long_line, _ = fit([_r("l.py", 1, ["x = '" + "a" * 5000 + "'"])], [], 100)
    assert long_line[0].content.endswith("…[cut]") and len(long_line[0].content) <= 100 * 4
    whole, nothing = fit(results[2:3], [], 10_000)
    assert whole[0].content == results[2].content and nothing.note() is None


def test_max_tokens_on_a_real_search_and_get_content(tmp_path, codii_home):
    files = {f"pkg/m{i}.py": "".join(f"def handler_{i}_{j}(request):\n    \"\"\"Retry request {i}.{j} with backoff.\"\"\"\n"
                                     f"    return request.retry({j})\n\n\n" for j in range(12)) for i in range(6)}
    repo = write_tree(tmp_path / "b", files)
    cb = service.open_codebase(repo)
    service.build(cb)
    def ask(query, opts):
        return service.search(service.SearchRequest(query, opts, [str(repo)], update=False))

    full = ask("retry the request with backoff", SearchOptions(limit=10))
    small = ask("retry the request with backoff", SearchOptions(limit=10, max_tokens=150))
    assert sum(tokens(r.content) + RESULT_OVERHEAD for r in small.results) <= 150 < \
        sum(tokens(r.content) + RESULT_OVERHEAD for r in full.results)
    assert small.results[0].path == full.results[0].path and small.budget.dropped > 0
    assert "max_tokens=150" in small.note(lambda hint: None) and "budget" in [n.kind for n in small.notes]
    with pytest.raises(UsageError, match=r"must be between 100 and") as refused:
        ask("retry", SearchOptions(max_tokens=5))
    assert refused.value.field == "max_tokens"
    session = service.Session()
    part = session.content(cb, "pkg/m0.py", None, None, max_tokens=100)
    assert len(part["content"]) <= 400 and part["next_start_line"] > 1
