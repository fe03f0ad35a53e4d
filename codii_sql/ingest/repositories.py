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
    """Whether a directory's ``.git`` entry makes it a repository: a directory, or a file that
    opens with ``gitdir:`` (a submodule's or a worktree's link to its git directory)."""
    if dot_git is None:
        return False
    try:
        if dot_git.is_dir():
            return True
        with open(dot_git.path, "rb") as fh:
            return fh.read(7) == b"gitdir:"
    except OSError:
        return False


def read_bytes(path: str) -> bytes:
    """The bytes of a small metadata file, or ``b""`` when it is missing or unreadable."""
    if not path:
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""
