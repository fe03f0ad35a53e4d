"""refs counts every use in the index, reads the chunk texts in slices, and says when it stopped."""

from __future__ import annotations

import json
import re

import pytest

from click.testing import CliRunner
from support.trees import write_tree

from codii_sql.cli import cli
from codii_sql.service import references


def tree(tmp_path):
    """60 files, each with uses of kmalloc in several chunks, one defining it, one mentioning kmalloc_array only."""
    files = {f"drivers/d{i:02d}.c": "".join(
        f"static int probe_{i}_{j}(void)\n{{\n\tvoid *p = kmalloc({j}, GFP_KERNEL);\n\treturn p != 0;\n}}\n\n"
        for j in range(8)) for i in range(60)}
    files["mm/slab.c"] = "void *kmalloc(size_t size, int flags)\n{\n\treturn alloc(size, flags);\n}\n"
    files["mm/array.c"] = "void *f(void)\n{\n\treturn kmalloc_array(2, 8, 0);\n}\n"
    return write_tree(tmp_path / "kernel", files)


def rg_lines(repo, word: str) -> int:
    """What ``rg -nw WORD`` counts: lines holding the word."""
    pattern = re.compile(rf"\b{word}\b")
    return sum(1 for p in repo.rglob("*.c") for line in p.read_text().splitlines() if pattern.search(line))


def refs(repo, *args):
    res = CliRunner().invoke(cli, ["refs", "kmalloc", "--path", str(repo), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_refs_counts_every_use_and_pages_them(tmp_path, codii_home, monkeypatch):
    repo = tree(tmp_path)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    monkeypatch.setattr(references, "TEXT_SLICE", 7)  # many slices: the texts are never read at once

    whole = refs(repo, "--limit", "2000")

    assert whole["total"] == rg_lines(repo, "kmalloc") - 1 == 480  # every use; the definition is none
    assert whole["total_files"] == 60 and not whole["truncated"] and "stopped" not in whole["note"]
    pages, offset = [], 0
    while True:
        part = refs(repo, "--limit", "150", "--offset", str(offset))
        assert part["total"] == 480
        pages += [(f["path"], ln["line"]) for f in part["files"] for ln in f["lines"]]
        if "next_offset" not in part:
            break
        offset = part["next_offset"]
    assert pages == [(f["path"], ln["line"]) for f in whole["files"] for ln in f["lines"]]


def test_refs_says_when_it_stopped_counting(tmp_path, codii_home, monkeypatch):
    repo = tree(tmp_path)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    monkeypatch.setattr(references, "REFERENCE_CHUNKS", 40)

    part = refs(repo)

    assert part["truncated"] and part["stopped_after_chunks"] == 40 and part["chunks_holding"] > 40
    assert 0 < part["total"] < 480 and "stopped after reading 40 of the" in part["note"]
    text = CliRunner().invoke(cli, ["refs", "kmalloc", "--path", str(repo)]).output
    assert "stopped after reading 40 of the" in text


def test_an_offset_past_a_stopped_count_is_an_answer_over_mcp(tmp_path, codii_home, monkeypatch):
    """A new user's find_references {"name": "i", "offset": 1000000} on the kernel, where the count stopped
    at its chunk bound, crashed the tool (KeyError: 'next_offset'): an agent saw only 'Error executing tool'."""
    from codii_sql import service
    from codii_sql.mcp import symbol_tools

    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def f{i}(i):\n    return i + {i}\n" for i in range(6)})
    service.build(service.open_codebase(repo), vectors=False)
    monkeypatch.setattr(references, "REFERENCE_CHUNKS", 2)
    res = symbol_tools.find_references(path=str(repo), name="i", offset=1_000_000)
    assert not res.is_error and res.structured_content["truncated"], res.content[0].text
    assert "stopped after reading 2" in res.content[0].text


def test_a_stored_definition_is_no_use_and_nothing_is_parsed_at_question_time(tmp_path, codii_home, monkeypatch):
    """The build stores every definition (def.c's kmalloc), so refs drops its line without reading a file:
    the calls inside expressions are the uses, and no file is parsed when the question is asked."""
    repo = write_tree(tmp_path / "k", {
        "uses.c": "int a(void)\n{\n\tvoid *p = kmalloc(1, 0);\n\treturn kmalloc(2, 0) != p;\n}\n",
        "calls.c": "void b(void)\n{\n\tif (!kmalloc(3, 0))\n\t\tfree(kmalloc(4, 0));\n}\n",
        "def.c": "void *kmalloc(int size, int flags)\n{\n\treturn 0;\n}\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    import codii_sql.ingest.chunking.chunker as chunker
    monkeypatch.setattr(chunker, "parser_for", lambda language: pytest.fail("parsed at question time"))
    out = refs(repo)
    listed = {(f["path"], line["line"]) for f in out["files"] for line in f["lines"]}
    assert listed == {("uses.c", 3), ("uses.c", 4), ("calls.c", 3), ("calls.c", 4)}, listed
    assert out["total"] == 4 and "1 line(s) that only define 'kmalloc' left out" in out["note"], out["note"]


def test_a_definition_line_that_names_the_identifier_again_uses_it(tmp_path, codii_home):
    """A new user's `refs SerializeSeq` on serde missed 7 of rg's 26 lines: `impl<E> ser::SerializeSeq for
    SerializeSeq<E>` and `type SerializeSeq = Impossible<...>` each define it, and the first uses it too."""
    repo = write_tree(tmp_path / "s", {"lib.rs": (
        "pub trait SerializeSeq {\n    fn end(self);\n}\n\npub struct Tuple;\n\n"
        "impl SerializeSeq for Tuple {\n    fn end(self) {}\n}\n\n"
        "pub struct SerializeSeq2;\n\nmod private {\n    pub struct SerializeSeq<E>(E);\n\n"
        "    impl<E> super::SerializeSeq for SerializeSeq<E> {\n        fn end(self) {}\n    }\n}\n")})
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    res = CliRunner().invoke(cli, ["refs", "SerializeSeq", "--path", str(repo), "--json"])
    out = json.loads(res.output)
    listed = [line["line"] for f in out["files"] for line in f["lines"]]
    assert listed == [7, 16], out  # the trait's and the struct's own lines only define it


def test_symbol_and_refs_from_a_subfolder_keep_to_its_files(tmp_path, codii_home):
    """As search and grep do: a subfolder of an indexed codebase answers from its files alone (a new user
    asked from zod/packages/zod/src/v4 and got packages/bench first and the whole repository's count)."""
    repo = write_tree(tmp_path / "mono", {
        "pkg/a/core.py": "def helper(x):\n    return x\n\n\ndef use_a():\n    return helper(1)\n",
        "pkg/b/core.py": "def helper(x):\n    return x * 2\n\n\ndef use_b():\n    return helper(2) + helper(3)\n",
        "pkg/b/tail.py": "def tail():\n    return use_b()\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    sub = str(repo / "pkg" / "b")
    res = CliRunner().invoke(cli, ["symbol", "helper", "--path", sub, "--json"])
    assert res.exit_code == 0, res.output
    assert [d["path"] for d in json.loads(res.output)["definitions"]] == ["pkg/b/core.py"]
    res = CliRunner().invoke(cli, ["refs", "helper", "--path", sub, "--json"])
    out = json.loads(res.output)
    assert out["total"] == 1 and {f["path"] for f in out["files"]} == {"pkg/b/core.py"}, out  # lines
    whole = json.loads(CliRunner().invoke(cli, ["refs", "helper", "--path", str(repo), "--json"]).output)
    assert whole["total"] == 2 and "scope" not in whole
    # Nothing under the folder: the answer names its scope and what lies elsewhere, never "not in the index".
    other = str(repo / "pkg" / "a")
    found_none = CliRunner().invoke(cli, ["symbol", "use_b", "--path", other, "--json"])
    assert found_none.exit_code == 1  # as grep: a script's `if codii-sql symbol X` reads it (a new user's ask)
    missing = json.loads(found_none.output)
    assert missing["definitions"] == [] and missing["scope"] == "pkg/a", missing
    assert "under pkg/a/" in missing["note"] and "1 definition elsewhere" in missing["note"], missing["note"]
    assert "in the index" not in missing["note"]
    no_use = CliRunner().invoke(cli, ["refs", "use_b", "--path", other])
    assert no_use.exit_code == 1 and "(0 of 0 lines" in no_use.output, no_use.output
    unused = json.loads(CliRunner().invoke(cli, ["refs", "use_b", "--path", other, "--json"]).output)
    assert unused["total"] == 0 and unused["scope"] == "pkg/a" and "1 use elsewhere" in unused["note"], unused


def uses(repo, name):
    res = CliRunner().invoke(cli, ["refs", name, "--path", str(repo), "--json", "--limit", "2000"])
    assert res.exit_code == (0 if json.loads(res.output)["total"] else 1), res.output
    return sorted((f["path"], line["line"]) for f in json.loads(res.output)["files"] for line in f["lines"])


def test_uses_as_rg_finds_them_in_long_lines_shell_variables_gnu_c_and_typescript_signatures(tmp_path, codii_home):
    """A new user's checks against `rg -nw`: a long line's piece cut after `alpha_` hid alpha_beta_gamma and
    showed beta_gamma; `$OUTDIR` was no use of OUTDIR; GNU C's name line under `static int`, TypeScript's
    `declare function`, overloads and interface methods were counted as uses."""
    words = [f"w{i}" for i in range(700)]
    long_line = "data = [" + ", ".join(words[:118] + ["alpha_beta_gamma_delta_epsilon"] + words[118:]) + "]\n"  # cut at `alpha_`
    repo = write_tree(tmp_path / "r", {
        "long.py": long_line,
        "build.sh": 'OUTDIR=/tmp/out\nmkdir -p "$OUTDIR"\necho ${OUTDIR}\n',
        "timing.c": "static int\ncgt_works_p(void)\n{\n\treturn 1;\n}\n\nint main(void)\n{\n\treturn cgt_works_p();\n}\n",
        "api.d.ts": "export declare function setErrorMap(m: number): void;\n",
        "over.ts": "function over(a: string): void;\nfunction over(a: number): void;\nfunction over(a: any) {\n"
                   "  return a;\n}\nover(1);\ninterface Fetcher {\n  fetchIt(url: string): void;\n}\n"
                   "declare const f: Fetcher;\nf.fetchIt('x');\n",
        "use.ts": "import { setErrorMap } from './api';\nsetErrorMap(1);\n",
        # the name only at the end: a field's line mentioning `client->x` was the signature (an agent's, on redis)
        "bench.c": "typedef struct _client {\n    int fd;\n    size_t n; /* client->n */\n} *client;\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    assert uses(repo, "alpha_beta_gamma_delta_epsilon") == [("long.py", 1)]
    assert uses(repo, "beta_gamma_delta_epsilon") == []
    assert uses(repo, "OUTDIR") == [("build.sh", 1), ("build.sh", 2), ("build.sh", 3)]  # as rg -nw
    assert uses(repo, "cgt_works_p") == [("timing.c", 9)]
    assert uses(repo, "setErrorMap") == [("use.ts", 1), ("use.ts", 2)]
    assert uses(repo, "over") == [("over.ts", 6)]
    assert uses(repo, "fetchIt") == [("over.ts", 11)]
    found = CliRunner().invoke(cli, ["symbol", "cgt_works_p", "--path", str(repo), "--json"])
    assert [(d["start_line"], d["signature"]) for d in json.loads(found.output)["definitions"]] == [(1, "cgt_works_p(void)")]
    typed = CliRunner().invoke(cli, ["symbol", "client", "--kind", "type", "--path", str(repo), "--json"])
    assert {d["signature"] for d in json.loads(typed.output)["definitions"]} == {"typedef struct _client {"}


def test_refs_exits_0_when_its_reader_stops_early(tmp_path, codii_home):
    """`refs err | head -1` exited 1 with nothing said (grep already exited as rg)."""
    import os
    import subprocess
    import sys

    from support.trees import REPO_ROOT

    repo = write_tree(tmp_path / "r", {"a.py": "".join(f"err_{i} = err + '{'x' * 300}'\n" for i in range(1500))})
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    piped = subprocess.run(f"'{sys.executable}' -m codii_sql.cli refs err --limit 2000 --no-update | head -1; "
                           "echo \"${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash", cwd=repo, env=env,
                           capture_output=True, text=True)
    assert piped.stdout.splitlines()[-1] == "0" and "Error" not in piped.stderr, piped


def test_a_use_is_on_word_boundaries_as_rg_w_has_them_wherever_it_lies_in_a_chunk():
    """The tally searches a chunk once and tests the character before each hit by hand: a name inside a
    longer word (letters of any script, digits, `_`) is no use; one after `$`, `.`, at the chunk's start or on
    its last line without a line break is; two uses on one line count once."""
    content = ("kmalloc(1);\n"  # the chunk's first character
               "x = ékmalloc + _kmalloc + 2kmalloc + kmalloc_array;\n"  # inside longer words only
               "y = $kmalloc + obj.kmalloc(kmalloc);\n"  # two uses, one line
               "\n"
               "return kmalloc")  # the last line, no line break after it
    tally = references._Tally("kmalloc", 0, 100, set())
    tally.add("a.c", "source", 10, content)
    tally.close()
    expected = [i for i, line in enumerate(content.split("\n"), 10) if re.search(r"(?<!\w)kmalloc(?!\w)", line)]
    assert [n for _, _, n, _ in tally.window] == expected == [10, 12, 14]
    assert tally.total == 3 and tally.window[2][3] == "return kmalloc"


def test_a_use_in_a_notebook_cell_stored_as_one_string_is_on_that_strings_line(tmp_path, codii_home):
    """nbformat may store a cell's source as one JSON string: its lines are all on that string's file line,
    as every listing numbers them; refs added the line's place in the cell and pointed past the cell."""
    cells = [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
              "source": "class Widget:\n    def spin(self):\n        return frobnicate(2)\n"},
             {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
              "source": ["def frob():\n", "    return frobnicate(3)\n"]}]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    repo = write_tree(tmp_path / "nb", {"nb.ipynb": text})
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    rows = text.splitlines()
    expected = [next(i for i, row in enumerate(rows, 1) if '"source": "class Widget' in row),
                next(i for i, row in enumerate(rows, 1) if "return frobnicate(3)" in row)]
    res = CliRunner().invoke(cli, ["refs", "frobnicate", "--path", str(repo), "--json"])
    assert [line["line"] for f in json.loads(res.output)["files"] for line in f["lines"]] == expected


def test_lisp_and_ruby_names_are_identifiers_with_their_own_boundaries(tmp_path, codii_home):
    """A new user's `refs magit-git-string`, `refs 'blank?'` and `refs 'eager_load!'` were refused as "not an
    identifier". A dash is then part of the name: `magit-git-string-p` is another one."""
    repo = write_tree(tmp_path / "r", {
        "magit-git.el": "(defun magit-git-string (&rest args)\n  (car args))\n\n"
                        "(defun magit-rev (x)\n  (magit-git-string \"rev-parse\" x))\n\n"
                        "(defun magit-git-string-p (x)\n  (stringp (magit-git-string x)))\n",
        "blank.rb": "class Object\n  def blank?\n    respond_to?(:empty?) ? !!empty? : !self\n  end\nend\n\n"
                    "def check(x)\n  return if x.blank?\n  x.nonblank? || x.blank?.to_s\nend\n",
    })
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0

    def lines(name):
        res = CliRunner().invoke(cli, ["refs", name, "--path", str(repo), "--json"])
        assert res.exit_code == 0, res.output
        return [(f["path"], ln["line"]) for f in json.loads(res.output)["files"] for ln in f["lines"]]

    assert lines("magit-git-string") == [("magit-git.el", 5), ("magit-git.el", 8)]  # not its definition, not -p
    assert lines("blank?") == [("blank.rb", 8), ("blank.rb", 9)]  # not nonblank?
    refused = CliRunner().invoke(cli, ["refs", "a b", "--path", str(repo)])
    assert refused.exit_code != 0 and "not an identifier" in refused.output
