"""The CLI through click's CliRunner: build, search (json, jsonl, batch), status, list, stats, clear, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from support.answers import last_json
from support.trees import REPO_ROOT, write_tree

from codii_sql.cli import cli
from codii_sql.codebase import Codebase


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def test_build_then_search_json(sample_repo):
    res = run("build", sample_repo, "--json")
    assert res.exit_code == 0, res.output
    report = last_json(res.output)
    assert report["files"] == 4 and report["added"] == 4
    res = run("search", "parse_header", "--path", sample_repo, "--json", "--limit", "3")
    out = json.loads(res.output)
    assert out["query"] == "parse_header" and out["codebase"] == str(sample_repo.resolve())
    first = out["results"][0]
    assert {"path", "start_line", "end_line", "score", "language", "kind", "symbol", "content", "stale"} <= set(first)
    assert first["path"] == "app/parse.py" and first["symbol"] == "parse_header" and first["stale"] is False


def test_search_builds_a_missing_index_and_prints_text(sample_repo):
    res = run("search", "follow redirects", "--path", sample_repo)
    assert res.exit_code == 0
    assert "app/http.py:" in res.output and "resolve_redirects" in res.output


def test_jsonl_and_filters(sample_repo):
    res = run("search", "redirects", "--path", sample_repo, "--jsonl", "--ext", ".md")
    lines = [json.loads(line) for line in res.output.splitlines()]
    assert lines and all(r["path"].endswith(".md") for r in lines)


def test_batch_queries_file(sample_repo, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text('{"id": "a", "query": "debounce"}\n{"id": "b", "query": "parse_header"}\nnot json\n'
                     '{"id": "c"}\n')
    res = run("search", "--path", sample_repo, "--queries-file", qfile, "--jsonl")
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["id"] for o in out[:2]] == ["a", "b"]
    assert out[0]["results"][0]["path"] == "web/util.js"
    assert "error" in out[2] and out[3]["id"] == "c" and '"query" string' in out[3]["error"]
    assert res.exit_code == 1 and "2 queries failed" in res.stderr
    whole = run("search", "--path", sample_repo, "--queries-file", qfile, "--json")
    def timeless(items):
        return [{k: v for k, v in item.items() if k != "seconds"} for item in items]

    assert timeless(json.loads(whole.stdout)) == timeless(out) and whole.exit_code == 1  # --json: one array
    alone = json.loads(run("search", "debounce", "--path", sample_repo, "--json").stdout)
    assert timeless([out[0]]) == timeless([{"id": "a", **alone}])  # each line is the answer `search --json` gives
    qfile.write_text('{"id": "a", "query": "debounce"}\n')
    assert run("search", "--path", sample_repo, "--queries-file", qfile, "--jsonl").exit_code == 0


def test_status_list_stats_clear(sample_repo):
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "not_indexed"
    run("build", sample_repo)
    st = json.loads(run("status", sample_repo, "--json").output)
    assert st["status"] == "indexed" and st["files"] == 4
    listed = json.loads(run("list", "--json").output)
    assert [r["root"] for r in listed] == [str(sample_repo.resolve())]
    stats = json.loads(run("stats", sample_repo, "--json").output)
    assert {r["language"] for r in stats["languages"]} >= {"python", "javascript", "markdown"}
    res = CliRunner().invoke(cli, ["clear", str(sample_repo), "--json"])
    assert res.exit_code == 2 and "--yes" in res.output  # --json never prompts, so it never deletes alone
    piped = CliRunner().invoke(cli, ["clear", str(sample_repo)], input="y\n")  # no terminal: no prompt
    assert piped.exit_code == 2 and "add --yes" in piped.output and "Aborted" not in piped.output
    assert json.loads(run("clear", sample_repo, "--json", "--yes").output)["removed"]
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "not_indexed"


def test_same_directory_through_other_spellings_is_one_codebase(sample_repo, tmp_path):
    run("build", sample_repo)
    link = tmp_path / "link"
    link.symlink_to(sample_repo)
    for spelling in (f"{sample_repo}/", link, sample_repo / "app" / ".."):
        assert json.loads(run("status", spelling, "--json").output)["status"] == "indexed"


def test_a_subfolder_searches_the_enclosing_index_kept_to_its_files(sample_repo, codii_home):
    run("build", sample_repo)
    indexes = sorted((codii_home / "indexes").glob("*.db"))
    out = json.loads(run("search", "parse header", "--path", sample_repo / "app", "--json").output)
    assert out["codebase"] == str(sample_repo.resolve()) and out["scope"] == "app"
    assert out["results"] and all(r["path"].startswith("app/") for r in out["results"])
    assert sorted((codii_home / "indexes").glob("*.db")) == indexes  # no second index was built
    st = json.loads(run("status", sample_repo / "app", "--json").output)
    # status from a subfolder tells of the index a search there uses (it said not_indexed: a new user's confusion)
    assert st["status"] == "indexed" and st["codebase"] == str(sample_repo.resolve()) and st["scope"] == "app", st
    res = CliRunner().invoke(cli, ["stats", str(sample_repo / "app")])
    assert res.exit_code == 1 and "lies inside the indexed codebase" in res.output
    res = CliRunner().invoke(cli, ["clear", str(sample_repo / "app"), "--yes"])
    assert res.exit_code == 0 and f"`codii-sql clear {sample_repo.resolve()}` deletes that one" in res.output
    assert sorted((codii_home / "indexes").glob("*.db")) == indexes  # and nothing was deleted
    (sample_repo / "build").mkdir()  # a folder of nothing indexed: say so, not just "no results"
    res = run("search", "parse header", "--path", sample_repo / "build", "--json", "--no-update")
    empty = json.loads(res.output[res.output.index("{"):])
    assert empty["results"] == [] and "no file under build/ is indexed" in empty["note"]
    text = CliRunner().invoke(cli, ["search", "parse header", "--path", str(sample_repo / "app")])
    assert f"searching the index of {sample_repo.resolve()}, files under app/ only" in text.output
    # A folder with its own index keeps it; one outside any index still gets its own.
    alone = json.loads(run("search", "parse header", "--path", sample_repo, "--json").output)
    assert "scope" not in alone and {r["path"].split("/")[0] for r in alone["results"]} > {"app"}


def test_a_subfolder_of_an_unindexed_git_repository_indexes_the_repository(sample_repo, codii_home):
    (sample_repo / ".git").mkdir()
    out = json.loads(run("search", "parse header", "--path", sample_repo / "app", "--json").output)
    assert out["codebase"] == str(sample_repo.resolve()) and out["scope"] == "app"
    assert out["results"] and all(r["path"].startswith("app/") for r in out["results"])
    assert len(list((codii_home / "indexes").glob("*.db"))) == 1
    whole = json.loads(run("search", "debounce", "--path", sample_repo, "--json", "--no-update").output)
    assert [r["path"] for r in whole["results"]][:1] == ["web/util.js"]  # the same index, all files


def test_recorded_filters_are_shown_kept_and_reset(sample_repo):
    only_md = last_json(run("build", sample_repo, "--ext", ".md", "--json").output)
    assert only_md["files"] == 1 and only_md["filters"] == {"extensions": [".md"], "ignore_patterns": []}
    text = run("build", sample_repo).output  # a plain build keeps the filter, and says so
    assert "filters kept for later builds: only .md" in text
    assert json.loads(run("status", sample_repo, "--json").output)["filters"] == only_md["filters"]
    assert 'filters: {"extensions": [".md"], "ignore_patterns": []}' in run("status", sample_repo).output
    res = CliRunner().invoke(cli, ["search", "retry", "--path", str(sample_repo), "--json"])
    assert "only .md files" in json.loads(res.stdout)["note"]
    reset = last_json(run("build", sample_repo, "--reset-filters", "--json").output)
    assert reset["files"] == 4 and reset["filters"] == {"extensions": [], "ignore_patterns": []}
    assert "filters" not in json.loads(run("status", sample_repo, "--json").output)
    assert "note" not in json.loads(run("search", "retry", "--path", sample_repo, "--json").output)
    both = last_json(run("build", sample_repo, "--ext", "py, MD", "--json").output)  # one comma list
    assert both["filters"]["extensions"] == [".py", ".md"] and both["files"] == 3
    before = Codebase.open(sample_repo).db_path.read_bytes()
    for ext in ("*", "src/", "*.py", ".p y"):  # a fresh user's --ext '*' indexed nothing, and kept that
        res = run("build", sample_repo, "--ext", ext)
        assert res.exit_code == 2 and "is not a file-name ending" in res.output and "Traceback" not in res.output
    assert Codebase.open(sample_repo).db_path.read_bytes() == before


def test_bad_input_is_one_line_without_traceback(sample_repo, tmp_path):
    for args in (["search", "x", "--path", tmp_path / "missing"],
                 ["search", "x", "--path", sample_repo / "app/parse.py"],
                 ["search", "   ", "--path", sample_repo],
                 ["search", "x", "--path", ""], ["build", " "],  # not the current directory
                 ["stats", tmp_path]):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code != 0
        assert "Traceback" not in res.output and res.output.strip().count("\n") == 0, res.output
        assert res.output.startswith("Error: ")
    run("build", sample_repo)
    res = CliRunner().invoke(cli, ["search", '*"', "--path", str(sample_repo)])
    assert res.exit_code == 2 and "no letters or digits" in res.output
    res = CliRunner().invoke(cli, ["workspace", "add", "web"])  # the hint names the subcommand's own help
    assert res.exit_code == 2 and "(see `codii-sql workspace add --help`)" in res.output, res.output


def test_a_folder_with_nothing_to_index_says_so_and_does_not_blame_filters(tmp_path, codii_home):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "logo.png").write_bytes(b"\x89PNG\r\n" + bytes(range(256)) * 8)
    res = CliRunner().invoke(cli, ["search", "logo", "--path", str(tmp_path / "bin")])
    assert res.exit_code == 0
    assert "no text files to index (skipped: 1 binary-extension)" in res.output and "filters" not in res.output


def test_db_alone_opens_the_recorded_codebase(sample_repo, tmp_path, monkeypatch):
    db = tmp_path / "copy" / "index.db"
    run("build", sample_repo, "--db", db)
    monkeypatch.chdir(tmp_path)
    out = json.loads(run("search", "parse_header", "--db", db, "--json", "--no-update").output)
    assert out["codebase"] == str(sample_repo.resolve()) and out["results"][0]["stale"] is False
    res = CliRunner().invoke(cli, ["status", "--db", str(tmp_path / "missing.db")])
    assert res.exit_code == 2 and "no such index file" in res.output


def test_inspect_takes_an_index_file_as_its_path_and_clear_says_how_to_pass_one(sample_repo, tmp_path, monkeypatch):
    """helper 62: `inspect x.db` searched the current folder for the query 'x.db'; `clear x.db` said to pass the
    folder that holds it (the index of that folder is another)."""
    db = tmp_path / "copy" / "index.db"
    run("build", sample_repo, "--db", db, "--no-vectors")
    monkeypatch.chdir(tmp_path)
    shown = json.loads(run("inspect", db, "--json").output)
    assert shown["snapshot"]["files"] == 4, shown
    res = CliRunner().invoke(cli, ["clear", str(db), "--yes"])
    assert res.exit_code == 2 and "is a file, not a directory: pass an index file as --db FILE" in res.output, res.output
    assert db.is_file()


def test_a_db_of_another_existing_codebase_is_refused_and_one_whose_root_moved_is_adopted(sample_repo, tmp_path):
    """A fresh user's `search --path slim --db gin.db` rewrote gin's index as Slim's, silently."""
    db = tmp_path / "a.db"
    assert run("build", sample_repo, "--db", db).exit_code == 0
    other = write_tree(tmp_path / "other", {"b.py": "def beta():\n    return 2\n"})
    before = db.read_bytes()
    for args in (["search", "beta", "--path", other, "--db", db], ["build", other, "--db", db],
                 ["status", other, "--db", db]):
        res = run(*args)
        assert res.exit_code == 2 and f"is the index of {sample_repo.resolve()}, not of {other}" in res.output, args
    assert db.read_bytes() == before
    moved = tmp_path / "moved"
    sample_repo.rename(moved)  # the recorded root is gone: the copied or moved .db is this codebase's
    out = json.loads(run("search", "parse_header", "--path", moved, "--db", db, "--json").output)
    assert out["codebase"] == str(moved) and out["results"][0]["path"] == "app/parse.py"
    assert run("clear", other, "--db", db, "--yes").exit_code == 0 and not db.exists()


def test_file_system_root_and_home_are_refused():
    res = CliRunner().invoke(cli, ["build", "/"])
    assert res.exit_code == 2 and "not a project folder" in res.output
    # A new user's `grep root /etc/passwd` indexed /etc (shadow included); `grep X /dev/null` indexed /dev.
    for args in (["grep", "root", "/etc/passwd"], ["grep", "X", "/dev/null"], ["build", "/proc/self"],
                 ["search", "x", "--path", "/tmp"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and "not a project folder" in res.output, (args, res.output)


def test_codii_sql_s_own_folder_is_no_codebase(codii_home, sample_repo):
    """A new user's `index_codebase` of $CODII_SQL_HOME indexed its logs and locks, and `watch` of it updated six
    times a second, each update writing what it watched."""
    (codii_home / "indexes").mkdir(exist_ok=True)
    for args in (["build", codii_home], ["watch", codii_home / "indexes"], ["grep", "x", codii_home]):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code == 2 and "codii-sql's own folder" in res.output, (args, res.output)
    assert CliRunner().invoke(cli, ["build", str(sample_repo), "--no-vectors"]).exit_code == 0  # others still are


def test_a_file_that_is_not_an_index_is_refused_and_left_untouched(sample_repo, tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    res = CliRunner().invoke(cli, ["status", "--db", str(empty)])
    assert res.exit_code != 0 and "not a codii-sql index" in res.output and empty.stat().st_size == 0


def test_a_reader_waits_for_the_schema_of_a_file_another_build_just_created(tmp_path):
    """Concurrent MCP index_codebase calls: one opened the file between its creation and its schema."""
    import threading

    from codii_sql.storage.store import Store

    db = tmp_path / "fresh.db"
    db.write_bytes(b"")  # created, no tables yet
    creator = threading.Timer(0.3, lambda: Store(db).close())  # commits the schema a moment later
    creator.start()
    with Store(db, create=False) as store:
        assert store.row("index_shape")["ours"] == 3
    creator.join()


def test_someone_elses_sqlite_file_is_never_written_or_deleted(sample_repo, tmp_path):
    import apsw

    theirs = tmp_path / "theirs.db"
    apsw.Connection(str(theirs)).execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
    # Tables named like ours but of another shape are someone else's too.
    lookalike = tmp_path / "lookalike.db"
    apsw.Connection(str(lookalike)).execute("CREATE TABLE meta(key, value); CREATE TABLE files(path, sha1)")
    keyvalue = tmp_path / "kv.db"  # a key/value table alone, even with keys like ours
    apsw.Connection(str(keyvalue)).execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                                           "INSERT INTO meta VALUES ('schema_version', '1.0'), ('root', 'alice')")
    for db in (theirs, lookalike, keyvalue):
        before = db.read_bytes()
        for args in (["search", "foo", "--path", str(sample_repo), "--db", str(db)],
                     ["build", str(sample_repo), "--db", str(db)], ["clear", "--db", str(db), "--yes"]):
            res = CliRunner().invoke(cli, args)
            assert res.exit_code != 0 and "not a codii-sql index" in res.output, args
            assert db.read_bytes() == before
    assert not list(tmp_path.glob("*.db?*"))  # no lock, WAL or SHM file left beside them


def test_clear_all_takes_no_path_and_deletes_nothing_while_one_index_is_busy(sample_repo, tmp_path):
    import filelock

    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("def a():\n    return 1\n")
    run("build", sample_repo)
    run("build", other)
    res = CliRunner().invoke(cli, ["clear", str(sample_repo), "--all", "--yes"])
    assert res.exit_code == 2 and "not both" in res.output
    with filelock.FileLock(str(Codebase.open(other).lock_path)):
        res = CliRunner().invoke(cli, ["clear", "--all", "--yes"])
        assert res.exit_code == 1 and "nothing was deleted" in res.output
    assert len(json.loads(run("list", "--json").output)) == 2
    assert len(json.loads(run("clear", "--all", "--yes", "--json").output)["removed"]) == 2


def test_no_update_never_builds_and_a_gone_folder_can_be_cleared(sample_repo, tmp_path):
    import shutil

    res = CliRunner().invoke(cli, ["search", "foo", "--path", str(sample_repo), "--no-update"])
    assert res.exit_code != 0 and "not indexed" in res.output and "Indexing" not in res.output
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "not_indexed"
    gone = shutil.copytree(sample_repo, tmp_path / "gone")
    run("build", gone)
    shutil.rmtree(gone)
    assert [r["status"] for r in json.loads(run("list", "--json").output)] == ["missing"]
    assert json.loads(run("clear", gone, "--yes", "--json").output)["removed"]
    assert run("list", "--json").output.strip() == "[]"


def test_inspect_an_unknown_file_and_a_capitalised_language(sample_repo):
    run("build", sample_repo)
    res = CliRunner().invoke(cli, ["inspect", str(sample_repo), "--file", ".env"])  # not a path mistake
    assert res.exit_code == 2 and "usually holds credentials" in res.output
    res = CliRunner().invoke(cli, ["inspect", str(sample_repo), "--file", "nope.py"])
    assert res.exit_code == 2 and "not in the index" in res.output
    info = json.loads(run("inspect", sample_repo, "--file", "app/parse.py", "--json").output)
    assert (info["file"]["role"], info["file"]["language"]) == ("source", "python") and info["chunks"], info
    assert "role=source" in run("inspect", sample_repo, "--file", "app/parse.py").output
    out = json.loads(run("search", "parse header", "--path", sample_repo, "--language", "Python", "--json").output)
    assert out["results"] and all(r["language"] == "python" for r in out["results"])
    docs = json.loads(run("search", "retries with backoff", "--path", sample_repo, "--role", "docs", "--json").output)
    assert {r["path"] for r in docs["results"]} == {"docs/guide.md"}
    # Under a budget the JSON is printed as the budget counted it: one line, not indented (6-12% more).
    fitted = run("search", "retry backoff parse header redirect", "--path", sample_repo, "--json", "--max-tokens",
                 "600").output
    assert fitted.count("\n") == 1 and len(fitted) / 4 <= 600 and json.loads(fitted)["budget"]["dropped"]


def test_bad_options_are_one_line_errors(sample_repo):
    for args in (["search", "-0", "--path", str(sample_repo)], ["search", "--limit", "999", "x"], ["nosuch"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and res.output.startswith("Error: ") and res.output.count("\n") == 1, res.output


def test_a_damaged_embedding_cache_is_replaced_with_one_warning(sample_repo, tmp_path, codii_home):
    import shutil

    cache = codii_home / "cache" / "embeddings.db"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not a database " * 4096)
    res = CliRunner().invoke(cli, ["build", str(sample_repo)])
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1 and "embedding cache" in warnings[0] and "damaged" in warnings[0], res.stderr
    # The cache works again: another codebase with the same files embeds nothing.
    clone = last_json(run("build", shutil.copytree(sample_repo, tmp_path / "clone"), "--json").stdout)
    assert clone["chunks_embedded"] == 0 and clone["vectors_reused"] == clone["chunks"] > 0
    assert "warnings" not in clone
    # A search that builds first says it too, in its note.
    cache.write_bytes(b"not a database " * 4096)
    out = json.loads(run("search", "retry", "--path", shutil.copytree(sample_repo, tmp_path / "third"),
                         "--json").stdout)
    assert "embedding cache" in out["note"] and "damaged" in out["note"]


def test_a_full_disk_during_build_is_a_write_failure_not_a_damaged_index(sample_repo, monkeypatch):
    import apsw
    from support.trees import write_tree

    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    write_tree(sample_repo, {f"more/m{i}.py": "".join(f"def more_{i}_{j}(x):\n    return x * {i} + {j}\n\n\n"
                                                       for j in range(10)) for i in range(6)})

    def full_disk(conn):  # SQLite's own SQLITE_FULL: the index may not grow past its current pages
        if conn.filename == str(db):
            pages = next(iter(conn.execute("PRAGMA page_count")))[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")

    monkeypatch.setattr(apsw, "connection_hooks", [full_disk])
    res = CliRunner().invoke(cli, ["build", str(sample_repo)])
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert res.output.startswith(f"Error: the disk is full writing {db}: free some space"), res.output
    assert "then run the command again" in res.output and "MCP" not in res.output and "damaged" not in res.output
    monkeypatch.setattr(apsw, "connection_hooks", [])
    assert json.loads(run("status", sample_repo, "--json").output)["files"] == 4  # the last committed state


def test_list_shows_a_damaged_index_with_its_real_size(sample_repo):
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    db.write_bytes(b"\x5a" * 2_200_000)  # overwritten: SQLite finds no database in it
    [row] = json.loads(run("list", "--json").output)
    assert (row["db"], row["status"], row["size_bytes"]) == (str(db), "damaged", 2_200_000) and "files" not in row
    text = run("list").output
    assert text.startswith(f"{db}  damaged  size=2.2 MB") and "None" not in text, text
    assert f"clear --db {db} --yes" in text
    assert json.loads(run("clear", "--db", db, "--yes", "--json").output)["removed"] == [str(db)]


def test_errors_under_json_are_json_on_stdout_too(sample_repo, tmp_path):
    for args in (("search", "", "--path", sample_repo, "--json"), ("status", tmp_path / "nowhere", "--json"),
                 ("search", "x", "--path", sample_repo, "--jsonl", "--limit", "0")):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code == 2 and res.stderr.startswith("Error: "), res.output
        out, said = json.loads(res.stdout), res.stderr[len("Error: "):].strip()
        assert out["exit_code"] == 2 and said.startswith(out["error"]), (out, said)
        assert said.endswith(out["hint"]) or out["hint"] == f"see `codii-sql {args[0]} --help`", (out, said)
    nowhere = json.loads(CliRunner().invoke(cli, ["status", str(tmp_path / "nowhere"), "--json"]).stdout)
    assert nowhere["error"].endswith("no such directory") and nowhere["hint"] == "pass the root folder of a codebase"
    plain = CliRunner().invoke(cli, ["status", str(tmp_path / "nowhere")])
    assert plain.stdout == "" and plain.exit_code == 2


def test_text_output_escapes_control_characters_in_names_and_lines(tmp_path):
    import re

    repo = tmp_path / "odd\x1b]0;T\x07dir"  # the codebase folder itself too
    repo.mkdir()
    (repo / "new\nline\a.py").write_text('def ring():\n    return "\x1b[31mred\x9b2J"\n')
    (repo / "calls.py").write_text('def caller():\n    """\x1b]0;title\x07"""\n    return ring()\n')
    (repo / "rtl\u202etxt.py").write_text('def ring_back():\n    return "abc\u202eRTL"\n')  # Trojan Source
    res = run("search", "ring", "--path", repo)
    assert res.exit_code == 0
    assert "new\\nline\\x07.py:1-2" in res.stdout and "\\x1b[31mred\\x9b2J" in res.stdout
    controls = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # not tab, newline
    for args in (("build", repo), ("build", repo, "--dry-run"), ("search", "ring", "--path", repo), ("status", repo),
                 ("list",), ("stats", repo),
                 ("inspect", repo), ("outline", repo / "new\nline\a.py"), ("symbol", "ring", "--path", repo),
                 ("refs", "ring", "--path", repo), ("outline", "gone\x1b[2J.py", "--path", repo),
                 ("search", "x", "--path", repo / "no\x1b[2Jwhere")):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert not controls.search(res.stdout + res.stderr), (args, res.stdout + res.stderr)
    raw = run("search", "ring", "--path", repo, "--json").output
    assert "\x9b" not in raw and "\\u009b" in raw  # C1 escaped in JSON too: the same string for a parser
    exact = json.loads(raw)["results"]
    assert any(r["path"] == "new\nline\a.py" and "\x1b[31mred\x9b2J" in r["content"] for r in exact), exact


def test_json_times_are_iso_8601_as_in_text(sample_repo):
    import datetime

    run("build", sample_repo)
    st = json.loads(run("status", sample_repo, "--json").output)
    [row] = json.loads(run("list", "--json").output)
    for when in (st["last_indexed_at"], row["last_indexed_at"]):
        assert abs(datetime.datetime.fromisoformat(when).timestamp() - time.time()) < 600, when
    assert f"last_indexed_at: {st['last_indexed_at']}" in run("status", sample_repo).output


def test_an_invalid_glob_is_a_usage_error_before_any_indexing(sample_repo, codii_home):
    for bad in ("./src/*", "!src/*", "/src/*"):
        res = CliRunner().invoke(cli, ["search", "retry", "--path", str(sample_repo), "--glob", bad, "--json"])
        assert res.exit_code == 2 and json.loads(res.stdout)["hint"] != "see `codii-sql search --help`", res.stdout
    for bad in ("[", "src/[a-", "[!]", "[]"):
        res = CliRunner().invoke(cli, ["search", "retry", "--path", str(sample_repo), "--glob", bad, "--json"])
        out = json.loads(res.stdout)
        assert res.exit_code == 2 and f"bad path glob {bad!r}" in out["error"] and "close every '['" in out["hint"], out
    assert not (codii_home / "indexes").exists() or not list((codii_home / "indexes").glob("*.db"))
    res = CliRunner().invoke(cli, ["search", "x", "--path", str(sample_repo), "--glob", "src\\*.py", "--json"])
    assert res.exit_code == 2 and "use '/' between folders" in json.loads(res.stdout)["hint"], res.stdout


def test_a_shell_negated_class_in_a_glob_negates(sample_repo):
    """SQLite's GLOB negates with ``^``; ``[!w]*/*`` (a shell's negation) matched only paths holding '!'."""
    run("build", sample_repo)
    for glob, found in (("[!a]*/*", ["web/util.js"]), ("[!w]*/*", []), ("[^w]*/*", [])):
        res = json.loads(run("search", "debounce", "--path", sample_repo, "--json", "--mode", "bm25", "--glob", glob).output)
        assert [r["path"] for r in res["results"]] == found, (glob, res)


def test_vector_mode_on_an_index_without_vectors_says_bm25_answered(sample_repo):
    """A new user's --mode vector over a --no-vectors index listed BM25 hits under a note saying vector
    mode could not find them."""
    assert CliRunner().invoke(cli, ["build", str(sample_repo), "--no-vectors"]).exit_code == 0
    res = CliRunner().invoke(cli, ["search", "retry with backoff", "--path", str(sample_repo), "--mode", "vector",
                                   "--json", "--no-update"])
    out = json.loads(res.stdout)
    assert out["results"] and all(r["bm25_rank"] is not None for r in out["results"])
    assert "with no vector in the index, vector mode answered by BM25" in out["note"], out["note"]


def test_a_query_of_one_character_words_says_bm25_cannot_match_it(sample_repo):
    """A new user's `search x --mode bm25` answered no result and no_good_match without a word."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    for query in ("x", "x = y"):
        res = run("search", query, "--path", sample_repo, "--mode", "bm25", "--no-update", "--json")
        assert res.exit_code == 0, res.output
        got = json.loads(res.output)
        assert "no word BM25 can match" in got["note"] and "grep -w" in got["note"], got
    got = json.loads(run("search", "retry", "--path", sample_repo, "--mode", "bm25", "--no-update", "--json").output)
    assert "no word BM25 can match" not in (got.get("note") or "")
    # helper 54: 9,000 words no chunk holds were told "used the 0 that say most ... no word of one character"
    words = " ".join(f"w{n * 7919 % 1_000_003}" for n in range(3000))
    got = json.loads(run("search", words, "--path", sample_repo, "--mode", "bm25", "--no-update", "--json").output)
    assert "none of those is in the index" in got["note"] and "one character" not in got["note"], got["note"]


def test_a_search_inside_a_submodule_uses_its_own_index(tmp_path):
    """A new user's `search --path libs/hist` (a git submodule, left out of the outer index as Git leaves
    it out) searched the outer index, found nothing and blamed the ignore rules. A repository of its own
    inside an indexed one is now a codebase of its own, indexed on first use; the outer folder is not."""
    import subprocess

    def git(cwd, *args):
        subprocess.run(["git", "-c", "user.email=a@b.c", "-c", "user.name=a", "-c", "protocol.file.allow=always",
                        *args], cwd=cwd, check=True, capture_output=True)

    inner = write_tree(tmp_path / "hist", {"src/backoff.py": "def exponential_backoff(n):\n    return 2 ** n\n"})
    git(inner, "init", "-q")
    git(inner, "add", ".")
    git(inner, "commit", "-qm", "backoff")
    outer = write_tree(tmp_path / "super", {"main.py": "print('outer')\n"})
    git(outer, "init", "-q")
    git(outer, "add", ".")
    git(outer, "commit", "-qm", "init")
    git(outer, "submodule", "add", "-q", str(inner), "libs/hist")
    built = last_json(run("build", outer, "--no-vectors", "--json").output)
    assert built["skipped"].get("nested-repository") == 1, built
    got = json.loads(run("search", "exponential backoff", "--path", outer / "libs" / "hist" / "src", "--mode", "bm25",
                         "--json").output)
    assert got["codebase"] == str(outer / "libs" / "hist") and got["results"][0]["path"] == "src/backoff.py", got
    got = json.loads(run("search", "outer", "--path", outer, "--mode", "bm25", "--no-update", "--json").output)
    assert got["codebase"] == str(outer) and [r["path"] for r in got["results"]] == ["main.py"], got


def test_ctrl_c_says_what_a_build_left_only_when_a_build_ran(sample_repo, monkeypatch):
    """A new user's Ctrl-C of a `grep --no-update` was told the index keeps what was committed and to run build."""
    import importlib

    from codii_sql.ingest.indexer import Indexer
    from codii_sql.service import builds

    assert CliRunner().invoke(cli, ["build", str(sample_repo), "--no-vectors"]).exit_code == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    grep_module = importlib.import_module("codii_sql.service.grep")  # service.grep is the function
    monkeypatch.setattr(grep_module, "search_codebase", interrupted)
    monkeypatch.setitem(builds._BUILDS, "started", 0)  # a command is a process of its own: this one built nothing
    grep = CliRunner().invoke(cli, ["grep", "--no-update", "retry", str(sample_repo)])
    assert grep.exit_code == 130 and grep.output.strip() == "Interrupted.", grep.output
    monkeypatch.setattr(Indexer, "build", interrupted)
    build = CliRunner().invoke(cli, ["build", str(sample_repo), "--force"])
    assert build.exit_code == 130 and "run build again" in build.output, build.output


def test_a_quoted_message_is_matched_as_written_and_weighs_as_its_words(tmp_path):
    """"what raises 'Too many files'": the stop words `too` and `files` were dropped, and the raise of
    "Too many fields" beside the question's other words ranked first (a new user, on starlette)."""
    from codii_sql.search.query import analyze, quoted_phrases

    assert quoted_phrases("""raises 'Too many files.' don't "use it" `parse_header` ''""") == [
        "too many files", "use it", "parse_header"]
    assert quoted_phrases("raises \u201cToo many files\u201d, \u2018use it\u2019 and users\u2019 files") == [
        "too many files", "use it"]
    assert analyze("what raises 'Too many files' when uploading", lambda t: {}).fts.startswith(
        '"too many files" OR "too many files" OR "too many files" OR "raises"')
    files = {"fields.py": 'def on_field(parser, count):\n    """Count a form field while uploading multipart form data."""\n'
                          '    if count > parser.max_fields:\n        raise ValueError("Too many fields.")\n',
             "files.py": 'def on_part(parser, count):\n    if count > parser.max_files:\n'
                         '        raise ValueError("Too many files.")\n'}
    files.update({f"util_{i}.py": f'def helper_{i}(files, fields):\n    """Keep many files and fields; too few is '
                                  f'fine."""\n    return [f for f in files if f in fields][:{i}]\n' for i in range(12)})
    repo = write_tree(tmp_path / "forms", files)
    run("build", repo, "--no-vectors")

    def top(query: str) -> str:
        return json.loads(run("search", query, "--path", repo, "--mode", "bm25", "--json").output)["results"][0]["path"]

    assert top("what raises Too many files when uploading multipart form") == "fields.py"  # the words alone
    assert top("what raises 'Too many files' when uploading multipart form") == "files.py"


def test_a_search_glob_s_double_star_matches_no_folder_too_and_a_folder_its_files(tmp_path):
    """gin's `--glob '**/render/**'` found nothing, as rg and .gitignore read it render/html.go; an agent's
    pathGlob 'tests/' found nothing either (new users)."""
    repo = write_tree(tmp_path / "gin", {
        "render/html.go": "package render\n\n// HTML renders an html template.\nfunc HTML(name string) string {\n"
                          "\treturn name\n}\n",
        "internal/render/json.go": "package render\n\n// JSON renders a json template.\nfunc JSON(v string) string {\n"
                                   "\treturn v\n}\n",
        "tests/render_test.go": "package tests\n\n// TestRender renders a template.\nfunc TestRender() {}\n",
        "context.go": "package gin\n\n// Render renders the template of a context.\nfunc Render() {}\n"})
    run("build", repo, "--no-vectors")

    def paths(glob: str) -> set[str]:
        out = run("search", "renders template", "--path", repo, "--mode", "bm25", "--glob", glob, "--json").output
        return {r["path"] for r in json.loads(out)["results"]}

    assert paths("**/render/**") == {"render/html.go", "internal/render/json.go"}
    assert paths("render/**") == {"render/html.go"}
    assert paths("**/*.go") == {"render/html.go", "internal/render/json.go", "tests/render_test.go", "context.go"}
    assert paths("internal/**/json.go") == {"internal/render/json.go"}
    assert paths("tests/") == {"tests/render_test.go"}
    assert paths("render/") == {"render/html.go", "internal/render/json.go"}  # a folder's name: at any depth
    assert paths("internal/render/") == {"internal/render/json.go"}


def test_a_test_s_own_definition_of_the_name_no_retriever_found_keeps_no_tier(tmp_path):
    """zod's tests each define `const schema = z.nan()`: for `schema`, five of them (score 0, found by neither
    retriever) came before BM25's first chunk, behind only ZodLazy.schema (an agent; starlette's `app` too)."""
    files = {"src/lazy.py": "def schema(getter):\n    return getter()\n"}
    files.update({f"src/check_{i}.py": f"def check_{i}(value, schema):\n    \"\"\"Check value against schema.\"\"\"\n"
                                       f"    return schema.validate(value) or schema\n" for i in range(60)})
    body = "".join(f"    assert run({j}) == {j} * 2\n" for j in range(40))
    files.update({f"tests/test_nan_{i}.py": f"schema = make({i})\n\n\ndef test_nan_{i}():\n{body}" for i in range(4)})
    repo = write_tree(tmp_path / "zod", files)
    run("build", repo, "--no-vectors")
    got = json.loads(run("search", "schema", "--path", repo, "--mode", "bm25", "--json").output)["results"]
    assert got[0]["symbol"] == "schema" and all(r["path"].startswith("src/") for r in got), \
        [(r["path"], r["score"]) for r in got]


def test_the_lexical_commands_start_without_numpy(sample_repo, codii_home):
    """grep, status and symbol answer from SQL alone: a constant of the vector phase loaded numpy (~45 ms of a
    selective CLI grep's ~100) for status's vector line. A search loads it, as it scores vectors."""
    time.sleep(2.1)  # the files' stats older than the scan's racy window: status then reads them, not a build's plan
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    code = ("import sys\nfrom codii_sql.cli import cli\n"
            "for command in (['grep', '--no-update', 'parse_header'], ['status'], ['symbol', 'parse_header', '--no-update']):\n"
            "    cli(command, standalone_mode=False)\n"
            "print('numpy' in sys.modules, file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=sample_repo, capture_output=True, text=True, timeout=120,
                         check=False,
                         env={**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)})
    assert "stale" not in out.stdout and out.stderr.splitlines()[-1] == "False", (out.stdout[-300:], out.stderr[-300:])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_a_cli_search_loads_numpy_with_one_blas_thread(sample_repo, codii_home):
    """OpenBLAS starts a thread per core as numpy loads (~55 ms of a ~280 ms CLI search); one process, one answer."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    code = ("import os, sys\nfrom codii_sql.cli.main import main\nsys.argv = ['codii-sql', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import numpy\nprint(len(os.listdir('/proc/self/task')), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code, "search", "parse_header", "--no-update", "--mode", "bm25"],
                         cwd=sample_repo, capture_output=True, text=True, timeout=120, check=False,
                         env={**env, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)})
    assert "parse_header" in out.stdout and out.stderr.splitlines()[-1] == "1", (out.stdout[-300:], out.stderr[-300:])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["grep", "--no-update", "parse_header"], ["status"], ["list"], ["--help"],
                                     ["--version"], ["workspace"]])
def test_output_that_cannot_be_written_is_one_line(sample_repo, codii_home, command):
    """`grep self >/dev/full` (a full disk under a redirect) printed a 45-line traceback and exited 1; so did --help
    and --version, which click writes before a command runs (helper 62)."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-m", "codii_sql.cli", *command], cwd=sample_repo, stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                             env={**os.environ, "CODII_SQL_HOME": str(codii_home), "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "Error: cannot write the output: No space left on device: make room where it goes, or send it elsewhere."
    ], out.stderr[-500:]
