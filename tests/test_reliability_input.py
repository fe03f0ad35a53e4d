"""Bad input through the real CLI: odd encodings, sizes, shapes and file system entries are
decided deterministically, reported by reason, and never stop the rest of the build."""

from __future__ import annotations

import base64
import codecs
import json
import os
import socket

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.answers import last_json
from support.trees import write_tree
from test_reliability_crash import cli_process

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.ingest.chunking.chunker import DEFAULT_MAX_TOKENS
from codii_sql.models import wordpiece
from codii_sql.storage.store import Store
from codii_sql.text import decode_source

PY = 'def greet(name):\n    """Say hello."""\n    return "héllo " + name\n'


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def build_json(repo, *extra) -> dict:
    res = run("build", repo, "--json", *extra)
    assert res.exit_code == 0, res.output
    return last_json(res.output)


def chunks(repo) -> dict[str, list[tuple[int, int, str]]]:
    """{path: [(start_line, end_line, content)]} of the index, in file order."""
    with Store(Codebase.open(repo).db_path, create=False) as store:
        rows = store.conn.execute("SELECT path, start_line, end_line, content FROM chunks "
                                  "ORDER BY path, start_byte").fetchall()
    out: dict[str, list] = {}
    for path, start, end, content in rows:
        out.setdefault(path, []).append((start, end, content))
    return out


def assert_chunks_match_decoded_lines(repo, indexed):
    """Every chunk is valid text within the model window, and its line numbers point at it."""
    counts = wordpiece.count_tokens([c for cs in indexed.values() for _, _, c in cs])
    assert max(counts) <= DEFAULT_MAX_TOKENS
    for path, cs in indexed.items():
        lines = decode_source((repo / path).read_bytes()).split("\n")
        for start, end, content in cs:
            content.encode("utf-8")  # raises on a lone surrogate
            assert content.rstrip("\r\n") in "\n".join(lines[start - 1:end]), (path, start, end)


def test_encodings_are_decided_deterministically_with_right_line_numbers(tmp_path):
    repo = write_tree(tmp_path / "enc", {
        "bom8.py": codecs.BOM_UTF8 + PY.encode(),
        "bom16.py": PY.encode("utf-16"),
        "latin1.py": "# café naïve façade\n".encode("latin-1") * 30 + PY.encode("latin-1"),
        "bad_utf8.py": b"def bad():\n    return '\xff\xfe'\n\n\n" + PY.encode() * 20,
        "fffd.py": ("REPLACEMENT = '\ufffd'\n\n\n" + PY).encode(),
        "crlf.py": (PY + "\n\n").replace("\n", "\r\n").encode() * 3,
        "lone_cr.py": (PY + "\n\n").replace("\n", "\r").encode() * 3,
        "wide.txt": ("😀漢字" * 200 + "\n").encode() * 3,
    })
    report = build_json(repo)
    assert report["files"] == 8 and report["failed"] == {} and report["skipped"] == {}
    indexed = chunks(repo)
    assert_chunks_match_decoded_lines(repo, indexed)
    first = {p: cs[0][2] for p, cs in indexed.items()}
    assert first["bom8.py"].startswith("def greet") and first["bom16.py"] == first["bom8.py"]
    assert "café naïve" in first["latin1.py"]
    assert first["bad_utf8.py"].count("\ufffd") == 2 and "héllo" in indexed["bad_utf8.py"][-1][2]
    assert "'\ufffd'" in first["fffd.py"] and "héllo" in first["fffd.py"]  # stays UTF-8, not Latin-1
    for name in ("crlf.py", "lone_cr.py"):
        assert [(s, e) for s, e, _ in indexed[name] if "def greet" in _] == [(1, 3), (6, 8), (11, 13)]
    assert {s for s, _, _ in indexed["wide.txt"]} == {1, 2, 3} and len(indexed["wide.txt"]) > 3
    again = build_json(repo, "--force")  # the same decisions every time
    assert chunks(repo) == indexed and again["chunks"] == report["chunks"]


def test_sizes_and_shapes_stay_within_the_window_and_huge_files_are_not_read(tmp_path):
    # Repetitive content keeps the model cost low: equal chunk texts are embedded once.
    repo = write_tree(tmp_path / "shapes", {
        "bundle.js": b"x=1;" * 75_000,  # a 300 KB single line
        "big_class.py": "class Big:\n" + "    value = compute(1)\n" * 4999,  # 5,000 lines
        "guide.md": "# Retries\n\n" + "The client retries failed requests with backoff.\n" * 1250,  # 60 KB
        "empty.py": "",
        "blank.py": "  \n\t\n\n   ",
    })
    (repo / "data.json").write_bytes(b"[" + b'{"k": 1},' * 2_300_000 + b"{}]")  # 20 MB
    report = build_json(repo)
    # The 20 MB file is skipped by its stat size, before any byte of it is read; the 300 KB
    # one-liner is a minified bundle whatever its name.
    assert report["skipped"] == {"too-large": 1, "minified": 1} and report["failed"] == {}
    assert report["files"] == 4 and report["chunks_embedded"] < 20
    indexed = chunks(repo)
    assert_chunks_match_decoded_lines(repo, indexed)
    assert "bundle.js" not in indexed
    assert indexed["big_class.py"][0][0] == 1 and indexed["big_class.py"][-1][1] == 5000
    assert indexed["guide.md"][-1][1] == 1252
    assert "empty.py" not in indexed and "blank.py" not in indexed
    res = run("build", repo)
    assert "too-large 1" in res.output and "minified 1" in res.output


def test_long_lines_do_not_hide_code_and_only_whole_bundles_count_as_minified(tmp_path):
    funcs = [f"def handler_{i}(request):\n    return request.args[{i}]\n\n\n" for i in range(30)]
    blob = base64.b64encode(bytes(range(256)) * 400).decode()  # 136 KB on one line
    cr_only = "".join(f"def on_cr_{i}(x):\n    return x + {i}\n\n\n" for i in range(400)).replace("\n", "\r")
    rules = "".join(f".rule-{i} {{ color: #{i:03d}; }}\n" for i in range(60))
    repo = write_tree(tmp_path / "long", {
        "icons.py": "".join(funcs[:15]) + f"ICON = '{blob}'\n\n\n" + "".join(funcs[15:]),
        "cr_only.py": cr_only.encode(),  # 17 KB whose lines end with a lone CR, as the decoder reads them
        "site.css": rules + f".logo {{ background: url(data:image/png;base64,{blob}); }}\n" + rules,
        "vendor/lib.js": "/*! lib v1.2 | (c) Someone | MIT */\n" + "var a=1;" * 5000 + "\n//# sourceMappingURL=lib.js.map\n",
    })
    report = build_json(repo, "--no-vectors")
    assert report["skipped"] == {"minified": 1} and report["files"] == 3  # only the bundle is minified as a whole
    indexed = chunks(repo)
    assert_chunks_match_decoded_lines(repo, indexed)
    with Store(Codebase.open(repo).db_path, create=False) as store:
        symbols = {r[0] for r in store.conn.execute("SELECT symbol FROM chunks WHERE symbol IS NOT NULL")}
    assert {f"handler_{i}" for i in range(30)} | {f"on_cr_{i}" for i in range(400)} <= symbols
    line = 60 + 1  # the ICON line: 15 functions of 4 lines above it
    windows = [c for s, e, c in indexed["icons.py"] if s == e == line]
    assert len(windows) > 1 and "".join(windows).strip() == f"ICON = '{blob}'"  # windowed, in order, whole
    assert "".join(c for s, e, c in indexed["site.css"] if s == e == 61).strip().endswith("); }")


def test_file_system_oddities_are_skipped_by_reason(tmp_path):
    root = tmp_path / "build" / "target" / "node_modules" / "repo"
    repo = write_tree(root, {"src/main.py": PY, "src/sub/util.py": "def helper():\n    return 2\n"})
    for name in ("with space.py", "quote'\"s.py", "new\nline.py", "naïve_日本.py"):
        (repo / name).write_text(f"def odd_name_{len(name)}():\n    return 1\n")
    (repo / "loop").symlink_to(repo)
    (repo / "src/sub/back").symlink_to("..")
    (repo / "outside.py").symlink_to(tmp_path / "elsewhere.py")
    (tmp_path / "elsewhere.py").write_text(PY)
    (repo / "dangling.py").symlink_to(repo / "nothing.py")
    os.mkfifo(repo / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(repo / "sock"))
    try:
        report = build_json(repo)
    finally:
        sock.close()
    assert report["files"] == 6 and report["failed"] == {}
    assert report["skipped"] == {"symlink-loop": 2, "symlink-outside-root": 1, "symlink-dangling": 1,
                                 "not-regular-file": 2}
    assert set(chunks(repo)) == {"src/main.py", "src/sub/util.py", "with space.py", "quote'\"s.py",
                                 "new\nline.py", "naïve_日本.py"}
    res = run("search", "odd_name", "--path", repo, "--json", "--mode", "bm25")
    assert "new\nline.py" in {r["path"] for r in json.loads(res.output)["results"]}


def test_unreadable_directory_and_file_are_reported(tmp_path, codii_home):
    repo = write_tree(tmp_path / "perm", {"ok.py": PY, "secret/a.py": PY, "locked.py": PY})
    (repo / "secret").chmod(0o000)
    (repo / "locked.py").chmod(0o000)
    try:
        res = cli_process(codii_home, "build", repo, "--json")
    finally:
        (repo / "secret").chmod(0o755)
        (repo / "locked.py").chmod(0o644)
    assert res.returncode == 0, res.stderr
    report = last_json(res.stdout)
    assert report["files"] == 1 and report["skipped"] == {"unreadable": 2}
    assert build_json(repo)["added"] == 2  # readable again: picked up by the next build


def test_files_deleted_or_rewritten_between_scan_and_read(tmp_path, embedder):
    from codii_sql.ingest.indexer import Indexer

    repo = write_tree(tmp_path / "race", {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(4)})

    def progress(phase, done, total):
        if phase == "scan":  # after the scan, before any file is read
            (repo / "m0.py").unlink()
            (repo / "m1.py").write_text("def rewritten_at_hash():\n    return 1\n")
        if phase == "chunk" and done == 0:  # after hashing, before chunking
            (repo / "m2.py").unlink()
            (repo / "m3.py").write_text("def rewritten_at_chunk():\n    return 3\n")

    report = Indexer(Codebase.open(repo), embedder, progress=progress).build()
    assert report.skipped == {"vanished": 2} and report.files == 2 and not report.failed
    indexed = chunks(repo)
    assert "rewritten_at_hash" in indexed["m1.py"][0][2] and "rewritten_at_chunk" in indexed["m3.py"][0][2]
    assert json.loads(run("doctor", repo, "--check-only", "--json").output)["consistent"]
    assert build_json(repo)["modified"] == 0  # the stored hashes are those of the indexed text


def _change_kinds(repo, phase, done):
    """Turn files into other kinds of entries at a build stage: after the scan (before any read), and
    after hashing (before chunking), as a branch switch does under a running build."""
    if phase == "scan" and (repo / "gone.py").exists():
        (repo / "mod.py").unlink()
        (repo / "mod.py").mkdir()  # mod.py becomes the package folder mod.py/
        (repo / "mod.py" / "inner.py").write_text("def inner():\n    return 0\n")
        (repo / "pipe.py").unlink()
        os.mkfifo(repo / "pipe.py")
        (repo / "gone.py").unlink()
    if phase == "chunk" and done == 0:
        (repo / "late.py").unlink()
        (repo / "late.py").mkdir()


@pytest.mark.parametrize("entry", ["build", "watch", "search"])
def test_a_path_that_changes_kind_mid_build_is_one_skipped_file(tmp_path, embedder, entry):
    from codii_sql import service
    from codii_sql.service.watching import update_if_stale

    files = {name: f"def {name[:-3]}_fn():\n    return 1\n" for name in ("mod.py", "pipe.py", "gone.py", "late.py")}
    repo = write_tree(tmp_path / "kinds", {**files, "kept.py": PY})
    codebase = Codebase.open(repo)
    progress = lambda phase, done, total: _change_kinds(repo, phase, done)  # noqa: E731
    if entry == "build":
        report = service.build(codebase, progress=progress, embedder=embedder)
    elif entry == "watch":
        report, _ = update_if_stale(codebase, progress)
    else:
        assert service.ensure_index(codebase, progress=progress, embedder=embedder) is None
        report = None
    st = service.status(codebase, check_stale=False)
    assert st["status"] == "indexed" and st["files"] == 1 and not st["failed"]
    assert st["skipped"] == {"not-regular-file": 3, "vanished": 1}
    assert set(chunks(repo)) == {"kept.py"}  # a first index: the rest committed
    if report is not None:
        assert report.skipped == {"not-regular-file": 3, "vanished": 1} and report.files == 1
    assert build_json(repo)["added"] == 1  # the next build indexes the new folder's file, mod.py/inner.py


def test_one_codebase_identity_for_every_spelling_of_a_path(sample_repo, tmp_path, monkeypatch):
    build_json(sample_repo)
    (tmp_path / "via").symlink_to(sample_repo)
    monkeypatch.chdir(sample_repo / "app")
    for spelling in ("..", "../", "./../web/..", str(tmp_path / "via"), str(tmp_path / "via" / "docs" / "..")):
        again = build_json(spelling)
        assert again["added"] == 0 and again["unchanged"] == 4 and again["codebase"] == str(sample_repo.resolve())
    assert len(json.loads(run("list", "--json").output)) == 1
    for bad, why in (("../missing", "no such directory"), ("parse.py", "is a file, not a directory")):
        res = run("build", bad)
        assert res.exit_code == 2 and res.output.startswith("Error: ") and why in res.output


@pytest.fixture(scope="module")
def indexed_repo(tmp_path_factory):
    from support.trees import SAMPLE

    home = tmp_path_factory.mktemp("home")
    repo = write_tree(tmp_path_factory.mktemp("q") / "repo", SAMPLE)
    db = home / "q.db"
    assert run("build", repo, "--db", db).exit_code == 0
    return repo, db


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(min_size=1, max_size=40))
def test_any_query_gives_valid_json_or_a_one_line_error(indexed_repo, query):
    repo, db = indexed_repo
    # "--" ends the options, as for any POSIX command: a query may start with "-".
    res = run("search", "--path", repo, "--db", db, "--no-update", "--json", "--", query)
    if res.exit_code == 0:
        out = json.loads(res.output)
        assert out["query"] == query and isinstance(out["results"], list)
    else:
        assert res.exit_code == 2 and res.output.startswith("Error: ") and "Traceback" not in res.output


def test_a_folder_name_that_is_not_utf8_is_written_with_its_bytes_in_errors_and_notes(tmp_path, codii_home):
    """A helper's folder `\xff\xfe` was written `\udcff\udcfe` in errors and hints, Python's name for the bytes."""
    import subprocess
    import sys

    folder = os.fsencode(tmp_path) + b"/\xff\xfe"
    os.mkdir(folder)
    with open(folder + b"/a.py", "wb") as fh:
        fh.write(b"def hello():\n    return 1\n")
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
    cli_ = [sys.executable.encode(), b"-m", b"codii_sql.cli"]
    assert subprocess.run([*cli_, b"build", folder, b"--no-vectors"], capture_output=True, env=env, check=False).returncode == 0
    found = subprocess.run([*cli_, b"search", b"hello", b"--path", folder], capture_output=True, env=env, check=False)
    missing = subprocess.run([*cli_, b"search", b"hello", b"--path", folder + b"/nothere"], capture_output=True, env=env, check=False)
    said = (found.stderr + missing.stderr).decode("utf-8")
    assert "\\xff\\xfe" in said and "udcff" not in said and missing.returncode == 2, said
    # JSON stays valid UTF-8 that parses back to the same name; MCP's list_codebases stopped the server's writer
    listed = subprocess.run([*cli_, b"list", b"--json"], capture_output=True, env=env, check=False)
    assert [os.fsencode(r["root"]) for r in json.loads(listed.stdout.decode("utf-8"))] == [folder]
    import asyncio

    from test_mcp import call, server

    async def agent():
        async with server(codii_home, CODII_SQL_WATCH="0") as session:
            got = await asyncio.wait_for(call(session, "list_codebases"), 120)
            assert [r["root"] for r in got["codebases"]] == [str(tmp_path) + "/\\xff\\xfe"], got

    asyncio.run(agent())


def test_a_query_with_a_byte_that_is_not_utf8_is_one_line_in_a_real_process(tmp_path, codii_home):
    """A new user's shell passed `caf\\xe9` (Latin-1): search crashed in the model's tokenizer with a
    TypeError traceback, where grep, symbol and refs each said one line."""
    import subprocess
    import sys

    repo = write_tree(tmp_path / "r", {"a.py": "def cafe():\n    return 1\n"})
    assert CliRunner().invoke(cli, ["build", str(repo)]).exit_code == 0
    for arg, shown in ((b"caf\xe9", "caf\\xe9"), (b"\xed\xa0\x80abc", "\\xed\\xa0\\x80abc")):
        for extra in ([], ["--json"]):
            done = subprocess.run([sys.executable.encode(), b"-m", b"codii_sql.cli", b"search", arg, b"--path",
                                   str(repo).encode(), *(e.encode() for e in extra)], capture_output=True,
                                  env={**os.environ, "CODII_SQL_HOME": str(codii_home)})
            out = (done.stdout + done.stderr).decode("utf-8", "replace")
            assert done.returncode == 2 and "Traceback" not in out and f"'{shown}' holds a byte that is not UTF-8" in out
    # history, inspect and a --queries-file line said it with a tokenizer's or a decoder's traceback (helper 2)
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
    for args in ([b"history", b"caf\xe9", str(repo).encode()], [b"inspect", b"caf\xe9", str(repo).encode()]):
        done = subprocess.run([sys.executable.encode(), b"-m", b"codii_sql.cli", *args], capture_output=True, env=env)
        out = (done.stdout + done.stderr).decode("utf-8", "replace")
        assert done.returncode == 2 and "Traceback" not in out and "holds a byte that is not UTF-8" in out, out
    batch = tmp_path / "q.jsonl"
    batch.write_bytes(b'{"id": 1, "query": "caf\xe9"}\n{"id": 2, "query": "cafe"}\n')
    done = subprocess.run([sys.executable, "-m", "codii_sql.cli", "search", "--path", str(repo), "--queries-file",
                           str(batch), "--jsonl"], capture_output=True, text=True, env=env)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "Traceback" not in done.stderr and "not UTF-8" in lines[0]["error"] and lines[1]["results"], done


def test_a_home_or_db_folder_that_is_a_file_is_named_in_one_line(tmp_path):
    """CODII_SQL_HOME pointing at a file said "[Errno 20] Not a directory: '<home>/indexes': check the path and free
    disk space" on build, "workspaces.json cannot be read" on list, `not_indexed` on status: every command now names
    the file and what to do (help is still given), and so does a --db below a file."""
    import subprocess
    import sys

    repo = write_tree(tmp_path / "r", {"a.py": "def cafe():\n    return 1\n"})
    home = tmp_path / "home"
    home.write_text("not a folder\n")

    def cli_(env_home, *args):
        return subprocess.run([sys.executable, "-m", "codii_sql.cli", *map(str, args)], capture_output=True, text=True,
                              env={**os.environ, "CODII_SQL_HOME": str(env_home)}, check=False)

    for env_home, said in ((home, f"({home}) is a file, not a folder"), (home / "sub", f"lies under {home}, a file")):
        for args in (["build", repo, "--no-vectors"], ["list"], ["status", repo], ["workspace", "list"],
                     ["search", "cafe", "--path", repo]):
            done = cli_(env_home, *args)
            assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
            assert said in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
    assert cli_(home, "search", "--help").returncode == 0
    done = cli_(tmp_path / "h2", "build", repo, "--no-vectors", "--db", home / "x.db")
    assert done.returncode == 1 and f"{home} is a file, not a folder" in done.stderr, done.stderr
    assert "free disk space" not in done.stderr and "Traceback" not in done.stderr
    assert home.read_text() == "not a folder\n"
