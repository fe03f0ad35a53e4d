"""A repository's own history as queries: non-merge commits from ``git log``, their subjects cleaned, their changed files."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..gitrepo import git, text, work_tree

#: Fewer words than this after cleaning say too little to search for ("Fix typo", "Cleanup").
MIN_WORDS = 3
#: Conventional-commit types (conventionalcommits.org and the Angular convention it comes from,
#: plus common extras). Only these are stripped: a component prefix such as ``sessions: fix
#: hooks type`` names where the change lives, which is what is being searched for.
_CONVENTIONAL = ("feat", "feature", "fix", "bugfix", "hotfix", "chore", "docs", "doc", "style", "refactor", "perf",
                 "test", "tests", "build", "ci", "revert", "deps", "dep", "security", "release", "wip", "types")
_PREFIX = re.compile(rf"^(?:{'|'.join(_CONVENTIONAL)})(?:\([^)]*\))?!?:\s*", re.IGNORECASE)
_TAG = re.compile(r"\[[^\]]*\]")
_CLOSES = r"(?:\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|refs?|see)\s+)?"
#: ``(#1234)``, ``(fixes #12)``, ``(closes gh-7)``, then any bare ``closes #12`` / ``GH-12`` / ``PR 12`` left.
_REF_GROUP = re.compile(rf"\(\s*{_CLOSES}(?:#|gh-)\d+\s*\)", re.IGNORECASE)
_REF = re.compile(rf"{_CLOSES}(?:#|\bgh-|\bPR\s+#?)\d+\b", re.IGNORECASE)
_EDGES = re.compile(r"^[\s.,;:!?\-]+|[\s.,;:!?\-]+$")
_VERSION = r"v?\d+(?:\.\d+)+\S*"
#: Subjects that name no behaviour: merges, dependency bumps, releases, README/changelog edits, bare versions.
_GENERIC = re.compile(
    rf"^(?:merge\b|bump\b|(?:prepare\s+(?:for\s+)?(?:the\s+)?)?releas(?:e|ing)(?:\s+(?:v|version\s+)?\d\S*|\s+notes\b|$)"
    rf"|version\s+{_VERSION}|{_VERSION}$"
    r"|update\s+(?:the\s+)?(?:readme|changelog|changes|history|news|docs?|documentation|authors|contributors"
    r"|license|copyright)\b)", re.IGNORECASE)


@dataclass
class Commit:
    """One non-merge commit: ``sha`` (40 hex), raw ``subject``, and the files it leaves added or
    modified (``files``, relative POSIX paths at that commit; a rename is its new path)."""

    sha: str
    subject: str
    files: list[str]


def clean_subject(subject: str) -> str:
    """``subject`` without ``[tags]``, PR/issue references, a conventional-commit prefix and trailing punctuation."""
    text = _TAG.sub(" ", subject)
    text = _REF_GROUP.sub(" ", text)
    text = _REF.sub(" ", text)
    text = _PREFIX.sub("", text.strip())
    return _EDGES.sub("", " ".join(text.split()))


def subject_skip(subject: str, cleaned: str) -> str | None:
    """Why a subject makes no query (``revert``, ``generic``, ``short``), or None when it does."""
    if re.match(r"revert\b", subject.strip(), re.IGNORECASE):
        return "revert"
    if _GENERIC.match(subject.strip()) or _GENERIC.match(cleaned):
        return "generic"
    if len(cleaned.split()) < MIN_WORDS:
        return "short"
    return None


def repository(path: Path) -> dict:
    """``{"root", "head", "branch", "shallow", "commits", "dirty"}`` of the repository holding ``path``.

    ``root`` is its top level (the codebase that is indexed), ``commits`` the number reachable
    from HEAD (of those present, in a shallow clone), ``dirty`` whether tracked files differ
    from HEAD (the index then holds the work tree, not HEAD).

    Raises:
        UsageError: ``path`` is not in a git work tree, or HEAD has no commit yet.
    """
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder: pass the folder of a git clone (codii-sql eval git PATH)")
    tree = work_tree(path)
    if tree is None:
        raise UsageError(f"{path} is not a git repository: pass the folder of a git clone "
                         "(codii-sql eval git PATH), with its history")
    if tree.head is None:
        raise UsageError(f"{tree.top} has no commits yet: eval git needs a history to take queries from")
    count = int(text(git(tree.top, "rev-list", "--count", "HEAD")) or 0)
    dirty = bool(text(git(tree.top, "status", "--porcelain", "--untracked-files=no")))
    return {"root": str(tree.top), "head": tree.head, "branch": tree.branch, "shallow": tree.shallow,
            "commits": count, "dirty": dirty}


def walk(root: Path) -> Iterator[Commit]:
    """The non-merge commits reachable from HEAD, newest first, read from ``git log`` as it runs.

    ``--no-renames``: rename detection reads both blobs and fails outright in a partial clone
    whose old blobs are absent; without it a rename is its old path deleted and its new one
    added, and only added or modified paths are kept. ``-z`` keeps odd file names verbatim.
    Stopping the iteration stops git.
    """
    cmd = ["git", "-C", str(root), "-c", "core.quotePath=false", "log", "--no-merges", "--no-renames", "-z",
           "--name-status", "--format=%x1e%H%x1f%s"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            yield from _records(proc.stdout)
        finally:
            proc.kill()


def _records(stream) -> Iterator[Commit]:
    """Parse ``RS sha US subject NUL [status NUL path NUL ...]`` records as the bytes arrive."""
    buf = b""
    for block in iter(lambda: stream.read(1 << 16), b""):
        buf += block
        *done, buf = buf.split(b"\x1e")
        yield from (_parse(r) for r in done if r)
    if buf:
        yield _parse(buf)


def _parse(record: bytes) -> Commit:
    header, _, changes = record.partition(b"\0")
    sha, _, subject = header.decode("utf-8", "replace").partition("\x1f")
    tokens = changes.lstrip(b"\n").split(b"\0")
    files = [tokens[i + 1].decode("utf-8", "surrogateescape") for i in range(0, len(tokens) - 1, 2)
             if tokens[i][:1] in (b"A", b"M")]
    return Commit(sha, subject, files)
