"""The Merkle tree: directory hashes, diffs that skip equal subtrees, incremental flushes."""

from codii_sql.ingest import merkle


def test_diff_reports_added_modified_removed():
    old = merkle.build({"a.py": "1", "d/b.py": "2", "d/e/c.py": "3"})
    new = merkle.build({"a.py": "1", "d/b.py": "2x", "d/e/c2.py": "3", "n.py": "4"})
    assert merkle.changed_files(old.nodes, new.nodes) == (["d/e/c2.py", "n.py"], ["d/b.py"], ["d/e/c.py"])


def test_equal_trees_have_equal_roots_and_no_diff():
    files = {"x/y/z.py": "h1", "x/w.py": "h2"}
    assert merkle.build(files).root_hash == merkle.build(dict(reversed(files.items()))).root_hash
    assert merkle.changed_files(merkle.build(files).nodes, merkle.build(files).nodes) == ([], [], [])


def test_rename_changes_root_though_content_is_equal():
    assert merkle.build({"a.py": "h"}).root_hash != merkle.build({"b.py": "h"}).root_hash


def test_file_replaced_by_directory():
    old = merkle.build({"x": "1"})
    new = merkle.build({"x/y.py": "1"})
    assert merkle.changed_files(old.nodes, new.nodes) == (["x/y.py"], [], ["x"])


def test_incremental_flush_matches_full_build_and_drops_empty_dirs():
    tree = merkle.build({"a.py": "1", "d/e/c.py": "3"})
    tree.set_file("d/e/c.py", None)
    tree.set_file("d/f.py", "9")
    upserts, deletes = tree.flush()
    assert deletes == ["d/e"] and {n.path for n in upserts} == {"d", ""}
    assert tree.root_hash == merkle.build({"a.py": "1", "d/f.py": "9"}).root_hash
