"""Where Git keeps a repository: ``.git`` directories and ``gitdir:`` files, ``info/`` files, nested repositories."""

from __future__ import annotations

import os


def git_info_path(root: str, name: str) -> str:
    """Path of ``info/<name>`` (``exclude``, ``attributes``) for the repository whose ``.git`` is
    at the root ("" if none)."""
    dot_git = os.path.join(root, ".git")
    git_dir = dot_git
    if os.path.isfile(dot_git):
        try:
            with open(dot_git, encoding="utf-8") as fh:
                first = fh.readline()
        except (OSError, UnicodeDecodeError):
            return ""
        if not first.startswith("gitdir:"):
            return ""
        git_dir = os.path.join(root, first[len("gitdir:"):].strip())
    # Worktrees keep info/ in the main repository, named by the ``commondir`` file.
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
            git_dir = os.path.join(git_dir, fh.read().strip())
    except (OSError, UnicodeDecodeError):
        pass
    return os.path.join(git_dir, "info", name)


def in_git_work_tree(root: str) -> bool:
    """Whether ``root`` or a folder above it holds a ``.git`` (so ``root`` is in a Git work tree)."""
    path = root
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def is_repository(dot_git: os.DirEntry | None) -> bool:
    """Whether a directory's ``.git`` entry makes it a repository as Git sees one: a git directory,
    or a file ``gitdir: PATH`` (a submodule's or a worktree's link) whose PATH is one. An empty
    ``.git`` folder or a dangling link does not: ``git status`` lists such a folder's files as the
    outer repository's own."""
    if dot_git is None:
        return False
    try:
        if dot_git.is_dir():
            return is_git_dir(dot_git.path)
        with open(dot_git.path, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    if not first.startswith("gitdir:"):
        return False
    return is_git_dir(os.path.join(os.path.dirname(dot_git.path), first[len("gitdir:"):].strip()))


def is_git_dir(path: str) -> bool:
    """Git's own test (``is_git_directory`` in git's setup.c): a ``HEAD`` file, and ``objects/``
    and ``refs/`` folders, found through ``commondir`` in a linked worktree's git directory."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    common = path
    try:
        with open(os.path.join(path, "commondir"), encoding="utf-8") as fh:
            common = os.path.join(path, fh.read().strip())
    except (OSError, UnicodeDecodeError):
        pass
    return os.path.isdir(os.path.join(common, "objects")) and os.path.isdir(os.path.join(common, "refs"))


def read_bytes(path: str) -> bytes:
    """The bytes of a small metadata file, or ``b""`` when it is missing or unreadable."""
    if not path:
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""
