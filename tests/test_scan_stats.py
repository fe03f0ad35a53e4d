"""An update check that stats what the last build's scan saw instead of walking: it spares the walk when
nothing changed, and every kind of change still reaches the index (real files, real builds, real git)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time

import pytest
from support.trees import REPO_ROOT, write_tree

from codii_sql import service
from codii_sql.codebase import Codebase
from codii_sql.ingest import scan_stats, walk
from codii_sql.service.builds import ensure_index
from codii_sql.service.status import open_store, unchanged_since_build

TREE = {
    "a.py": "def alpha():\n    return 1\n",
    "sub/b.py": "def beta():\n    return 2\n",
    "sub/deep/c.py": "def gamma():\n    return 3\n",
    "sub/.ignore": "*.tmp\n",  # not indexed (the extensions), so only its record as a rule file tells of an edit
    ".codii.yaml": "max_file_bytes: 4000\nextensions: ['.py', '.txt']\n",
    "big.txt": "big_marker\n" + "x" * 5000 + "\n",
}
#: The racy window in these tests (seconds): short, so each step can wait it out; the clock ticks in ms.
RACY_SECONDS = 0.2


def paths(cb: Codebase) -> set[str]:
    with open_store(cb) as store:
        return {r["path"] for r in store.rows("files_all")}


def settled(cb: Codebase) -> None:
    """Build, wait past the racy window, build again: the stats now prove what they saw."""
    service.build(cb, vectors=False)
    time.sleep(scan_stats.RACY_NS / 1e9 + 0.1)
    service.build(cb, vectors=False)


@pytest.fixture
def short_racy_window(monkeypatch):
    monkeypatch.setattr(scan_stats, "RACY_NS", int(RACY_SECONDS * 1e9))


def no_walk(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the tree was walked")
    monkeypatch.setattr(walk, "scan", refuse)
    monkeypatch.setattr("codii_sql.ingest.plan.scan", refuse)


def test_an_unchanged_tree_is_not_walked_and_each_kind_of_change_is_seen(tmp_path, codii_home, monkeypatch,
                                                                         short_racy_window):
    root = write_tree(tmp_path / "repo", TREE)
    cb = Codebase.open(root)
    settled(cb)
    assert unchanged_since_build(cb, vectors=False) and unchanged_since_build(cb, vectors=True)
    with monkeypatch.context() as m:
        no_walk(m)
        assert ensure_index(cb, vectors=False) is None and not service.is_stale(cb)

    def changed(change, expect) -> None:
        settled(cb)  # each change alone stands against a record it did not make racy
        assert unchanged_since_build(cb, vectors=False), change.__doc__
        change()
        assert not unchanged_since_build(cb, vectors=False), change.__doc__
        ensure_index(cb, vectors=False)
        assert expect(), change.__doc__

    def same_size_same_mtime():
        """an edit of the same size whose mtime is put back (cp -p, a tarball's dates): its ctime moves"""
        st = os.stat(root / "a.py")
        (root / "a.py").write_text("def omega():\n    return 1\n")
        os.utime(root / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    changed(same_size_same_mtime, lambda: service.find_symbol(cb, "omega", update=False)["definitions"])

    def new_deep_file():
        """a file added in a folder below the root"""
        (root / "sub" / "deep" / "d.py").write_text("def delta():\n    return 4\n")
    changed(new_deep_file, lambda: "sub/deep/d.py" in paths(cb))

    def removed():
        """a file removed"""
        (root / "sub" / "deep" / "c.py").unlink()
    changed(removed, lambda: "sub/deep/c.py" not in paths(cb))

    def ignore_rule():
        """a nested .ignore edited in place to ignore an indexed file (no folder changes its listing)"""
        with open(root / "sub" / ".ignore", "r+") as fh:
            fh.seek(0, os.SEEK_END)
            fh.write("b.py\n")
    changed(ignore_rule, lambda: "sub/b.py" not in paths(cb))

    def shrunk():
        """a file left out as too large that shrinks under the cap"""
        (root / "big.txt").write_text("big_marker\n")
    changed(shrunk, lambda: "big.txt" in paths(cb))

    def config():
        """.codii.yaml edited (a smaller cap leaves a file out)"""
        (root / ".codii.yaml").write_text("max_file_bytes: 20\n")
    changed(config, lambda: "a.py" not in paths(cb))

    def folder_to_file():
        """a folder replaced by a file of its name"""
        for p in (root / "sub" / "deep").iterdir():
            p.unlink()
        (root / "sub" / "deep").rmdir()
        (root / "sub" / "deep").write_text("x\n")
    changed(folder_to_file, lambda: not any(p.startswith("sub/deep/") for p in paths(cb)))


def test_a_change_during_the_racy_window_is_walked_and_a_git_change_is_seen(tmp_path, codii_home, short_racy_window):
    """A file written within a second of the scan proves nothing by its stat; `git add -f` of an
    ignored file changes no file the walk lists, only Git's index (its folder is recorded)."""
    root = write_tree(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "*.gen.py\n", "keep.gen.py": "y = 2\n"})
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=root, check=True)
    cb = Codebase.open(root)
    service.build(cb, vectors=False)
    assert not unchanged_since_build(cb, vectors=False)  # just written: racy, so walked
    time.sleep(scan_stats.RACY_NS / 1e9 + 0.1)
    service.build(cb, vectors=False)
    assert unchanged_since_build(cb, vectors=False) and "keep.gen.py" not in paths(cb)
    subprocess.run([*git, "add", "-f", "keep.gen.py"], cwd=root, check=True)
    assert not unchanged_since_build(cb, vectors=False)
    ensure_index(cb, vectors=False)
    assert "keep.gen.py" in paths(cb)


@pytest.mark.parametrize("damage", ["missing", "garbage", "other_state"])
def test_a_missing_damaged_or_outdated_record_means_a_walk(tmp_path, codii_home, damage, short_racy_window):
    root = write_tree(tmp_path / "repo", {"a.py": "x = 1\n"})
    cb = Codebase.open(root)
    settled(cb)
    path = scan_stats.sidecar(cb.db_path)
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"\x00garbage")
    else:  # another process's build committed since
        (root / "b.py").write_text("y = 2\n")
        saved = path.read_bytes()
        service.build(cb, vectors=False)
        path.write_bytes(saved)
    assert not unchanged_since_build(cb, vectors=False)
    service.clear(cb)
    assert not path.exists()


def test_a_fresh_process_answers_from_an_unchanged_tree_and_sees_an_edit(tmp_path, codii_home):
    """As a user runs it: the second CLI call after a build trusts the recorded stats, and an edit made
    then is in the next call's answer."""
    root = write_tree(tmp_path / "repo", {"a.py": "def alpha():\n    return 1\n"})
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_WATCH": "0", "PYTHONPATH": str(REPO_ROOT)}
    cli = [sys.executable, "-m", "codii_sql.cli"]
    subprocess.run([*cli, "build", str(root), "--no-vectors"], env=env, check=True, capture_output=True)
    time.sleep(scan_stats.RACY_NS / 1e9 + 0.1)
    subprocess.run([*cli, "build", str(root), "--no-vectors"], env=env, check=True, capture_output=True)
    first = subprocess.run([*cli, "grep", "alpha"], cwd=root, env=env, capture_output=True, text=True)
    assert first.returncode == 0 and first.stdout == "a.py:1:def alpha():\n", first
    (root / "a.py").write_text("def alpha_two():\n    return 1\n")
    second = subprocess.run([*cli, "grep", "alpha_two"], cwd=root, env=env, capture_output=True, text=True)
    assert second.returncode == 0 and second.stdout == "a.py:1:def alpha_two():\n", second


@pytest.mark.parametrize("key", ["chunker_version", "roles_version"])
def test_an_index_made_by_older_rules_is_brought_up_to_them_though_no_file_changed(tmp_path, codii_home, key,
                                                                                 short_racy_window, monkeypatch):
    """A new user's index of redis kept chunker 15 and roles 7 under chunker 16 and roles 8: every stat was as
    the last scan saw it, so no update check ever walked, and no build re-chunked or re-classified it."""
    import codii_sql.ingest.indexer as indexer
    import codii_sql.ingest.settings as settings
    from codii_sql.ingest import roles

    status = importlib.import_module("codii_sql.service.status")  # the package's `status` is a function

    root = write_tree(tmp_path / "repo", {"a.py": "def alpha():\n    return 1\n", "deps/lib/b.py": "x = 1\n"})
    cb = Codebase.open(root)
    settled(cb)
    assert unchanged_since_build(cb, vectors=False)
    if key == "chunker_version":  # the code upgraded: its rules are newer than the index's
        newer = indexer.CHUNKER_VERSION + 1
        for module in (indexer, settings, status):
            monkeypatch.setattr(module, "CHUNKER_VERSION", newer)
    else:
        newer = roles.VERSION + 1
        monkeypatch.setattr(roles, "VERSION", newer)
    assert not unchanged_since_build(cb, vectors=False)
    if key == "chunker_version":  # a build would re-chunk every file: status says stale, and why
        st = service.status(cb)
        assert st["status"] == "stale" and st["stale_reason"].startswith(f"built by chunker {newer - 1}; "), st
    ensure_index(cb, vectors=False)
    with open_store(cb) as store:
        assert store.meta()[key] == newer
        assert {r["path"]: r["role"] for r in store.rows("file_roles")} == {"a.py": "source", "deps/lib/b.py": "vendored"}
    time.sleep(RACY_SECONDS + 0.1)
    service.build(cb, vectors=False)
    assert unchanged_since_build(cb, vectors=False)


def test_a_large_index_of_an_older_chunker_answers_as_it_is_while_a_background_build_re_chunks_it(
        tmp_path, codii_home, monkeypatch):
    """Above INLINE_RECHUNK_FILES, a search after an upgrade no longer waits for the whole re-chunk (the kernel's:
    15 min): it answers from the index as it is, says so, and a real background build (a process of its own)
    brings the index to the running chunker."""
    import codii_sql.service.builds as builds
    from codii_sql.ingest.chunking.version import CHUNKER_VERSION, rechunk_scope

    root = write_tree(tmp_path / "repo", {f"m{i}.py": f"def handler_{i}():\n    return {i}\n" for i in range(6)})
    cb = Codebase.open(root)
    service.build(cb, vectors=False)
    with open_store(cb) as store, store.transaction():  # a version whose index re-chunks every file
        store.set_meta(chunker_version=next(v for v in range(CHUNKER_VERSION - 1, 0, -1) if rechunk_scope(v) is None))
    monkeypatch.setattr(builds, "INLINE_RECHUNK_FILES", 4)
    monkeypatch.setenv("CODII_SQL_BACKGROUND", "1")
    answer = service.search(service.SearchRequest("handler_3", service.SearchOptions(limit=1), [str(root)]))
    assert answer.results[0].path == "m3.py"
    assert any("chunked by an older version" in n.what and "6 files" in n.what for n in answer.notes), answer.notes
    deadline = time.time() + 120
    while time.time() < deadline:
        with open_store(cb) as store:
            if store.meta().get("chunker_version") == CHUNKER_VERSION and service.daemon_info(cb) is None:
                break
        time.sleep(0.5)
    with open_store(cb) as store:
        assert store.meta()["chunker_version"] == CHUNKER_VERSION and store.meta()["status"] == "indexed"
    later = service.search(service.SearchRequest("handler_3", service.SearchOptions(limit=1), [str(root)]))
    assert not any("older version" in n.what for n in later.notes)
