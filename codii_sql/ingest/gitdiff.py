"""Commits and their diff hunks parsed from ``git log -p`` as it runs (the history index and ``why`` read it)."""

from __future__ import annotations

import codecs
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError

#: Starts each commit's record: RS US "commit" US, a sequence no commit message or diff holds in practice.
MARK = b"\x1e\x1fcommit\x1f"
#: ``--format`` of a record: the mark, then sha, author, email, author date (unix seconds), subject
#: and body, each ended by NUL; the patch follows.
FORMAT = "--format=%x1e%x1fcommit%x1f%H%x00%an%x00%ae%x00%at%x00%s%x00%b%x00"
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    """One hunk of a commit's diff: ``path`` after the commit (the old path for a deletion),
    ``old_path`` when renamed, the old and new ranges (start 1-based, 0 for an empty side; lines
    counted), and ``content``: the ``@@`` line, then the `` ``, ``-`` and ``+`` lines."""

    path: str
    old_path: str | None
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    content: str


@dataclass
class CommitDiff:
    """A commit as the history holds it: ``sha`` (40 hex), ``author``, ``email``, ``date`` (unix
    seconds, the author date), ``subject``, ``body``, the ``files`` it touched (new paths) and its
    ``hunks`` (binary files have none)."""

    sha: str
    author: str
    email: str
    date: int
    subject: str
    body: str
    files: list[str] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)


def log_command(root: Path, *args: str) -> list[str]:
    """The ``git log`` command line reading commits with their patches: rename detection on, no
    colour, external diff drivers and text conversion off (a user's config must not change what is
    parsed), three lines of context."""
    return ["git", "-C", str(root), "-c", "core.quotePath=false", "-c", "diff.noprefix=false",
            "-c", "diff.mnemonicPrefix=false", "log", FORMAT, "-p", "-M", "-U3", "--no-color", "--no-ext-diff",
            "--no-textconv", "--no-merges", *args]


def read_commits(root: Path, shas: Iterable[str], *, relative: bool = False) -> Iterator[CommitDiff]:
    """The commits ``shas`` (each read once, in the order given; at least one: none means HEAD to
    git) with their hunks, parsed as git writes them; ``relative``: paths relative to ``root`` (a subfolder of its work tree) and only
    the changes under it. Stopping the iteration stops git.

    Raises:
        UsageError: no git command.
    """
    listed = "".join(f"{s}\n" for s in shas).encode()
    cmd = log_command(root, "--no-walk=unsorted", "--stdin", *(["--relative"] if relative else []))
    yield from stream(cmd, listed)


def stream(cmd: list[str], stdin: bytes | None = None) -> Iterator[CommitDiff]:
    """Run ``cmd`` (a :func:`log_command`) and parse its records as they arrive.

    Raises:
        UsageError: no git command.
    """
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UsageError("this needs the git command: install git and put it on PATH") from None
    with proc:
        try:
            if stdin is not None:
                # git reads every sha before it writes: feed them all, then read the records.
                proc.stdin.write(stdin)
                proc.stdin.close()
            yield from parse_records(proc.stdout)
        finally:
            proc.kill()


def parse_records(chunks: Iterable[bytes] | object) -> Iterator[CommitDiff]:
    """:class:`CommitDiff` records from ``git log`` output in :data:`FORMAT` (a binary stream, or
    an iterable of byte blocks), each parsed once it is complete."""
    blocks = iter(lambda: chunks.read(1 << 16), b"") if hasattr(chunks, "read") else chunks
    buf = b""
    for block in blocks:
        buf += block
        *done, buf = buf.split(MARK)
        yield from (parse_record(r) for r in done if r.strip())
    if buf.strip():
        yield parse_record(buf)


def parse_record(record: bytes) -> CommitDiff:
    """One record: the NUL-ended header fields, then the commit's patch."""
    parts = record.split(b"\0", 6)
    sha, author, email, date, subject, body = (p.decode("utf-8", "replace") for p in parts[:6])
    commit = CommitDiff(sha.strip(), author, email, int(date or 0), subject.strip(), body.strip())
    _parse_patch(parts[6] if len(parts) > 6 else b"", commit)
    return commit


def _parse_patch(patch: bytes, commit: CommitDiff) -> None:
    """Fill ``commit.files`` and ``commit.hunks`` from its unified diff, file by file."""
    for section in re.split(rb"(?m)^(?=diff --git )", patch):
        if section.startswith(b"diff --git "):
            _parse_file(section, commit)


def _parse_file(section: bytes, commit: CommitDiff) -> None:
    lines = section.split(b"\n")
    old = new = None
    renamed_from = renamed_to = None
    body = 0
    for i, line in enumerate(lines[1:], 1):
        if line.startswith(b"@@"):
            body = i
            break
        if line.startswith(b"--- "):
            old = _path(line[4:], b"a/")
        elif line.startswith(b"+++ "):
            new = _path(line[4:], b"b/")
        elif line.startswith(b"rename from "):
            renamed_from = _unquoted(line[12:])
        elif line.startswith(b"rename to "):
            renamed_to = _unquoted(line[10:])
    path = new or renamed_to or old or _header_path(lines[0])
    if path is None:
        return
    commit.files.append(path)
    old_path = renamed_from if renamed_from and renamed_from != path else (old if old and old != path else None)
    if not body:
        return
    current: list[bytes] = []
    for line in lines[body:]:
        if line.startswith(b"@@") and current:
            commit.hunks.append(_hunk(path, old_path, current))
            current = []
        if line or current:
            current.append(line)
    if current:
        commit.hunks.append(_hunk(path, old_path, current))


def _hunk(path: str, old_path: str | None, lines: list[bytes]) -> Hunk:
    while lines and not lines[-1]:
        lines.pop()
    found = _HUNK.match(lines[0])
    old_start, old_lines, new_start, new_lines = (
        (int(found.group(1)), int(found.group(2) or 1), int(found.group(3)), int(found.group(4) or 1))
        if found else (0, 0, 0, 0))
    return Hunk(path, old_path, old_start, old_lines, new_start, new_lines,
                b"\n".join(lines).decode("utf-8", "replace"))


def _path(raw: bytes, prefix: bytes) -> str | None:
    """The path of a ``---``/``+++`` line (None for ``/dev/null``), its ``a/``/``b/`` prefix dropped."""
    raw = raw.rstrip(b"\t")  # git ends the name with a tab when it holds a space
    if raw == b"/dev/null":
        return None
    name = _unquoted(raw)
    return name[len(prefix):] if name.startswith(prefix.decode()) else name


def _header_path(line: bytes) -> str | None:
    """The path of ``diff --git a/P b/P`` (a mode change or a rename without edits): both halves
    equal, so the split is unambiguous even with spaces in P."""
    rest = line[len(b"diff --git "):]
    half = (len(rest) - 1) // 2
    a, b = rest[:half], rest[half + 1:]
    if a.startswith(b"a/") and b.startswith(b"b/") and a[2:] == b[2:]:
        return _unquoted(a[2:])
    return None


def _unquoted(raw: bytes) -> str:
    """A path as git printed it: C-quoted (``"a\\tb"``, octal UTF-8 bytes) when it holds unusual
    characters; bytes that are not UTF-8 as ``\\xNN``, as the walk stores such names (SQLite TEXT
    cannot hold them raw)."""
    if raw.startswith(b'"') and raw.endswith(b'"') and len(raw) >= 2:
        raw = codecs.escape_decode(raw[1:-1])[0]
    return raw.decode("utf-8", "backslashreplace")
