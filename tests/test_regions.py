"""Files that hold other languages, on real files, real tree-sitter and a real index: notebooks by
cell, Vue/Svelte scripts by their grammar, extension-less scripts by their ``#!`` line."""

from __future__ import annotations

import base64
import json
import os

import pytest
from click.testing import CliRunner
from support.trees import write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.languages import detect_language
from codii_sql.storage.store import Store

#: A notebook as nbformat writes it, with outputs that must not be indexed: a 200 KB PNG, a
#: text result, execution counts and kernel metadata.
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Loading the survey\n", "\n", "We read the raw frame first."]},
        {"cell_type": "code", "execution_count": 3, "metadata": {}, "source": [
            "import pandas as pd\n", "\n", "\n", "class SurveyLoader:\n", "    def load_frame(self, path):\n",
            "        return pd.read_csv(path)\n"],
         "outputs": [
             {"output_type": "display_data", "metadata": {},
              "data": {"image/png": base64.b64encode(os.urandom(150_000)).decode() + "\n",
                       "text/plain": ["<Figure size 640x480 with 1 Axes> zanzibarquux\n"]}},
             {"output_type": "execute_result", "execution_count": 3, "metadata": {},
              "data": {"text/plain": ["'zanzibarquux result'"]}}]},
        {"cell_type": "code", "execution_count": 4, "metadata": {}, "outputs": [],
         "source": "def weighted_mean(values, weights):\n    total = sum(weights)\n    return sum(v * w for v, w in zip(values, weights)) / total\n"},
        {"cell_type": "raw", "metadata": {}, "source": ["raw cell rawcellword"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                 "language_info": {"name": "python", "version": "3.12.1"}},
    "nbformat": 4, "nbformat_minor": 5,
}

VUE = """\
<template>
  <button @click="increment">{{ label }}</button>
</template>

<script setup lang="ts">
import { ref } from "vue"

const count = ref(0)

function increment(): void {
  count.value += 1
  console.log("clicked", count.value)
}
</script>

<style scoped>
button { color: tomato; }
</style>
"""

SVELTE = """\
<script context="module">
  export function preloadProfile(id) {
    return fetch(`/api/profile/${id}`).then((r) => r.json())
  }
</script>

<script>
  let name = "world"
  function greetVisitor() { return `hello ${name}` }
</script>

<h1>Hello {name}</h1>
"""


def chunk_rows(cb, path):
    with Store(cb.db_path, create=False) as store:
        return [dict(zip(("start_line", "end_line", "start_byte", "end_byte", "kind", "symbol", "language", "content"), r))
                for r in store.conn.execute("SELECT start_line, end_line, start_byte, end_byte, kind, symbol, language, "
                                            "content FROM chunks WHERE path = ? ORDER BY start_line", (path,))]


def bm25(cb, query, **kw):
    return service.search(service.SearchRequest(query, service.SearchOptions(mode="bm25", **kw), [str(cb.root)],
                                                db=str(cb.db_path))).results


def test_a_notebook_is_indexed_by_its_cells_with_lines_of_the_file(tmp_path):
    text = json.dumps(NOTEBOOK, indent=1) + "\n"
    assert len(text) > 200_000  # one 200 KB line of outputs: no "minified" skip
    repo = write_tree(tmp_path / "nb", {"analysis.ipynb": text, "broken.ipynb": '{"cells": [ oops\n"def lost():"\n',
                                        ".codii.yaml": "max_file_bytes: 100000\n"})  # the notebook file is larger
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    lines = text.split("\n")
    chunks = chunk_rows(cb, "analysis.ipynb")
    assert {c["language"] for c in chunks} == {"python"}
    by_symbol = {c["symbol"]: c for c in chunks}
    loader, mean = by_symbol["SurveyLoader"], by_symbol["weighted_mean"]
    assert loader["content"].startswith("import pandas as pd\n") and "def load_frame(self, path):" in loader["content"]
    assert lines[loader["start_line"] - 1].strip() == '"import pandas as pd\\n",'
    assert lines[loader["end_line"] - 1].strip() == '"        return pd.read_csv(path)\\n"'
    assert text.encode()[loader["start_byte"]:loader["end_byte"]].decode().strip().startswith('"import pandas')
    # A one-string source: every line of the cell sits on the file row of that string.
    assert mean["start_line"] == mean["end_line"] and lines[mean["start_line"] - 1].strip().startswith('"source": "def weighted_mean')
    assert by_symbol["Loading the survey"]["kind"] == "section"
    assert all("zanzibarquux" not in c["content"] and "rawcellword" not in c["content"] for c in chunks)
    assert not bm25(cb, "zanzibarquux") and not bm25(cb, "iVBOR")  # outputs are not searchable
    cells = [(c["start_line"], c["end_line"]) for c in chunks]
    assert cells == sorted(cells) and all(a[1] < b[0] for a, b in zip(cells, cells[1:]))  # none spans two cells

    # Shown line numbers are file lines: the one-string cell's three lines all sit on its row.
    shown = CliRunner().invoke(cli, ["search", "weighted_mean", "--path", str(repo), "--mode", "bm25", "--limit", "1"])
    numbers = [line.split()[0] for line in shown.stdout.splitlines()[1:4]]
    assert numbers == [str(mean["start_line"])] * 3, shown.stdout

    found = bm25(cb, "load_frame", language="python")
    assert found[0].path == "analysis.ipynb" and found[0].start_line == loader["start_line"]
    broken = chunk_rows(cb, "broken.ipynb")  # invalid JSON: line windows of the raw text
    assert [c["kind"] for c in broken] == ["text"] and "def lost" in broken[0]["content"]

    outline = service.outline(cb, "analysis.ipynb")
    assert outline["language"] == "python"
    got = [(d["symbol"], d["signature"], [c["symbol"] for c in d["children"]]) for d in outline["symbols"]]
    assert got == [("Loading the survey", "We read the raw frame first.", []),  # as for a .md file
                   ("SurveyLoader", "class SurveyLoader:", ["SurveyLoader.load_frame"]),
                   ("weighted_mean", "def weighted_mean(values, weights):", [])]
    assert [lines[d["start_line"] - 1].strip()[:20] for d in outline["symbols"]] == [
        '"# Loading the surve', '"class SurveyLoader:', '"source": "def weigh']
    [d] = service.find_symbol(cb, "load_frame")["definitions"]
    assert (d["path"], d["start_line"], d["signature"]) == ("analysis.ipynb", loader["start_line"] + 4,
                                                           "def load_frame(self, path):")


def test_a_notebook_whose_cells_exceed_the_cap_is_skipped(tmp_path):
    big = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x = 1\n"] * 30_000}],
           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    repo = write_tree(tmp_path / "nb", {"big.ipynb": json.dumps(big, indent=1), ".codii.yaml": "max_file_bytes: 100000\n"})
    cb = service.open_codebase(repo)
    report = service.build(cb, vectors=False)
    assert report.skipped.get("too-large") == 1 and not chunk_rows(cb, "big.ipynb")


@pytest.mark.parametrize(("path", "content", "symbols"), [
    ("web/Counter.vue", VUE, {"increment": "function"}),
    ("web/Profile.svelte", SVELTE, {"preloadProfile": "function", "greetVisitor": "function"}),
])
def test_component_scripts_are_chunked_by_their_grammar_and_the_rest_by_lines(tmp_path, path, content, symbols):
    repo = write_tree(tmp_path / "app", {path: content})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    chunks = chunk_rows(cb, path)
    lines = content.split("\n")
    for c in chunks:  # lines and bytes point into the component file
        assert content.encode()[c["start_byte"]:c["end_byte"]].decode() == c["content"]
        assert c["content"].split("\n")[0] == lines[c["start_line"] - 1]
    spans = [(c["start_line"], c["end_line"]) for c in chunks]
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # no overlap between scripts and the rest
    assert {c["symbol"]: c["kind"] for c in chunks if c["symbol"]} == symbols
    assert {c["kind"] for c in chunks} == {"text", "function"}
    assert any("<style" in c["content"] or "<h1>" in c["content"] for c in chunks if c["kind"] == "text")
    name = next(iter(symbols))
    assert bm25(cb, name)[0].path == path
    outline = {d["symbol"]: (d["kind"], d["start_line"]) for d in service.outline(cb, path)["symbols"]
               if d["kind"] != "variable"}  # module bindings (`const count = ref(0)`) are listed too
    assert {s: k for s, (k, _) in outline.items()} == symbols
    assert all(f"function {s}" in lines[line - 1] for s, (_, line) in outline.items())
    [d] = service.find_symbol(cb, name)["definitions"]
    assert (d["path"], d["start_line"]) == (path, outline[name][1])


def test_a_vue_options_api_method_gets_its_symbol():
    from codii_sql.ingest.chunking.regions import index_source, read_source

    vue = '<template><p/></template>\n<script lang="tsx">\nexport default {\n  methods: {\n' \
          '    save(): void { persist(this.form) }\n  },\n}\n</script>\n'
    chunks = index_source(read_source("Form.vue", vue))[0]
    assert [(c.start_line, c.kind, c.symbol) for c in chunks] == [(1, "text", None), (3, "function", "save"),
                                                                  (8, "text", None)]


@pytest.mark.parametrize(("first_line", "language"), [
    ("#!/usr/bin/env python3", "python"), ("#!/usr/bin/env -S python3 -u", "python"),
    ("#!/usr/bin/python3.12", "python"), ("#! /bin/sh", "bash"), ("#!/bin/zsh -e", "bash"),
    ("#!/usr/bin/env dash", "bash"), ("#!/usr/bin/env node", "javascript"), ("#!/usr/bin/env ts-node", "typescript"), ("#!/usr/bin/env -S deno run", "javascript"),
    ("#!/usr/local/bin/bun", "javascript"), ("#!/usr/bin/env ruby", "ruby"), ("#!/usr/bin/perl -w", "perl"),
    ("#!/usr/bin/env awk", None), ("# not a shebang", None),
])
def test_shebang_names_the_language_of_a_file_without_extension(first_line, language):
    assert detect_language("bin/tool", first_line) == language
    assert detect_language("bin/tool.cfg", first_line) == "ini"  # an extension wins
    assert detect_language("Makefile", first_line) == "make"  # and so does a known name


def test_a_modeline_names_the_language_of_a_file_without_extension():
    """bash-completion's scripts have no ``#!`` line: 134 of 135 files were text, `symbol _apt` found nothing."""
    apt = "# Debian apt(8) completion                             -*- shell-script -*-\n\n_apt()\n{\n    :\n}\n"
    assert detect_language("completions/apt", apt.split("\n", 1)[0], apt) == "bash"
    vim = "_x_module()\n{\n    :\n}\ncomplete -F _x_module x\n\n# ex: filetype=sh\n"
    assert detect_language("completions/x", vim.split("\n", 1)[0], vim) == "bash"
    assert detect_language("bin/run", "# -*- mode: python; coding: utf-8 -*-", "") == "python"
    assert detect_language("bin/run", "# -*- coding: utf-8 -*-", "x = 1\n") is None  # no mode named
    assert detect_language("notes.txt", "-*- shell-script -*-", "") == "text"  # an extension wins
    from codii_sql.ingest.chunking.regions import index_source, read_source

    assert [c.symbol for c in index_source(read_source("completions/apt", apt))[0]] == ["_apt"]


def test_shebang_scripts_are_stored_and_chunked_in_their_language(tmp_path, monkeypatch):
    repo = write_tree(tmp_path / "tools", {
        "bin/deploy": "#!/usr/bin/env -S python3 -u\nimport sys\n\n\ndef push_release(tag):\n    print(tag)\n    return 0\n",
        "bin/backup": "#!/bin/sh\nset -e\n\nrotate_snapshots() {\n  ls /backups | tail -n 5\n}\n",
        "bin/serve": "#!/usr/bin/env node\nconst http = require('http')\n\nfunction startServer(port) {\n  return http.createServer().listen(port)\n}\n",
        "bin/report": "#!/usr/bin/perl -w\nuse strict;\nsub render_report { print \"ok\\n\"; }\n",
        "bin/notes": "plain words, no interpreter\n",
    })
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    expected = {"bin/deploy": ("python", "push_release"), "bin/backup": ("bash", "rotate_snapshots"),
                "bin/serve": ("javascript", "startServer"), "bin/report": ("perl", "render_report"), "bin/notes": (None, None)}
    for path, (language, symbol) in expected.items():
        chunks = chunk_rows(cb, path)
        assert {c["language"] for c in chunks} == {language}, path
        assert [c["symbol"] for c in chunks if c["symbol"]] == ([symbol] if symbol else []), path
    assert [c["kind"] for c in chunk_rows(cb, "bin/report")] == ["function"]  # Perl is read by its syntax too
    assert bm25(cb, "push_release", language="python")[0].path == "bin/deploy"
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["outline", "bin/backup"])
    assert res.exit_code == 0 and "rotate_snapshots" in res.output and "4-6" in res.output, res.output

