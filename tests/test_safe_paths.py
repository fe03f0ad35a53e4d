"""The MCP server's file boundary on real files: escapes, symlinks, NUL bytes, FIFOs, ignore rules."""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path

import pytest
from support.trees import write_tree

from codii_sql.ingest.config import DEFAULT_MAX_FILE_BYTES
from codii_sql.ingest.walk import scan
from codii_sql.service.boundary import (
    FileSet,
    IndexedReader,
    PathRefusedError,
    read_bytes,
    resolve_file,
)


@pytest.fixture
def tree(tmp_path):
    outside = write_tree(tmp_path / "outside", {"secret.txt": "TOPSECRET\n"})
    root = write_tree(tmp_path / "repo", {
        "src/a.py": "def a():\n    return 1\n",
        "src/b.py": "def b():\n    return 2\n",
        "notes.env": "TOKEN=1\n",
        ".ignore": "*.env\n",  # a .gitignore outside a work tree rules nothing, as for rg
    })
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "outdir")
    os.symlink(root / "src" / "a.py", root / "alias.py")
    os.mkfifo(root / "pipe.py")
    return root


def test_relative_and_absolute_paths_inside_the_root_resolve(tree):
    f = resolve_file(tree, "src/a.py")
    assert f.rel == "src/a.py" and f.real == tree / "src" / "a.py"
    assert resolve_file(tree, str(tree / "src" / "b.py")).rel == "src/b.py"
    assert resolve_file(tree, "./src//a.py").rel == "src/a.py"
    assert read_bytes(f) == b"def a():\n    return 1\n"


def test_symlink_inside_the_root_keeps_its_own_path(tree):
    f = resolve_file(tree, "alias.py")
    assert f.rel == "alias.py" and f.real == tree / "src" / "a.py"


@pytest.mark.parametrize("path, reason", [
    ("../outside/secret.txt", "'..' is not allowed"),
    ("src/../../outside/secret.txt", "'..' is not allowed"),
    ("src/../a.py", "'..' is not allowed"),
    ("/etc/passwd", "outside the codebase root"),
    ("leak.txt", "resolves outside the codebase root"),
    ("outdir/secret.txt", "resolves outside the codebase root"),
    ("src/a.py\0.txt", "NUL byte"),
    ("pipe.py", "not a regular file"),
    ("src", "is a directory"),
    ("", "empty"),
    ("missing.py", "no such file"),
])
def test_escapes_and_non_files_are_refused(tree, path, reason):
    with pytest.raises(PathRefusedError, match=reason):
        resolve_file(tree, path)


def test_file_set_refuses_ignored_files(tree):
    fileset = FileSet(tree, {"ignore_patterns": [], "extensions": None, "max_file_bytes": DEFAULT_MAX_FILE_BYTES})
    assert fileset.check("src/a.py").rel == "src/a.py"
    with pytest.raises(PathRefusedError, match="ignore rules"):
        fileset.check("notes.env")
    only_b = FileSet(tree, {"ignore_patterns": ["src/a.py"], "extensions": (".py",), "max_file_bytes": 1 << 20})
    with pytest.raises(PathRefusedError, match="ignore rules"):
        only_b.check("src/a.py")
    with pytest.raises(PathRefusedError, match="extension filter"):
        only_b.check(".ignore")
    with pytest.raises(PathRefusedError, match=r"larger than the codebase's size limit \(4 bytes\)"):
        FileSet(tree, {"ignore_patterns": [], "extensions": None, "max_file_bytes": 4}).check("src/b.py")
    (tree / ".env").write_text("API_KEY=1\n")  # a fresh user was told of .gitignore and size limits
    with pytest.raises(PathRefusedError, match="usually holds credentials"):
        fileset.check(".env")


def test_read_refuses_a_file_swapped_after_the_check(tree):
    f = resolve_file(tree, "src/b.py")
    os.replace(tree / "src" / "a.py", tree / "src" / "b.py")
    with pytest.raises(PathRefusedError, match="changed"):
        read_bytes(f)


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_read_refuses_a_file_that_changed_kind_after_the_check(tree, kind):
    f = resolve_file(tree, "src/b.py")
    (tree / "src" / "b.py").unlink()
    (tree / "src" / "b.py").mkdir() if kind == "folder" else os.mkfifo(tree / "src" / "b.py")
    with pytest.raises(PathRefusedError, match="changed"):
        read_bytes(f)


def test_read_refuses_files_over_the_size_cap(tree):
    with pytest.raises(PathRefusedError, match="larger than 4 bytes"):
        read_bytes(resolve_file(tree, "src/a.py"), max_bytes=4)


def test_get_content_is_capped_by_characters_not_only_lines(tmp_path):
    """A minified bundle's one 1 MB line must not land whole in an agent's context."""
    from codii_sql.service import Codebase, Session, build
    from codii_sql.service.session import MAX_CONTENT_CHARS

    (tmp_path / "bundle.js").write_text("var a=1;" * 130_000 + "\n")  # 1,040,000 characters
    (tmp_path / "wide.py").write_text("".join(f"x{i} = '{'y' * 990}'\n" for i in range(300)))
    cb = Codebase.open(tmp_path)
    build(cb, vectors=False)
    session = Session()
    try:
        one = session.content(cb, "bundle.js", None, None)
        assert len(one["content"]) == MAX_CONTENT_CHARS and one["end_line"] == 1 and "truncated" in one
        wide = session.content(cb, "wide.py", None, None)
        assert len(wide["content"]) <= MAX_CONTENT_CHARS and wide["content"].endswith("\n")
        assert wide["next_start_line"] == wide["end_line"] + 1 and "truncated" not in wide
        pages = [wide]
        while "next_start_line" in pages[-1]:
            pages.append(session.content(cb, "wide.py", pages[-1]["next_start_line"], None))
        assert len(pages) >= 3 and "".join(p["content"] for p in pages) == (tmp_path / "wide.py").read_text()
        assert all(len(p["content"]) <= MAX_CONTENT_CHARS for p in pages)
    finally:
        session.shutdown()


def test_a_link_is_read_only_as_the_file_it_leads_to(tree):
    """A link inside the root never serves what the rules exclude (a fresh user's `innocent.py -> .env`
    served the secret over MCP, HTTP and grep); one to an indexed file reads that file."""
    (tree / ".env").write_text("AWS_SECRET_ACCESS_KEY=1\n")
    os.symlink(".env", tree / "innocent.py")
    os.symlink("notes.env", tree / "notes_link.txt")  # ignored by *.env
    os.mkdir(tree / ".git")
    (tree / ".git" / "config").write_text("[core]\n")
    os.symlink(".git/config", tree / "gitcfg.txt")
    fileset = FileSet(tree, {"ignore_patterns": [], "extensions": None, "max_file_bytes": DEFAULT_MAX_FILE_BYTES})
    with pytest.raises(PathRefusedError, match="usually holds credentials"):
        fileset.check("innocent.py")
    for link, why in (("notes_link.txt", "ignore rules"), ("gitcfg.txt", r"not indexed \(default excluded\)")):
        with pytest.raises(PathRefusedError, match=why):
            fileset.check(link)
    assert read_bytes(fileset.check("alias.py")) == b"def a():\n    return 1\n"
    listed = {f.path for f in scan(tree).files}
    assert not {"innocent.py", "notes_link.txt", "gitcfg.txt", "alias.py", ".env"} & listed and "src/a.py" in listed


def _open_descriptors(under: Path) -> list[str]:
    """What this process holds open under ``under``: the reader's own descriptors, whatever earlier tests'
    threads and garbage open or close meanwhile (a count of every descriptor saw 91 after 93, and 96 after 97,
    in CI)."""
    gc.collect()
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target == str(under) or target.startswith(str(under) + os.sep):
                held.append(target)
    return sorted(held)


def test_the_indexed_reader_goes_down_folders_in_any_order_and_never_through_a_link(tree):
    """grep's reader keeps the last path's folders open: reads in path order, back up and across must
    each give their own file; a link anywhere on the way (the file, a folder), a FIFO, a path that
    climbs out or names nothing, and a root that is gone read as None; every descriptor is closed."""
    (tree / "src" / "deep" / "er").mkdir(parents=True)
    (tree / "src" / "deep" / "er" / "c.py").write_text("c = 3\n")
    (tree / "other").mkdir()
    (tree / "other" / "d.py").write_text("d = 4\n")
    before = _open_descriptors(Path(os.path.realpath(tree)))
    with IndexedReader(os.path.realpath(tree)) as reader:
        got = [reader.read(rel, DEFAULT_MAX_FILE_BYTES) for rel in (
            "src/a.py", "src/deep/er/c.py", "src/b.py", "other/d.py", "src/deep/er/c.py", "notes.env")]
        assert got == [b"def a():\n    return 1\n", b"c = 3\n", b"def b():\n    return 2\n", b"d = 4\n", b"c = 3\n",
                       b"TOKEN=1\n"]
        assert _open_descriptors(Path(os.path.realpath(tree)))  # the last path's folders, held (then closed)
        for refused in ("leak.txt", "outdir/secret.txt", "alias.py", "pipe.py", "src/../notes.env", "src//a.py",
                        "src/missing.py", "src/a.py/x", "src"):
            assert reader.read(refused, DEFAULT_MAX_FILE_BYTES) is None, refused
        assert reader.read("src/a.py", 5) is None  # over the size cap
        (tree / "src").rename(tree / "real_src")
        os.symlink("real_src", tree / "src")  # a folder swapped for a link while its descriptor is not held
        assert reader.read("other/d.py", DEFAULT_MAX_FILE_BYTES) == b"d = 4\n"
        assert reader.read("src/a.py", DEFAULT_MAX_FILE_BYTES) is None
    assert _open_descriptors(Path(os.path.realpath(tree))) == before == []
    with IndexedReader(str(tree / "no_such_root")) as gone:
        assert gone.read("src/a.py", DEFAULT_MAX_FILE_BYTES) is None


def test_a_file_reached_through_a_symlinked_folder_says_where_it_is_indexed(tmp_path, codii_home):
    """The page's file view of such a file said "not indexed yet", which it never would be: the walk indexes
    it once, under its real folder (symlink-folder)."""
    from codii_sql import service

    root = write_tree(tmp_path / "repo", {"real/a.py": "def realfn():\n    return 1\n"})
    os.symlink("real", root / "linked")
    cb = service.open_codebase(root)
    service.build(cb, vectors=False)
    assert service.file_text(cb, "linked/a.py").unindexed == \
        "reached through a symlinked folder, it is indexed as real/a.py"
    assert service.file_text(cb, "real/a.py").unindexed is None
