"""Chunker tests on real tree-sitter grammars and the real WordPiece tokenizer."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from codii_sql.ingest.chunking.chunker import CHUNKER_VERSION, DEFAULT_MAX_TOKENS, chunk_text, definitions
from codii_sql.ingest.chunking.layout import Chunk
from codii_sql.ingest.chunking.regions import index_source, read_source
from codii_sql.languages import AST_LANGUAGES, detect_language
from codii_sql.models.wordpiece import count_tokens

FIXTURES = Path(__file__).parent / "fixtures" / "chunk"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def file_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (the chunker's notion of a line; ``\\r`` stays in the line)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def assert_valid(text: str, chunks: list[Chunk], max_tokens: int, *, ast: bool) -> None:
    """The invariants every chunking must satisfy."""
    data, lines = text.encode("utf-8"), file_lines(text)
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert data[chunk.start_byte:chunk.end_byte].decode("utf-8") == chunk.content
        whole = "".join(lines[chunk.start_line - 1:chunk.end_line])
        if chunk.content != whole:  # only a part of one over-long line may differ
            assert chunk.start_line == chunk.end_line and chunk.content in whole
        assert chunk.content.strip(), "a chunk of blank lines only"
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    must = (lambda line: any(ch.isalnum() for ch in line)) if ast else str.strip
    assert all(n in covered for n, line in enumerate(lines, 1) if must(line))
    if ast:
        for before, after in zip(chunks, chunks[1:]):
            assert before.end_byte <= after.start_byte, (before, after)
    if chunks:
        assert max(count_tokens([c.content for c in chunks])) <= max_tokens


def kinds_and_symbols(chunks: list[Chunk]) -> list[tuple[int, str, str | None]]:
    return [(c.start_line, c.kind, c.symbol) for c in chunks]


# At 64 word pieces these small files show their structure: each definition of real size is a
# chunk, tiny neighbours are merged (e.g. the imports into the first definition).
EXPECTED_AT_64 = {
    "sample.py": [(1, "function", "top"), (11, "class", "Foo"), (19, "function", "g")],
    "sample.js": [(1, "imports", None), (3, "function", "add"), (10, "function", "mul"),
                  (11, "function", "handler"), (15, "class", "Greeter"), (27, "function", "gen"),
                  (28, "module", None)],
    "sample.ts": [(1, "imports", None), (3, "class", "Shape"), (9, "class", "Circle"),
                  (19, "function", "makeCircle"), (23, "function", "double"),
                  (25, "class", "Color"), (26, "class", "NS"), (29, "class", "A")],  # NS.inner inside
    "sample.tsx": [(1, "module", None), (5, "function", "Counter"), (8, "function", "Counter"),
                   (11, "function", "Title"), (13, "class", "Panel")],
    "sample.go": [(1, "class", "Server"), (15, "method", "Server.Start"),
                  (21, "method", "Server.Addr"), (23, "function", "New")],
    "sample.rs": [(1, "imports", None), (3, "class", "Point"), (9, "class", "Point"),
                  (16, "class", "Point"), (22, "class", "Shape"), (26, "class", "Kind"),
                  (28, "function", "main"), (33, "function", "it_works"), (37, "macro", "m")],
    "sample.java": [(1, "imports", None), (5, "class", "UserRepo"), (12, "method", "UserRepo.find"),
                    (18, "method", "UserRepo.UserRepo"), (20, "class", "UserRepo.Listener"),
                    (22, "class", "UserRepo.State"), (25, "class", "Pair")],
    "sample.c": [(1, "module", None), (5, "class", "node"), (10, "class", "point_t"),
                 (14, "function", "add"), (19, "function", "name"), (21, "function", "main")],
    "sample.cpp": [(1, "module", None), (5, "class", "Shape"), (15, "class", "Point"),
                   (17, "function", "Circle::area"), (21, "function", "max_of"),
                   (28, "function", "main")],
    "sample.cs": [(1, "module", None), (5, "class", "User"), (11, "method", "User.Greet"),
                  (17, "method", "User.User"), (20, "class", "IRepo"), (21, "class", "Pt"),
                  (22, "class", "Color")],
    "sample.rb": [(1, "class", "Billing"), (19, "function", "helper")],
    "sample.php": [(1, "imports", None), (6, "class", "UserController"),
                   (14, "method", "UserController.show"), (21, "function", "helper"),
                   (25, "class", "Repo"), (26, "class", "T")],
    "sample.kt": [(1, "imports", None), (5, "class", "Shape"), (10, "class", "Circle"),
                  (19, "class", "Registry"), (23, "function", "main")],
    "sample.swift": [(1, "class", "Shape"), (8, "class", "Circle"), (19, "class", "Box"),
                     (24, "class", "Circle"), (28, "class", "Kind"), (30, "function", "main")],
    "sample.sh": [(1, "module", None), (4, "function", "usage"), (9, "function", "build"),
                  (13, "module", None)],
    "sample.sql": [(1, "module", None), (3, "function", "create_orders"), (12, "function", "revenue_by_day"),
                   (13, "function", "revenue_by_day.days"), (16, "function", "revenue_by_day.totals"),
                   (19, "function", "revenue_by_day")],
    # chunker 18's languages
    "sample.lua": [(1, "module", None), (4, "function", "M.split"), (10, "function", "M:method"),
                   (14, "function", "helper"), (18, "function", "global_fn"), (21, "function", "M.other"),
                   (22, "function", "f2")],
    "sample.pm": [(1, "class", "Mojo::Util"), (12, "class", "Mojo::Other")],  # each package whole
    "sample.el": [(1, "module", None), (7, "variable", "magit-git-executable"), (10, "variable", "magit-git-debug"),
                  (15, "function", "magit-git-string"), (20, "macro", "magit-with-toplevel"),
                  (24, "function", "magit-foo"), (25, "function", "magit-auto-mode"), (26, "module", None)],
    "sample.erl": [(1, "module", None), (3, "type", "state"), (4, "macro", "TIMEOUT"), (5, "type", "key"),
                   (7, "function", "insert"), (14, "function", "lookup")],
    "sample.ex": [(1, "class", "MyApp.Repo"), (5, "method", "MyApp.Repo.get_user"), (10, "method", "MyApp.Repo.helper"),
                  (12, "method", "MyApp.Repo.my_macro"), (17, "class", "Size")],
    "sample.hs": [(1, "module", None), (5, "class", "Tree"), (8, "class", "Wrap"), (10, "type", "Name"),
                  (12, "class", "Container"), (16, "class", "Container"), (20, "function", "lookupKey"),
                  (24, "function", "fact")],  # the class and its instance apart
    "sample.scala": [(1, "class", "Service"), (9, "class", "Service"), (13, "class", "Greeter"), (17, "class", "Point"),
                     (19, "function", "topLevel")],
    "sample.sol": [(1, "license", None), (2, "imports", None), (4, "class", "Vault"), (9, "class", "Vault"),
                   (13, "method", "Vault.onlyAdmin"), (18, "method", "Vault.constructor"), (22, "method", "Vault.deposit"),
                   (26, "method", "Vault.deposit"), (29, "method", "Vault.receive"), (32, "class", "Math")],
    "sample.proto": [(1, "imports", None), (5, "class", "Order"), (17, "class", "Status"), (22, "class", "OrderService"),
                     (29, "class", "GetOrderRequest")],
    "sample.tf": [(1, "module", None), (5, "class", "aws_s3_bucket.logs"), (11, "variable", "var.prefix"),
                  (16, "class", "module.vpc"), (21, "class", "data.aws_iam_policy_document.assume"),
                  (27, "variable", "output.bucket_arn")],  # named as Terraform's references name them
    "sample.mli": [(1, "module", None), (3, "type", "t"), (6, "function", "create"), (10, "function", "clear"),
                   (13, "function", "seeded_hash_param"), (15, "class", "HashedType")],  # each val with its doc
    "sample.ml": [(1, "constant", "default_size"), (6, "type", "t"), (8, "function", "create"),
                  (13, "function", "insert_all"), (17, "class", "Stats"), (18, "method", "Stats.mean"),
                  (20, "method", "Stats.variance"), (25, "function", "length"), (27, "module", None)],
    "sample.clj": [(1, "module", None), (4, "variable", "*currency*"), (6, "constant", "MAX-ITEMS"),
                   (8, "function", "line-total"), (13, "function", "order-total"), (18, "function", "describe"),
                   (20, "function", "describe"), (23, "class", "Priced"), (26, "class", "Item"),
                   (30, "macro", "with-currency")],
}


def flat_definitions(text: str, language: str) -> list[tuple[int, int, str, str]]:
    """Every definition of ``text`` as ``(first line, last line, kind, symbol)``, nested ones too, sorted."""
    out, stack = [], list(definitions(text, language))
    while stack:
        d = stack.pop()
        out.append((d.first + 1, d.last + 1, d.kind, d.symbol))
        stack += d.children
    return sorted(out)


def test_clauses_signatures_and_specs_are_one_definition_with_their_docs():
    """Erlang writes a function as clauses (and a -spec), Haskell as a signature and equations: each was a piece
    of its own, or no definition at all (a new user's `symbol reverse` in Erlang's sources found nothing)."""
    flat = flat_definitions

    erlang = flat(read("sample.erl"), "erlang")
    assert (7, 12, "function", "insert") in erlang  # its doc comment, -spec and both clauses
    # a -spec a blank line above its clauses (38% of erlang-src's), and Elixir's clauses, are one definition too
    spaced = flat("-spec rev(list()) -> list().\n\nrev([]) -> [];\nrev([H | T]) -> rev(T) ++ [H].\n", "erlang")
    assert spaced == [(1, 4, "function", "rev")]
    clauses = flat("defmodule M do\n  def fact(0), do: 1\n  def fact(n), do: n * fact(n - 1)\nend\n", "elixir")
    assert (2, 3, "method", "M.fact") in clauses and len(clauses) == 2
    nested = flat("(when (require 'vc-git nil t)\n  (defun vc-git-conflicted-files (dir)\n    dir))\n"
                  "(define-key map \"x\" 'magit-x)\n", "elisp")
    assert nested == [(2, 3, "function", "vc-git-conflicted-files")]  # a binding defines nothing
    haskell = flat(read("sample.hs"), "haskell")
    assert (20, 22, "function", "lookupKey") in haskell and (24, 26, "function", "fact") in haskell
    assert (13, 13, "method", "Container.empty") in haskell
    elixir = flat(read("sample.ex"), "elixir")
    assert (5, 8, "method", "MyApp.Repo.get_user") in elixir and (18, 18, "method", "Size.size") in elixir
    lisp = flat(read("sample.el"), "elisp")
    assert (15, 18, "function", "magit-git-string") in lisp and (7, 8, "variable", "magit-git-executable") in lisp
    assert [d[3] for d in flat(read("sample.lua"), "lua")][:3] == ["M.split", "M:method", "helper"]
    assert flat(read("sample.pm"), "perl") == [  # each sub in its package, to the next package statement
        (1, 10, "class", "Mojo::Util"), (4, 8, "method", "Mojo::Util::url_escape"),
        (10, 10, "method", "Mojo::Util::_private"), (12, 18, "class", "Mojo::Other"), (14, 17, "method", "Mojo::Other::new")]
    assert detect_language("lisp/magit.el") == "elisp" and detect_language("include/ms.hrl") == "erlang"


def test_contracts_messages_modules_and_defns_are_definitions_with_their_docs():
    """Solidity, Protocol Buffers, OCaml and Clojure were cut in line windows: `symbol deposit`, `find_symbol
    PlaceOrder` or an outline of a contract found nothing. Their definitions carry their doc comments, nest in
    their contract, message, service or module, and a contract's storage, events and errors are declarations."""
    flat_text = flat_definitions

    def flat(name):
        return flat_definitions(read(name), detect_language(name))

    sol = flat("sample.sol")
    assert (22, 27, "method", "Vault.deposit") in sol and (33, 35, "method", "Math.max") in sol  # with its `/// @dev`
    assert {(9, 9, "constant", "Vault.MAX_DEPOSIT"), (10, 10, "constant", "Vault._admin"),
            (11, 11, "variable", "Vault._balances"), (7, 7, "type", "Vault.Deposited"),
            (6, 6, "type", "Vault.Unauthorized"), (29, 29, "method", "Vault.receive")} <= set(sol)
    assert flat("sample.proto") == [(5, 15, "class", "Order"), (10, 14, "class", "Order.Item"), (17, 20, "class", "Status"),
                                    (22, 27, "class", "OrderService"), (24, 25, "method", "OrderService.PlaceOrder"),
                                    (26, 26, "method", "OrderService.GetOrder"), (29, 31, "class", "GetOrderRequest")]
    ml = flat("sample.ml")
    assert (8, 11, "function", "create") in ml and (3, 4, "constant", "default_size") in ml  # `let () =` defines nothing
    assert (20, 22, "method", "Stats.variance") in ml and (25, 25, "function", "length") in ml and len(ml) == 8
    # each binding of `let rec ... and ...` and of `type ... and ...` (helper 55: 0 of the stdlib's 111 were)
    assert flat_text("let rec f x = g x\nand g = fun z -> z\n\ntype t = A of u\nand u = B | C\n", "ocaml") == [
        (1, 1, "function", "f"), (2, 2, "function", "g"), (4, 4, "type", "t"), (5, 5, "type", "u")]
    clj = flat("sample.clj")
    assert (8, 11, "function", "line-total") in clj and (20, 21, "function", "describe") in clj  # `^:private`, defmethod
    assert (4, 4, "variable", "*currency*") in clj and (30, 31, "macro", "with-currency") in clj
    assert detect_language("src/app/core.cljs") == detect_language("src/app/util.cljc") == "clojure"
    # helper 55: an .mli was line windows; its docs follow its vals (OCaml's stdlib), and are theirs
    mli = "type t = int\n(** A key. *)\n\nval length : 'a array -> int\n(** The length.\n    In O(1). *)\n\n" \
          "val empty : t\nmodule Floatarray : sig\n  val create : int -> floatarray\nend\n"
    assert detect_language("stdlib/array.mli") == "ocaml_interface"
    assert flat_text(mli, "ocaml_interface") == [(1, 2, "type", "t"), (4, 6, "function", "length"),
                                                 (8, 8, "constant", "empty"), (9, 11, "class", "Floatarray"),
                                                 (10, 10, "method", "Floatarray.create")]
    # Terraform's blocks, named as its references write them; a nested block is no definition
    assert flat("sample.tf") == [(5, 9, "class", "aws_s3_bucket.logs"), (11, 14, "variable", "var.prefix"),
                                 (16, 19, "class", "module.vpc"), (21, 25, "class", "data.aws_iam_policy_document.assume"),
                                 (27, 29, "variable", "output.bucket_arn")]
    # helper 57: a protocol's methods are its definitions, as Elixir's are
    assert flat_text("(defprotocol CollReduce\n  \"Reduce faster.\"\n  (coll-reduce [coll f] [coll f val]))\n",
                     "clojure") == [(1, 3, "class", "CollReduce"), (3, 3, "method", "CollReduce.coll-reduce")]
    # helper 55: definline is a definition; a (comment ...) form's scratch code is none
    assert flat_text("(definline booleans [xs] `(. clojure.lang.Numbers booleans ~xs))\n"
                     "(comment\n  (defn scratch [] 1))\n(when true\n  (defn kept [] 2))\n", "clojure") == [
        (1, 1, "function", "booleans"), (5, 5, "function", "kept")]



def test_instances_and_implementations_of_one_name_stay_apart_and_an_infix_equation_joins_its_signature():
    """helper 54: mtl's 19 `MonadState` instances were outlined as 5 (neighbours of one name merged as clauses are),
    an Elixir protocol and its defimpl as one, and `(<+>) :: ...` lost its equation `a <+> b = ...`."""
    flat = flat_definitions

    haskell = flat("instance MonadState s (Lazy.StateT s m) where\n  get = Lazy.get\n\n"
                   "instance MonadState s (Strict.StateT s m) where\n  get = Strict.get\n\n"
                   "(<+>) :: Int -> Int -> Int\na <+> b = a + b\n\nplus :: Int -> Int\nx `plus` y = x + y\n", "haskell")
    assert [d for d in haskell if d[2] != "method"] == [(1, 2, "class", "MonadState"), (4, 5, "class", "MonadState"),
                                                       (7, 8, "function", "(<+>)"), (10, 11, "function", "plus")]
    elixir = flat("defprotocol Shop.Priced do\n  def price(item)\nend\n\n"
                  "defimpl Shop.Priced, for: Shop.Book do\n  def price(book), do: book.price\nend\n", "elixir")
    assert [d for d in elixir if d[2] == "class"] == [(1, 3, "class", "Shop.Priced"), (5, 7, "class", "Shop.Priced")]

# At 24 word pieces classes no longer fit, so their members become chunks of their own.
MEMBERS_AT_24 = {
    "sample.py": {("method", "Foo.bar"), ("function", "top.inner")},
    "sample.js": {("method", "Greeter.constructor"), ("method", "Greeter.greet")},
    "sample.ts": {("method", "Circle.area"), ("method", "Circle.constructor")},
    "sample.tsx": {("method", "Panel.render")},
    "sample.go": {("method", "Server.Start"), ("method", "Server.Addr")},
    "sample.rs": {("method", "Point.new"), ("method", "Point.fmt")},
    "sample.java": {("method", "UserRepo.find"), ("class", "UserRepo.State")},
    "sample.cpp": {("method", "Shape.sides")},
    "sample.cs": {("method", "User.Greet"), ("method", "User.User")},
    "sample.rb": {("method", "Billing.Invoice.initialize"), ("method", "Billing.Invoice.zero")},
    "sample.php": {("method", "UserController.show")},
    "sample.kt": {("method", "Circle.area")},
    "sample.swift": {("method", "Circle.area"), ("method", "Circle.scaled")},
    "sample.sql": {("class", "create_orders.orders"), ("function", "create_orders.orders_created")},
}


def test_every_ast_language_has_a_sample():
    languages = {detect_language(name) for name in EXPECTED_AT_64} | {"markdown"}
    assert languages == AST_LANGUAGES


@pytest.mark.parametrize("name", sorted(EXPECTED_AT_64))
def test_sample_chunks(name):
    text = read(name)
    chunks = chunk_text(text, detect_language(name), max_tokens=64)
    assert kinds_and_symbols(chunks) == EXPECTED_AT_64[name]
    assert_valid(text, chunks, 64, ast=True)


@pytest.mark.parametrize("name", sorted(MEMBERS_AT_24))
def test_members_become_chunks_when_their_class_does_not_fit(name):
    text = read(name)
    chunks = chunk_text(text, detect_language(name), max_tokens=24)
    assert MEMBERS_AT_24[name] <= {(c.kind, c.symbol) for c in chunks}
    assert_valid(text, chunks, 24, ast=True)


# assign.js: express-style methods assigned to an object (``res.sendFile = function ...``).
ASSIGNED_FUNCTIONS = [
    (1, "module", None), (7, "function", "res.sendFile"), (19, "function", "res.cookie"),  # its JSDoc, a blank line above
    (26, "function", "res.contentType"), (30, "function", "res.locals.helpers.format"),
    (32, "function", "Router.handle"), (37, "function", "exports.compile"),
    (41, "function", "exports.View"), (47, "module", None),  # module code keeps out of the small function after it
    (52, "function", "sendfile"),
    (58, "function", "createApplication")]


@pytest.mark.parametrize("language", ["javascript", "typescript", "tsx"])
def test_assigned_functions_are_definitions_named_by_their_target(language):
    """``res.sendFile = function sendFile()`` is found as ``res.sendFile``, not as ``module``
    code; ``a[k] = function`` (no name to search for) and ``res.charset = 'x'`` stay module code."""
    text = read("assign.js")
    chunks = chunk_text(text, language)
    assert kinds_and_symbols(chunks) == ASSIGNED_FUNCTIONS
    assert chunk_named(chunks, "res.sendFile").content.startswith(
        "/**\n * Transfer the file at the given `path`.\n */\n\nres.sendFile = function sendFile(path, options, callback) {\n")
    assert "res.handlers[kind] = function" in chunks[-3].content
    assert_valid(text, chunks, DEFAULT_MAX_TOKENS, ast=True)


def test_functions_assigned_to_this_are_members_of_the_enclosing_function():
    text = ("function Queue(limit) {\n  this.limit = limit;\n  this.items = [];\n"
            "  this.push = function push(item) {\n    this.items.push(item);\n"
            "    return this.items.length <= this.limit;\n  };\n}\n")
    chunks = chunk_text(text, "javascript", max_tokens=24)
    assert ("function", "Queue.push") in {(c.kind, c.symbol) for c in chunks}
    assert_valid(text, chunks, 24, ast=True)


@pytest.mark.parametrize(("text", "symbol"), [
    ("module.exports = function () {\n  return 1;\n};\n", "module.exports"),
    ("module.exports = async function serve(port) {\n  return port;\n};\n", "serve"),
    ("Cache.prototype.get = (key) => {\n  return key;\n};\n", "Cache.get"),
    ("handler = function () {\n  return 1;\n};\n", "handler"),
])
def test_assignment_symbols(text, symbol):
    assert [(c.kind, c.symbol) for c in chunk_text(text, "javascript")] == [("function", symbol)]


def test_an_exported_value_a_call_makes_is_a_definition_and_its_members_are_its_own():
    """zod: `export const safeParse = _safeParse(...)` had no definition, and the methods inside
    `export const ZodType = core.$constructor(...)` were a bare `get`."""
    text = ('import * as core from "./core.js";\nconst fs = require("fs");\nexport const VERSION = "4.1";\n\n'
            'export const safeParse = /* @__PURE__ */ makeSafeParse(core.Error) as SafeParse;\n\n'
            'export const ZodType: core.$constructor<ZodType> = core.$constructor("ZodType", (inst, def) => {\n'
            '  core.$ZodType.init(inst, def);\n  Object.defineProperty(inst, "description", {\n'
            '    get(this: ZodType) {\n      return core.globalRegistry.get(inst)?.description;\n    },\n  });\n});\n')
    symbols = [(c.kind, c.symbol) for c in chunk_text(text, "typescript", max_tokens=24)]
    assert ("function", "safeParse") in symbols and ("function", "ZodType.get") in symbols
    assert not {s for _, s in symbols} & {"fs", "VERSION", "get"}  # a require and a constant are no API
    abstract = ("export abstract class ZodType<T> {\n  /** Parses the input. */\n"
                "  abstract _parse(input: ParseInput): ParseReturnType<T>;\n}\n")
    from codii_sql.ingest.chunking.chunker import definitions
    assert [c.symbol for c in definitions(abstract, "typescript")[0].children] == ["ZodType._parse"]


def test_small_class_is_one_chunk_at_the_default_budget():
    text = read("sample.java")
    chunks = chunk_text(text, "java")
    assert [(c.start_line, c.end_line, c.kind, c.symbol) for c in chunks] == [
        (1, 23, "class", "UserRepo"), (25, 25, "class", "Pair")]
    assert_valid(text, chunks, DEFAULT_MAX_TOKENS, ast=True)


def chunk_named(chunks: list[Chunk], symbol: str) -> Chunk:
    return next(c for c in chunks if c.symbol == symbol)


def test_decorators_and_leading_comments_belong_to_the_definition():
    python = chunk_text(read("sample.py"), "python", max_tokens=24)
    assert chunk_named(python, "top").content.startswith("# helper comment\n@decorator\ndef top")
    bar = chunk_named(python, "Foo.bar").content
    assert bar.startswith("    # method comment\n    @property\n")
    java = chunk_named(chunk_text(read("sample.java"), "java", max_tokens=24), "UserRepo.find")
    assert java.content.startswith("    /** Finds a user. */\n    @Override\n")
    rust = chunk_text(read("sample.rs"), "rust", max_tokens=24)
    assert rust[1].content.startswith("/// A point.\n#[derive(Debug, Clone)]\npub struct Point")
    ts = chunk_named(chunk_text(read("sample.ts"), "typescript", max_tokens=24), "Circle")
    assert ts.content.startswith('@Component({ selector: "x" })\nexport class Circle')


def test_a_doc_comment_a_blank_line_above_its_definition_is_still_its_own():
    """commander writes each method's JSDoc, a blank line, then the method: each comment was a chunk of its own
    labelled with the class (55 of lib/command.js's 201 chunks), ranked above the methods they document."""
    body = "".join(f"    this.v{i} = compute({i});\n" for i in range(12))
    text = ("/**\n * @license MIT\n */\n\nfunction first() {\n  return 1;\n}\n\n"
            "class Command {\n  /**\n   * Set the directory for searching executables.\n   */\n\n"
            f"  executableDir(path) {{\n{body}    return this;\n  }}\n\n"
            "  /** Two blank lines: a section's comment, not this method's. */\n\n\n"
            f"  helpInformation() {{\n{body}    return '';\n  }}\n}}\n")
    chunks = chunk_text(text, "javascript", max_tokens=64)
    assert chunk_named(chunks, "Command.executableDir").content.startswith("  /**\n   * Set the directory")
    assert chunk_named(chunks, "Command.helpInformation").content.startswith("  helpInformation()")
    assert not chunk_named(chunks, "first").content.startswith("/**")  # the file's opening comment is the file's
    java = "class A {\n  int x;\n\n  /** Finds a user. */\n\n  User find(int id) {\n    return null;\n  }\n}\n"
    outline = definitions(java, "java")[0].children
    assert [(d.symbol, d.first) for d in outline] == [("A.x", 1), ("A.find", 3)], [(d.symbol, d.first) for d in outline]
    assert_valid(text, chunks, 64, ast=True)


def test_trailing_comment_of_code_is_not_taken_as_a_doc_comment():
    text = "x = compute()  # cached\ndef f():\n    return x\n" + "y = 1\n" * 20
    chunks = chunk_text(text, "python", max_tokens=16)
    assert chunk_named(chunks, "f").start_line == 2


def test_multibyte_text_before_a_function():
    text = ("# 日本語のコメント 🎉🎉🎉\nS = '中文字符串 émoji 👍'\n\n\n"
            "def 関数(x):\n    return '🎉' * x\n\n\ndef g():\n    pass\n")
    chunks = chunk_text(text, "python", max_tokens=24)
    assert kinds_and_symbols(chunks) == [(1, "module", None), (5, "function", "関数"),
                                         (9, "function", "g")]
    func = chunks[1]
    assert func.content == "def 関数(x):\n    return '🎉' * x\n"
    assert func.start_byte == len("".join(file_lines(text)[:4]).encode("utf-8"))
    assert_valid(text, chunks, 24, ast=True)


def test_crlf_line_endings():
    text = "import os\r\n\r\ndef f(x):\r\n    return x\r\n\r\nclass A:\r\n    pass\r\n"
    chunks = chunk_text(text, "python", max_tokens=12)
    assert kinds_and_symbols(chunks) == [(1, "imports", None), (3, "function", "f"),
                                         (6, "class", "A")]
    assert chunks[1].content == "def f(x):\r\n    return x\r\n"
    assert_valid(text, chunks, 12, ast=True)


@pytest.mark.parametrize("language", ["python", "markdown", None])
@pytest.mark.parametrize("text", ["", " \n\n\t\n", "\n"])
def test_blank_text_has_no_chunks(text, language):
    assert chunk_text(text, language) == []


def test_last_line_without_newline():
    chunks = chunk_text("def f():\n    return 1", "python")
    assert [(c.start_line, c.end_line, c.content) for c in chunks] == [
        (1, 2, "def f():\n    return 1")]


def test_large_class_is_split_into_header_and_methods():
    methods = "".join(
        f"    def method_{i}(self, x):\n        '''Return x plus {i}.'''\n"
        f"        y = x + {i}\n        return y * 2\n\n" for i in range(1000))
    text = "class Big:\n    '''A big class.'''\n    attr = 1\n\n" + methods
    chunks = chunk_text(text, "python")
    assert len(text.splitlines()) == 5004
    assert (chunks[0].start_line, chunks[0].end_line, chunks[0].kind, chunks[0].symbol) == (
        1, 3, "class", "Big")
    assert [c.symbol for c in chunks[1:]] == [f"Big.method_{i}" for i in range(1000)]
    assert {c.kind for c in chunks[1:]} == {"method"}
    assert_valid(text, chunks, DEFAULT_MAX_TOKENS, ast=True)


def test_nested_function_stays_in_its_parent_unless_the_parent_is_split():
    text = ("def outer(items):\n    def key(item):\n        return item.name\n"
            "    return sorted(items, key=key)\n")
    assert kinds_and_symbols(chunk_text(text, "python")) == [(1, "function", "outer")]
    body = "".join(f"    step_{i} = transform(step_{i - 1}, option_{i})\n" for i in range(1, 40))
    big = text.replace("    return sorted", body + "    return sorted")
    chunks = chunk_text(big, "python", max_tokens=64)
    assert ("function", "outer.key") in {(c.kind, c.symbol) for c in chunks}
    assert chunks[0].symbol == "outer" and chunks[0].end_line == 1
    assert_valid(big, chunks, 64, ast=True)


def test_oversized_function_is_cut_on_line_boundaries():
    body = "".join(f"    total += compute_value(item_{i}, weight={i})\n" for i in range(200))
    text = f"def accumulate():\n    total = 0\n{body}    return total\n"
    chunks = chunk_text(text, "python", max_tokens=64)
    assert len(chunks) > 10
    assert {(c.kind, c.symbol) for c in chunks} == {("function", "accumulate")}
    assert all(a.end_line + 1 == b.start_line for a, b in zip(chunks, chunks[1:]))
    assert_valid(text, chunks, 64, ast=True)


def test_tiny_neighbours_merge_but_each_definition_keeps_its_symbol():
    text = ("A = 1\n\ndef one():\n    return 1\n\ndef two():\n    return 2\n\n"
            "def documented(x):\n    '''Explain what this function does at some length.'''\n"
            "    return x\n")
    chunks = chunk_text(text, "python")
    assert [(c.start_line, c.end_line, c.kind, c.symbol) for c in chunks] == [
        (1, 4, "function", "one"), (6, 7, "function", "two"), (9, 11, "function", "documented")]


def test_markdown_sections_follow_the_heading_path():
    text = read("sample.md")
    chunks = chunk_text(text, "markdown", max_tokens=20)
    assert kinds_and_symbols(chunks) == [
        (1, "section", None), (3, "section", "Project"), (7, "section", "Project > Install"),
        (11, "section", "Project > Install > Linux"), (19, "section", "Project > Usage"),
        (21, "section", "Project > Setext")]
    assert "# not a heading" in chunks[3].content
    assert_valid(text, chunks, 20, ast=True)


# setext.md: three ``===`` sections (an express-style History.md), a ``---`` subsection in the
# second and an ATX ``###`` subsection in the third.
SETEXT_SECTIONS = {
    1: "4.19.2 / 2024-03-25", 6: "4.19.1 / 2024-03-20",
    11: "4.19.1 / 2024-03-20 > Security", 16: "4.18.3 / 2024-02-29",
    19: "4.18.3 / 2024-02-29 > Deps",
}


def test_setext_headings_start_sections_like_atx_headings():
    text = read("setext.md")
    chunks = chunk_text(text, "markdown")
    assert kinds_and_symbols(chunks) == [
        (1, "section", "4.19.2 / 2024-03-25"), (6, "section", "4.19.1 / 2024-03-20"),
        (16, "section", "4.18.3 / 2024-02-29")]
    assert_valid(text, chunks, DEFAULT_MAX_TOKENS, ast=True)


def test_each_setext_section_labels_its_own_chunks():
    text = read("setext.md")
    chunks = chunk_text(text, "markdown", max_tokens=20)
    for chunk in chunks:
        section = max(line for line in SETEXT_SECTIONS if line <= chunk.start_line)
        assert chunk.symbol == SETEXT_SECTIONS[section], chunk
    assert {c.symbol for c in chunks} == set(SETEXT_SECTIONS.values())
    assert_valid(text, chunks, 20, ast=True)


def test_long_markdown_section_is_split():
    paragraphs = "\n".join(f"Paragraph {i} explains one more detail of the setup.\n"
                           for i in range(60))
    text = f"# Guide\n\nIntro.\n\n## Setup\n\n{paragraphs}\n## Next\n\nDone.\n"
    chunks = chunk_text(text, "markdown", max_tokens=48)
    setup = [c for c in chunks if c.symbol == "Guide > Setup"]
    assert len(setup) > 5 and {c.kind for c in chunks} == {"section"}
    assert_valid(text, chunks, 48, ast=True)


def test_line_windows_for_other_text_overlap():
    text = "".join(f"key_{i}: value number {i} for the configuration\n" for i in range(300))
    chunks = chunk_text(text, "yaml", max_tokens=64)
    assert {(c.kind, c.symbol) for c in chunks} == {("text", None)}
    assert all(b.start_line <= a.end_line < b.end_line for a, b in zip(chunks, chunks[1:]))
    assert_valid(text, chunks, 64, ast=False)
    assert chunk_text(text, None, max_tokens=64) == chunks


def test_minified_line_is_cut_into_bounded_parts():
    parts, i = [], 0
    while sum(map(len, parts)) < 100_000:
        parts.append(f"function f{i}(a,b){{var c=a+b*{i};if(c>{i}){{return g(c,'x{i}')}}"
                     f"return c}}var v{i}=f{i}(1,2);")
        i += 1
    text = "!function(){" + "".join(parts) + "}();\n"
    chunks = chunk_text(text, "javascript")
    assert len(chunks) > 100 and {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}
    assert "".join(c.content for c in chunks) == text
    assert all(a.end_byte == b.start_byte for a, b in zip(chunks, chunks[1:]))
    assert_valid(text, chunks, DEFAULT_MAX_TOKENS, ast=True)


def test_invariants_hold_on_mangled_sources():
    """Shuffled lines, CRLF, long and multi-byte lines: broken syntax must not break chunks."""
    rng = random.Random(7)
    names = sorted(p.name for p in FIXTURES.glob("sample.*"))
    for _ in range(40):
        name = rng.choice(names)
        lines = read(name).split("\n")
        if rng.random() < 0.5:
            rng.shuffle(lines)
        k = rng.randrange(len(lines))
        lines[k] += " word" * rng.randrange(80) + "中🎉" * rng.randrange(20)
        text = rng.choice(["\n", "\r\n"]).join(lines)
        max_tokens = rng.choice([8, 20, 64])
        assert_valid(text, chunk_text(text, detect_language(name), max_tokens=max_tokens),
                     max_tokens, ast=True)


def test_pathological_nesting_is_cut_at_64_levels_and_the_file_indexed(tmp_path):
    """A new user's generated 500-deep file ran the recursive walks of a definition's children out of Python's
    stack: not indexed (every build retried it, the codebase stale for ever), its outline a traceback. Definitions
    deeper than 64 levels are no definitions of their own; the file is chunked and outlined."""
    from codii_sql.ingest.chunking.chunker import MAX_NESTING
    from codii_sql.ingest.prepare import prepare_file
    from codii_sql.ingest.scanned import SourceFile

    for depth, name in ((600, "deep.py"), (500, "deep.js")):
        if name.endswith(".py"):
            text = "".join(" " * d + f"def f{d}():\n" for d in range(depth)) + " " * depth + "return 1\n"
        else:
            text = "".join(f"function f{d}() {{\n" for d in range(depth)) + "}\n" * depth
        chunks = chunk_text(text, "python" if name.endswith(".py") else "javascript", max_tokens=16)
        assert_valid(text, chunks, 16, ast=True)
        (tmp_path / name).write_text(text)
        prepared = prepare_file(str(tmp_path), SourceFile(name, len(text), 0), 2_000_000)
        assert prepared.error is None and prepared.chunks, prepared.error
        assert len(prepared.definitions) == MAX_NESTING == 64
        assert prepared.definitions[-1]["symbol"].count(".") == MAX_NESTING - 1  # f0.f1. ... .f63
        outline = definitions(text, "python" if name.endswith(".py") else "javascript")
        depth_seen, level = 0, outline
        while level:
            depth_seen, level = depth_seen + 1, level[0].children
        assert depth_seen == MAX_NESTING


def test_no_chunk_of_punctuation_alone_after_a_split_definition():
    # express's router: `proto.handle = function handle(...) { ...long... };` left `};` as its own
    # one-line chunk, which then ranked for any query (a user's report).
    body = "".join(f"    var step{i} = stack[{i}].handle(req, res, next);\n" for i in range(40))
    text = (f"proto.handle = function handle(req, res, out) {{\n  var idx = 0;\n  next();\n\n"
            f"  function next(err) {{\n{body}  }}\n}};\n\nproto.use = function use(fn) {{\n  return fn;\n}};\n")
    chunks = chunk_text(text, "javascript", max_tokens=64)
    assert_valid(text, chunks, 64, ast=True)
    assert all(any(ch.isalnum() for ch in c.content) for c in chunks), [c.content for c in chunks]
    assert {c.symbol for c in chunks} == {"proto.handle", "proto.handle.next", "proto.use"}


def test_budget_below_eight_is_rejected():
    with pytest.raises(ValueError):
        chunk_text("x = 1\n", "python", max_tokens=4)


def test_chunker_version_is_an_int():
    assert isinstance(CHUNKER_VERSION, int) and CHUNKER_VERSION >= 1


@pytest.mark.parametrize(("path", "language"), [
    ("src/app.py", "python"), ("a/b/Component.TSX", "tsx"), ("lib/x.d.ts", "typescript"),
    ("main.go", "go"), ("src/lib.rs", "rust"), ("Foo.java", "java"), ("x.h", "c"),
    ("x.hpp", "cpp"), ("P.cs", "csharp"), ("Rakefile", "ruby"), ("i.php", "php"),
    ("build.gradle.kts", "kotlin"), ("V.swift", "swift"), ("run.sh", "bash"),
    ("README.md", "markdown"), ("Makefile", "make"), ("docker/Dockerfile", "dockerfile"),
    ("Dockerfile.dev", "dockerfile"), ("conf.yml", "yaml"), ("pyproject.toml", "toml"),
    ("index.html", "html"), ("q.sql", "sql"), ("docs/index.rst", "rst"), ("notes.txt", "text"),
    ("data.bin", None), ("LICENSE", "text"), ("noext", None), (".gitignore", "text"),
])
def test_detect_language(path, language):
    assert detect_language(path) == language


def test_header_prototypes_are_named_with_their_doc_comments_and_forward_declarations_are_not():
    header = (
        "/* Copyright 2013 Google Inc. All Rights Reserved.\n   Distributed under MIT license. */\n"
        "#include <stdint.h>\n\n"
        "/**\n * Decompresses the data in encoded_buffer into decoded_buffer.\n */\n"
        "BROTLI_DEC_API BrotliDecoderResult BrotliDecoderDecompress(size_t encoded_size,\n"
        "    const uint8_t* encoded_buffer, size_t* decoded_size, uint8_t* decoded_buffer);\n\n"
        "/* Creates a decoder instance. */\n"
        "BROTLI_DEC_API BrotliDecoderState* BrotliDecoderCreateInstance(brotli_alloc_func alloc_func);\n"
        "void (*on_done)(int status);\n"
        "static const int kTable[4] = {1, 2, 3, 4};\n")
    chunks = chunk_text(header, "c")
    assert kinds_and_symbols(chunks) == [(1, "license", None), (3, "function", "BrotliDecoderDecompress"),
                                         (11, "function", "BrotliDecoderCreateInstance"), (13, "module", None)]
    assert chunk_named(chunks, "BrotliDecoderDecompress").content.startswith("#include <stdint.h>\n\n/**\n * Decomp")
    assert "kTable" in chunks[-1].content and "on_done" in chunks[-1].content  # variables stay module code
    source = "static int helper(int a);\n\nint run(void) { return helper(1); }\n\nstatic int helper(int a) { return a; }\n"
    assert [s for _, _, s in kinds_and_symbols(chunk_text(source, "c"))] == ["run", "helper"]
    cpp = "class Formatter {\n public:\n  // Formats the value.\n  virtual std::string format(int value) const = 0;\n" \
          "  int width;\n};\n" + "".join(f"void step_{i}(int n);\n" for i in range(3))
    assert {s for _, _, s in kinds_and_symbols(chunk_text(cpp, "cpp", max_tokens=24))} >= {
        "Formatter.format", "step_0", "step_2"}


def test_a_cpp_header_is_chunked_as_cpp_and_a_c_header_as_c():
    """fmt's include/fmt/*.h parsed as C: `namespace ui {` was a function spanning the file, and
    the template class's methods were not found."""
    from codii_sql.ingest.chunking.regions import index_source, read_source, source_definitions

    widget = ("#pragma once\n#include <string>\n\nnamespace ui {\n\ntemplate <typename T>\nclass Widget {\n public:\n"
              "  std::string render_widget_html(const T& value) const {\n    return \"<div>\" + value + \"</div>\";\n  }\n"
              "};\n\ninline int widget_count() { return 1; }\n\n}  // namespace ui\n")
    source = read_source("include/widget.h", widget)
    assert source.language == "cpp"
    assert {c.symbol for c in index_source(source)[0]} == {"Widget", "widget_count"}
    widget_class = source_definitions(source)[0]
    assert (widget_class.kind, widget_class.symbol, [d.symbol for d in widget_class.children]) == (
        "class", "Widget", ["Widget.render_widget_html"])  # as C: one function "ui" over the file
    c_header = ("#ifndef POOL_H\n#define POOL_H\nstruct pool {\n  int new;\n  int class;\n};\n"
                "int pool_take(struct pool *p);\n#endif\n")  # C++ keywords as C names
    macros = ("#include \"base.h\"\nFMT_BEGIN_NAMESPACE\nnamespace detail {\ntemplate <typename T> struct is_wrapper {};\n"
              "class node {\n public:\n  virtual ~node() = default;\n  int size() const { return 1; }\n};\n}  // namespace detail\n"
              "FMT_EXPORT template <typename Context> class store {\n public:\n  void push_back(int v) { n_ += v; }\n"
              " private:\n  int n_ = 0;\n};\nFMT_END_NAMESPACE\n")  # fmt's export macros confuse the grammar
    named = {c.symbol for c in index_source(read_source("include/fmt/args.h", macros))[0]} - {None}
    assert "node" in named and not any(" " in s or s.split(".")[0] in ("namespace", "template") for s in named), named
    assert read_source("src/pool.h", c_header).language == "c"
    assert detect_language("src/pool.h") == "c"
    assert "pool_take" in {c.symbol for c in index_source(read_source("src/pool.h", c_header))[0]}


def test_rust_impl_symbols_drop_generics_and_a_bare_impl_line_joins_its_first_method():
    body = "".join(f"        let v{j} = value.wrapping_mul({j}) + self.offset;\n" for j in range(8))
    methods = "".join(f"    /// Step {i}.\n    fn step_{i}(&self, value: u32) -> u32 {{\n{body}        value + {i}\n    }}\n\n"
                      for i in range(12))
    text = "struct Serializer<'a> { offset: u32, name: &'a str }\n\nimpl<'a> Serialize for Serializer<'a> {\n" + methods + "}\n"
    chunks = chunk_text(text, "rust")
    assert [s for _, _, s in kinds_and_symbols(chunks)] == ["Serializer"] + [f"Serializer.step_{i}" for i in range(12)]
    assert chunk_named(chunks, "Serializer.step_0").content.startswith("impl<'a> Serialize for Serializer<'a> {\n")
    by_ref = "impl<'de, R: Read<'de>> de::Deserializer<'de> for &mut Deserializer<R> {\n    fn deserialize_any(self) {}\n}\n"
    assert [s for _, _, s in kinds_and_symbols(chunk_text(by_ref * 1, "rust", max_tokens=16))][-1] == "Deserializer.deserialize_any"
    trait = "pub trait Parser {\n    /// Parses it.\n    fn parse(&self) -> u32;\n    fn name(&self) -> String;\n}\n"
    assert {s for _, _, s in kinds_and_symbols(chunk_text(trait * 1, "rust", max_tokens=16))} >= {"Parser.parse", "Parser.name"}


def test_a_preamble_is_its_own_chunk_not_the_first_functions():
    preamble = "".join(f"import {m}\n" for m in ("os", "re", "sys", "json", "time", "shutil", "logging", "pathlib"))
    text = preamble + "\nDEFAULTS = {'retries': 3, 'timeout': 10.0, 'backoff': 0.5}\n\ndef tiny():\n    return 1\n"
    assert kinds_and_symbols(chunk_text(text, "python")) == [(1, "module", None), (12, "function", "tiny")]
    one_import = "import os\n\ndef tiny():\n    return os.sep\n"  # a small side still joins
    assert kinds_and_symbols(chunk_text(one_import, "python")) == [(1, "function", "tiny")]


@pytest.mark.parametrize("language", ["javascript", "typescript", "tsx"])
def test_default_exports_class_fields_and_object_members_are_definitions(language):
    """axios: ``export default cond && function httpAdapter`` left http.js as 29 unnamed module chunks."""
    text = ("import utils from './utils.js';\n\n"
            "export default isHttpAdapterSupported && function httpAdapter(config) {\n"
            "  return dispatch(config);\n};\n\n"
            "class Store {\n  handle = (event) => { return event.type; };\n  count = 0;\n}\n\n"
            "const api = {\n  get(url) { return fetch(url); },\n  post: function (url, body) { return send(url, body); },\n"
            "  retries: 3,\n};\n\n"
            "export default function () { return 1; }\n")
    found = {(k, s) for _, k, s in kinds_and_symbols(chunk_text(text, language, max_tokens=16))}
    assert {("function", "httpAdapter"), ("method", "Store.handle"), ("function", "get"), ("function", "post"),
            ("function", "default")} <= found, found
    assert not any(s in ("count", "retries") for _, s in found)  # fields that hold values stay code


def test_a_top_comment_that_only_mentions_a_licence_is_no_licence_header():
    """sql/search.sql's parameter notes say 'a licence header chunk': they are documentation, not a licence."""
    doc = "# Parameters: :role_weights weighs a licence header chunk as data.\n# Ranking notes follow.\n\n" \
          "def rank(rows):\n    return sorted(rows)\n"
    assert "license" not in [c.kind for c in chunk_text(doc, "python")]
    for header in ("# Copyright 2024 The Authors\n", "# SPDX-License-Identifier: MIT\n",
                   "# Licensed under the Apache License, Version 2.0\n", "# (c) 2019 ACME\n"):
        assert chunk_text(header + "\ndef rank(rows):\n    return sorted(rows)\n", "python")[0].kind == "license", header


#: Functions the Linux kernel defines through macros (arch/x86/mm/fault.c, fs/read_write.c,
#: kernel/bpf/helpers.c), with a loop macro inside a body, which defines nothing.
MACRO_DEFINED = """\
DEFINE_IDTENTRY_RAW_ERRORCODE(exc_page_fault)
{
	unsigned long address = read_cr2();

	list_for_each_entry(pos, head, list) {
		handle(pos, address);
	}
}

SYSCALL_DEFINE3(read, unsigned int, fd, char __user *, buf, size_t, count)
{
	return ksys_read(fd, buf, count);
}

#ifdef CONFIG_COMPAT
COMPAT_SYSCALL_DEFINE2(getrlimit, unsigned int, resource, struct compat_rlimit __user *, rlim)
{
	return do_prlimit(current, resource, NULL, rlim);
}
#endif

BPF_CALL_2(bpf_map_lookup_elem, struct bpf_map *, map, void *, key)
{
	return (unsigned long) map->ops->map_lookup_elem(map, key);
}

static int __init fault_init(void)
{
	return 0;
}
"""


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_a_function_a_macro_defines_is_named_by_the_function(language):
    chunks = chunk_text(MACRO_DEFINED, language)
    named = [(start, kind, symbol) for start, kind, symbol in kinds_and_symbols(chunks) if symbol]
    assert named == [(1, "function", "exc_page_fault"), (10, "function", "sys_read"),
                     (16, "function", "compat_sys_getrlimit"), (22, "function", "bpf_map_lookup_elem"),
                     (27, "function", "fault_init")]
    assert chunk_named(chunks, "sys_read").content.startswith("SYSCALL_DEFINE3(read,")  # the macro stays searchable


def test_a_c_function_after_an_unknown_attribute_macro_keeps_its_name():
    """fs/btrfs/ctree.c: the C grammar reads ``btrfs_get_num_csums`` as the type of ``(void)``."""
    source = "size_t __attribute_const__ btrfs_get_num_csums(void)\n{\n\treturn 1;\n}\n"
    assert [s for _, _, s in kinds_and_symbols(chunk_text(source, "c"))] == ["btrfs_get_num_csums"]


#: A header shaped as the Linux kernel's include/linux/slab.h and printk.h: attribute macros with arguments
#: in declarations' heads, on the name's line or the line above it.
ATTRIBUTE_MACROS = """\
static __always_inline __alloc_size(1) void *kmalloc_noprof(size_t size, gfp_t flags)
{
\tif (__builtin_constant_p(size) && size)
\t\treturn __kmalloc_large_noprof(size, flags);
\treturn __kmalloc_noprof(size, flags);
}
#define kmalloc(...)\t\t\talloc_hooks(kmalloc_noprof(__VA_ARGS__))

static inline __alloc_size(1, 2) void *kmalloc_array_noprof(size_t n, size_t size, gfp_t flags)
{
\treturn __kmalloc_noprof(n * size, flags);
}

int __printf(6, 7) pci_request_irq(struct pci_dev *dev, unsigned int nr, const char *fmt, ...);

static inline __printf(3, 4)
void ksft_test_result_code(int exit_code, const char *test_name, const char *msg, ...)
{
\tva_end(args);
}

void *__kmalloc_large_noprof(size_t size, gfp_t flags) __assume_kmalloc_alignment __alloc_size(1);

static inline void *kzalloc_noprof(size_t size, gfp_t flags)
{
\treturn kmalloc_noprof(size, flags | __GFP_ZERO);
}
"""


def flat(found: list) -> list:
    """Definitions and their nested ones, in order."""
    return [x for d in found for x in (d, *flat(d.children))]


def test_attribute_macros_in_a_c_declaration_s_head_lose_no_definition():
    """``static __always_inline __alloc_size(1) void *kmalloc_noprof(...)``: the C grammar read ``__alloc_size(1)``
    as the declarator and its error recovery ran on through the next 245 lines of slab.h: ``symbol kmalloc`` on
    the kernel found only the copies under tools/. The parser now reads such calls as spaces."""
    found = {d.symbol: (d.kind, d.head + 1) for d in flat(definitions(ATTRIBUTE_MACROS, "c"))}
    assert found == {"kmalloc_noprof": ("function", 1), "kmalloc": ("macro", 7),
                     "kmalloc_array_noprof": ("function", 9), "pci_request_irq": ("function", 14),
                     "ksft_test_result_code": ("function", 16), "__kmalloc_large_noprof": ("function", 22),
                     "kzalloc_noprof": ("function", 24)}, found
    chunks = chunk_text(ATTRIBUTE_MACROS, "c")
    assert "static __always_inline __alloc_size(1) void *kmalloc_noprof" in chunk_named(chunks, "kmalloc_noprof").content
    from codii_sql.ingest.chunking.cmacros import hide_attribute_macros

    data = ATTRIBUTE_MACROS.encode()
    hidden = hide_attribute_macros(data)
    assert len(hidden) == len(data) and hidden.count(b"\n") == data.count(b"\n")
    assert b"__alloc_size(1) void" not in hidden and b"__kmalloc_large_noprof(size_t size" in hidden  # a declarator stays
    plain = b"int f(void)\n{\n\tif (x) return g(x);\n\tFOO(x);\n}\n"
    assert hide_attribute_macros(plain) is plain
    # A block of attribute lines hidden in part led error recovery astray: a tree that loses a name is not kept
    # (the kernel's BPF tests lost ~100 functions to `__success __retval(0) __flag(...)`).
    bpf = ('SEC("xdp")\n__description("XDP pkt read, mangling, bad access")\n__failure __msg("R3 pointer arithmetic")\n'
           '__naked void end_mangling_bad_access(void)\n{\n\tasm volatile ("r0 = 0; exit;" ::: __clobber_all);\n}\n\n'
           'SEC("xdp")\n__description("XDP pkt read, corner case, good access")\n'
           '__success __retval(0) __flag(BPF_F_ANY_ALIGNMENT)\n__naked void end_corner_case_good_access(void)\n{\n'
           '\tasm volatile ("r0 = 0; exit;" ::: __clobber_all);\n}\n')
    assert [d.symbol for d in flat(definitions(bpf, "c"))] == ["end_mangling_bad_access", "end_corner_case_good_access"]


def test_attribute_macros_after_a_type_s_body_or_before_a_head_s_newline_name_nothing():
    """The kernel closes 1,412 structs with ``} __aligned(8);``, which the C grammar read as a function
    ``__aligned`` holding the struct (``symbol alloc_tag`` found ``__aligned.alloc_tag``), and its error recovery
    could take in the next prototype; ``static inline __printf(1, 2) __cold`` then ``void early_printk(`` on the
    next line (printk.h) lost the function."""
    text = ("struct alloc_tag {\n\tstruct codetag ct;\n} __aligned(8);\n\n"
            "typedef struct {\n\tint x;\n} __aligned(8) foo_t;\n\n"
            "struct fm10k_lport {\n\tint ffu;\n\tstruct x *y;\n} __aligned(4) __packed;\n\n"
            "s32 fm10k_msg_lport_map_pf(struct fm10k_hw *, u32 **, struct fm10k_mbx_info *);\n\n"
            "static inline __printf(1, 2) __cold\nvoid early_printk(const char *s, ...) { }\n\n"
            "int after(void)\n{\n\treturn 0;\n}\n")
    found = {d.symbol: (d.kind, d.head + 1) for d in flat(definitions(text, "c"))}
    assert found == {"alloc_tag": ("class", 1), "foo_t": ("class", 5), "fm10k_lport": ("class", 9),
                     "fm10k_msg_lport_map_pf": ("function", 14), "early_printk": ("function", 16),
                     "after": ("function", 19)}, found


PYBIND_LIKE = """#pragma once
#include "detail/common.h"

PYBIND11_NAMESPACE_BEGIN(PYBIND11_NAMESPACE)
PYBIND11_NAMESPACE_BEGIN(detail)
PYBIND11_WARNING_PUSH

PyThreadState *get_thread_state_unchecked();

PYBIND11_WARNING_POP

template <typename Type, typename Key>
struct set_caster {
    using type = Type;
    bool load(handle src, bool convert) {
        weakref wr(src, disable_lifesupport);
        return true;
    }
    PYBIND11_TYPE_CASTER(type,
                         io_name("collections.abc.Set", "set") + const_name("[")
                             + const_name("]"));
};
PYBIND11_NAMESPACE_END(detail)

class PYBIND11_EXPORT_EXCEPTION error_already_set : public std::exception {
public:
    PYBIND11_NOINLINE error_already_set() { fetch(); }
    PYBIND11_NOINLINE ~error_already_set() { release(); }
    const char *what() const noexcept override;
    explicit operator bool() const { return true; }
};

template <typename type_>
class class_ : public detail::generic_type {
public:
    template <typename Func>
    PYBIND11_ALWAYS_INLINE class_ &def(const char *name_, Func &&f) {
        if (!f) {
            throw error_already_set();
        }
        return *this;
    }
    class_ &def_readwrite(const char *name, int pm) {
        return *this;
    }
};
PYBIND11_NAMESPACE_END(PYBIND11_NAMESPACE)
"""


def test_cpp_macros_and_reference_heads_lose_no_definition():
    """pybind11 (a new user's and an agent's stand-in's): `symbol def_readwrite`, `class_::def` found nothing
    (a head returning a reference was named `&def(...)`, unsearchable), `PYBIND11_NAMESPACE_BEGIN(detail)`
    lines and `PYBIND11_TYPE_CASTER(...)` in class bodies led error recovery to hide `set_caster`, and
    `error_already_set` was a class named `std::exception` while four `throw error_already_set();` lines
    were its "definitions"; local variables (`weakref wr(...)`) were functions."""
    found = {d.symbol: d.kind for d in flat(definitions(PYBIND_LIKE, "cpp"))}
    assert found == {"get_thread_state_unchecked": "function", "set_caster": "class", "set_caster.load": "method",
                     "error_already_set": "class", "error_already_set.error_already_set": "method",
                     "error_already_set.~error_already_set": "method", "error_already_set.what": "method",
                     "error_already_set.operator bool": "method", "class_": "class", "class_.def": "method",
                     "class_.def_readwrite": "method"}, found
    # A specialization whose arguments hold a comma is a definition; an `else if` after `#if` is none (a helper's)
    special = ("template <typename Type, typename Alloc>\nstruct type_caster<std::vector<Type, Alloc>>\n"
               "    : list_caster<std::vector<Type, Alloc>, Type> {};\n\nbool load(handle src, bool convert) {\n"
               "    if (!src) {\n        return false;\n    }\n#if defined(PYPY_VERSION)\n    else if (convert) {\n"
               "        return true;\n    }\n#endif\n    return false;\n}\n")
    assert [d.symbol for d in flat(definitions(special, "cpp"))] == ["type_caster<std::vector<Type, Alloc>>", "load"]
    # A one-line body's macro call whose arguments are types named the classes after it `PYBIND11_OVERRIDE.X`
    override = ("class TrampolineB : public ProtectedB {\npublic:\n"
                "    int foo() const override { PYBIND11_OVERRIDE(int, ProtectedB, foo, ); }\n};\n\n"
                "class PublicistB : public ProtectedB {\npublic:\n    ~PublicistB() override {};\n};\n")
    assert [d.symbol for d in flat(definitions(override, "cpp"))] == [
        "TrampolineB", "TrampolineB.foo", "PublicistB", "PublicistB.~PublicistB"]
    from codii_sql.languages import detect_language

    assert detect_language("include/pybind11/warnings.h", "", "#include <cstring>\nint f(void);\n") == "cpp"
    assert detect_language("x.h", "", "struct t {\n\tdetail::value_and_holder v_h;\n};\n") == "cpp"
    assert detect_language("x.h", "", " * see struct pmu::swap_task_ctx();\nWARN(1, \"struct file::f\");\n") == "c"


SWIFT_APP_CONTEXT = """import Foundation

/**
 The app's context.
 */
@objc(EXAppContext)
public final class AppContext: NSObject {
  public var config: AppContextConfig

  /**
   Handles a notification the client app posted.
   */
  private func handleClientAppNotification(_ notification: Notification) {
    switch notification.name {
    #if os(iOS) || os(tvOS)
    case UIApplication.willEnterForegroundNotification:
      moduleRegistry.post(event: .appEntersForeground)
    #endif
    default:
      return
    }
  }

  public func setRuntime(_ runtime: JavaScriptRuntime) {
    self.runtime = runtime
  }
}

public protocol AnyModule: AnyObject {
  var appContext: AppContext? { get }
  func willDestroy()
}
"""


def test_a_typescript_namespace_holds_its_members():
    """A new user's `symbol Geometry.distance` fell back to a note: a namespace named only itself."""
    text = ("export namespace Geometry {\n  export function distance(a: P, b: P): number {\n    return 0;\n  }\n"
            "  export namespace Inner {\n    export function origin(): P { return P0; }\n  }\n}\n")
    assert [d.symbol for d in flat(definitions(text, "typescript"))] == [
        "Geometry", "Geometry.distance", "Geometry.Inner", "Geometry.Inner.origin"]


def test_swift_conditional_cases_doc_comments_properties_and_requirements():
    """expo (a new user): one `#if os(iOS)` between a switch's cases made AppContext.swift one error from line 8
    to 944 (`symbol AppContext` found only Kotlin's); `/** ... */` docs were chunks of their own, labelled with
    the class (164 of 1,643 Swift definitions); properties and protocol requirements were no symbols."""
    from codii_sql.ingest.chunking.regions import read_source, source_definitions

    found = {d.symbol: (d.kind, d.start_line) for d in flat(source_definitions(read_source("AppContext.swift",
                                                                                          SWIFT_APP_CONTEXT)))}
    assert found == {"AppContext": ("class", 3), "AppContext.config": ("variable", 8),
                     "AppContext.handleClientAppNotification": ("method", 10),  # its doc comment's line
                     "AppContext.setRuntime": ("method", 24), "AnyModule": ("class", 29),
                     "AnyModule.appContext": ("variable", 30), "AnyModule.willDestroy": ("method", 31)}, found
    kotlin = "class AppContext {\n  override val currentActivity: Activity?\n    get() = host\n" \
             "  fun start() {\n    val local = 1\n  }\n}\n"
    assert {d.symbol: (d.start_line, d.end_line) for d in flat(source_definitions(read_source("AppContext.kt",
                                                                                           kotlin)))} == {
        "AppContext": (1, 7), "AppContext.currentActivity": (2, 3), "AppContext.start": (4, 6)}  # with its getter


@pytest.mark.parametrize("line", ["A" * 800_000, "abcdefghij" * 90_000, "😀" * 20_000])
def test_a_line_the_tokenizer_counts_as_one_word_is_still_cut(line):
    """BERT makes one [UNK] piece of any word over 100 characters: such a line counted one word piece,
    and a new user's search printed an 800 KB chunk. A piece is taken to cover at most 16 characters."""
    chunks = chunk_text(f"X = '{line}'\n\n\ndef after():\n    return 1\n", "python")
    from codii_sql.ingest.chunking.layout import MAX_CHARS_PER_PIECE

    assert max(len(c.content) for c in chunks) <= 240 * MAX_CHARS_PER_PIECE + 8
    assert "".join(c.content for c in chunks if c.start_line == 1).strip() == f"X = '{line}'"  # nothing lost
    assert any("def after" in c.content for c in chunks)


@pytest.mark.parametrize(("language", "text", "kind"), [
    ("ruby", "# frozen_string_literal: true\n\nrequire 'time'\nrequire_relative 'utils'\n", "imports"),
    ("python", '"""Doc."""\nimport json\nfrom typing import Any\n', "module"),  # a docstring is code, not an import
    ("python", "# A comment.\nimport json\nfrom os import path as p\n", "imports"),
    ("go", 'package gin\n\nimport (\n\t"fmt"\n\tjson "encoding/json"\n)\n', "imports"),
    ("c", "#include <stdio.h>\n#include \"dict.h\"\n", "imports"),
    ("c", "#include <stdio.h>\n#define MAX_LEN 64\n", "module"),  # a macro is code
    ("javascript", "'use strict';\nconst fs = require('fs');\nimport { a } from './a.js';\n", "imports"),
    ("rust", "use std::fmt;\npub use crate::de::Visitor;\nmod util;\n", "imports"),
    ("java", "package org.example;\n\nimport java.util.List;\n", "imports"),
    ("csharp", "using System;\nusing System.Linq;\nnamespace Shop.Cart;\n", "imports"),
    ("php", "<?php\nnamespace Symfony\\Console;\nuse Symfony\\Component\\Foo;\n", "imports"),
    ("javascript", "const fs = require('fs');\nconst x = compute(fs);\n", "module"),
])
def test_a_preamble_that_only_imports_is_a_chunk_of_kind_imports(language, text, kind):
    """An agent's stand-in on rack: "constant time string comparison" ranked three files' `# frozen_string_literal`
    + `require 'time'` chunks #3-#5: a module chunk that only imports now has a kind the ranking weighs low."""
    from codii_sql.ingest.chunking.imports import only_imports

    assert only_imports(text, language) == (kind == "imports")
    body = {"ruby": "module Rack\n  def self.x\n    1\n  end\nend\n", "python": "def f():\n    return 1\n",
            "go": "func F() int {\n\treturn 1\n}\n", "c": "int f(void) {\n  return 1;\n}\n",
            "javascript": "function f() {\n  return 1;\n}\n", "rust": "fn f() -> i32 {\n    1\n}\n",
            "java": "class A {\n  int f() { return 1; }\n}\n", "csharp": "class A {\n  int F() { return 1; }\n}\n",
            "php": "function f() {\n  return 1;\n}\n"}[language]
    filler = "".join(f"{'#' if language in ('ruby', 'python') else '//'} note {i}: filler line of words\n" for i in range(30))
    chunks = chunk_text(text + "\n" + filler + body, language, max_tokens=64)
    assert chunks[0].kind == kind, [(c.start_line, c.kind, c.symbol) for c in chunks]


def test_packages_template_values_and_embedded_fields_are_declarations():
    """helper 54: `symbol Mojo::UserAgent` (now a package holding its subs) and a Scala object's `val`/`type` found
    nothing; a val inside a method stays a local. A Go struct's embedded type is no field of its own: its line is
    a use of the type."""
    def declared(name, text):
        out, stack = [], list(index_source(read_source(name, text))[1])
        while stack:
            d = stack.pop()
            out.append((d.start_line, d.kind, d.symbol))
            stack += d.children
        return sorted(out)

    assert declared("a.scala", "object A {\n  val limit = 5\n  var n: Int = 0\n  lazy val cache = Map()\n"
                               "  type Id = String\n  def f() = {\n    val local = 1\n    local\n  }\n}\n") == [
        (1, "class", "A"), (2, "constant", "A.limit"), (3, "variable", "A.n"), (4, "variable", "A.cache"),
        (5, "type", "A.Id"), (6, "method", "A.f")]
    assert declared("a.go", "package x\ntype Engine struct {\n\tRouterGroup\n\t*pkg.Handler\n\tname string\n}\n") == [
        (2, "class", "Engine"), (5, "variable", "Engine.name")]
    assert declared("a.pm", "package Mojo::UserAgent;\nsub start { 1 }\n1;\n") == [
        (1, "class", "Mojo::UserAgent"), (2, "method", "Mojo::UserAgent::start")]
    # helper 57: the POD after `__END__` was the package's (Mojo/Server/FastCGI.pm: 1-513, __END__ at 397)
    assert flat_definitions("package T;\nsub a{1}\n__END__\n=pod\nx\n", "perl") == [
        (1, 2, "class", "T"), (2, 2, "method", "T::a")]
