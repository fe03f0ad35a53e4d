"""Outlines and definitions by name (CLI, service and MCP) on real indexes of Python, TypeScript, Go and Rust."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner
from support.readonly import refusing
from support.trees import write_tree
from test_mcp import call, server, wait_indexed

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.errors import UsageError
from codii_sql.search.budget import json_tokens
from codii_sql.service import symbols

POLYGLOT = {
    "py/session.py": '''
        class Session:
            """An HTTP session."""

            @staticmethod
            def make():
                return Session()

            def send(self, request):
                return request


        def send(request):
            return Session().send(request)
        ''',
    "tests/test_session.py": '''
        def send(x):
            return x
        ''',
    "ts/router.ts": '''
        export class Router {
          route(path: string): string {
            return path;
          }
        }

        export function mount(app: Router): void {
          app.route("/");
        }
        ''',
    "go/cache.go": '''
        package store

        type Cache struct {
        	items map[string]int
        }

        // Get returns the item.
        func (c *Cache) Get(key string) (int, bool) {
        	v, ok := c.items[key]
        	return v, ok
        }
        ''',
    "rs/parser.rs": '''
        pub struct Parser<'a> {
            input: &'a str,
        }

        impl<'a> Parser<'a> {
            /// Parse a header line.
            pub fn parse_header(&self) -> Option<&'a str> {
                self.input.lines().next()
            }
        }
        ''',
}


@pytest.fixture
def poly(tmp_path, codii_home):
    repo = write_tree(tmp_path / "poly", POLYGLOT)
    service.build(service.open_codebase(repo))
    return service.open_codebase(repo)


def names(nodes):
    return [(n["kind"], n["symbol"], n["start_line"], n["end_line"], [names([c]) for c in n["children"]]) for n in nodes]


def test_outlines_nest_definitions_with_lines_and_signatures_in_four_languages(poly):
    py = service.outline(poly, "py/session.py")["symbols"]
    assert [(n["symbol"], n["start_line"], n["end_line"]) for n in py] == [("Session", 1, 9), ("send", 12, 13)]
    assert [(c["symbol"], c["start_line"], c["signature"]) for c in py[0]["children"]] == [
        ("Session.make", 4, "def make():"), ("Session.send", 8, "def send(self, request):")]
    ts = service.outline(poly, "ts/router.ts")["symbols"]
    assert ts[0]["symbol"] == "Router" and ts[0]["children"][0]["symbol"] == "Router.route" and ts[1]["symbol"] == "mount"
    go = service.outline(poly, "go/cache.go")["symbols"]
    assert [(n["symbol"], n["start_line"]) for n in go] == [("Cache", 3), ("Cache.Get", 7)]
    assert go[1]["signature"] == "func (c *Cache) Get(key string) (int, bool) {"
    rs = service.outline(poly, "rs/parser.rs")["symbols"]
    assert rs[1]["children"][0]["symbol"] == "Parser.parse_header"
    with pytest.raises(UsageError):
        service.outline(poly, "../outside.py")


def test_find_symbol_by_name_qualified_name_generics_module_and_prefix(poly):
    def found(name, **kw):
        return [(d["path"], d["symbol"], d["match"]) for d in service.find_symbol(poly, name, **kw)["definitions"]]

    # Named exactly as asked, plain or as a member, source first: a new user's `symbol get` on Django listed
    # 11 vendored jQuery keys (plain `get`) before QuerySet.get.
    assert found("send") == [("py/session.py", "send", "exact"), ("py/session.py", "Session.send", "qualified"),
                             ("tests/test_session.py", "send", "exact")]
    assert found("Session.send") == [("py/session.py", "Session.send", "exact")]
    assert found("Parser::parse_header") == found("Parser.parse_header") == [
        ("rs/parser.rs", "Parser.parse_header", "exact")]
    assert found("Cache.Get") == [("go/cache.go", "Cache.Get", "exact")]
    # Go's method expressions, as its docs and stack traces write them (an agent's `(*FlagSet).Parse` fell back
    # to the package-level Parse first)
    assert found("(*Cache).Get") == found("(Cache).Get") == [("go/cache.go", "Cache.Get", "exact")]
    assert found("py.session.Session.make") == [("py/session.py", "Session.make", "exact")]
    assert found("Rout", prefix=True)[:2] == [("ts/router.ts", "Router", "prefix"), ("ts/router.ts", "Router.route", "prefix")]
    assert found("send", kind="method") == [("py/session.py", "Session.send", "qualified")]
    session = service.find_symbol(poly, "Session")["definitions"][0]
    assert (session["start_line"], session["end_line"], session["signature"]) == (1, 13 - 4, "class Session:")
    assert found("Session", kind="CLASS") == [("py/session.py", "Session", "exact")]
    with pytest.raises(UsageError, match="unknown kind 'bogus'"):
        service.find_symbol(poly, "send", kind="bogus")
    with pytest.raises(UsageError, match="'<script>' holds no identifier"):  # was "is empty" (a new user)
        service.find_symbol(poly, "<script>")
    nothing = service.find_symbol(poly, "no_such_thing")
    assert nothing["definitions"] == [] and "no definition" in nothing["note"]


def test_find_references_gives_each_use_on_its_own_line_without_the_definition(poly):
    refs = service.find_references(poly, "Session.send")
    assert refs["identifier"] == "send"
    lines = {(f["path"], ln["line"]) for f in refs["files"] for ln in f["lines"]}
    assert ("py/session.py", 13) in lines  # return Session().send(request)
    assert ("py/session.py", 8) not in lines and ("py/session.py", 12) not in lines  # definitions of send,
    assert "tests/test_session.py" not in {f["path"] for f in refs["files"]}  # whichever class they are in
    assert refs["total_files"] == 1
    route = service.find_references(poly, "route")
    assert [(f["path"], [ln["line"] for ln in f["lines"]]) for f in route["files"]] == [("ts/router.ts", [8])]
    items = service.find_references(poly, "items")  # line 4 declares the field: a definition, no use
    assert [ln["line"] for f in items["files"] for ln in f["lines"]] == [9] and "1 line(s) that only define" in items["note"]
    assert not any(ln["text"].startswith("func") for f in service.find_references(poly, "Get")["files"]
                   for ln in f["lines"])
    assert [ln["line"] for f in service.find_references(poly, "input")["files"] for ln in f["lines"]] == [2, 8]  # Rust
    few = service.find_references(poly, "Session", limit=1)  # used on lines 6 and 13
    assert few["truncated"] and sum(len(f["lines"]) for f in few["files"]) == 1 and few["total"] > 1
    with pytest.raises(UsageError, match="not an identifier"):
        service.find_references(poly, "a b")


def test_a_signature_after_annotations_on_its_line_or_over_lines(tmp_path, codii_home):
    """moshi: `@CheckReturnValue @Throws(IOException::class) public abstract fun peek(): Token`
    had an empty signature (a line starting with @ was taken for a decorator line)."""
    repo = write_tree(tmp_path / "k", {
        "Reader.kt": "abstract class Reader {\n  @CheckReturnValue @Throws(IOException::class) public abstract fun peek(): Token\n"
                     "  @Throws(\n    IOException::class,\n  )\n  public abstract fun skip()\n}\n",
        "app.py": "@app.route(\"/x\", methods=[\"GET\"])\n@retry(stop=stop_after(3))\ndef view():\n    return 1\n",
        "PublishTests.cs": "public class PublishTests\n{\n    [Fact]\n    [Trait(\"Kind\", \"Unit\")]\n"
                           "    public async Task Should_publish()\n    {\n        await Task.Delay(1);\n    }\n}\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    outline = service.outline(cb, "Reader.kt")["symbols"][0]["children"]
    assert [c["signature"] for c in outline] == [
        "@CheckReturnValue @Throws(IOException::class) public abstract fun peek(): Token", "public abstract fun skip()"]
    assert service.outline(cb, "app.py")["symbols"][0]["signature"] == "def view():"
    (test,) = service.outline(cb, "PublishTests.cs")["symbols"][0]["children"]  # MediatR: "[Fact]" was the signature
    assert test["signature"] == "public async Task Should_publish()"


def test_a_typescript_private_method_is_its_own_signature_and_no_use_of_itself(tmp_path, codii_home):
    """A new user's #private methods (not async) showed their first body line as the signature,
    and refs listed the definition line as a use: '#' was read as a comment marker."""
    repo = write_tree(tmp_path / "ts", {"client.ts": """
        export class Client {
          #secret = 1;

          #compute(x: number): number {
            const y = x * 2;
            return y + this.#secret;
          }

          async #load(url: string): Promise<void> {
            await fetch(url);
          }

          run(): number {
            return this.#compute(3);
          }
        }
        """, "deploy.py": "# compute the plan\ndef plan():\n    return 1\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    methods = {c["symbol"]: c["signature"] for c in service.outline(cb, "client.ts")["symbols"][0]["children"]}
    assert methods["Client.#compute"] == "#compute(x: number): number {"
    assert methods["Client.#load"] == "async #load(url: string): Promise<void> {"
    (found,) = service.find_symbol(cb, "compute")["definitions"]
    assert found["signature"] == "#compute(x: number): number {"
    refs = service.find_references(cb, "compute")
    assert [(f["path"], [ln["line"] for ln in f["lines"]]) for f in refs["files"]] == [
        ("client.ts", [14]), ("deploy.py", [1])]
    assert service.outline(cb, "deploy.py")["symbols"][0]["signature"] == "def plan():"  # Python's '#' is a comment


def test_a_name_defined_in_many_files_is_found_up_to_the_limit_and_never_listed_as_a_use(tmp_path, codii_home):
    """5,000 files of `class WidgetN: def run(self)`: symbol run --limit 100 gave 40 definitions
    silently, and refs run listed the other 4,960 as uses (small methods are no chunks of their own).
    Every definition is stored by the build now: all are counted and paged, none is a use."""
    files = {f"w/widget{i}.py": f"class Widget{i}:\n    def run(self):\n        return {i}\n" for i in range(150)}
    repo = write_tree(tmp_path / "gen", {**files, "main.py": "from w.widget0 import Widget0\n\nWidget0().run()\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = service.find_symbol(cb, "run", limit=100)
    assert len(found["definitions"]) == 100 and found["truncated"] and found["total"] == 150
    assert "qualified name" in found["note"] and found["next_offset"] == 100
    rest = service.find_symbol(cb, "run", limit=100, offset=100)
    assert len(rest["definitions"]) == 50 and not rest.get("truncated")
    assert {d["path"] for d in found["definitions"] + rest["definitions"]} == set(files)
    first = service.find_symbol(cb, "run", limit=20)
    assert len(first["definitions"]) == 20 and first["truncated"] and "20 shown from offset 0" in first["note"] and first["next_offset"] == 20
    few = service.find_symbol(cb, "Widget7.run")
    assert [d["path"] for d in few["definitions"]] == ["w/widget7.py"]
    refs = service.find_references(cb, "run")
    assert [(f["path"], [ln["text"] for ln in f["lines"]]) for f in refs["files"]] == [("main.py", ["Widget0().run()"])]


def test_cli_outline_and_symbol(poly, monkeypatch):
    monkeypatch.chdir(poly.root / "go")  # a path from the shell, relative to here
    assert "Cache.Get" in CliRunner().invoke(cli, ["outline", "cache.go"]).output
    res = CliRunner().invoke(cli, ["outline", str(poly.root / "go" / "cache.go")])
    assert res.exit_code == 0 and "7-11" in res.output and "Cache.Get" in res.output, res.output
    # from the --path folder given, a subfolder of the codebase (it was read from the codebase's root)
    res = CliRunner().invoke(cli, ["outline", "cache.go", "--path", str(poly.root / "go")])
    assert res.exit_code == 0 and "Cache.Get" in res.output, res.output
    monkeypatch.chdir(poly.root.parent)
    assert "Cache.Get" in CliRunner().invoke(cli, ["outline", "cache.go", "--path", str(poly.root / "go")]).output
    assert "Cache.Get" in CliRunner().invoke(cli, ["outline", "go/cache.go", "--path", str(poly.root)]).output
    res = CliRunner().invoke(cli, ["symbol", "route", "--path", str(poly.root), "--json"])
    assert json.loads(res.output)["definitions"][0]["symbol"] == "Router.route"
    res = CliRunner().invoke(cli, ["symbol", "Session.send", "--path", str(poly.root)])
    assert res.output.startswith("py/session.py:8-9  method Session.send  def send(self, request):")
    res = CliRunner().invoke(cli, ["refs", "route", "--path", str(poly.root)])
    assert res.output.startswith('ts/router.ts:8: app.route("/");'), res.output


def test_mcp_outline_and_find_symbol(codii_home, tmp_path):
    repo = write_tree(tmp_path / "mcp-poly", POLYGLOT)

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(repo))
            await wait_indexed(s, repo)
            out = await call(s, "get_file_outline", path=str(repo), file="rs/parser.rs")
            assert out["symbols"][1]["children"][0]["symbol"] == "Parser.parse_header"
            res = await s.call_tool("find_symbol", {"path": str(repo), "name": "Parser::parse_header"})
            assert res.structured_content["definitions"][0]["path"] == "rs/parser.rs"
            assert "rs/parser.rs:6-9 method" in res.content[1].text  # its doc comment included
            assert "{" not in res.content[1].text.split(":", 1)[0]  # text is a listing, not the JSON again
            refs = await call(s, "find_references", path=str(repo), name="items")
            assert [(f["path"], [ln["line"] for ln in f["lines"]]) for f in refs["files"]] == [("go/cache.go", [9])]
            fitted = await call(s, "search_code", path=str(repo), query="send the request", max_tokens=500)
            assert fitted["budget"]["max_tokens"] == 500 and fitted["budget"]["used_tokens"] <= 500
            least = await call(s, "search_code", path=str(repo), query="send the request", max_tokens=400)
            assert least["results"] and least["budget"]["used_tokens"] <= 400  # the least budget taken is kept
            refused = await s.call_tool("search_code", {"path": str(repo), "query": "send", "max_tokens": 100})
            assert refused.is_error and "400" in refused.content[0].text, refused.content[0].text
            part = await call(s, "get_content", path=str(repo), file="py/session.py", start_line=1, max_tokens=100)
            assert len(part["content"]) <= 400  # the file is smaller: whole (the cut is tested in test_budget.py)
            similar = await call(s, "find_similar_code", path=str(repo), file="py/session.py", max_tokens=400)
            assert sum(len(r["content"]) // 4 + 30 for r in similar["results"]) <= 400 + 4 * len(similar["results"])

    asyncio.run(run())


def test_a_name_many_symbols_start_with_costs_sqlite_steps_in_proportion_to_the_chunks(tmp_path, codii_home,
                                                                                       monkeypatch):
    """``f`` over f0..f1499 in one file: the symbol statement looked up each matched symbol's first chunk and
    its class members with a subquery of its own (quadratic: 15 s at 6,000 symbols). SQLite's virtual-machine
    steps, counted by its progress handler, are deterministic: they must grow with the chunks, not their square."""
    n = 1500
    repo = write_tree(tmp_path / "many", {"many.py": "".join(f"def f{i}():\n    return {i}\n" for i in range(n))})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    steps = [0]
    opened = symbols.open_store

    def counted(codebase):
        store = opened(codebase)
        store.conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1) or 0, 1000)
        return store

    monkeypatch.setattr(symbols, "open_store", counted)
    assert service.find_symbol(cb, "f")["definitions"] == []
    prefixed = [d["symbol"] for d in service.find_symbol(cb, "f1", prefix=True, limit=3)["definitions"]]
    assert prefixed[0] == "f1" and len(prefixed) == 3 and all(len(s) == 3 and s.startswith("f1") for s in prefixed[1:])
    assert [d["symbol"] for d in service.find_symbol(cb, "f1499")["definitions"]] == ["f1499"]
    # Measured: 286 thousand steps for the three calls; the quadratic statement took 93,638 thousand.
    assert steps[0] * 1000 < 3 * 200 * n, steps[0]


def test_uses_and_definitions_cut_by_tokens_go_on_from_next_offset_to_the_same_whole(tmp_path, codii_home):
    """max_tokens cuts at whole lines and definitions; the pages from next_offset on add up to the uncut answer."""
    repo = write_tree(tmp_path / "wide", {"wide.py": "".join(f'zz_{i} = zz + "{"q" * 900}"\n' for i in range(60)),
                                          "defs.py": "".join(f"def zz_handler_{i}(a, b):\n    return a\n" for i in range(60))})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)

    def pages(fn, key, name="zz", **kw):
        got, offset = [], 0
        while True:
            part = fn(cb, name, offset=offset, max_tokens=1000, **kw)
            got += key(part)
            assert fn(cb, name, offset=offset, max_tokens=1000, **kw) == part  # deterministic
            if not part.get("truncated"):
                return got
            assert part["next_offset"] == offset + len(key(part)) and "offset=" in part["note"]
            offset = part["next_offset"]

    def uses(part):
        return [(f["path"], ln["line"]) for f in part["files"] for ln in f["lines"]]

    whole = service.find_references(cb, "zz", limit=2000)
    assert len(uses(whole)) == whole["total"] == 60 and not whole["truncated"]
    assert pages(service.find_references, uses, limit=2000) == uses(whole)
    defs = service.find_symbol(cb, "zz_handler", prefix=True, limit=100)["definitions"]
    assert len(defs) == 60 and pages(service.find_symbol, lambda p: p["definitions"], "zz_handler", prefix=True,
                                     limit=100) == defs
    outline = service.outline(cb, "defs.py", max_tokens=200)
    assert outline["truncated"] and 1 <= len(outline["symbols"]) < 60 and "max_tokens=200" in outline["note"]
    for budget in (200, 400, 800):  # the whole answer, not its definitions alone (a helper's 400 came to 445)
        assert json_tokens(service.outline(cb, "defs.py", max_tokens=budget)) <= budget, budget
    assert service.outline(cb, "defs.py", start_line=outline["next_start_line"])["symbols"][0]["symbol"] == \
        f"zz_handler_{len(outline['symbols'])}"


def test_cli_symbol_finds_a_function_a_macro_defines_by_its_real_name(tmp_path, codii_home):
    repo = write_tree(tmp_path / "kernel", {
        "arch/x86/mm/fault.c": "DEFINE_IDTENTRY_RAW_ERRORCODE(exc_page_fault)\n{\n\thandle_page_fault(regs);\n}\n",
        "fs/read_write.c": "SYSCALL_DEFINE3(read, unsigned int, fd, char __user *, buf, size_t, count)\n{\n"
                           "\treturn ksys_read(fd, buf, count);\n}\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    for name, path in (("exc_page_fault", "arch/x86/mm/fault.c"), ("sys_read", "fs/read_write.c")):
        res = CliRunner().invoke(cli, ["symbol", name, "--path", str(repo), "--json"])
        assert [(d["path"], d["symbol"], d["start_line"]) for d in json.loads(res.output)["definitions"]] == [(path, name, 1)]
    res = CliRunner().invoke(cli, ["search", "SYSCALL_DEFINE3", "--path", str(repo), "--mode", "bm25", "--json"])
    assert json.loads(res.output)["results"][0]["path"] == "fs/read_write.c"


def test_a_stub_file_lists_after_the_definition_it_declares(tmp_path, codii_home):
    """A new user's `SchemaValidator::validate_python` listed pydantic-core's .pyi stub above its Rust method
    (both exact, both source: the stub's path sorted first)."""
    repo = write_tree(tmp_path / "core", {
        "python/core/_core.pyi": "class SchemaValidator:\n    def validate_python(self, input: object) -> object: ...\n",
        "src/validators/mod.rs": "pub struct SchemaValidator {}\n\nimpl SchemaValidator {\n"
                                 "    pub fn validate_python(&self, input: i32) -> i32 {\n        input\n    }\n}\n",
        "types/api.d.ts": "export declare function parseHeader(text: string): string;\n",
        "src/api.ts": "export function parseHeader(text: string): string {\n  return text.trim();\n}\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    for name, first in (("SchemaValidator::validate_python", "src/validators/mod.rs"), ("parseHeader", "src/api.ts")):
        res = CliRunner().invoke(cli, ["symbol", name, "--path", str(repo), "--json"])
        paths = [d["path"] for d in json.loads(res.output)["definitions"]]
        assert len(paths) == 2 and paths[0] == first, (name, paths)


def test_the_cli_updates_the_index_before_symbol_and_refs_unless_told_not_to(tmp_path, codii_home):
    """A fresh process each time, as an agent's shell runs them: a function added since the build is found
    and a deleted file's definitions are gone (they answered from the old index, saying nothing)."""
    import os
    import subprocess
    import sys

    repo = write_tree(tmp_path / "repo", {"utils.go": "package gin\n\nfunc Helper() int {\n\treturn 1\n}\n",
                                          "auth.go": "package gin\n\nfunc BasicAuth() int {\n\treturn Helper()\n}\n"})
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_WATCH": "0"}

    def cli_json(*args):
        done = subprocess.run([sys.executable, "-m", "codii_sql.cli", *args, "--path", str(repo), "--json"],
                              env=env, capture_output=True, text=True)
        out = json.loads(done.stdout)
        assert done.returncode == (0 if out.get("definitions") or out.get("total") else 1), done.stderr
        return out

    assert subprocess.run([sys.executable, "-m", "codii_sql.cli", "build", str(repo), "--no-vectors"],
                          env=env, capture_output=True).returncode == 0
    (repo / "utils.go").write_text((repo / "utils.go").read_text() + "\nfunc BrandNewHelper() int {\n\treturn 2\n}\n")
    (repo / "auth.go").unlink()
    assert cli_json("symbol", "BrandNewHelper", "--no-update")["definitions"] == []
    assert [d["path"] for d in cli_json("symbol", "BasicAuth", "--no-update")["definitions"]] == ["auth.go"]
    assert [(d["path"], d["start_line"]) for d in cli_json("symbol", "BrandNewHelper")["definitions"]] == [
        ("utils.go", 7)]
    assert cli_json("symbol", "BasicAuth")["definitions"] == []
    assert [f["path"] for f in cli_json("refs", "Helper")["files"]] == []


DECLARED = {
    "cjson.h": "#define CJSON_VERSION_MAJOR 1\n#define cJSON_ArrayForEach(e, a) for (e = a; e; e = e->next)\n"
               "typedef int cJSON_bool;\nint cJSON_Parse(const char *value);\n",
    "types.ts": "export type ZodTypeAny = ZodType<any>;\nexport type SafeParseResult<T> = { ok: T };\n",
    "gin.go": "package gin\n\nconst abortIndex int8 = 63\n\nvar DebugPrintRouteFunc func()\n\nfunc f() {\n\tvar local = 1\n}\n",
    "lib.rs": "pub type Result<T> = std::result::Result<T, Error>;\npub const LIMIT: usize = 3;\n",
    "Gson.java": "class Gson {\n  static final String JSON_NON_EXECUTABLE_PREFIX = \")]}'\\n\";\n  private int x;\n}\n",
    "ranking.py": "RRF_K = 60\n\n\ndef fuse():\n    local = RRF_K\n    return local\n",
    "z_last/cjson.c": "int cJSON_Parse(const char *value)\n{\n    return value != 0;\n}\n",
    "grouped.go": "package gin\n\nvar (\n\tdefault404Body = []byte(\"404\")\n\tdefault405Body = 2\n)\n",
    "spin.h": "typedef struct spinlock {\n\tint raw;\n} spinlock_t;\n",
    "node.h": "typedef struct node {\n\tint value;\n} node;\n",  # one name, one place: listed once
    "pair.go": "package gin\n\nvar (\n\tgw, gz = 3, 4\n)\n",
    "Cfg.java": "class Cfg {\n  static final String NAME = \"cfg\", OTHER = \"x\";\n}\n",
    "flags.py": "cc, dd = 1, 2\nAA = BB = 1\ntry:\n    import y\n    HAS_Y = True\nexcept ImportError:\n    HAS_Y = False\n\n\n"
                "def f():\n    if AA:\n        inner_local = 2\n",
    "consts.ts": "export const MAX_ITEMS = 10;\nexport declare const ZodIssueCode: { a: 1 };\nfunction f() {\n"
                 "  const inner = 1;\n}\n",
    # npm's `symbol Npm` listed four of these imports before `class Npm`
    "lib/get.js": "const Npm = require('../npm.js')\nconst { log } = require('proc-log')\nconst join = require('path').join\n"
                  "const Later = (await import('./later.js')).default\nconst wrapped = wrap(require('x'))\n",
}


def test_members_no_chunk_is_named_after_are_symbols_in_csharp_php_and_java(tmp_path, codii_home):
    """An agent's stand-in found nothing for pythonnet's `PythonEngine.IsInitialized` (a property) and
    `PyObject.Handle`, monolog's `Logger::DEBUG`, symfony's `Response::HTTP_NOT_FOUND` or jpype's
    `ModifierCode.value`; C# operators were missing from outlines and finalizers named as constructors."""
    repo = write_tree(tmp_path / "repo", {
        "PythonEngine.cs": "namespace Python.Runtime {\n    public class PythonEngine {\n"
                           "        public static bool IsInitialized { get { return initialized; } }\n"
                           "        public const int Version = 3;\n        private int count = 0;\n"
                           "        public static bool operator ==(PythonEngine a, PythonEngine b) => true;\n"
                           "        ~PythonEngine() { }\n        PythonEngine() { }\n    }\n}\n",
        "Logger.php": "<?php\nclass Logger\n{\n    public const DEBUG = 100;\n    protected string $name;\n"
                      "    public function log() { $local = 1; }\n}\n",
        "ModifierCode.java": "enum ModifierCode {\n    PUBLIC(1);\n    final public int value;\n"
                             "    void f() { int local = 2; }\n}\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    want = {"PythonEngine.IsInitialized": ("PythonEngine.cs", "variable", 3),
            "PythonEngine.Version": ("PythonEngine.cs", "constant", 4), "count": ("PythonEngine.cs", "variable", 5),
            "Logger::DEBUG": ("Logger.php", "constant", 4), "Logger.name": ("Logger.php", "variable", 5),
            "ModifierCode.value": ("ModifierCode.java", "variable", 3),
            "ModifierCode.PUBLIC": ("ModifierCode.java", "constant", 2)}
    for name, (path, kind, line) in want.items():
        found = service.find_symbol(cb, name)["definitions"]
        assert [(d["path"], d["kind"], d["start_line"]) for d in found] == [(path, kind, line)], (name, found)
    assert service.find_symbol(cb, "local")["definitions"] == []
    members = [s["symbol"] for s in service.outline(cb, "PythonEngine.cs")["symbols"][0]["children"]]
    assert "PythonEngine.operator ==" in members and "PythonEngine.~PythonEngine" in members, members
    assert members.count("PythonEngine.PythonEngine") == 1


def test_macros_type_aliases_and_constants_are_symbols_and_in_outlines(tmp_path, codii_home, monkeypatch):
    """A fresh user looked up cJSON_bool, ZodTypeAny, abortIndex, RRF_K... and found nothing: they are
    declarations no chunk is named after. Outlines and symbol list them; locals stay out."""
    repo = write_tree(tmp_path / "repo", DECLARED)
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    want = {"CJSON_VERSION_MAJOR": ("cjson.h", "macro", 1), "cJSON_ArrayForEach": ("cjson.h", "macro", 2),
            "cJSON_bool": ("cjson.h", "type", 3), "ZodTypeAny": ("types.ts", "type", 1),
            "SafeParseResult": ("types.ts", "type", 2), "abortIndex": ("gin.go", "constant", 3),
            "DebugPrintRouteFunc": ("gin.go", "variable", 5), "Result": ("lib.rs", "type", 1),
            "LIMIT": ("lib.rs", "constant", 2), "JSON_NON_EXECUTABLE_PREFIX": ("Gson.java", "constant", 2),
            "RRF_K": ("ranking.py", "constant", 1), "default404Body": ("grouped.go", "variable", 4),
            "spinlock_t": ("spin.h", "type", 1), "spinlock": ("spin.h", "class", 1), "node": ("node.h", "type", 1),
            "MAX_ITEMS": ("consts.ts", "constant", 1), "ZodIssueCode": ("consts.ts", "variable", 2),
            "BB": ("flags.py", "constant", 2), "dd": ("flags.py", "variable", 1), "gz": ("pair.go", "variable", 4),
            "OTHER": ("Cfg.java", "constant", 2), "wrapped": ("lib/get.js", "variable", 5)}
    for name, (path, kind, line) in want.items():
        found = service.find_symbol(cb, name)["definitions"]
        assert [(d["path"], d["kind"], d["start_line"]) for d in found] == [(path, kind, line)], (name, found)
    assert service.find_symbol(cb, "CJSON_VERSION_MAJOR")["definitions"][0]["signature"] == "#define CJSON_VERSION_MAJOR 1"
    assert service.find_symbol(cb, "local")["definitions"] == [] == service.find_symbol(cb, "inner")["definitions"]
    for imported in ("Npm", "join", "Later"):  # a module's value is an import, not a definition
        assert service.find_symbol(cb, imported)["definitions"] == [], imported
    assert [d["start_line"] for d in service.find_symbol(cb, "HAS_Y")["definitions"]] == [5, 7]  # under try/except
    assert service.find_symbol(cb, "inner_local")["definitions"] == []  # a function's, however deep
    # The definition with its body before the header's prototype, whatever their paths' order.
    assert [(d["path"], d["start_line"]) for d in service.find_symbol(cb, "cJSON_Parse")["definitions"]] == [
        ("z_last/cjson.c", 1), ("cjson.h", 4)]
    assert [d["symbol"] for d in service.find_symbol(cb, "cJSON_bool", kind="type")["definitions"]] == ["cJSON_bool"]
    # Any type is a type to whoever asks (an agent's stand-in: `kind: type` found no Go struct, no Swift struct)
    assert [d["kind"] for d in service.find_symbol(cb, "spinlock", kind="type")["definitions"]] == ["class"]
    assert service.find_symbol(cb, "spinlock_t", kind="class")["definitions"] == []
    # The file that declares a name is found, however many files use it more (the kernel's container_of.h).
    write_tree(repo, {f"use_{i}.c": "".join(f"int f{i}_{j}(void) {{ return CJSON_VERSION_MAJOR + {j}; }}\n"
                                              for j in range(30)) for i in range(8)})
    service.build(cb, vectors=False)
    assert [d["path"] for d in service.find_symbol(cb, "CJSON_VERSION_MAJOR", limit=1)["definitions"]] == ["cjson.h"]
    outline = service.outline(cb, "gin.go")["symbols"]
    assert [(n["kind"], n["symbol"]) for n in outline] == [("constant", "abortIndex"), ("variable", "DebugPrintRouteFunc"),
                                                           ("function", "f")]


def test_a_fresh_mcp_server_answers_symbols_from_the_files_as_they_are(codii_home, tmp_path):
    """A new user's fresh server listed a deleted file's definition and missed a new function until a
    search started its watcher: the first symbol, reference or grep call of a codebase updates it."""
    repo = write_tree(tmp_path / "fresh", {"hooks.py": "def dispatch_hook(x):\n    return x\n",
                                           "app.py": "def run():\n    return 1\n"})
    service.build(service.open_codebase(repo), vectors=False)
    (repo / "hooks.py").unlink()
    (repo / "app.py").write_text("def run():\n    return 1\n\n\ndef mcp_new_fn():\n    return 2\n")

    async def run():
        async with server(codii_home) as s:  # watching on, as an agent's server runs
            found = await call(s, "find_symbol", path=str(repo), name="mcp_new_fn")
            assert [(d["path"], d["start_line"]) for d in found["definitions"]] == [("app.py", 5)]
            assert (await call(s, "find_symbol", path=str(repo), name="dispatch_hook"))["definitions"] == []

    asyncio.run(run())


def test_an_index_from_before_stored_definitions_says_so_until_its_build_reads_them(tmp_path, codii_home):
    """Schema 8 had no definitions table. Read-only, it is answered from an empty stand-in with a note;
    writable, it is upgraded, the note stays until a build has read every file again, then goes."""
    from codii_sql.storage.store import Store

    repo = write_tree(tmp_path / "old", {"app.py": "def handler(x):\n    return x\n\n\nLIMIT = 3\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    with Store(cb.db_path, create=False) as store:
        store.conn.execute("DROP TABLE definitions")
        store.conn.execute("DELETE FROM meta WHERE key = 'definitions_complete'")
        store.set_meta(schema_version=8)
    with refusing("create_schema"):
        old = service.find_symbol(cb, "handler")
        assert old["definitions"] == [] and "older codii-sql" in old["note"] and "codii-sql build" in old["note"]
        assert "older codii-sql" in service.find_references(cb, "LIMIT")["note"]
    upgraded = service.find_symbol(cb, "handler")  # migrated on open: every file waits for the next build
    assert upgraded["definitions"] == [] and "older codii-sql" in upgraded["note"]
    service.build(cb, vectors=False)
    now = service.find_symbol(cb, "LIMIT")
    assert [(d["path"], d["kind"], d["start_line"]) for d in now["definitions"]] == [("app.py", "constant", 5)]
    assert "note" not in now


def test_doctor_finds_and_deletes_definitions_whose_file_is_gone(tmp_path, codii_home):
    import apsw

    repo = write_tree(tmp_path / "doc", {"a.py": "def kept():\n    return 1\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    conn = apsw.Connection(str(cb.db_path))
    conn.execute("INSERT INTO definitions VALUES (999, 0, 0, 'ghost', 'ghost', 'function', 1, 2, 'def ghost():')")
    conn.close()

    def doctor(*flags):
        return json.loads(CliRunner().invoke(cli, ["doctor", str(repo), "--json", *flags]).stdout)

    assert [c["name"] for c in doctor("--check-only")["checks"] if not c["ok"]] == ["definitions match files"]
    assert [c["repaired"] for c in doctor()["checks"] if not c["ok"]] == ["repaired"]
    assert doctor("--check-only")["consistent"]
    assert service.find_symbol(cb, "ghost")["definitions"] == []
    assert [d["symbol"] for d in service.find_symbol(cb, "kept")["definitions"]] == ["kept"]


def test_a_name_as_it_is_imported_lists_the_definitions_of_its_last_part_and_says_so(poly):
    """`requests.get` is requests/api.py's get; `models.Model` django/db/models/base.py's Model: the
    qualified name matched nothing and the note did not say to try the short one."""
    out = service.find_symbol(poly, "somepkg.Session")
    assert [(d["path"], d["symbol"], d["match"]) for d in out["definitions"]] == [("py/session.py", "Session", "name")]
    assert "no definition is qualified as 'somepkg.Session'" in out["note"]
    assert service.find_symbol(poly, "Session.send")["definitions"][0]["match"] == "exact"  # found as asked: as before
    assert service.find_symbol(poly, "somepkg.no_such_thing")["definitions"] == []
    tail = service.find_symbol(poly, "requests.Session.send")  # the longest tail some symbol ends in first
    assert [(d["symbol"], d["match"]) for d in tail["definitions"]] == [("Session.send", "name")]
    assert "these are named 'Session.send'" in tail["note"]


def test_an_index_of_a_newer_codii_sql_says_to_upgrade(tmp_path, codii_home):
    """The version before definitions called an index with that table "not a codii-sql index"; a newer
    schema's tables are foreign to this one too: it says what made the file and what to do."""
    import apsw

    from codii_sql.errors import StorageError
    from codii_sql.storage.store import SCHEMA_VERSION, Store

    repo = write_tree(tmp_path / "new", {"a.py": "x = 1\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    conn = apsw.Connection(str(cb.db_path))
    conn.execute("CREATE TABLE tomorrow (x); UPDATE meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION + 1),))
    conn.close()
    for readonly in (False, True):
        with pytest.raises(StorageError, match=f"newer codii-sql \\(schema {SCHEMA_VERSION + 1}.*pip install -U"):
            Store(cb.db_path, create=False, readonly=readonly)
    out = CliRunner().invoke(cli, ["symbol", "x", "--path", str(repo), "--no-update"])
    assert out.exit_code == 1 and "newer codii-sql" in out.output and "Traceback" not in out.output


def test_definitions_and_uses_of_files_changed_since_the_build_are_marked_stale(tmp_path, codii_home):
    """A new user renamed pkg/new.py and `symbol brand_new_fn --no-update` still answered pkg/new.py, unmarked
    (search marks such results stale, grep says it could not read them)."""
    repo = write_tree(tmp_path / "s", {"pkg/new.py": "def brand_new_fn(x):\n    return x\n",
                                       "main.py": "from pkg.new import brand_new_fn\nbrand_new_fn(1)\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    assert [d["stale"] for d in service.find_symbol(cb, "brand_new_fn")["definitions"]] == [False]
    (repo / "pkg/new.py").rename(repo / "pkg/renamed.py")
    (repo / "main.py").write_text("from pkg.renamed import brand_new_fn\n\nbrand_new_fn(2)\n")
    old = service.find_symbol(cb, "brand_new_fn")
    assert [(d["path"], d["stale"]) for d in old["definitions"]] == [("pkg/new.py", True)]
    assert "changed or went since the index took it (pkg/new.py)" in old["note"]
    uses = service.find_references(cb, "brand_new_fn")
    assert [(f["path"], f["stale"]) for f in uses["files"]] == [("main.py", True)] and "changed or went" in uses["note"]
    fresh = service.find_symbol(cb, "brand_new_fn", update=True)
    assert [(d["path"], d["stale"]) for d in fresh["definitions"]] == [("pkg/renamed.py", False)]
    assert "changed or went" not in (fresh.get("note") or "")


def test_a_very_long_name_is_echoed_cut_and_a_prefix_search_says_starting_with(poly):
    long = "x" * 5000
    out = service.find_symbol(poly, long)
    assert len(out["name"]) == 201 and len(out["note"]) < 600
    assert "starting with 'Zz'" in service.find_symbol(poly, "Zz", prefix=True, kind="constant")["note"]
    with pytest.raises(UsageError) as refused:
        service.find_references(poly, "a%" + long)  # no identifier (a dash now joins a Lisp name)
    assert len(str(refused.value)) < 400


def test_rust_macros_are_macros_and_markdown_sections_a_kind_one_may_ask_for(tmp_path, codii_home):
    """A new user's `symbol join --kind macro` missed tokio's macro_rules! join (stored as a function), and
    `--kind section` was refused though sections are listed."""
    repo = write_tree(tmp_path / "k", {"lib.rs": "macro_rules! join {\n    ($a:expr) => { $a };\n}\n",
                                       "README.md": "# Guide\n\n## Install\n\nRun it.\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    assert [(d["kind"], d["symbol"]) for d in service.find_symbol(cb, "join", kind="macro")["definitions"]] == [
        ("macro", "join")]
    assert [(d["symbol"], d["match"]) for d in service.find_symbol(cb, "Install", kind="section")["definitions"]] == [
        ("Guide > Install", "qualified")]


def test_a_page_past_the_end_says_so_and_where_to_ask_from(poly):
    """A new user's agent asked find_references from offset 100,000 of 184 uses and get_file_outline from line
    99,999 of a 2,732-line file, and got empty answers without a word."""
    uses = service.find_references(poly, "send", offset=10_000)
    assert uses["files"] == [] and "offset 10000 is past the last of the" in uses["note"] and "offset=0" in uses["note"]
    outline = service.outline(poly, "py/session.py", start_line=99_999)
    assert outline["symbols"] == [] and "no definition starts at or after line 99999" in outline["note"]
    assert "past" not in (service.outline(poly, "py/session.py").get("note") or "")


RUST_IN_MACROS = """macro_rules! cfg_rt {
    ($($item:item)*) => { $( #[cfg(feature = "rt")] $item )* }
}

cfg_rt! {
    /// Runs a closure on a thread where blocking is fine.
    #[track_caller] // the caller's place in a panic
    pub fn spawn_blocking<F, R>(f: F) -> R
    where
        F: FnOnce() -> R,
    {
        f()
    }

    pub struct Blocking {
        id: u64,
    }
}

pub struct TcpListener;

impl TcpListener {
    cfg_net! {
        pub async fn bind(addr: &str) -> TcpListener {
            let _ = addr;
            TcpListener
        }
    }

    pub fn local_addr(&self) -> u16 {
        0
    }
}
"""


def test_rust_items_inside_a_macro_s_braces_are_definitions_at_their_lines(tmp_path, codii_home):
    """A new user's `symbol spawn_blocking` and `symbol TcpListener::bind` on tokio found nothing or another
    type's bind: tokio writes its API inside cfg_rt! { ... } and cfg_net! { ... }, a token tree to the grammar."""
    repo = write_tree(tmp_path / "t", {"src/lib.rs": RUST_IN_MACROS})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = {d["symbol"]: (d["kind"], d["start_line"], d["end_line"])
             for name in ("spawn_blocking", "Blocking", "bind", "local_addr")
             for d in service.find_symbol(cb, name)["definitions"]}
    # its doc and attribute with it (tokio::spawn lost #[track_caller] and its 150-line doc: tokens to the file's parse)
    assert found == {"spawn_blocking": ("function", 6, 13), "Blocking": ("class", 15, 17),
                     "TcpListener.bind": ("method", 24, 27), "TcpListener.local_addr": ("method", 30, 32)}, found
    outline = json.dumps(service.outline(cb, "src/lib.rs")["symbols"])
    assert "spawn_blocking" in outline and "TcpListener.bind" in outline
    hit = service.search(service.SearchRequest("spawn_blocking", service.SearchOptions(mode="bm25", limit=1),
                                               [str(repo)], update=False)).results[0]
    assert (hit.start_line, hit.end_line, hit.symbol) == (6, 13, "spawn_blocking")  # a chunk of its own


def test_a_php_name_with_its_namespace_finds_the_class_and_its_method(tmp_path, codii_home):
    """A new user's `symbol 'Monolog\\Handler\\StreamHandler'` found nothing, and `...::write` listed all 38
    `write` methods with StreamHandler's 14th: a PHP namespace qualifies a name as `.` does."""
    from support.trees import write_tree

    php = "<?php\nnamespace Monolog\\Handler;\n\nclass {cls}\n{{\n    public function write(array $r): void\n" \
          "    {{\n        echo $r;\n    }}\n}}\n"
    repo = write_tree(tmp_path / "php", {f"src/Handler/{c}.php": php.format(cls=c)
                                         for c in ("AHandler", "BHandler", "StreamHandler", "ZHandler")})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    for name in ("Monolog\\Handler\\StreamHandler", "\\Monolog\\Handler\\StreamHandler"):
        out = service.find_symbol(cb, name)
        assert [(d["symbol"], d["path"]) for d in out["definitions"]] == [("StreamHandler",
                                                                          "src/Handler/StreamHandler.php")], out
        assert f"no definition is qualified as '{name}'" in out["note"]
    method = service.find_symbol(cb, "Monolog\\Handler\\StreamHandler::write")["definitions"]
    assert [d["symbol"] for d in method] == ["StreamHandler.write"]


def test_a_private_name_asked_without_its_underscores_is_found_and_said_so(tmp_path, codii_home):
    """httpx's `_parse_header_links`: `find_symbol parse_header_links` found nothing, and the note's prefix
    search found nothing either (a new user's agent)."""
    repo = write_tree(tmp_path / "httpx", {
        "httpx/_utils.py": "def _parse_header_links(value):\n    return []\n\n\nclass Client:\n"
                           "    def __send_single(self, request):\n        return request\n",
        "httpx/_models.py": "def links(response):\n    return _parse_header_links(response)\n"})
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    cb = Codebase.open(repo)
    got = service.find_symbol(cb, "parse_header_links")
    assert [(d["path"], d["symbol"]) for d in got["definitions"]] == [("httpx/_utils.py", "_parse_header_links")]
    assert got["name"] == "parse_header_links" and "these are named '_parse_header_links'" in got["note"]
    member = service.find_symbol(cb, "Client.send_single")
    assert [d["symbol"] for d in member["definitions"]] == ["Client.__send_single"]
    assert service.find_symbol(cb, "parse_header")["definitions"] == []  # not a prefix search


def test_go_struct_fields_are_symbols_of_their_struct(tmp_path, codii_home):
    """An agent's `find_symbol Context.Errors` on gin got errorMsgs.Errors, another type's method, and
    `Context.Keys` nothing: a Go struct's fields were no declarations."""
    repo = write_tree(tmp_path / "g", {
        "context.go": "package gin\n\ntype Context struct {\n\t// Keys is a key/value pair for the request.\n"
                      "\tKeys map[string]any\n\n\tErrors errorMsgs\n\tX, Y int\n\t*Engine\n}\n",
        "errors.go": "package gin\n\ntype errorMsgs []string\n\nfunc (a errorMsgs) Errors() []string {\n\treturn a\n}\n",
    })
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    first = service.find_symbol(cb, "Context.Errors")["definitions"][0]
    assert (first["path"], first["symbol"], first["kind"], first["start_line"]) == ("context.go", "Context.Errors",
                                                                                   "variable", 7)
    keys = service.find_symbol(cb, "Context.Keys")["definitions"]
    assert [(d["symbol"], d["start_line"], d["end_line"]) for d in keys] == [("Context.Keys", 4, 5)]  # with its doc
    assert {d["symbol"] for d in service.find_symbol(cb, "Y")["definitions"]} == {"Context.Y"}


def test_ruby_attribute_macros_name_their_accessors(tmp_path, codii_home):
    """A new user's `symbol zone_default` on ActiveSupport found nothing: `attr_accessor :zone_default` (and Rails'
    `cattr_accessor`, `class_attribute`) names the class's accessors."""
    repo = write_tree(tmp_path / "rb", {"zone.rb": "class Zone\n  attr_accessor :zone_default, :other\n"
                                                   "  cattr_reader :logger\n  def initialize\n    attr :nope\n  end\nend\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = {d["symbol"]: (d["kind"], d["start_line"]) for name in ("zone_default", "other", "logger")
             for d in service.find_symbol(cb, name)["definitions"]}
    assert found == {"Zone.zone_default": ("variable", 2), "Zone.other": ("variable", 2), "Zone.logger": ("variable", 3)}
    assert service.find_symbol(cb, "nope")["definitions"] == []  # a call in a method defines no accessor


def test_a_function_s_body_comes_before_its_overload_stubs(tmp_path, codii_home):
    """`symbol command` on click listed its four 4-line @t.overload stubs before its 80-line implementation:
    of one file's definitions of one name, the longest comes first; other names keep their order."""
    stub = "@t.overload\ndef command(name: {}) -> Command:\n    ...\n\n\n"
    body = "def command(name=None, cls=None, **attrs):\n" + "".join(f"    x{i} = {i}\n" for i in range(12)) + "    return x0\n"
    repo = write_tree(tmp_path / "c", {"decorators.py": "import typing as t\n\n\n" + stub.format("str") + stub.format("None")
                                       + body + "\n\ndef group(name=None):\n    return command(name)\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = [(d["start_line"], d["end_line"]) for d in service.find_symbol(cb, "command")["definitions"]]
    assert found[0] == (14, 27) and sorted(found[1:]) == [(4, 6), (9, 11)], found


def test_an_ocaml_module_qualifies_by_its_file_and_a_contract_member_by_its_contract(tmp_path, codii_home):
    """OCaml's `hashtbl.ml` is the module `Hashtbl`: `symbol Hashtbl.create` listed every file's `create` by path
    (array.ml first). A Solidity contract's functions and events, a service's rpcs are found qualified, and refs
    counts a Clojure name with its dashes."""
    repo = write_tree(tmp_path / "ml", {
        "stdlib/array.ml": "let create n x = Array.make n x\n",
        "stdlib/hashtbl.ml": "(** A new table. *)\nlet create n =\n  ref []\n",
        "contracts/Vault.sol": "contract Vault {\n    event Deposited(uint256 amount);\n"
                               "    function deposit(uint256 amount) external {\n        emit Deposited(amount);\n    }\n}\n",
        "api/shop.proto": "syntax = \"proto3\";\nservice Shop {\n  rpc PlaceOrder (Order) returns (Order);\n}\n"
                          "message Order {\n  string id = 1;\n}\n",
        "src/core.clj": "(defn order-total [o] (reduce + o))\n(defn report [o]\n  (order-total o))\n",
        "src/clojure/set.clj": "(ns clojure.set)\n(defn join [xrel yrel] xrel)\n",
        "src/clojure/string.clj": "(ns clojure.string)\n(defn join [coll] (apply str coll))\n",
        "src/lists.erl": "-module(lists).\nfoldl(F, Acc, []) -> Acc.\n", "src/other.erl": "foldl(F, A, L) -> A.\n",
        "net/http/server.go": "package http\n\nvar ErrAbortHandler = errors.New(\"abort\")\n",
        "net/rpc/server.go": "package rpc\n\nvar ErrAbortHandler = 1\n",
        "lua/map.lua": "local M = {}\nfunction M:set(k, v)\n  self[k] = v\nend\nreturn M\n",
        "hs/Ops.hs": "module Ops where\n\n(<+>) :: Int -> Int -> Int\na <+> b = a + b\n\n"
                     "(<->) :: Int -> Int -> Int\na <-> b = a - b\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    found = service.find_symbol(cb, "Hashtbl.create")["definitions"]
    assert [(d["path"], d["start_line"], d["end_line"]) for d in found] == [("stdlib/hashtbl.ml", 1, 3)], found
    assert [d["kind"] for d in service.find_symbol(cb, "Vault.Deposited")["definitions"]] == ["type"]
    assert [(d["start_line"], d["end_line"]) for d in service.find_symbol(cb, "Vault.deposit")["definitions"]] == [(3, 5)]
    assert [d["symbol"] for d in service.find_symbol(cb, "PlaceOrder")["definitions"]] == ["Shop.PlaceOrder"]
    refs = service.find_references(cb, "order-total")
    assert [(f["path"], ln["line"]) for f in refs["files"] for ln in f["lines"]] == [("src/core.clj", 3)], refs
    # Erlang's `lists:foldl` and Go's `http.ErrAbortHandler` name a module and a package (helper 54: "no definition
    # is qualified as..."); Lua's `M:set` is found by `set` and `M.set` (it was by `M:set` alone)
    assert [d["path"] for d in service.find_symbol(cb, "lists:foldl")["definitions"]] == ["src/lists.erl"]
    assert [d["path"] for d in service.find_symbol(cb, "lists:foldl/3")["definitions"]] == ["src/lists.erl"]  # arity
    assert [d["path"] for d in service.find_symbol(cb, "http.ErrAbortHandler")["definitions"]] == ["net/http/server.go"]
    # helper 54: `symbol '(<+>)'` listed every operator (each was named `()`), and `<+>` was refused
    ops = [d["symbol"] for d in service.find_symbol(cb, "(<+>)")["definitions"]]
    assert ops == ["(<+>)"] == [d["symbol"] for d in service.find_symbol(cb, "<+>")["definitions"]], ops
    # helper 55: Clojure's namespace/name listed clojure/set.clj's join first
    assert [d["path"] for d in service.find_symbol(cb, "clojure.string/join")["definitions"]] == ["src/clojure/string.clj"]
    for name in ("set", "M.set", "M:set"):
        assert [d["symbol"] for d in service.find_symbol(cb, name)["definitions"]] == ["M:set"], name
