"""Portable shards: an index file searched and read alone, without the source it was built from."""

from __future__ import annotations

import json
import os
import shutil
import stat

from click.testing import CliRunner
from support.trees import SAMPLE, write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.codebase import Codebase


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def as_json(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def alone_copy(tmp_path, codii_home):
    """The sample repository built, its index copied out read-only, the source deleted."""
    repo = write_tree(tmp_path / "repo", SAMPLE)
    assert run("build", repo).exit_code == 0
    copy = tmp_path / "shelf" / "sample.db"
    copy.parent.mkdir()
    shutil.copy(Codebase.open(repo).db_path, copy)
    shutil.rmtree(repo)
    copy.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return copy


def test_an_index_file_alone_is_searched_read_only_from_its_stored_chunks(tmp_path, codii_home):
    copy = alone_copy(tmp_path, codii_home)
    before = sorted(os.listdir(copy.parent)), copy.stat().st_mtime_ns
    found = as_json(run("search", "retry with exponential backoff", "--db", copy, "--json"))
    assert found["results"][0]["symbol"] == "retry_with_backoff"
    assert all(r["stale"] is None for r in found["results"]) and "source" in found["notes"]
    assert found["codebase"] == str(copy)
    st = as_json(run("status", "--db", copy, "--json"))
    assert st["status"] == "indexed" and st["stale"] is None and st["files"] == 4
    assert as_json(run("stats", "--db", copy, "--json"))["chunks"] > 4
    symbol = as_json(run("symbol", "parse_header", "--db", copy, "--json"))
    assert [d["path"] for d in symbol["definitions"]] == ["app/parse.py"] and "stored chunks" in symbol["note"]
    assert [d["symbol"] for d in as_json(run("symbol", "send", "--db", copy, "--json"))["definitions"]] == \
        ["Session.send"]  # parsed from the stored text: too small for a chunk of its own
    refs = as_json(run("refs", "send", "--db", copy, "--json"))
    assert [ln["line"] for f in refs["files"] for ln in f["lines"]] == [22]  # self.send(...), not def send
    outline = as_json(run("outline", "app/http.py", "--db", copy, "--json"))
    assert [s["symbol"] for s in outline["symbols"]] == ["retry_with_backoff", "Session"]
    assert [c["symbol"] for c in outline["symbols"][1]["children"]] == ["Session.resolve_redirects", "Session.send"]
    assert (sorted(os.listdir(copy.parent)), copy.stat().st_mtime_ns) == before  # nothing written, no -wal/-shm
    session = service.Session()
    cb = service.open_codebase(str(copy))
    content = session.content(cb, "app/http.py", None, None)
    assert "def retry_with_backoff" in content["content"] and content["not_stored"] == [] or "not stored" in \
        content["note"]
    assert content["content"].split("\n")[0] == SAMPLE["app/http.py"].strip("\n").split("\n")[0].strip()
