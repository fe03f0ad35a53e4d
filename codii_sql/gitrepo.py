"""The ``git`` command on a user's repository: one runner, and the facts of the work tree a folder is in."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

#: Seconds a one-answer git command (rev-parse, rev-list, blame) may take before it is called
#: hung: a `rev-list` of Django's 33k commits takes ~0.2 s here.
GIT_TIMEOUT_SECONDS = 120


def git(root: Path | str, *args: str, stdin: bytes | None = None,
        timeout: float = GIT_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[bytes]:
    """``git -C root ARGS`` with its stdout and stderr as bytes; the caller reads the return code
    (a failure such as "not a repository" is an answer, not a crash).

    Raises:
        UsageError: there is no ``git`` command on the PATH, or it ran longer than ``timeout`` seconds.
    """
    try:
        return subprocess.run(["git", "-C", str(root), "-c", "core.quotePath=false", *args], input=stdin,
                              capture_output=True, timeout=timeout, check=False,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise UsageError("this needs the git command: install git and put it on PATH") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {args[0]} ran over {timeout:.0f} s in {root}: try again, or check the repository "
                         "with git fsck") from None


def text(done: subprocess.CompletedProcess[bytes]) -> str:
    """A git command's stdout as text, stripped (undecodable bytes replaced)."""
    return done.stdout.decode("utf-8", "replace").strip()


class GitRefused(UsageError):
    """Git refuses the repository a folder is in: it belongs to another user (Git's ``safe.directory``
    check, since 2.35.2), and git reads nothing of it until the user trusts it."""


@dataclass(frozen=True)
class WorkTree:
    """The git work tree a folder is in: its ``top`` level, the folder's ``prefix`` from there
    (``""`` at the top, else ``"sub/dir/"``), ``head`` (40 hex, None before the first commit),
    ``branch`` (``HEAD`` when detached) and whether it is a ``shallow`` clone."""

    top: Path
    prefix: str
    head: str | None
    branch: str
    shallow: bool


def work_tree(path: Path) -> WorkTree | None:
    """The :class:`WorkTree` holding the folder ``path``, or None when it is in none (or is no folder).

    Raises:
        UsageError: no ``git`` command (see :func:`git`).
        GitRefused: git refuses the repository as another user's (its message says how to trust it).
    """
    if not Path(path).is_dir():
        return None
    found = git(path, "rev-parse", "--show-toplevel", "--show-prefix", "--is-shallow-repository")
    if found.returncode != 0:
        if b"dubious ownership" in found.stderr:  # git's words since 2.35.2; "not a git repository" else
            top = _refused_at(found.stderr) or str(path)
            raise GitRefused(f"git refuses the repository at {top}: it belongs to another user",
                             f"if you trust it, run `git config --global --add safe.directory {top}`")
        return None
    lines = found.stdout.decode("utf-8", "surrogateescape").split("\n")
    top, prefix, shallow = (lines + ["", "", ""])[:3]
    head = git(path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    branch = git(path, "rev-parse", "--abbrev-ref", "HEAD")
    return WorkTree(Path(top), prefix, text(head) if head.returncode == 0 else None,
                    text(branch) if branch.returncode == 0 else "HEAD", shallow == "true")


def _refused_at(stderr: bytes) -> str | None:
    """The repository git named in its refusal ("... dubious ownership in repository at '/x'"), or None."""
    found = re.search(rb"dubious ownership in repository at '([^'\n]*)'", stderr)
    return found.group(1).decode("utf-8", "surrogateescape") if found else None
