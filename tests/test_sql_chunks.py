"""SQL files are chunked by their definitions: named blocks, CREATE statements and CTEs."""

from __future__ import annotations

from support.trees import REPO_ROOT, write_tree

from codii_sql import service
from codii_sql.ingest.chunking.regions import index_source, read_source, source_definitions

SCHEMA = """\
-- The schema of a small shop.

-- name: create_schema
-- Idempotent.
CREATE TABLE IF NOT EXISTS orders (
    id    INTEGER PRIMARY KEY,
    note  TEXT DEFAULT 'a; b WITH fake AS (',   -- a ';' and a WITH inside a string
    total REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS orders_total ON orders(total);
CREATE VIRTUAL TABLE IF NOT EXISTS orders_fts USING fts5(note, content = 'orders');
-- Keeps the FTS5 table in step.
CREATE TRIGGER IF NOT EXISTS orders_ai AFTER INSERT ON orders BEGIN
    INSERT INTO orders_fts(rowid, note) VALUES (new.id, CASE WHEN new.note IS NULL THEN '' ELSE new.note END);
END;
CREATE VIEW big_orders AS
WITH ranked AS (
    SELECT id, total, row_number() OVER (ORDER BY total DESC) AS pos FROM orders
)
SELECT * FROM ranked WHERE pos <= 10;

-- name: revenue_by_day
WITH days AS (
    SELECT date(created) AS day, total FROM orders
),
"totals" (day, amount) AS MATERIALIZED (
    SELECT day, sum(total) FROM days GROUP BY day
)
SELECT * FROM "totals" ORDER BY day;
"""


def _tree(defs) -> list:
    return [(d.kind, d.symbol, d.start_line, d.end_line, _tree(d.children)) for d in defs]


def test_named_blocks_create_statements_and_ctes_are_definitions():
    defs = source_definitions(read_source("db/shop.sql", SCHEMA))
    assert _tree(defs) == [
        ("function", "create_schema", 3, 20, [
            ("class", "create_schema.orders", 5, 9, []),
            ("function", "create_schema.orders_total", 10, 10, []),
            ("class", "create_schema.orders_fts", 11, 11, []),
            ("function", "create_schema.orders_ai", 12, 15, []),  # its comment above, its BEGIN ... END
            ("function", "create_schema.big_orders", 16, 20, [
                ("function", "create_schema.big_orders.ranked", 17, 19, [])])]),
        ("function", "revenue_by_day", 22, 29, [
            ("function", "revenue_by_day.days", 23, 25, []),
            ("function", "revenue_by_day.totals", 26, 28, [])]),
    ]


def test_a_long_named_statement_is_split_at_its_ctes():
    """sql/search.sql's search_hybrid (230 lines) was windows of text; each CTE is now a chunk of its own."""
    text = (REPO_ROOT / "sql" / "search.sql").read_text(encoding="utf-8")
    chunks = index_source(read_source("sql/search.sql", text))[0]
    symbols = {c.symbol for c in chunks}
    assert {"search_hybrid.bm25_hits", "search_hybrid.fused", "search_hybrid.ranked", "knn_match", "fts_any"} <= symbols
    # Text only for comment blocks too long to ride along with their statement (search_hybrid's parameters).
    assert all(c.kind != "text" or all(line.lstrip().startswith("--") or not line.strip()
                                       for line in c.content.splitlines()) for c in chunks)


def test_a_table_is_found_by_name_and_outlined(tmp_path, codii_home):
    repo = write_tree(tmp_path / "shop", {"db/shop.sql": SCHEMA, "app.py": "def orders():\n    return []\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = service.find_symbol(cb, "orders_fts")["definitions"]
    assert [(d["path"], d["start_line"], d["signature"]) for d in found] == [
        ("db/shop.sql", 11, "CREATE VIRTUAL TABLE IF NOT EXISTS orders_fts USING fts5(note, content = 'orders');")]
    outline = service.outline(cb, "db/shop.sql")["symbols"]
    assert [s["symbol"] for s in outline] == ["create_schema", "revenue_by_day"]
    assert outline[1]["signature"] == "WITH days AS ("  # the "-- name:" line is a comment


PLAIN = """\
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL
);

CREATE INDEX users_name ON users(name);
SELECT 1
"""


def test_a_file_without_a_name_header_is_chunked_by_its_statements(tmp_path, codii_home):
    """A .sql file with no ``-- name:`` line (a plain schema, an empty file, a lone comment) failed
    to chunk with "zip() argument 2 is longer than argument 1" and was left out of the index."""
    defs = source_definitions(read_source("schema.sql", PLAIN))
    assert _tree(defs) == [("class", "users", 1, 4, []), ("function", "users_name", 6, 6, [])]
    repo = write_tree(tmp_path / "plain", {"schema.sql": PLAIN, "empty.sql": "", "note.sql": "-- only a comment\n"})
    cb = service.open_codebase(repo)
    report = service.build(cb, vectors=False)
    assert not report.failed
    found = service.find_symbol(cb, "users")["definitions"]
    assert [(d["path"], d["start_line"], d["end_line"]) for d in found] == [("schema.sql", 1, 4)]
