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


def read_bytes(path: str) -> bytes:
    """The bytes of a small metadata file, or ``b""`` when it is missing or unreadable."""
    if not path:
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""
