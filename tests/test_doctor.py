"""`codii-sql doctor` finds damage that PRAGMA integrity_check cannot see, and repairs it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from support.answers import last_json

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.storage.store import Store


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_healthy_index_is_consistent(sample_repo):
    run("build", sample_repo)
    out = json.loads(run("doctor", sample_repo, "--json").output)
    assert out["consistent"] and all(c["ok"] for c in out["checks"])


def test_missing_vector_orphan_vector_and_bad_merkle_are_repaired(sample_repo):
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        store.conn.execute("DELETE FROM chunks_vec WHERE rowid = (SELECT min(id) FROM chunks)")
        store.conn.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (99999, zeroblob(1536))")
        store.conn.execute("UPDATE merkle_nodes SET hash = 'x' WHERE path = ''")
    res = run("doctor", sample_repo, "--check-only", "--json")
    out = json.loads(res.output)
    assert not out["consistent"] and res.exit_code == 1
    assert {c["name"] for c in out["checks"] if not c["ok"]} == {"vec0 rows match chunks", "merkle tree matches files"}
    # the node that differs is named: a node altered under an intact root printed two equal roots (helper 60)
    [merkle] = [c for c in out["checks"] if c["name"] == "merkle tree matches files"]
    assert "node '': stored x, recomputed " in merkle["detail"], merkle
    fixed = json.loads(run("doctor", sample_repo, "--json").output)
    assert fixed["forgotten"] and fixed["rebuild"]["modified"] == len(fixed["forgotten"])
    again = json.loads(run("doctor", sample_repo, "--json").output)
    assert again["consistent"], again


def test_files_whose_rows_a_repair_dropped_are_indexed_again(sample_repo):
    """A new user deleted file rows; doctor dropped their orphaned chunks, and every later grep and search
    skipped the files for good: the last scan's stats said the tree was unchanged."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    assert run("grep", "def parse_header", sample_repo).exit_code == 0  # the stats are saved by now
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        gone = store.conn.execute("SELECT count(*) FROM files").fetchone()[0]
        store.conn.execute("DELETE FROM files")
    out = json.loads(run("doctor", sample_repo, "--json").output)
    assert not out["consistent"] and out["rebuild"]["added"] == gone, out
    assert run("grep", "-c", "def parse_header", sample_repo).exit_code == 0


def test_damaged_fts_is_rebuilt(sample_repo):
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        store.conn.execute("DELETE FROM chunks_fts_docsize WHERE id = (SELECT min(id) FROM chunks)")
    out = json.loads(run("doctor", sample_repo, "--json").output)
    assert not out["consistent"]
    assert json.loads(run("doctor", sample_repo, "--json").output)["consistent"]
    res = json.loads(run("search", "parse_header", "--path", sample_repo, "--json", "--mode", "bm25").output)
    assert res["results"][0]["symbol"] == "parse_header"


def test_broken_pages_are_reported_damaged_and_build_force_replaces_the_file(sample_repo, codii_home):
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    data = bytearray(db.read_bytes())
    page = 4096
    data[2 * page:len(data) - page] = bytes(range(256)) * ((len(data) - 3 * page) // 256) + bytes(
        (len(data) - 3 * page) % 256)
    db.write_bytes(bytes(data))
    res = CliRunner().invoke(cli, ["doctor", str(sample_repo)])
    assert res.exit_code == 1 and "damaged" in res.output and "build" in res.output and "--force" in res.output
    assert len(res.output.splitlines()) <= 3  # the integrity check's page list is cut, not dumped
    copy = codii_home.parent / "elsewhere.db"  # a damaged --db copy: its own path in the advice
    copy.write_bytes(db.read_bytes())
    res = CliRunner().invoke(cli, ["doctor", str(sample_repo), "--db", str(copy)])
    assert res.exit_code == 1 and "export it again" in res.output and "--force" not in res.output, res.output
    res = CliRunner().invoke(cli, ["build", str(sample_repo), "--force", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(run("doctor", sample_repo, "--check-only", "--json").output)["consistent"]
    assert json.loads(run("search", "retry", "--path", sample_repo, "--json").output)["results"]


def test_a_truncated_index_is_one_line_and_can_be_cleared_or_rebuilt(sample_repo, tmp_path):
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    with open(db, "r+b") as fh:
        fh.truncate(20_000)
    res = CliRunner().invoke(cli, ["search", "retry", "--path", str(sample_repo), "--no-update"])
    assert res.exit_code != 0 and "damaged" in res.output and "Traceback" not in res.output, res.output
    # status and doctor report what they found, as for a broken page (a new user's status and doctor of a
    # file too broken to open stopped with an error instead)
    st = json.loads(run("status", sample_repo, "--json").output)
    assert st["status"] == "damaged" and st["damage"] and f"build {sample_repo} --force" in st["hint"], st
    doctored = CliRunner().invoke(cli, ["doctor", str(sample_repo), "--json"])
    assert doctored.exit_code == 1 and json.loads(doctored.stdout)["damaged"], doctored.output
    res = CliRunner().invoke(cli, ["build", str(sample_repo), "--force", "--json"])
    assert res.exit_code == 0 and last_json(res.stdout)["added"] == 4, res.output
    assert "embedder could not be read" in res.stderr  # too broken for its meta: the default, said
    with open(db, "r+b") as fh:
        fh.truncate(20_000)
    assert json.loads(run("clear", sample_repo, "--yes", "--json").output)["removed"] == [str(db)]
    # A damaged file outside $CODII_SQL_HOME may not be ours: it stays.
    elsewhere = tmp_path / "copy.db"
    elsewhere.write_bytes(b"SQLite format 3\x00" + bytes(5000))
    res = CliRunner().invoke(cli, ["clear", "--db", str(elsewhere), "--yes"])
    assert res.exit_code != 0 and "delete it by hand" in res.output and elsewhere.exists()


def _damage_one_leaf(db) -> int:
    """Overwrite the cells of one leaf page of the chunks table (the page header stays, so only a
    read of that page finds it); returns the page number."""
    with Store(db, create=False) as store:
        [[page]] = store.conn.execute(
            "SELECT max(pageno) FROM dbstat WHERE name = 'chunks' AND pagetype = 'leaf'").fetchall()
        size = store.conn.execute("PRAGMA page_size").fetchall()[0][0]
    with open(db, "r+b") as fh:
        fh.seek((page - 1) * size + 16)
        fh.write(b"\xff" * (size - 16))
    return page


def test_a_plain_status_and_build_notice_a_damaged_page(sample_repo):
    """A no-change build and status read a few pages only: one broken leaf went unnoticed."""
    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    healthy = json.loads(run("status", sample_repo, "--json").output)
    assert healthy["status"] == "indexed" and "damage" not in healthy
    _damage_one_leaf(db)
    st = json.loads(run("status", sample_repo, "--json").output)
    assert st["status"] == "damaged" and st["damage"] and f"build {sample_repo} --force" in st["hint"], st
    [listed] = json.loads(run("list", "--json").output)
    assert listed["status"] == "damaged" and "clear --db" in listed["hint"], listed
    assert f"build {sample_repo} --force" in listed["hint"], listed
    doctored = CliRunner().invoke(cli, ["doctor", str(sample_repo), "--json"])
    assert doctored.exit_code == 1 and json.loads(doctored.stdout)["damaged"], doctored.output
    res = CliRunner().invoke(cli, ["build", str(sample_repo), "--json"])
    out = last_json(res.stdout)
    assert res.exit_code != 0 and "is damaged" in out["error"] and f"build {sample_repo} --force" in out["hint"], out
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "damaged"  # not remembered clean
    assert last_json(run("build", sample_repo, "--force", "--json").output)["added"] == 4
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "indexed"
    assert run("build", sample_repo, "--json").exit_code == 0


def test_a_clean_check_is_remembered_until_the_file_changes(sample_repo):
    from codii_sql.storage import health

    run("build", sample_repo)
    db = Codebase.open(sample_repo).db_path
    assert json.loads(health.checked_path(db).read_text())["stamp"] == health.stamp(db)  # the build vouched for its commit
    with Store(db, create=False) as store:
        store.conn.execute("INSERT INTO meta(key, value) VALUES ('probe', '1')")  # another writer
    assert json.loads(health.checked_path(db).read_text())["stamp"] != health.stamp(db)
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "indexed"
    assert json.loads(health.checked_path(db).read_text())["stamp"] == health.stamp(db)


def test_search_and_grep_refuse_an_index_with_a_broken_page_they_never_read(sample_repo):
    """A new user's corrupted index answered search with "No results." (exit 0) and grep with exit 1, "no
    match", since their statements never read the broken pages: both now check the file as status does
    (a stat while it is as our last commit left it) and say it is damaged in one line."""
    run("build", sample_repo, "--no-vectors")
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        [[page]] = store.conn.execute("SELECT max(pageno) FROM dbstat WHERE name = 'definitions'").fetchall()
        size = store.conn.execute("PRAGMA page_size").fetchall()[0][0]
    with open(db, "r+b") as fh:  # a page of symbol definitions: neither search nor grep reads it
        fh.seek((page - 1) * size + 16)
        fh.write(b"\xff" * (size - 16))
    for args in (["search", "retry", "--path", str(sample_repo), "--no-update"],
                 ["search", "retry", "--path", str(sample_repo), "--mode", "bm25", "--no-update"],
                 ["grep", "retry", str(sample_repo), "--no-update"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == (2 if args[0] == "grep" else 1) and "is damaged" in res.output, (args, res.output)
        assert len(res.output.strip().splitlines()) == 1, res.output
    # The agent's tools too (a new user's MCP index_codebase called a damaged index "already up to date").
    from codii_sql import service
    from codii_sql.errors import DamagedIndexError
    from codii_sql.service.jobs import Jobs

    cb = Codebase.open(sample_repo)
    for ask in (lambda: service.find_symbol(cb, "retry"), lambda: service.find_references(cb, "retry"),
                lambda: Jobs().start(cb, False, None, None)):
        try:
            ask()
            raise AssertionError("answered from a damaged index")
        except DamagedIndexError as err:
            assert "damaged" in err.what
    assert last_json(run("build", sample_repo, "--force", "--no-vectors", "--json").output)["added"] == 4
    assert CliRunner().invoke(cli, ["grep", "retry", str(sample_repo), "--no-update"]).exit_code == 0


def test_build_force_over_a_damaged_index_keeps_its_embedder(sample_repo):
    """A new user's openai: embedder became 'local' without a word when build --force replaced a damaged
    index; the file's meta still read, and the new file keeps what it recorded."""
    assert run("build", sample_repo, "--embedder", "local:fast", "--no-vectors").exit_code == 0
    db = Codebase.open(sample_repo).db_path
    data = bytearray(db.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle:middle + 8 * 4096] = bytes(range(256)) * 128
    db.write_bytes(bytes(data))
    assert json.loads(run("status", sample_repo, "--json").output)["status"] == "damaged"
    assert run("build", sample_repo, "--force", "--no-vectors").exit_code == 0
    st = json.loads(run("status", sample_repo, "--json").output)
    assert st["status"] == "indexed" and st["embedder"] == "local:fast", st
    # Damaged past reading its meta: the default is used, and said (it was silent).
    data = bytearray(db.read_bytes())
    data[4096:21 * 4096] = bytes(range(256)) * 320
    db.write_bytes(bytes(data))
    forced = CliRunner().invoke(cli, ["build", str(sample_repo), "--force", "--no-vectors"])
    assert forced.exit_code == 0 and "embedder could not be read" in forced.output, forced.output


def test_queue_rows_of_chunks_a_repair_deleted_go_with_them(sample_repo):
    """A new user's repair left 542 queue rows of deleted chunks: the index stayed "pending" for good, and
    every build said another process was embedding them."""
    assert run("build", sample_repo, "--no-vectors").exit_code == 0
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        store.conn.execute("DELETE FROM chunks WHERE id = (SELECT min(id) FROM chunks)")  # its queue row stays
        store.conn.execute("DELETE FROM files WHERE id = (SELECT max(id) FROM files)")  # its chunks go in repair
    checked = json.loads(run("doctor", sample_repo, "--check-only", "--json").output)
    vec = next(c for c in checked["checks"] if c["name"] == "vec0 rows match chunks")
    assert not vec["ok"] and "1 queued without chunk" in vec["detail"], vec
    assert run("doctor", sample_repo, "--json").exit_code == 0
    with Store(db, create=False) as store:
        assert store.conn.execute("SELECT count(*) FROM vector_queue WHERE chunk_id NOT IN "
                                  "(SELECT id FROM chunks)").fetchone()[0] == 0
    assert run("build", sample_repo, "--vectors").exit_code == 0
    assert json.loads(run("status", sample_repo, "--json").output)["vectors"]["state"] == "complete"


def test_a_build_vouches_for_its_commits_under_its_lock_and_a_search_meanwhile_reads_no_page(tmp_path, codii_home,
                                                                                           monkeypatch):
    """A search that met the file between a build's commit and its vouch took the change for another
    writer's and read every page (13-15 s on the kernel's index, for each watched edit). The vouch now
    comes while the build still holds its lock, and a search skips the page check while a lexical or
    vector phase holds one; after, a change nobody vouched for is checked again."""
    from support.trees import write_tree

    from codii_sql import service
    from codii_sql.search.results import SearchOptions
    from codii_sql.storage import health
    from codii_sql.storage.lock import is_locked, vector_lock, vectors_running

    repo = write_tree(tmp_path / "r", {"a.py": "def alpha():\n    return 1\n"})
    cb = service.open_codebase(repo)
    held_at_vouch = []
    vouch = health.vouch
    monkeypatch.setattr(health, "vouch", lambda db, *a: held_at_vouch.append(is_locked(cb) or vectors_running(cb))
                        or vouch(db, *a))
    service.build(cb, vectors=False)
    (repo / "a.py").write_text("def alpha():\n    return 2\n")
    service.build(cb)  # with its vector phase
    assert held_at_vouch and all(held_at_vouch)
    checks = []
    rows = Store.rows
    monkeypatch.setattr(Store, "rows", lambda self, name, params=None: checks.append(name) or rows(self, name, params))

    def search():
        return service.search(service.SearchRequest("alpha", SearchOptions(mode="bm25"), [str(repo)], update=False))

    with vector_lock(cb, wait=False):
        with Store(cb.db_path, create=False) as store:  # a commit this test does not vouch for
            store.conn.execute("INSERT INTO meta(key, value) VALUES ('probe', '1')")
        assert search().results and "pragma_quick_check" not in checks
    assert search().results and "pragma_quick_check" in checks
