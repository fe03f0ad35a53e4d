"""Where Git keeps a repository: ``.git`` directories and ``gitdir:`` files, ``info/`` files, nested
repositories, and what only Git itself knows of one (``core.excludesFile``, the tracked files)."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass

#: Seconds a ``git`` command may take before the scan goes on without its answer. ``git ls-files``
#: answers in milliseconds; it hangs only where Git itself would (a FIFO in place of an ignore file).
GIT_TIMEOUT_SECONDS = 10


def git_dir(root: str) -> str:
    """The Git directory of the repository whose ``.git`` is at the root: that folder, or the one a
    ``.git`` file names (a worktree's, a submodule's); "" if none."""
    dot_git = os.path.join(root, ".git")
    if not os.path.isfile(dot_git):
        return dot_git
    try:
        with open(dot_git, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return ""
    return os.path.join(root, first[len("gitdir:"):].strip()) if first.startswith("gitdir:") else ""


def git_config_paths(root: str) -> list[str]:
    """The config files Git reads for the repository at ``root``, besides those they include: the
    system's, the user's two and the repository's."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    info = git_info_path(root, "config")  # <common dir>/info/config: the repository's is one folder up
    own = [os.path.join(os.path.dirname(os.path.dirname(info)), "config")] if info else []
    return ["/etc/gitconfig", os.path.join(os.path.expanduser("~"), ".gitconfig"), os.path.join(xdg, "git", "config"),
            *own]


def git_info_path(root: str, name: str) -> str:
    """Path of ``info/<name>`` (``exclude``, ``attributes``) for the repository whose ``.git`` is
    at the root ("" if none)."""
    git_dir_path = git_dir(root)
    if not git_dir_path:
        return ""
    # Worktrees keep info/ in the main repository, named by the ``commondir`` file.
    try:
        with open(os.path.join(git_dir_path, "commondir"), encoding="utf-8") as fh:
            git_dir_path = os.path.join(git_dir_path, fh.read().strip())
    except (OSError, UnicodeDecodeError):
        pass
    return os.path.join(git_dir_path, "info", name)


@dataclass(frozen=True, slots=True)
class WorkTree:
    """The Git work tree a scan root lies in: its ``top`` folder and the root's place in it,
    ``prefix`` (``""`` for the top itself, else ``"sub/dir/"``)."""

    top: str
    prefix: str


def work_tree(root: str) -> WorkTree | None:
    """The work tree holding ``root`` (absolute): the nearest folder at or above it whose ``.git``
    is a repository as Git sees one (:func:`is_repository`), or None."""
    path = root
    while True:
        dot_git = os.path.join(path, ".git")
        if os.path.lexists(dot_git) and _is_repository_at(dot_git):
            rel = os.path.relpath(root, path)
            return WorkTree(path, "" if rel == "." else rel.replace(os.sep, "/") + "/")
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def excludes_file(top: str) -> str:
    """Git's ``core.excludesFile`` for the work tree at ``top`` (any config level, ``~`` expanded),
    else its default ``$XDG_CONFIG_HOME/git/ignore`` (``~/.config/git/ignore`` when unset or empty).
    Without ``git`` on the PATH, the default."""
    try:
        out = _git(top, "config", "--path", "--get", "core.excludesFile")
    except OSError:
        out = None
    if out:
        return os.path.join(top, os.fsdecode(out.rstrip(b"\n")))
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(xdg, "git", "ignore")


def tracked_but_ignored(root: str) -> set[str]:
    """The files under ``root`` that Git tracks although its ignore rules match them (``git add -f``,
    or added before the rule), relative to ``root``: ``git ls-files`` lists them, so the walk does.
    Empty without ``git``, or when it fails (a repository it refuses as another user's)."""
    try:
        out = _git(root, "ls-files", "-z", "--cached", "--ignored", "--exclude-standard")
    except OSError:
        return set()
    return {os.fsdecode(p) for p in (out or b"").split(b"\0") if p}


def _git(cwd: str, *args: str) -> bytes | None:
    """``git -C cwd ARGS``'s stdout, or None when it exits non-zero (an unset key, a refused repository).

    Raises:
        OSError: no ``git`` on the PATH.
    """
    try:
        done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, timeout=GIT_TIMEOUT_SECONDS,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return None
    return done.stdout if done.returncode == 0 else None


def is_repository(dot_git: os.DirEntry | None) -> bool:
    """Whether a directory's ``.git`` entry makes it a repository as Git sees one: a git directory,
    or a file ``gitdir: PATH`` (a submodule's or a worktree's link) whose PATH is one. An empty
    ``.git`` folder or a dangling link does not: ``git status`` lists such a folder's files as the
    outer repository's own."""
    return dot_git is not None and _is_repository_at(dot_git.path)


def _is_repository_at(dot_git: str) -> bool:
    """:func:`is_repository` of the ``.git`` entry at path ``dot_git``."""
    try:
        if os.path.isdir(dot_git):
            return is_git_dir(dot_git)
        with open(dot_git, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    if not first.startswith("gitdir:"):
        return False
    return is_git_dir(os.path.join(os.path.dirname(dot_git), first[len("gitdir:"):].strip()))


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
    """The bytes of a small metadata file (an ignore or attributes file), or ``b""`` when it is
    missing, unreadable or no regular file: opened non-blocking, so a FIFO in its place never hangs."""
    if not path:
        return b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        blocks = []
        while block := os.read(fd, 1 << 16):
            blocks.append(block)
        return b"".join(blocks)
    except OSError:
        return b""
    finally:
        os.close(fd)
