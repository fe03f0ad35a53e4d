"""A line too long for one chunk is cut into windows: search lists the windows of one line in line order."""

from __future__ import annotations

import base64
import random

import pytest
from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search import searcher as search
from codii_sql.search.results import SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage.store import Store

MESSAGES = ", ".join(f"E{i}: 'request {i} failed with an HTTPError from the upstream service'" for i in range(40))
ERRORS_TS = f"""// Errors of the client.
import {{ Response }} from './response';

/** Raised for a response whose status is not 2xx. */
export class HTTPError extends Error {{
  response: Response;

  static readonly MESSAGES = {{ {MESSAGES} }};

  constructor(response: Response) {{
    super(HTTPError.MESSAGES.E0);
    this.response = response;
  }}
}}
"""


@pytest.mark.parametrize("query, mode", [("HTTPError", "hybrid"), ("HTTPError", "bm25"),
                                         ("request failed upstream service", "hybrid")])
def test_one_long_line_is_one_result(tmp_path, embedder, query, mode):
    """A new user's `search HTTPError` listed 6-7, then 9-9's second half, then its first half; another's
    top 10 for a function's name was nine windows of the base64 constant in its body. The windows of
    one line are one place in the file: the best-ranked stands for it, and the rest of the list is
    other code."""
    repo = write_tree(tmp_path / "r", {"src/errors.ts": ERRORS_TS})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        windows = [c for (c,) in store.conn.execute("SELECT content FROM chunks WHERE start_line = 8 ORDER BY start_byte")]
        results = Searcher(store, cb.root, embedder).search(query, SearchOptions(limit=10, mode=mode))
    assert len(windows) > 2
    listed = [r.content for r in results if r.start_line == r.end_line == 8]
    assert len(listed) == 1 and listed[0] in windows
    if not any(r.tier for r in results):  # the places keep their scores: still in score order
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_a_function_holding_a_huge_constant_leaves_room_for_other_code(tmp_path, embedder):
    data = base64.b64encode(random.Random(7).randbytes(30_000)).decode()  # 40 KB of base64 on one line
    repo = write_tree(tmp_path / "r", {"logo.py": f'def get_logo_bytes():\n    DATA = "{data}"\n    return DATA\n',
                                       "use.py": "from logo import get_logo_bytes\n\n\ndef show():\n"
                                                 "    return get_logo_bytes()\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        results = Searcher(store, cb.root, embedder).search("get_logo_bytes", SearchOptions(limit=10))
    places = [(r.path, r.start_line, r.end_line) for r in results]
    assert len(places) == len(set(places)) and any(path == "use.py" for path, *_ in places), places


def test_the_windows_of_one_long_line_do_not_crowd_other_results_out(tmp_path, embedder):
    """88 equal windows of a 300,000-character line filled the 50 KNN candidates and, being one result,
    left a new user's search with 2 results of 10; the search fetches deeper when that happens."""
    files = {f"pkg/mod_{i}.py": f"def handler_{i}(request):\n    \"\"\"Answer request kind {i}.\"\"\"\n    return {i}\n"
             for i in range(60)}
    files["pkg/blob.py"] = "X = '" + "a" * 300_000 + "'\n\n\ndef after_long_line():\n    y = 1\n    return y\n"
    repo = write_tree(tmp_path / "r", files)
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        windows = store.conn.execute("SELECT count(*) FROM chunks WHERE path = 'pkg/blob.py'").fetchone()[0]
        assert windows > search.DEPTH  # enough to fill the KNN list alone
        for q in ("中文注释", "aaaaaaaa"):
            got = Searcher(store, cb.root, embedder).search(q, SearchOptions(limit=10, mode="vector"))
            line_one = [r for r in got if r.path == "pkg/blob.py" and r.start_line == 1]
            assert len(got) == 10 and len(line_one) == 1, [(r.path, r.start_line) for r in got]


def test_an_agent_reads_a_long_line_to_its_end_by_column(tmp_path, codii_home):
    """A new user's agent could never read past the start of a 133 KB line that grep found (a trailing comment):
    get_content now says where the rest starts, and start_column reads it, over a real MCP session."""
    import asyncio

    from click.testing import CliRunner
    from test_mcp import call, refused, server

    from codii_sql.cli import cli

    blob = base64.b64encode(random.Random(7).randbytes(60_000)).decode()
    long_line = f"BLOB = '{blob}'  # needle_in_long_line"
    root = write_tree(tmp_path / "r", {"blob.py": f"import base64\n{long_line}\nprint(BLOB)\n"})
    assert CliRunner().invoke(cli, ["build", str(root), "--no-vectors"]).exit_code == 0

    async def run():
        async with server(codii_home) as s:
            read, column = "", None
            for _ in range(40):
                part = await call(s, "get_content", path=str(root), file="blob.py", start_line=2,
                                  **({"start_column": column} if column else {}))
                read += part["content"]
                if "next_start_column" not in part:
                    break
                assert part["next_start_line"] == 2 and part["end_line"] == 2
                # the part it shows, not "only its start" (a new user's start_column=100000 read that)
                assert f"its characters {column or 1:,}-{part['next_start_column'] - 1:,} are shown" in part["truncated"]
                column = part["next_start_column"]
            assert read.startswith(long_line) and read[len(long_line):] == "\nprint(BLOB)\n" and column > 1
            told = await refused(s, "get_content", path=str(root), file="blob.py", start_line=3, start_column=999)
            assert "past the end of line 3 (11 characters)" in told  # print(BLOB): search's line_chars, no newline

    asyncio.run(run())


def test_a_part_of_a_long_line_says_where_it_lies_in_the_line(tmp_path, embedder):
    """A new user's agent read a 3,449-character piece of an 800,059-character line 1 as "line 1": nothing
    said it was a part. Such a result carries its columns and the line's length; whole lines carry none."""
    from codii_sql.service.listing import AGENT, listing

    line = 'DATA = "' + "QUJD" * 50_000 + '"  # medline_marker'
    repo = write_tree(tmp_path / "r", {"medium_line.py": line + "\n\ndef after_big():\n    return 1\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        searcher = Searcher(store, cb.root, embedder)
        part = searcher.search("medline_marker", SearchOptions(limit=1, mode="bm25"))[0]
        whole = searcher.search("after_big", SearchOptions(limit=1, mode="bm25"))[0]
    assert part.start_line == part.end_line == 1 and part.line_chars == len(line) and part.start_column > 1
    assert line[part.start_column - 1:part.end_column] == part.content.rstrip("\n") and part.end_column == len(line)
    assert {"start_column", "end_column", "line_chars"} <= set(part.to_dict())
    assert whole.start_column is None and "start_column" not in whole.to_dict()
    header = listing([part], AGENT)[0]
    assert f"medium_line.py:1-1 (columns {part.start_column:,}-{len(line):,} of {len(line):,})" in header


def test_a_class_s_pieces_between_its_methods_and_names_spelled_otherwise_do_not_lead(tmp_path, embedder):
    """A new user's `QuerySet` on Django listed the class's comment banners (pieces between its methods,
    each labelled with the class) as results 2-6, and `queryset` methods of admin classes before the class's
    own methods. A piece cut off from the class's head ranks by its own score; a name matched only
    case-folded, when the query has capitals, is boosted but not tiered."""
    body = "\n".join(f"        value_{j} = self._query.step_{j}(args, kwargs)" for j in range(25))
    methods = "\n".join(f"    ####################################\n    # METHODS THAT DO DATABASE QUERIES {i} #\n"
                        f"    ####################################\n\n    def {name}(self, *args, **kwargs):\n"
                        f"        \"\"\"Perform the {name} lookup.\"\"\"\n{body}\n        return value_0\n"
                        for i, name in enumerate(["get", "create", "filter", "exclude", "order_by", "count"]))
    steps = "\n".join(f"        step_{j} = request.GET.get('p{j}', {j})" for j in range(30))
    repo = write_tree(tmp_path / "r", {
        "query.py": f'class QuerySet:\n    """Represent a lazy database lookup for a set of objects."""\n\n{methods}',
        "filters.py": f'class ListFilter:\n    """Filter the change list by a field."""\n\n    def has_output(self):\n'
                      f'        """Whether the filter shows anything."""\n{steps}\n        return True\n\n'
                      f'    def queryset(self, request, qs):\n        """The filtered rows."""\n{steps}\n        return qs\n'})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        searcher = Searcher(store, cb.root, embedder)
        cased = searcher.search("QuerySet", SearchOptions(limit=12))
        lower = searcher.search("queryset", SearchOptions(limit=12))
        # Capitals no symbol has (a sentence's first letter, shouting): case is no evidence then.
        for other in ("Queryset", "QUERYSET"):
            top = [(r.symbol, r.start_line) for r in searcher.search(other, SearchOptions(limit=5))]
            assert ("QuerySet", 1) in top and "ListFilter.queryset" in {n for n, _ in top}, (other, top)
    names = [r.symbol for r in cased]
    assert (names[0], cased[0].start_line) == ("QuerySet", 1), names
    own_method = next(i for i, n in enumerate(names) if n.startswith("QuerySet."))
    assert all(i > own_method for i, n in enumerate(names) if n == "ListFilter.queryset"), names
    # Lower case names the methods too; the class's banners, cut off from its head, come after them.
    order = [(r.symbol, r.start_line) for r in lower]
    last_method = max(i for i, (n, _) in enumerate(order) if n == "ListFilter.queryset")
    assert last_method < 5 and all(i > last_method for i, (n, line) in enumerate(order) if n == "QuerySet" and line > 1), order


def test_the_parts_of_a_minified_line_are_not_all_named_after_its_first_function():
    """A new user's bundle line held f0..f4999; its 352 parts were all "function f0", the one holding f4999 too."""
    from codii_sql.ingest.chunking.chunker import chunk_text

    line = "var a=1;" + "".join(f"function f{i}(x){{return x+{i}}};" for i in range(3000))
    chunks = chunk_text("function before(){\n  return 1;\n}\n" + line + "\nfunction after(){\n  return 2;\n}\n",
                        "javascript")
    parts = [c for c in chunks if c.start_line == c.end_line == 4]
    assert len(parts) > 100 and [c.symbol for c in parts].count("f0") == 1 and parts[0].symbol == "f0"
    assert {(c.kind, c.symbol) for c in parts[1:]} == {("text", None)}
    assert {"before", "after"} <= {c.symbol for c in chunks}


def test_a_budget_cuts_a_long_line_around_its_match_and_says_which_columns(tmp_path, embedder):
    """A new user's `search f4999 --max-tokens 100` kept its bundle window's start and dropped f4999, the
    match, with half the budget unused, the columns still those of the whole window."""
    from codii_sql.search.budget import CUT_MARK, fit

    line = "var a=1;" + "".join(f"function f{i}(x){{return x+{i}}};" for i in range(3000))
    repo = write_tree(tmp_path / "r", {"app.js": "function before(){\n  return 1;\n}\n" + line + "\n"})
    cb = Codebase.open(repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        found = Searcher(store, cb.root, embedder).search("f2999", SearchOptions(limit=3, mode="bm25"))
    fitted, _ = fit(found, ["f2999"], 100)
    top = fitted[0]
    kept = top.content.rstrip("\n").removesuffix(CUT_MARK)
    assert "f2999" in kept and top.start_line == 4, top
    assert line[top.start_column - 1:top.end_column] == kept and top.line_chars == len(line)


def test_a_bundle_line_after_a_licence_comment_is_named_once_too():
    """Another new user's bundle had a comment line above it (as `/*! jQuery v3.7.1 ... */`): the comment was
    attached to f0, and all 28 parts were `function f0`."""
    from codii_sql.ingest.chunking.chunker import chunk_text

    text = "// header\n" + ";".join(f"function f{i}(a){{return a+{i}}}" for i in range(420)) + "\n// end\n"
    parts = [c for c in chunk_text(text, "javascript") if c.start_line == c.end_line == 2]
    assert len(parts) > 10 and [c.symbol for c in parts].count("f0") == 1 and parts[0].symbol == "f0", parts[:3]


def test_a_doc_comment_too_long_for_its_definition_is_text_of_its_own():
    """A new user's `search JoinHandle` on tokio listed seven windows of the struct's 145-line doc comment, each
    named JoinHandle, before the one holding `pub struct JoinHandle` (the name's windows read top-down)."""
    from codii_sql.ingest.chunking.chunker import chunk_text

    doc = "".join(f"/// Line {i} of a long explanation of how a handle joins its task and what it returns.\n"
                  for i in range(150))
    text = doc + "pub struct JoinHandle<T> {\n    raw: RawTask,\n    _p: PhantomData<T>,\n}\n"
    chunks = chunk_text(text, "rust")
    named = [c for c in chunks if c.symbol == "JoinHandle"]
    assert named and named[0].content.startswith("pub struct JoinHandle<T> {"), [(c.start_line, c.symbol) for c in chunks]
    assert all(c.symbol is None and c.kind == "text" for c in chunks if c.start_line <= 150)
