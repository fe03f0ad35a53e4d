"""Every skipped file can be seen, with its reason: build --json, status --skipped (text and JSON) and
the service's status dict, capped with a count."""

from __future__ import annotations

import json
import os
import subprocess

from click.testing import CliRunner
from support.answers import last_json
from support.trees import write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.ingest.report import SKIPPED_LISTED


def run(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def test_skipped_files_are_listed_with_their_reason(tmp_path):
    repo = write_tree(tmp_path / "repo", {
        "src/app.py": "def app():\n    return 1\n",
        ".env": "TOKEN=1\n",
        "deploy_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n",
        "blob.dat": b"\x00\x01\x02binary",
        "dist/app.min.js": "var a=1;",  # no package.json beside dist/: not build output, but minified
        "bundle.js": "/*! v1 */\n" + "var a=1;" * 5000 + "\n",
        "big.txt": "x" * (1 << 20) + "x",
        "node_modules/left-pad/index.js": "module.exports = 1;\n",
        ".ignore": "*.log\n",  # a .gitignore outside a work tree rules nothing, as for rg
        "debug.log": "noise\n",
        **{f"zz/c{i:03d}.pem": "-----BEGIN CERTIFICATE-----\n" for i in range(SKIPPED_LISTED)},
    })
    with open(os.path.join(os.fsencode(repo), b"bad\xff.py"), "wb") as fh:
        fh.write(b"x = 1\n")

    built = last_json(run("build", repo, "--json", "--no-vectors"))
    assert built["skipped"] == {"secret": SKIPPED_LISTED + 2, "binary": 1, "default-excluded": 1, "minified": 2,
                                "too-large": 1, "undecodable-name": 1, "ignored": 1}
    listing = built["skipped_files"]
    assert len(listing["files"]) == SKIPPED_LISTED and listing["more"] == sum(built["skipped"].values()) - SKIPPED_LISTED
    secrets = {f["path"] for f in listing["files"] if f["reason"] == "secret"}
    assert {".env", "deploy_key"} <= secrets  # by name and by content, listed first
    # Every reason has its turn (1,300 binary .mo files hid a new user's one FIFO), the rest counted by reason.
    assert {f["reason"] for f in listing["files"]} == set(built["skipped"])
    assert listing["more_by_reason"] == {"secret": listing["more"]}
    text = run("status", repo, "--skipped")
    assert f"and {listing['more']:,} more (secret {listing['more']:,})" in text and "undecodable-name" in text

    st = service.status(service.open_codebase(str(repo)))
    assert st["skipped_files"] == listing  # the key the MCP get_indexing_status reads
    text = run("status", repo, "--skipped")
    assert "secret               .env" in text and "deploy_key" in text
    assert f"and {listing['more']:,} more" in text
    assert "`status --skipped` lists them" in run("status", repo)
    assert json.loads(run("status", repo, "--skipped", "--json"))["skipped_files"] == listing
    assert "skipped_files" not in json.loads(run("status", repo, "--json"))


def test_every_reason_is_listed_when_few_files_are_skipped(tmp_path):
    repo = write_tree(tmp_path / "repo", {
        "src/app.py": "def app():\n    return 1\n", "blob.dat": b"\x00\x01", "bundle.js": "var a=1;" * 5000,
        "big.txt": "x" * (1 << 20) + "x", "node_modules/m.js": "1;\n", "logo.png": b"\x89PNG", "yarn.lock": "x\n",
    })
    with open(os.path.join(os.fsencode(repo), b"bad\xff.py"), "wb") as fh:
        fh.write(b"x = 1\n")
    os.mkfifo(repo / "pipe.py")
    run("build", repo, "--no-vectors")
    text = run("status", repo, "--skipped")
    shown = [line.split() for line in text.split("skipped files:")[1].strip().splitlines()]
    assert shown == [["too-large", "big.txt"], ["minified", "bundle.js"], ["binary", "blob.dat"],
                     ["undecodable-name", "bad\\xff.py"], ["not-regular-file", "pipe.py"],
                     ["binary-extension", "logo.png"], ["lock-file", "yarn.lock"], ["default-excluded", "node_modules/"]]


def test_build_and_status_name_the_folders_the_defaults_left_out(tmp_path):
    repo = write_tree(tmp_path / "repo", {
        "drivers/target/core.c": "int target_core(void) { return 0; }\n",  # source called target: indexed
        "crate/Cargo.toml": "[package]\nname = \"c\"\n", "crate/src/lib.rs": "pub fn f() {}\n",
        "crate/target/debug/build.rs": "fn main() {}\n",
        "node_modules/m.js": "1;\n",
    })
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # its .git/ is no folder to name on every build
    text = run("build", repo, "--no-vectors")
    assert "skipped folders: crate/target/ (build-output), node_modules/ (default-excluded) (" in text, text
    assert "build-output         crate/target/" in run("status", repo, "--skipped")
    found = json.loads(run("search", "target_core", "--path", repo, "--json", "--mode", "bm25", "--no-update"))
    assert [r["path"] for r in found["results"]] == ["drivers/target/core.c"]


def test_names_that_are_not_utf8_are_listed_when_they_appear_later_and_refused_in_one_line_as_arguments(tmp_path):
    """A folder or file whose name is no UTF-8 appearing after the first build reaches the skip list (a build
    that changed no indexed file kept the old list), and such a name given as an argument is one line of
    error, not a traceback from SQLite's text binding (grep PATH, search --glob, symbol, a grep pattern)."""
    repo = write_tree(tmp_path / "repo", {"ok.py": "def ok():\n    return 1\n"})
    run("build", repo, "--no-vectors")
    os.mkdir(os.path.join(os.fsencode(repo), b"dir_\xfe"))
    with open(os.path.join(os.fsencode(repo), b"dir_\xfe", b"inside.py"), "wb") as fh:
        fh.write(b"def inside():\n    return 2\n")
    with open(os.path.join(os.fsencode(repo), b"bad_\xff.py"), "wb") as fh:
        fh.write(b"def bad():\n    return 3\n")
    assert last_json(run("build", repo, "--json", "--no-vectors"))["skipped"] == {"undecodable-name": 2}
    listed = json.loads(run("status", repo, "--skipped", "--json"))["skipped_files"]["files"]
    assert sorted(f["path"] for f in listed) == ["bad_\\xff.py", "dir_\\xfe/"]

    bad_name = os.fsdecode(b"bad_\xff.py")
    for args in (["grep", "return", str(repo / bad_name), "--no-update"],
                 ["search", "return", "--path", str(repo), "--glob", bad_name, "--no-update"],
                 ["symbol", os.fsdecode(b"bad_\xff"), "--path", str(repo), "--no-update"],
                 ["grep", os.fsdecode(b"ret\xffurn"), str(repo), "--no-update"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.exception)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and "\\xff" in lines[0], (args, res.output)


def test_codii_sqls_own_folder_inside_the_root_is_left_out(tmp_path, monkeypatch):
    """A new user's $CODII_SQL_HOME inside the indexed folder: the index's own sidecar files (the clean
    check's stamp, the scan record) changed at every build, so the tree was never up to date and `watch`
    updated ~8 times a second. The folder is left out and listed."""
    repo = write_tree(tmp_path / "repo", {"a.py": "def selfh_fn():\n    return 1\n"})
    monkeypatch.setenv("CODII_SQL_HOME", str(repo / "idx"))
    first = last_json(run("build", repo, "--json", "--no-vectors"))
    assert first["skipped"] == {"default-excluded": 1} and first["files"] == 1, first
    again = last_json(run("build", repo, "--json", "--no-vectors"))
    assert (again["added"], again["modified"], again["unchanged"]) == (0, 0, 1), again
    assert json.loads(run("status", repo, "--json"))["status"] == "indexed"


def test_an_indexing_status_fits_its_budget_with_its_own_fields(tmp_path, codii_home):
    """A new user's get_indexing_status at max_tokens 100 answered 304 tokens: the skipped paths were fitted to
    the whole budget beside the status's ~300 tokens of fields. They now fit what the fields leave (and MCP's
    least budget for a status is 400)."""
    from codii_sql.codebase import Codebase
    from codii_sql.mcp.app import STATUS_MIN_TOKENS
    from codii_sql.search.budget import json_tokens
    from codii_sql.service.session import Session

    repo = write_tree(tmp_path / "r", {"a.py": "x = 1\n", **{f"keys/id_{i:03d}.pem": "-----BEGIN RSA PRIVATE KEY-----\n"
                                                             for i in range(60)}})
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    session = Session()
    try:
        whole = session.indexing_status(Codebase.open(repo))
        fitted = session.indexing_status(Codebase.open(repo), STATUS_MIN_TOKENS)
    finally:
        session.shutdown()
    assert len(whole["skipped_files"]["files"]) > len(fitted["skipped_files"]["files"]) >= 1
    assert json_tokens(fitted) <= STATUS_MIN_TOKENS, json_tokens(fitted)
    assert "left out to fit max_tokens=400" in fitted["note"]
