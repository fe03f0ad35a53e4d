"""Named SQL: every statement loads, names are unique, and Python holds no SQL of its own."""

import re
from pathlib import Path

import pytest

from codii_sql.storage import queries

PKG = Path(__file__).resolve().parent.parent / "codii_sql"


def test_parse_splits_named_statements():
    text = "-- name: a\n-- doc\nSELECT 1;\n\n-- name: b\nSELECT 2;\n"
    assert queries.parse(text) == {"a": "-- doc\nSELECT 1;", "b": "SELECT 2;"}


def test_duplicate_names_are_rejected():
    with pytest.raises(ValueError):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_every_statement_used_by_python_exists():
    names = set(queries.load())
    used = set()
    for py in PKG.rglob("*.py"):
        used |= set(re.findall(r'(?:store|self|queries)\.(?:run|rows|row|value|many|sql)\(\s*"([a-z_0-9]+)"', py.read_text()))
    assert used and used <= names, used - names


def test_no_sql_strings_in_python():
    pattern = re.compile(r'["\'](SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA|BEGIN|COMMIT)\s')
    sources = list(PKG.rglob("*.py"))
    offenders = [f"{py.name}: {m.group(0)}" for py in sources for m in pattern.finditer(py.read_text())]
    assert len(sources) > 40 and offenders == []


def test_every_query_fits_the_prepared_statement_cache():
    """apsw prepares a statement longer than its cache takes again at every call: search_hybrid's 17 KB
    of commented text cost each search 7 ms on the kernel's index before its comment lines were left out."""
    import apsw

    limit = apsw.Connection(":memory:").cache_stats()["max_cacheable_bytes"]
    sizes = {name: len(queries.runnable(name).encode()) for name in queries.load()}
    assert len(queries.sql("search_hybrid").encode()) > limit  # the documented text alone would not fit
    assert max(sizes.values()) <= limit, {n: s for n, s in sizes.items() if s > limit}


def test_runnable_text_drops_whole_comment_lines_only():
    queries.runnable.cache_clear()
    text = queries.runnable("search_hybrid")
    assert "\n--" not in text and not text.lstrip().startswith("--")
    assert "bm25_ranked AS (  -- :bm25_given is best first" in text  # a trailing comment is SQL's to skip
    kept = [line for line in queries.sql("search_hybrid").splitlines() if not line.lstrip().startswith("--")]
    assert text.splitlines() == kept
