"""``.codii.yaml``'s chunk sizes, embedding batch and workers: validated, recorded, and in effect."""

from __future__ import annotations

import re

import pytest
from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.errors import UsageError
from codii_sql.ingest.config import CONFIG_FILE_NAME, load_config
from codii_sql.ingest.indexer import Indexer
from codii_sql.models.embedder import Embedder
from codii_sql.storage.store import Store

FUNCS = "".join(f"def handler_{i}(request, retries={i}):\n" + "".join(
    f"    value_{j} = request.args.get('key_{i}_{j}', default=retries)\n" for j in range(6))
    + f"    return value_0 or retries\n\n\n" for i in range(12))
IMPORTS = ("import os, sys, json, time, logging, hashlib, functools, itertools, collections, contextlib\n"
           "from pathlib import Path, PurePosixPath\n\n\n"
           "def load(path):\n    with open(Path(path)) as fh:\n        return json.load(fh)\n")
FILES = {"app/handlers.py": FUNCS, "app/boot.py": IMPORTS}


class Counting(Embedder):
    """The real model, with the size of each call it was given."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls = inner, []
        self.name, self.model_id, self.dims = inner.name, inner.model_id, inner.dims
        self.max_tokens, self.sha256 = inner.max_tokens, inner.sha256

    def embed(self, texts):
        self.calls.append(len(texts))
        return self.inner.embed(texts)


def chunks(repo) -> list[tuple[int, int, str]]:
    with Store(Codebase.open(repo).db_path, create=False) as store:
        return store.conn.execute("SELECT start_line, end_line, content FROM chunks WHERE path LIKE 'app/%' "
                                  "ORDER BY path, start_byte").fetchall()


def meta(repo) -> dict:
    with Store(Codebase.open(repo).db_path, create=False) as store:
        return store.meta()


@pytest.mark.parametrize("text, needle", [
    ("max_chunk_size: 50\n", "max_chunk_size must be an integer from 100 to 100,000 (characters), got 50"),
    ("min_chunk_size: -1\n", "min_chunk_size must be an integer from 0 to 10,000 (characters)"),
    ("max_chunk_size: 400\nmin_chunk_size: 400\n", "min_chunk_size (400) must be below max_chunk_size (400)"),
    ("embedding_batch_size: 0\n", "embedding_batch_size must be an integer from 1 to 4,096 (texts per model call)"),
    ("embedding_batch_size: '32'\n", "embedding_batch_size must be an integer"),
    ("workers: 65\n", "workers must be an integer from 0 to 64 (chunking processes, 0 = auto), got 65"),
    ("workers: true\n", "workers must be an integer"),
])
def test_each_setting_is_validated_in_one_line(tmp_path, text, needle):
    (tmp_path / CONFIG_FILE_NAME).write_text(text)
    with pytest.raises(ValueError) as info:
        load_config(tmp_path)
    assert needle in str(info.value) and CONFIG_FILE_NAME in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UsageError, match=re.escape(needle.split(" must")[0])):  # a build says the same
        Indexer(Codebase.open(tmp_path), None).plan(Store(tmp_path / "i.db"))


def test_chunk_sizes_cut_and_merge_by_characters_and_a_change_rechunks(tmp_path, embedder):
    repo = write_tree(tmp_path / "r", FILES)
    cb = Codebase.open(repo)
    first = Indexer(cb, embedder, vectors=False).build()
    default = chunks(repo)
    assert max(len(c) for *_, c in default) > 300 and first.reindexed == 0
    (repo / CONFIG_FILE_NAME).write_text("max_chunk_size: 300\nmin_chunk_size: 200\n")
    second = Indexer(cb, embedder, vectors=False).build()
    small = chunks(repo)
    assert second.reindexed == 2 and len(small) > len(default)  # a change of sizes re-chunks every file
    assert max(len(c) for *_, c in small) <= 300 and min(len(c) for *_, c in small) >= 200
    assert [(s, e) for s, e, _ in default[:2]] == [(1, 2), (5, 7)] and (small[0][0], small[0][1]) == (1, 7)
    assert meta(repo)["chunk_sizes"] == {"max_chunk_size": 300, "min_chunk_size": 200}
    assert Indexer(cb, embedder, vectors=False).build().reindexed == 0  # recorded: the next build keeps them
    (repo / CONFIG_FILE_NAME).unlink()
    assert Indexer(cb, embedder, vectors=False).build().reindexed == 2 and chunks(repo) == default


def test_embedding_batch_size_and_workers_are_used_and_recorded(tmp_path, embedder):
    files = {f"pkg/m{i:02d}.py": f"def f{i}(x):\n    return x * {i} + {i * i}\n" for i in range(70)}
    repo = write_tree(tmp_path / "r", {**files, CONFIG_FILE_NAME: "embedding_batch_size: 16\nworkers: 2\n"})
    cb = Codebase.open(repo)
    counting = Counting(embedder)
    report = Indexer(cb, counting).build()
    assert report.chunks_embedded == report.chunks == 71 and max(counting.calls) == 16  # .codii.yaml is a chunk too
    recorded = meta(repo)
    assert recorded["embedding_batch_size"] == 16 and "workers" not in recorded  # from the file, not an option
    Indexer(cb, counting, workers=1).build(force=True)
    assert meta(repo)["workers"] == 1  # an option is recorded and kept, as --ext and --no-vectors are
    with pytest.raises(UsageError, match="workers must be an integer from 0 to 64"):
        Indexer(cb, counting, workers=-1)


def test_a_search_after_a_typo_in_the_config_answers_from_the_index_and_says_why(tmp_path, codii_home):
    """A new user's max_chunk_size: 50 made every search with its update exit 2; the index it already
    had could answer. A first build still refuses the bad file."""
    import json as _json
    import subprocess
    import sys

    from support.trees import REPO_ROOT

    repo = write_tree(tmp_path / "r", FILES)
    env = {"CODII_SQL_HOME": str(codii_home), "CODII_SQL_BACKGROUND": "0", "PYTHONPATH": str(REPO_ROOT),
           "PATH": "/usr/bin:/bin"}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "codii_sql.cli", *args], capture_output=True, text=True,
                              env=env, timeout=300)

    (repo / CONFIG_FILE_NAME).write_text("max_chunk_size: 50\n")
    first = cli("search", "handler", "--path", str(repo), "--mode", "bm25")
    assert first.returncode == 2 and "max_chunk_size must be" in first.stderr
    (repo / CONFIG_FILE_NAME).unlink()
    assert cli("build", str(repo), "--no-vectors").returncode == 0
    (repo / CONFIG_FILE_NAME).write_text("max_chunk_size: 50\n")
    out = cli("search", "handler_3", "--path", str(repo), "--mode", "bm25", "--json")
    assert out.returncode == 0, out.stderr
    answer = _json.loads(out.stdout)
    assert answer["results"][0]["symbol"] == "handler_3"
    assert "max_chunk_size must be" in answer["note"] and "not updated" in answer["note"]
    # grep, outline, status and the file view read the index as it was built (a new user's typo refused
    # them all, and most MCP tools); status says the next build fails.
    (repo / CONFIG_FILE_NAME).write_text("unknown_key: 1\n")
    assert cli("grep", "--no-update", "def handler_3", str(repo / "app")).returncode == 0
    assert cli("outline", "app/handlers.py", "--path", str(repo)).returncode == 0
    # A script passing --no-update to every answering command (outline said "No such option", a new user).
    assert cli("outline", "app/handlers.py", "--path", str(repo), "--no-update").returncode == 0
    status = cli("status", str(repo), "--json")
    assert status.returncode == 0 and "unknown_key" in _json.loads(status.stdout)["config_error"], status.stderr
    from codii_sql.service.session import Session

    session = Session()
    try:
        cb = Codebase.open(repo)
        assert "unknown_key" in session.indexing_status(cb)["note"]
    finally:
        session.shutdown()
    # An answer from the last commit (MCP, HTTP) says why it may be behind the files: a new user's agent got
    # a confident "0 matching lines" for a line added since, no update being able to run.
    from codii_sql import service

    found = service.grep(service.GrepRequest(["def handler_3"], paths=[str(repo)], update=False))
    symbol = service.find_symbol(cb, "handler_3", update=False)
    for said in (found.note(lambda h: None), symbol["note"]):
        assert "unknown_key" in said and "may be behind the files" in said, said


def test_a_first_search_of_a_codebase_without_vectors_does_not_promise_them(tmp_path, codii_home):
    """A new user's `.codii.yaml` said `vectors: false`; the first search still said "the model embeds the
    chunks in the background"."""
    from click.testing import CliRunner

    from codii_sql.cli import cli

    root = write_tree(tmp_path / "r", {"a.py": "def count_cycles(t):\n    return 0\n", CONFIG_FILE_NAME: "vectors: false\n"})
    first = CliRunner().invoke(cli, ["search", "count cycles", "--path", str(root)])
    assert first.exit_code == 0 and "count_cycles" in first.stdout, first.output
    assert "vectors: false" in first.stderr and "in the background" not in first.stderr, first.stderr
