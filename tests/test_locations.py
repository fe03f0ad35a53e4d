"""A query that points at a place (`sessions.py:107`, a traceback's frame from another machine) finds the code there."""

from __future__ import annotations

import pytest
from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search.locations import MAX_PLACES, places, resolve
from codii_sql.search.query import named_in_query
from codii_sql.search.results import MODES, SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage.store import Store


def test_places_are_read_as_compilers_and_tracebacks_write_them():
    assert places('File "/usr/lib/python3/site-packages/requests/sessions.py", line 703, in send') == [
        ("usr/lib/python3/site-packages/requests/sessions.py", 703)]
    assert places("src/requests/sessions.py:107") == [("src/requests/sessions.py", 107)]
    assert places("at Layer.handle (/app/node_modules/express/lib/router/layer.js:95:5)") == [
        ("app/node_modules/express/lib/router/layer.js", 95)]
    assert places("at com.acme.Billing.charge(Billing.java:42)") == [("billing.java", 42)]
    assert places("./main.go:12 +0x1d") == [("main.go", 12)]
    assert places("error[E0308]: mismatched types --> src/lib.rs:10:5") == [("src/lib.rs", 10)]
    assert places("where are retries handled") == [] and places("http://example.org/a.py") == []
    assert places("https://github.com/psf/requests/blob/main/src/requests/sessions.py#L703-L710") == [
        ("github.com/psf/requests/blob/main/src/requests/sessions.py", 703)]
    assert places("https://github.com/o/r/blob/main/src/app.py#L70C5-L72C9") == [("github.com/o/r/blob/main/src/app.py", 70)]
    # a file without an extension, in a folder or by a name such files have; not `line:10` or `port:8080`
    assert places("LICENSE:19 docs/Makefile:100 bin/run:12") == [("license", 19), ("docs/makefile", 100), ("bin/run", 12)]
    assert places("line:10 port:8080 Error:42 version 4.17.2:3") == []
    assert places("> /usr/lib/python3/site-packages/requests/sessions.py(703)send()") == [
        ("usr/lib/python3/site-packages/requests/sessions.py", 703)]
    assert places(r"at Shop.Cart.Total() in C:\src\Shop\Cart.cs:line 42") == [("c:/src/shop/cart.cs", 42)]
    assert places("Died at /opt/app/lib/Pay.pm line 12.") == [("opt/app/lib/pay.pm", 12)]
    assert places("print(x) if y else len(z)") == []
    many = " ".join(f"f{i}.py:{i + 1}" for i in range(10))
    assert len(places(many)) == MAX_PLACES


#: Three functions, the middle one long; a module whose words match every query better than they do.
FILES = {
    "src/pay/billing.py": "import os\n\n\ndef charge(card, amount):\n    \"\"\"Take the amount.\"\"\"\n"
                          + "".join(f"    step_{i} = amount * {i}\n" for i in range(30))
                          + "    return card\n\n\ndef refund(card, amount):\n"
                          + "".join(f"    undo_{i} = amount - {i}\n" for i in range(120))
                          + "    return amount\n\n\ndef receipt(amount):\n    return str(amount)\n",
    "src/pay/notes.py": "# billing line send in file billing py refund charge receipt\n" * 3
                        + "def billing_line_send():\n    return 'billing py line send refund'\n",
    "setup.py": "# file line in send billing python lib site packages usr\nname = 'pay'\n",
    "a/billing.py": "def short():\n    return 'billing refund line'\n",  # a billing.py too short for the lines asked
    "src/pay/refunds.py": "".join(f"def refund_{k}(amount):\n    # Refund, refund, refund the amount.\n"
                                  f"    return refund(amount, refund_rate_{k})  # refund\n\n\n" for k in range(80)),
    "LICENSE": "Copyright the pay authors.\n\nPermission is granted to refund.\n",
    "README.md": "# Pay\n\nTake and refund payments.\n",
    "docs/README.md": "# Docs\n\nHow to refund a payment, with refund examples.\n",
}


@pytest.fixture(scope="module")
def searcher(tmp_path_factory, embedder):
    cb = Codebase.open(write_tree(tmp_path_factory.mktemp("places") / "repo", FILES))
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        yield Searcher(store, cb.root, embedder)


def _line_of(text: str) -> int:
    return FILES["src/pay/billing.py"].splitlines().index(text) + 1


def test_a_long_word_is_read_for_places_in_linear_time():
    """A new user's 60,000-character one-word query held the HTTP server 41 s (`/healthz` waited 39 s
    behind it; MCP 152 s): the places' patterns, tried from every position, backtracked over the word's run.
    Quadratic, 200,000 characters took minutes; each pattern now reads only before its marker."""
    import threading

    got = []
    for text in ("x" * 200_000, "x" * 200_000 + ".py:12", "x" * 200_000 + "#L3", "a.py:1 " * 30_000):
        worker = threading.Thread(target=lambda t=text: got.append(places(t)), daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), len(got)
    assert got == [[], [], [], [("a.py", 1)]]


@pytest.mark.parametrize("mode", MODES)
def test_a_frame_from_another_machine_finds_the_function_at_its_line(searcher, mode):
    line = _line_of("    undo_25 = amount - 25")
    query = f'File "/usr/lib/python3.11/site-packages/pay/billing.py", line {line}, in refund'
    top = searcher.search(query, SearchOptions(limit=5, mode=mode))
    assert top[0].symbol == "refund" and top[0].path == "src/pay/billing.py", [(r.path, r.symbol) for r in top]


@pytest.mark.parametrize("query", ["src/pay/billing.py:{line}", "billing.py:{line}", "pay/billing.py:{line}:9"])
@pytest.mark.parametrize("undo", [30, 70, 110])
def test_path_and_line_list_the_chunk_holding_it_first_then_its_function_in_order(searcher, query, undo):
    """A new user's `adapters.py:700` left out the window holding line 700, which neither retriever found
    (only the symbol at the line was named); `base.py:870` listed three short base.py files."""
    line = _line_of(f"    undo_{undo} = amount - {undo}")
    top = searcher.search(query.format(line=line), SearchOptions(limit=8))
    assert top[0].path == "src/pay/billing.py" and top[0].start_line <= line <= top[0].end_line, \
        [(r.path, r.symbol, r.start_line) for r in top]
    windows = [r[0] for r in searcher.store.conn.execute(
        "SELECT start_line FROM chunks WHERE symbol = 'refund' ORDER BY start_line")]
    assert len(windows) >= 3 and [r.start_line for r in top[1:len(windows)]] == \
        [w for w in windows if w != top[0].start_line], [(r.symbol, r.start_line) for r in top]


@pytest.mark.parametrize("frame", ['File "/opt/app/billing.py", line {line}, in refund',
                                   "at refund (/app/node_modules/pay/billing.py:{line}:3)", "x/billing.py:{line}"])
def test_a_frame_whose_folders_are_another_machines_means_the_file_of_that_name_long_enough(searcher, frame):
    """A new user's `/app/node_modules/lodash/lodash.js:10520` and `File "/opt/app/sessions.py"` shared only the
    file name with the index, and were read as no place."""
    line = _line_of("    undo_90 = amount - 90")
    top = searcher.search(frame.format(line=line), SearchOptions(limit=3))
    assert top[0].path == "src/pay/billing.py" and top[0].start_line <= line <= top[0].end_line, \
        [(r.path, r.start_line) for r in top]


def test_a_file_without_an_extension_and_a_line_no_chunk_holds_are_places(searcher):
    top = searcher.search("LICENSE:3", SearchOptions(limit=3))
    assert top[0].path == "LICENSE", [r.path for r in top]
    blank = _line_of("def refund(card, amount):") - 1  # a blank line between two functions: the one below
    top = searcher.search(f"src/pay/billing.py:{blank}", SearchOptions(limit=3))
    assert top[0].symbol == "refund" and top[0].start_line > blank, [(r.symbol, r.start_line) for r in top]


def test_the_whole_path_as_written_is_the_file_a_place_means(searcher):
    top = searcher.search("README.md:3", SearchOptions(limit=3))
    assert top[0].path == "README.md" and top[0].start_line <= 3 <= top[0].end_line, [r.path for r in top]


def test_an_identifier_lists_every_window_of_a_function_of_few_in_line_order(searcher):
    """A new user's `Model.save` lost its third and fourth windows of 4: neither retriever reached them."""
    windows = [r[0] for r in searcher.store.conn.execute(
        "SELECT start_line FROM chunks WHERE symbol = 'refund' ORDER BY start_line")]
    top = searcher.search("refund", SearchOptions(limit=10, mode="bm25"))
    assert [r.start_line for r in top[:len(windows)]] == windows, [(r.symbol, r.start_line) for r in top]


def test_a_place_of_no_indexed_file_changes_nothing(searcher):
    named = named_in_query("refund other/thing.py:3")
    assert resolve(searcher.store, named, places("refund other/thing.py:3")) is None
    # a file of that name elsewhere in the tree is the one a frame of another layout means
    found = resolve(searcher.store, named, [("opt/app/lib/pay/billing.py", 4)])
    assert found.paths == ["other/thing.py", "src/pay/billing.py"] and found.names == ["charge"], found


def test_a_token_budget_keeps_the_line_a_place_names(searcher):
    """A new user's `sessions.py:703` under --max-tokens kept lines 691-692 of the chunk holding 703."""
    from codii_sql.search.budget import fit

    line = _line_of("    undo_90 = amount - 90")
    query = f"at refund (/app/pay/billing.py:{line}:5)"
    found = searcher.search(query, SearchOptions(limit=3))
    assert found[0].start_line <= line <= found[0].end_line and found[0].end_line - found[0].start_line > 20
    kept, _ = fit(found, [], 120, places(query))
    assert kept[0].start_line <= line <= kept[0].end_line and kept[0].end_line - kept[0].start_line < 20, \
        (kept[0].start_line, kept[0].end_line)
    assert f"undo_90 = amount - 90" in kept[0].content
    from codii_sql import service  # the search use case every face answers through, with its budget

    answer = service.search(service.SearchRequest(query, SearchOptions(limit=3, max_tokens=400), [str(searcher.root)],
                                                  db=str(searcher.store.path), update=False))
    assert answer.results[0].start_line <= line <= answer.results[0].end_line, \
        (answer.results[0].start_line, answer.results[0].end_line)
