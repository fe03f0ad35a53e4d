"""The Merkle tree: directory hashes, incremental flushes, and builds that read only the nodes they rehash."""

import shutil

from support.trees import write_tree

from codii_sql import service
from codii_sql.ingest import merkle


def test_equal_trees_have_equal_roots():
    files = {"x/y/z.py": "h1", "x/w.py": "h2"}
    assert merkle.build(files).root_hash == merkle.build(dict(reversed(files.items()))).root_hash


def test_rename_changes_root_though_content_is_equal():
    assert merkle.build({"a.py": "h"}).root_hash != merkle.build({"b.py": "h"}).root_hash


def test_incremental_flush_matches_full_build_and_drops_empty_dirs():
    tree = merkle.build({"a.py": "1", "d/e/c.py": "3"})
    tree.set_file("d/e/c.py", None)
    tree.set_file("d/f.py", "9")
    upserts, deletes = tree.flush()
    assert deletes == ["d/e"] and {n.path for n in upserts} == {"d", ""}
    assert tree.root_hash == merkle.build({"a.py": "1", "d/f.py": "9"}).root_hash


def test_a_name_that_changes_kind_keeps_its_new_node_in_the_builds_order():
    """A build writes new files first and removes old ones last: the old file's removal took the
    folder just written under its name with it (and an emptied folder, the file of its name)."""
    tree = merkle.build({"a.py": "1", "x": "2"})
    tree.set_file("x/y.py", "3")  # written
    tree.set_file("x", None)      # then the file x removed
    tree.flush()
    assert tree.root_hash == merkle.build({"a.py": "1", "x/y.py": "3"}).root_hash
    tree.set_file("x", "4")       # and back: the file x written
    tree.set_file("x/y.py", None)  # then x/y.py removed, emptying the folder x
    tree.flush()
    assert tree.root_hash == merkle.build({"a.py": "1", "x": "4"}).root_hash


def test_a_file_replaced_by_a_folder_and_back_leaves_a_consistent_index(tmp_path, codii_home):
    repo = write_tree(tmp_path / "r", {"src/a.py": "def a():\n    pass\n", "src/b.py": "def b():\n    pass\n"})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    (repo / "src" / "b.py").unlink()
    write_tree(repo, {"src/b.py/c.py": "def c():\n    pass\n"})
    service.build(cb, vectors=False)
    assert service.doctor(cb, repair=False)["consistent"]
    shutil.rmtree(repo / "src" / "b.py")
    write_tree(repo, {"src/b.py": "def b():\n    return 2\n"})
    report = service.build(cb, vectors=False)
    assert report.removed == 1 and service.doctor(cb, repair=False)["consistent"]
    assert [d["path"] for d in service.find_symbol(cb, "c")["definitions"]] == []


def test_an_unchanged_tree_reads_only_the_root_of_its_merkle_tree(tmp_path, codii_home, monkeypatch):
    """A no-change update (every search's) reads no Merkle node but the root: loading and rebuilding
    the kernel's ~100k nodes was most of its 7 s. A binary file, skipped after reading, keeps it so;
    an edit reads the nodes along its path alone."""
    from codii_sql.storage.store import Store

    repo = write_tree(tmp_path / "r", {"src/a.py": "def a():\n    pass\n", "src/b.py": "def b():\n    pass\n"})
    (repo / "blob.dat").write_bytes(b"\x00\x01\x02" * 100)
    cb = service.open_codebase(repo)
    first = service.build(cb, vectors=False)
    asked = []
    rows = Store.rows
    monkeypatch.setattr(Store, "rows", lambda self, name, params=None: asked.append(name) or rows(self, name, params))
    stamp = (cb.db_path.stat().st_mtime_ns, cb.db_path.stat().st_size)
    again = service.build(cb, vectors=False)
    assert "merkle_all" not in asked and again.merkle_root == first.merkle_root
    # Nothing to do writes nothing (every search's update, every watched event of an ignored file).
    assert (cb.db_path.stat().st_mtime_ns, cb.db_path.stat().st_size) == stamp
    assert again.files == first.files and again.chunks == first.chunks
    assert (again.added, again.modified, again.removed) == (0, 0, 0)
    (repo / "src" / "b.py").write_text("def b():\n    return 2\n")
    edited = service.build(cb, vectors=False)
    assert "merkle_all" not in asked and "merkle_near" in asked
    assert edited.modified == 1 and edited.merkle_root != first.merkle_root
    assert service.doctor(cb, repair=False)["consistent"]


def test_a_same_size_rewrite_that_keeps_its_mtime_is_noticed(tmp_path, codii_home):
    """`cp -p` of a same-size file (npm tarballs date every file 1985): size and mtime equal, content not.
    The build re-hashed nothing and searches called the old chunk fresh; its ctime moved, and counts now."""
    import os

    from codii_sql.search.results import SearchOptions

    repo = write_tree(tmp_path / "r", {"pkg.json": '{"version": "3.23.7"}\n'})
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)
    before = os.stat(repo / "pkg.json")
    (repo / "pkg.json").write_text('{"version": "3.23.8"}\n')
    os.utime(repo / "pkg.json", ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(repo / "pkg.json")
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    def first():
        return service.search(service.SearchRequest("version", SearchOptions(mode="bm25", limit=1), [str(repo)],
                                                    update=False)).results[0]

    assert first().stale is True
    report = service.build(cb, vectors=False)
    assert report.modified == 1
    fresh = first()
    assert "3.23.8" in fresh.content and fresh.stale is False


def test_builds_that_rehash_only_the_changed_folders_keep_the_whole_tree_right(tmp_path, codii_home):
    """A build reads the Merkle nodes above its changed files alone (plan.py's _tree_near): after each of
    these changes (a new deep folder, a folder emptied, a rename across folders, an edit at the root, a
    file that becomes a folder) every stored node equals the tree built whole from the files' hashes."""
    import random

    from codii_sql.storage.store import Store

    rng = random.Random(7)
    files = {f"d{i % 3}/e{i % 2}/f{i}.py": f"def f{i}():\n    return {i}\n" for i in range(12)}
    files["top.py"] = "X = 1\n"
    repo = write_tree(tmp_path / "r", files)
    cb = service.open_codebase(repo)
    service.build(cb, vectors=False)

    def check():
        with Store(cb.db_path, create=False) as store:
            hashes = {r["path"]: r["hash"] for r in store.rows("files_all")}
            nodes = {r["path"]: (r["parent"], bool(r["is_dir"]), r["hash"]) for r in store.rows("merkle_all")}
        whole = merkle.build(hashes)
        assert nodes == {n.path: (n.parent, n.is_dir, n.hash) for n in whole.nodes.values()}
        assert service.doctor(cb, repair=False)["consistent"]

    write_tree(repo, {"d0/new/deeper/g.py": "def g():\n    pass\n"})
    service.build(cb, vectors=False)
    check()
    for name in [p for p in files if p.startswith("d1/e1/")]:
        (repo / name).unlink()
    service.build(cb, vectors=False)
    check()
    moved = rng.choice([p for p in files if p.startswith("d2/")])
    (repo / moved).rename(repo / "d0" / "moved.py")
    (repo / "top.py").write_text("X = 2\n")
    service.build(cb, vectors=False)
    check()
    (repo / "top.py").unlink()
    write_tree(repo, {"top.py/inner.py": "Y = 3\n"})
    report = service.build(cb, vectors=False)
    assert (report.added, report.removed) == (1, 1)
    check()
