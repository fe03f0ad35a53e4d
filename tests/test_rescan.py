"""A watcher's update looks at the paths it heard change, not the whole tree (walk.rescan): each kind of
change gives what a walk gives, and a change that may reach beyond its own path walks (real files, builds)."""

from __future__ import annotations

import collections
import os
import threading

import pytest
from support.trees import write_tree

from codii_sql import service
from codii_sql.codebase import Codebase
from codii_sql.ingest import scan_stats, walk
from codii_sql.service.status import open_store, scan_rules

TREE = {
    "a.py": "def alpha():\n    return 1\n",
    "sub/b.py": "def beta():\n    return 2\n",
    "sub/deep/c.py": "def gamma():\n    return 3\n",
    "sub/.gitignore": "*.log\n",
    "docs/guide.md": "# Guide\n\nHow to use it.\n",
    ".codii.yaml": "max_file_bytes: 4000\n",
}


def answer(result: walk.ScanResult) -> tuple:
    """What a build reads of a scan's answer (not ``ignored_by``: a record keeps no hiding rules)."""
    return ([(f.path, f.size, f.mtime_ns) for f in result.files], collections.Counter(result.skipped),
            sorted(result.skipped_paths), result.dirs, result.attributes.fingerprint)


def edit(root, rel: str, text: str | bytes | None) -> None:
    path = root / rel
    if text is None:
        path.unlink()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())


CHANGES = {
    "an edit": [("sub/b.py", "def beta():\n    return 20\n")],
    "a new file": [("sub/deep/d.py", "def delta():\n    pass\n")],
    "a removal": [("sub/deep/c.py", None)],
    "a rename": [("a.py", None), ("sub/a2.py", "def alpha():\n    return 1\n")],
    "a file grown too large": [("docs/guide.md", "# Guide\n" + "x" * 5000 + "\n")],
    "a new ignored file": [("sub/run.log", "log line\n")],
    "a secret's name": [("sub/.env", "TOKEN=1\n")],
    "an editor's temporary file made and gone": [("sub/.b.py.swp", "x"), ("sub/.b.py.swp", None)],
    "a binary extension": [("docs/logo.png", b"\x89PNG\r\n")],
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_rescan_of_the_changed_paths_answers_as_a_walk(tmp_path, change):
    root = write_tree(tmp_path / "repo", TREE)
    rules = dict(max_file_bytes=4000)
    saved = walk.scan(root, **rules)
    for rel, text in CHANGES[change]:
        edit(root, rel, text)
    again = walk.rescan(root, saved, {rel for rel, _ in CHANGES[change]}, **rules)
    assert again is not None
    assert answer(again) == answer(walk.scan(root, **rules))


WALKS = {
    "a new folder": "sub/new/",
    "a removed folder": "sub/deep/",
    "a new link to a folder": "sub/link",
    "an ignore file": "sub/.gitignore",
    "the config": ".codii.yaml",
    "a build tool's file": "Cargo.toml",
    "an attribute file": ".gitattributes",
    "Git's index": ".git/index",
    "outside the root": "../elsewhere.py",
}


@pytest.mark.parametrize("change", sorted(WALKS))
def test_a_change_that_may_reach_beyond_its_path_asks_for_a_walk(tmp_path, change):
    root = write_tree(tmp_path / "repo", TREE)
    saved = walk.scan(root, max_file_bytes=4000)
    rel = WALKS[change]
    if rel == "sub/new/":
        (root / "sub" / "new").mkdir()
    elif rel == "sub/link":  # a new user's `ln -s ../tests`: never counted as symlink-folder while watched
        os.symlink("deep", root / "sub" / "link")
    elif rel == "sub/deep/":
        (root / "sub" / "deep" / "c.py").unlink()
        (root / "sub" / "deep").rmdir()
    assert walk.rescan(root, saved, {rel.rstrip("/")}, max_file_bytes=4000) is None


def test_too_many_changes_or_none_left_ask_for_a_walk(tmp_path):
    root = write_tree(tmp_path / "repo", TREE)
    saved = walk.scan(root, max_file_bytes=4000)
    assert walk.rescan(root, saved, {f"x{i}.py" for i in range(walk.RESCAN_MAX + 1)}, max_file_bytes=4000) is None
    gone = {f.path for f in saved.files}
    for rel in gone:
        (root / rel).unlink()
    assert walk.rescan(root, saved, gone, max_file_bytes=4000) is None  # the hiding rules need a walk


def test_a_watched_edit_reaches_the_index_without_a_walk(tmp_path, codii_home, monkeypatch):
    """The watcher's update hands the paths it heard to the build, which rescans them from the scan the
    last build kept: no walk, and the index is what a full build makes. A kernel edit's update went
    from 1.3 s to ~0.6 s (docs/benchmarks.md "Tenth round")."""
    root = write_tree(tmp_path / "repo", TREE)
    cb = Codebase.open(root)
    service.build(cb, vectors=False)
    walks = []
    scan = walk.scan
    monkeypatch.setattr("codii_sql.ingest.plan.scan", lambda *a, **k: walks.append(a) or scan(*a, **k))
    updates: list = []
    stop = threading.Event()
    watcher = service.Watcher([cb], stop=stop, on_update=updates.append)
    ready = threading.Event()
    thread = threading.Thread(target=watcher.run, kwargs={"ready": ready.set}, daemon=True)
    thread.start()
    try:
        assert ready.wait(30)
        ready_walks = len(walks)  # the first check walks: what changed while it started is unknown
        edit(root, "sub/b.py", "def beta_watched():\n    return 5\n")
        edit(root, "sub/deep/new.py", "def fresh_one():\n    return 6\n")
        for _ in range(300):
            if service.find_symbol(cb, "fresh_one", update=False)["definitions"] and \
                    service.find_symbol(cb, "beta_watched", update=False)["definitions"]:
                break
            stop.wait(0.05)
        else:
            raise AssertionError(f"the edits never reached the index: {updates}")
        assert len(walks) == ready_walks, "the watched edit walked the tree"
    finally:
        stop.set()
        thread.join(30)
    assert service.doctor(cb, repair=False)["consistent"]
    with open_store(cb) as store:
        kept = scan_stats.saved_scan(store, scan_rules(cb))
    assert kept is not None and answer(kept) == answer(walk.scan(root, **scan_rules(cb)))


def test_the_record_keeps_a_scan_whole(tmp_path):
    root = write_tree(tmp_path / "repo", {**TREE, ".gitattributes": "*.md linguist-documentation\n"})
    result = walk.scan(root, max_file_bytes=4000)
    path = tmp_path / "rec.scan"
    scan_stats.save(path, result, "k")
    assert answer(scan_stats.load(path, "k")) == answer(result)
    assert scan_stats.load(path, "other") is None and answer(scan_stats.load(path, None)) == answer(result)
    os.truncate(path, 10)
    assert scan_stats.load(path, "k") is None
