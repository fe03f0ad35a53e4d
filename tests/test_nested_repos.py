"""Nested repositories (issue 16): a folder with its own .git is another codebase, as Git treats it."""

from __future__ import annotations

import json

from click.testing import CliRunner
from support.answers import last_json
from support.trees import write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.ingest.walk import SKIP_REASONS, scan
from codii_sql.service.watching import Follow

def git_dir(at: str, **more: str) -> dict[str, str]:
    """The files that make ``at`` a git directory to Git (HEAD, objects/, refs/)."""
    return {f"{at}/HEAD": "ref: refs/heads/main\n", f"{at}/objects/info/packs": "", f"{at}/refs/heads/main": "0" * 40,
            **{f"{at}/{k}": v for k, v in more.items()}}


TREE = {
    **git_dir(".git"),
    "app/main.py": "def main():\n    return 0\n",
    "libs/sub/.git": "gitdir: ../../.git/modules/libs/sub\n",  # a submodule
    **git_dir(".git/modules/libs/sub"),
    "libs/sub/sub.py": "def from_the_submodule():\n    pass\n",
    ".worktrees/feat/.git": "gitdir: ../../.git/worktrees/feat\n",  # git worktree add .worktrees/feat
    ".git/worktrees/feat/HEAD": "ref: refs/heads/feat\n", ".git/worktrees/feat/commondir": "../..\n",
    ".worktrees/feat/app/main.py": "def main():\n    return 1\n",
    **git_dir("tools/cloned/.git"),  # a repository cloned inside
    "tools/cloned/x.py": "def cloned():\n    pass\n",
    "notes/.git": "not a gitdir link\n",  # no repository: an odd file
    "notes/todo.py": "def todo():\n    pass\n",
    # Git lists these folders' files as the outer repository's own: no HEAD, or a dangling link.
    "stray/.git/description": "left behind\n",
    "stray/kept.py": "def kept():\n    pass\n",
    "dangling/.git": "gitdir: ../gone/.git\n",
    "dangling/also.py": "def also():\n    pass\n",
}


def test_the_build_leaves_nested_repositories_out_and_says_so(tmp_path):
    repo = write_tree(tmp_path / "repo", TREE)
    res = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--json"], catch_exceptions=False)
    report = last_json(res.output)
    assert report["files"] == 4  # app/main.py, notes/todo.py, stray/kept.py, dangling/also.py (no .git file itself)
    assert report["skipped"]["nested-repository"] == 3 and "nested-repository" in SKIP_REASONS
    text = CliRunner().invoke(cli, ["build", str(repo), "--force", "--no-vectors"], catch_exceptions=False).output
    assert "nested-repository 3" in text
    found = CliRunner().invoke(cli, ["search", "from_the_submodule cloned", "--path", str(repo), "--json"]).output
    assert {r["path"] for r in json.loads(found)["results"]} <= {"app/main.py", "notes/todo.py", "stray/kept.py",
                                                                "dangling/also.py"}


def test_outside_a_git_work_tree_a_folder_of_repositories_is_indexed_whole(tmp_path):
    tree = {k: v for k, v in TREE.items() if not k.startswith(".git/")}
    result = scan(write_tree(tmp_path / "folder", tree))
    assert "nested-repository" not in result.skipped
    assert {"libs/sub/sub.py", "tools/cloned/x.py"} <= {f.path for f in result.files}


def test_a_codiiignore_negation_takes_a_nested_repository_back(tmp_path):
    result = scan(write_tree(tmp_path / "repo", {**TREE, ".codiiignore": "!libs/sub/\n"}))
    assert result.skipped["nested-repository"] == 2
    assert "libs/sub/sub.py" in {f.path for f in result.files}


def test_watch_ignores_events_under_a_nested_repository(tmp_path):
    repo = write_tree(tmp_path / "repo", TREE)
    follow = Follow(service.open_codebase(repo))
    follow.rescan()
    root = str(repo.resolve())
    assert follow.wants(f"{root}/app/new.py")
    assert not follow.wants(f"{root}/libs/sub/sub.py") and not follow.wants(f"{root}/libs/sub/new.py")
    assert not follow.wants(f"{root}/.worktrees/feat/app/main.py")
    assert not follow.wants(f"{root}/tools/cloned/.git/index")


def test_an_agent_reads_a_subfolder_as_search_does_and_is_told_to_index_a_repository_of_its_own(tmp_path, codii_home):
    """A new user's agent: search_code and find_symbol took a subfolder path, grep_code, get_content and
    get_file_outline refused it ("pass path=ROOT"); a clone inside the indexed folder was refused with the
    advice to search the outer folder, whose index leaves it out, while the CLI indexed it on its own."""
    import asyncio

    from test_mcp import call, refused, server

    root = write_tree(tmp_path / "outer", {**TREE, "pkg/mod.py": "def handler_of_pkg():\n    return 1\n"})
    assert CliRunner().invoke(cli, ["build", str(root), "--no-vectors"]).exit_code == 0
    write_tree(root / "clone", {**git_dir(".git"), "c.py": "def in_the_clone():\n    pass\n"})  # after the build
    sub = str(root / "pkg")

    async def run():
        async with server(codii_home) as s:
            grepped = await call(s, "grep_code", path=sub, pattern="handler_of_pkg")
            assert [f["path"] for f in grepped["files"]] == ["pkg/mod.py"]
            assert "def handler_of_pkg" in (await call(s, "get_content", path=sub, file="pkg/mod.py"))["content"]
            outline = await call(s, "get_file_outline", path=sub, file="pkg/mod.py")
            assert "handler_of_pkg" in json.dumps(outline)
            # or the file relative to the folder passed (the answer still names it from the root)
            assert (await call(s, "get_content", path=sub, file="mod.py"))["path"] == "pkg/mod.py"
            assert (await call(s, "get_file_outline", path=sub, file="mod.py"))["path"] == "pkg/mod.py"
            assert (await call(s, "get_indexing_status", path=sub))["codebase"] == str(root)  # as search reads it
            told = await refused(s, "search_code", path=str(root / "clone"), query="in the clone")
            assert "clone is not indexed" in told and "index_codebase" in told and "lies inside" not in told, told

    asyncio.run(run())


def test_a_search_of_a_folder_holding_indexed_codebases_builds_nothing_and_says_what_to_do(tmp_path, monkeypatch):
    """A new user's `grep x ../..` from inside a repository built a 502 MB index of the folder above, each
    codebase it held indexed again; an explicit build still indexes the whole folder."""
    top = write_tree(tmp_path / "top", {"inner/a.py": "def alpha():\n    return 1\n", "b.py": "x = 1\n"})
    assert CliRunner().invoke(cli, ["build", str(top / "inner"), "--no-vectors"]).exit_code == 0
    monkeypatch.chdir(top / "inner")
    for args in (["grep", "alpha", ".."], ["search", "alpha", "--path", ".."], ["symbol", "alpha", "--path", ".."]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and "holds 1 indexed codebases" in res.output, (args, res.output)
        assert "Indexing" not in res.output and f"codii-sql build {top}" in res.output, res.output
    assert not service.open_codebase(str(top)).db_path.exists()
    assert CliRunner().invoke(cli, ["build", str(top), "--no-vectors"]).exit_code == 0
    assert CliRunner().invoke(cli, ["grep", "alpha", ".."]).exit_code == 0


def test_outside_git_a_search_from_a_project_s_subfolder_indexes_the_project_once(tmp_path, monkeypatch):
    """A new user's first `grep x lib/commands` in npm's folder (no .git; a package.json at its top) made
    lib/commands the codebase, and `grep x lib` and `grep x` were then refused as folders holding one."""
    root = write_tree(tmp_path / "npm", {"package.json": "{}\n", "lib/commands/cache.js": "cacache\n",
                                         "lib/utils/x.js": "cacache\n", "bin/npm.js": "cacache\n",
                                         "lib/vendor/pkg/package.json": "{}\n", "lib/vendor/pkg/a.js": "cacache\n"})
    monkeypatch.chdir(root)
    runner = CliRunner()
    first = runner.invoke(cli, ["grep", "-l", "cacache", "lib/commands"])
    assert first.exit_code == 0 and first.stdout == "lib/commands/cache.js\n", first.output
    assert f"Indexing {root} first" in first.stderr
    wider = runner.invoke(cli, ["grep", "-l", "cacache", "lib"])
    assert wider.exit_code == 0 and "lib/utils/x.js" in wider.stdout and "lib/vendor/pkg/a.js" in wider.stdout, wider.output
    assert runner.invoke(cli, ["grep", "-l", "cacache"]).stdout.count("\n") == 4
    # A folder holding a manifest of its own is its own project (once the outer one is indexed, its index
    # answers from there, as for any subfolder)
    from codii_sql.codebase import Codebase

    assert Codebase.open(root / "lib/vendor/pkg").project() is None
    assert Codebase.open(root / "lib/utils").project().root == root
    assert service.find_codebase(str(root / "lib/vendor/pkg"))[1] == "lib/vendor/pkg"
