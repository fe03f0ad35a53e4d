"""The walk against real ``git ls-files --cached --others --exclude-standard``: fuzzed ignore files,
every place Git reads ignore rules from, tracked files, and real trees."""

from __future__ import annotations

import codecs
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.answers import last_json
from support.trees import REPO_ROOT

from codii_sql.ingest.ignore import read_ignore_file
from codii_sql.ingest.repositories import GIT_TIMEOUT_SECONDS
from codii_sql.ingest import walk
from codii_sql.ingest.walk import scan

#: Names codii-sql adds no rule of its own for (no lock file, secret, binary or build folder).
NAMES = ["a", "b", "ab", "a.py", "b.txt", "x.log", "A.PY", "c d.py", "[x]", "e!", "#f", "g*", "h?", "sp ", "ü.py",
         ".hid", "]x", "-", "a-", "\\a", "x]", "[x", "1", "a1", "b2.txt", "new\nline"]
FOLDERS = ["", "a", "b", "src", "src/a", "src/b/c", "lib", "a/b", "deep/a/b/c"]
PIECES = ["a", "b", "ab", "src", "lib", "c", "deep", "*", "**", "?", "[ab]", "[!a]", "*.py", "*.txt", "x.log", "a*",
          "*b", "\\#f", "e\\!", "g\\*", "[[]x]", "sp\\ ", "ü.py", ".hid", "A.PY", "[a-c]", "a**", "**b", "***", "[]]x",
          "[a-]", "[^a]*", "[[:alpha:]]", "[[:digit:]]*", "\\a", "a\\", "[!]]", "*.[pt]*", "a/**/b", "**/", "?*", "[x",
          "x]", "-", "[a\\]]", "]", "[[:bad:]]"]


def git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout


def listed(root: Path) -> set[str]:
    """What Git lists under ``root`` (existing files only: --cached also names deleted ones)."""
    out = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return {p for p in map(os.fsdecode, out.split(b"\0")) if p and os.path.lexists(root / p)}


@pytest.fixture
def git_home(tmp_path, monkeypatch) -> Path:
    """A user of Git of one's own: HOME, XDG_CONFIG_HOME and a global config file in ``tmp_path``."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


def write(root: Path, rel: str, data: str | bytes = "x\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def test_every_place_git_reads_ignore_rules_from(tmp_path, git_home, monkeypatch):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    files = ["top.py", "keep.py", "notes.tmp", "a.local", "b.global", "c.xdg", "secrets/key.txt", "sub/x.py",
             "sub/generated/g.py", "sub/deep/d.py", "sub/deep/skip.me", "sub/forced.tmp", "sub/tracked/t.py"]
    for rel in files:
        write(repo, rel)
    # A byte-order mark opens the file (Windows editors): Git drops it, so secrets/ is ignored.
    write(repo, ".gitignore", codecs.BOM_UTF8 + b"secrets/\r\n*.tmp\r\n/sub/generated/\r\n")
    write(repo, "sub/.gitignore", "deep/skip.me\ntracked/\n")
    write(repo, ".git/info/exclude", "*.local\n")
    write(git_home, "global-ignore", "*.global\n")
    write(git_home, ".gitconfig", f"[core]\n\texcludesFile = {git_home / 'global-ignore'}\n")
    git(repo, "add", "-f", "sub/forced.tmp", "sub/tracked/t.py")  # tracked although ignored
    want = {"top.py", "keep.py", "c.xdg", ".gitignore", "sub/.gitignore", "sub/x.py", "sub/deep/d.py",
            "sub/forced.tmp", "sub/tracked/t.py"}
    assert {f.path for f in scan(repo).files} == listed(repo) == want
    # Without core.excludesFile, Git reads $XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore.
    write(git_home, ".gitconfig", "")
    write(git_home, ".config/git/ignore", "*.xdg\n")
    assert {f.path for f in scan(repo).files} == listed(repo) == want - {"c.xdg"} | {"b.global"}
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    write(tmp_path, "xdg/git/ignore", "keep.py\n")
    assert {f.path for f in scan(repo).files} == listed(repo) == want - {"keep.py"} | {"b.global"}
    # A subfolder of the repository: the rules of the folders above it apply, relative to their folders.
    sub = repo / "sub"
    assert {f.path for f in scan(sub).files} == listed(sub) == {".gitignore", "x.py", "deep/d.py", "forced.tmp",
                                                                "tracked/t.py"}


def test_a_bom_opens_codiiignore_and_gitattributes_as_well(tmp_path):
    write(tmp_path, ".codiiignore", codecs.BOM_UTF8 + b"private/\n")
    write(tmp_path, ".gitattributes", codecs.BOM_UTF8 + b"gen/** linguist-generated\n")
    for rel in ("private/p.py", "gen/g.py", "main.py"):
        write(tmp_path, rel)
    result = scan(tmp_path)
    assert {f.path for f in result.files} == {".codiiignore", ".gitattributes", "gen/g.py", "main.py"}
    assert result.attributes.marks("gen/g.py") == {"generated": True}


def test_a_pattern_matching_the_root_itself_does_not_empty_its_index(tmp_path, git_home):
    """The one deliberate difference: the folder one asks to index is indexed (Git lists nothing)."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    write(repo, ".gitignore", "build/\n*.log\n")
    for rel in ("build/docs/index.md", "build/docs/run.log"):
        write(repo, rel)
    assert {f.path for f in scan(repo / "build" / "docs").files} == {"index.md"}


@st.composite
def trees(draw):
    """Files, ignore files (with BOMs and CRLF), tracked files, global rules and the folder indexed."""
    files = sorted(set(draw(st.lists(st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)), min_size=5,
                                     max_size=30))))
    pattern = st.builds(lambda neg, lead, parts, trail, spaces: neg + lead + "/".join(parts) + trail + spaces,
                        st.sampled_from(["", "", "", "!"]), st.sampled_from(["", "", "", "/"]),
                        st.lists(st.sampled_from(PIECES), min_size=1, max_size=3),
                        st.sampled_from(["", "", "", "/"]), st.sampled_from(["", "", "", "  "]))
    ignore_files = draw(st.dictionaries(st.sampled_from(FOLDERS[:6]), st.tuples(
        st.lists(st.one_of(pattern, st.sampled_from(["", "# c", "#*.py"])), min_size=1, max_size=6),
        st.booleans(), st.booleans()), max_size=4))
    return {
        "files": files, "ignore": ignore_files,
        "exclude": draw(st.lists(pattern, max_size=2)), "global": draw(st.lists(pattern, max_size=2)),
        "tracked": draw(st.lists(st.integers(0, len(files) - 1), max_size=4)),
        "root": draw(st.sampled_from(["", "", "src", "a", "deep/a"])),
    }


def _make(tmp: Path, home: Path, tree: dict) -> Path:
    repo = tmp / "repo"
    git(tmp, "init", "-q", str(repo))
    made = []
    for folder, name in tree["files"]:
        rel = f"{folder}/{name}" if folder else name
        try:
            write(repo, rel)
            made.append(rel)
        except (IsADirectoryError, NotADirectoryError, FileExistsError):
            pass  # a name taken by a folder of the same name
    tracked = sorted({made[i] for i in tree["tracked"] if i < len(made)})
    if tracked:
        git(repo, "add", "-f", "--", *tracked)
    for folder, (lines, bom, crlf) in tree["ignore"].items():
        if (repo / folder).is_dir():
            text = ("\r\n" if crlf else "\n").join(lines).encode()
            write(repo, f"{folder}/.gitignore" if folder else ".gitignore", (codecs.BOM_UTF8 if bom else b"") + text)
    write(repo, ".git/info/exclude", "\n".join(tree["exclude"]) + "\n")
    write(home, "global-ignore", "\n".join(tree["global"]) + "\n")
    return repo


@pytest.mark.slow
@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=trees())
def test_fuzzed_ignore_rules_list_what_git_lists(git_home, tree):
    write(git_home, ".gitconfig", f"[core]\n\texcludesFile = {git_home / 'global-ignore'}\n")
    with tempfile.TemporaryDirectory() as tmp:
        repo = _make(Path(tmp), git_home, tree)
        root = repo / tree["root"]
        assume(root.is_dir())
        parts = tree["root"].split("/") if tree["root"] else []
        chain = ["/".join(parts[:i + 1]) for i in range(len(parts))]
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", *chain], cwd=repo) if chain else None
        assume(ignored is None or ignored.returncode == 1)  # the root itself is never ignored (see above)
        scanned = {f.path for f in scan(root).files}
        assert scanned == listed(root)
        # One path at a time (a symbol look-up, a file read over MCP) decides as the whole walk does.
        every = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}
        assert {rel for rel in every if walk.listed(root, rel)} == scanned


def codii_ignored(root: Path, path: str) -> bool:
    """Whether one of the tree's ``.codiiignore`` files (codii-sql's own rules, not Git's) matches ``path``."""
    for ignore_file in root.rglob(".codiiignore"):
        folder = ignore_file.parent.relative_to(root).as_posix()
        level = read_ignore_file(str(ignore_file), b"" if folder == "." else os.fsencode(folder + "/"), can_rescue=True)
        if level is not None and path.startswith(level.base.decode()) and level.verdict(os.fsencode(path), False):
            return True
    return False


def assert_walk_is_git(root: Path) -> int:
    """What the walk lists is what Git lists, but for codii-sql's own exclusions: each is in the
    skipped paths (itself or a folder above it) for a reason of codii-sql's, or for a ``.codiiignore``;
    no folder the walk calls ignored holds a file Git lists. Returns the number of files listed."""
    result = scan(root)
    walked, git_listed = {f.path for f in result.files}, listed(root)
    assert walked <= git_listed
    for path in git_listed - walked:
        why = [reason for p, reason in result.skipped_paths if p == path or p.endswith("/") and path.startswith(p)]
        assert why and (why[0] != "ignored" or codii_ignored(root, path)), path
    pruned = [p for p, reason in result.skipped_paths if reason == "ignored" and p.endswith("/")]
    assert not [p for p in pruned if any(g.startswith(p) for g in git_listed)]
    return len(walked)


@pytest.mark.slow
def test_a_copy_of_the_standard_library_with_a_real_python_gitignore(tmp_path, git_home):
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    repo = tmp_path / "lib"
    git(tmp_path, "init", "-q", str(repo))
    for package in ("json", "email", "asyncio", "unittest", "xml", "importlib", "http", "logging", "multiprocessing",
                    "urllib", "concurrent", "ctypes", "encodings"):
        shutil.copytree(stdlib / package, repo / package, symlinks=True)
    # GitHub's Python.gitignore, in part: build outputs, caches, environments, coverage, notebooks.
    write(repo, ".gitignore", "__pycache__/\n*.py[cod]\n*$py.class\n*.so\nbuild/\ndist/\n*.egg-info/\n"
                              ".installed.cfg\n*.egg\n.tox/\n.coverage\n.coverage.*\n.cache\nnosetests.xml\n"
                              "coverage.xml\n*.cover\n.hypothesis/\n.pytest_cache/\n.env\n.venv\nenv/\nvenv/\n"
                              ".ipynb_checkpoints\n/site\n.mypy_cache/\n**/test_*.py\n!unittest/test/test_case.py\n")
    write(repo, "email/.gitignore", "_*.py\n!__init__.py\n")
    write(repo, ".git/info/exclude", "xml/dom/\n")
    write(git_home, ".gitconfig", f"[core]\n\texcludesFile = {git_home / 'global-ignore'}\n")
    write(git_home, "global-ignore", "*.orig\n.DS_Store\nasyncio/windows_*\n")
    git(repo, "add", "-f", "asyncio/windows_events.py", "email/_parseaddr.py")  # tracked, then ignored
    assert assert_walk_is_git(repo) > 200
    assert assert_walk_is_git(repo / "email") > 20


@pytest.mark.slow
def test_this_checkout_lists_what_git_lists(git_home):
    if not (REPO_ROOT / ".git").exists():
        pytest.skip(f"{REPO_ROOT} is not a Git checkout (an sdist or a copy): nothing to compare with")
    assert assert_walk_is_git(REPO_ROOT) > 100


@pytest.mark.slow
def test_a_fifo_in_place_of_an_ignore_file_never_blocks_the_walk(tmp_path, git_home):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    write(repo, "sub/a.py")
    (repo / ".git/info/exclude").unlink(missing_ok=True)
    for fifo in (repo / ".git/info/exclude", repo / ".gitignore", git_home / ".config/git/ignore"):
        fifo.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(fifo)
    found: list[set[str]] = []
    walk = threading.Thread(target=lambda: found.append({f.path for f in scan(repo / "sub").files}), daemon=True)
    started = time.monotonic()
    walk.start()
    walk.join(timeout=3 * GIT_TIMEOUT_SECONDS)
    assert found == [{"a.py"}]  # a blocking open() of any of them would still be waiting
    # Git itself blocks on such a FIFO (git status hangs there): the walk waits for it this long at most.
    assert time.monotonic() - started < GIT_TIMEOUT_SECONDS + 5


def test_a_build_that_indexes_nothing_names_the_rule_that_hid_everything(tmp_path, git_home, codii_home):
    """The Debian kernel tarball's root .gitignore ends with ``/*`` and ``!/debian/``: git and the
    walk ignore every top-level entry, and the build says which rule did it, as git check-ignore -v does."""
    from click.testing import CliRunner

    from codii_sql.cli import cli

    repo = tmp_path / "linux-source-6.12"
    write(repo, ".gitignore", "*.o\n*.ko\n\n#\n# Debian packaging: ignore everything at the top level\n#\n/*\n!/debian/\n")
    for rel in ("Makefile", "kernel/fork.c", "mm/slab.c", "README"):
        write(repo, rel, "x\n")
    git(repo, "init", "-q")
    assert git(repo, "check-ignore", "-v", "--no-index", "kernel").split(b"\t")[0] == b".gitignore:7:/*"

    res = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--json"])
    report = last_json(res.output)
    assert report["files"] == 0 and report["hidden_by"] == [{"where": ".gitignore:7", "rule": "/*", "paths": 5}]
    text = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).output
    assert "nothing to index: the ignore rules leave every path out, most by .gitignore:7 `/*` (5 paths)" in text
    write(repo, "debian/rules", "x\n")  # what the tarball's rules keep: an index, and no such note
    assert last_json(CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--json"]).output)["hidden_by"] == []


@pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep")
def test_ignore_and_rgignore_files_leave_out_what_ripgrep_leaves_out(tmp_path, git_home):
    """A new user's `.ignore` and `.rgignore` were not read: grep answered from a.txt and b.txt, which rg (and fd,
    ag) leave out. They sit over the folder's .gitignore, .rgignore over .ignore, and exclude tracked files too."""
    root = tmp_path / "repo"
    for rel in ("a.txt", "b.txt", "c.txt", "d.txt", "keep.log", "x.log", "sub/c.txt", "sub/e.txt", "sub/f.txt",
                "tracked.md"):
        write(root, rel)
    write(root, ".gitignore", "*.log\n")
    write(root, ".ignore", "a.txt\n!keep.log\nf.txt\ntracked.md\n")
    write(root, ".rgignore", "b.txt\n!f.txt\n")
    write(root, "sub/.ignore", "c.txt\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    rg = subprocess.run(["rg", "--files", "--no-config"], cwd=root, capture_output=True, text=True).stdout.split()
    ours = {f.path for f in scan(root).files if not f.path.rpartition("/")[2].startswith(".")}  # rg: no --hidden
    assert ours == set(rg) == {"c.txt", "d.txt", "keep.log", "sub/e.txt", "sub/f.txt"}, (sorted(ours), sorted(rg))


@pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep")
def test_outside_a_work_tree_a_gitignore_rules_nothing_as_for_rg(tmp_path, git_home):
    """A new user's ujson sdist (no .git) holds a .gitignore that ignores lib/, its whole C core: the index left it
    out where rg, which reads a .gitignore only inside a Git repository, found the function grep said was not
    there (the Debian kernel tarball's root .gitignore hid every file the same way). A repository inside a folder
    of several, none of them in one, keeps its own .gitignore."""
    root = tmp_path / "sdist"
    for rel in ("lib/encoder.c", "lib/decoder.h", "python/ujson.c", "build.log", "sub/.ignore-me.txt", "repo/a.py",
                "repo/gen/out.py", "repo/x.log", "other/x.log"):
        write(root, rel)
    write(root, ".gitignore", "lib/\n*.log\n")
    write(root, "repo/.gitignore", "gen/\n*.log\n*.py\n!a.py\n")
    write(root, "repo/inner/own.py")  # a repository inside that one: repo's *.py does not hold there (helper 2)
    git(root / "repo", "init", "-q")
    git(root / "repo" / "inner", "init", "-q")
    rg = subprocess.run(["rg", "--files", "--no-config"], cwd=root, capture_output=True, text=True).stdout.split()
    ours = {f.path for f in scan(root).files if not any(p.startswith(".") for p in f.path.split("/"))}
    assert ours == set(rg), (sorted(ours), sorted(rg))
    assert {"lib/encoder.c", "build.log", "other/x.log", "repo/a.py", "repo/inner/own.py"} <= ours
    assert not {"repo/gen/out.py", "repo/x.log"} & ours
    git(root, "init", "-q")  # the same folder as a work tree: Git's rules hold
    assert {f.path for f in scan(root).files} >= {"python/ujson.c"} and "lib/encoder.c" not in \
        {f.path for f in scan(root).files}


@pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep")
@pytest.mark.parametrize("files", [
    {"sub/keep.py": "x\n", "sub/drop.py": "x\n", "sub/.gitignore": "*.py\n", ".ignore": "!sub/keep.py\n"},
    {"sub/b.txt": "x\n", "sub/c.md": "x\n", ".rgignore": "*.txt\n", "sub/.ignore": "!b.txt\n*.md\n"},
    {"a/b/deep.log": "x\n", "a/b/.gitignore": "!deep.log\n", ".ignore": "*.log\n", "top.log": "x\n"},
])
def test_an_ignore_file_of_higher_kind_decides_before_a_deeper_one_of_lower_kind(tmp_path, git_home, files):
    """rg orders ignore files by kind first (.rgignore, .ignore, .gitignore), the deepest of a kind first: a new
    user's root .ignore negation did not take back what a sub-folder's .gitignore left out, and a sub-folder's
    .ignore negation took back what the root .rgignore left out."""
    root = tmp_path / "repo"
    for rel, text in files.items():
        write(root, rel, text)
    git(root, "init", "-q")
    rg = subprocess.run(["rg", "--files", "--no-config"], cwd=root, capture_output=True, text=True).stdout.split()
    ours = {f.path for f in scan(root).files if not f.path.rpartition("/")[2].startswith(".")}
    assert ours == set(rg), (sorted(ours), sorted(rg))
