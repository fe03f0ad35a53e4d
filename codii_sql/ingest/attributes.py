"""GitHub linguist's role overrides from ``.gitattributes``: ``linguist-generated``, ``-vendored``, ``-documentation``.

Semantics of gitattributes(5) and linguist (https://github.com/github-linguist/linguist/blob/main/docs/overrides.md):
a line is a pattern and attributes; ``attr`` or ``attr=<value>`` sets one (``=false`` unsets it,
any other value sets it, as linguist reads it), ``-attr`` unsets it, ``!attr`` makes it
unspecified again. Patterns match as in ``.gitignore``, relative to the directory of their
file, except that negations are invalid and a pattern matching a directory says nothing about
the files under it (``vendor/** linguist-vendored``, not ``vendor/``). For each attribute the
last matching line decides; a deeper ``.gitattributes`` overrides its parents', and
``$GIT_DIR/info/attributes`` overrides all. Other attributes and macro lines (``[attr]``) are
ignored; a quoted pattern (C-style, for names with spaces) is skipped. Files are read as Git reads
them (:func:`~.ignore.split_lines`: a byte-order mark dropped, ``\\n`` lines).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import wildmatch
from .ignore import Rule, split_lines

#: The file read in every walked directory.
FILE_NAME = ".gitattributes"
#: linguist's attributes and the role each one sets (roles.ROLES).
LINGUIST = {"linguist-generated": "generated", "linguist-vendored": "vendored",
            "linguist-documentation": "docs"}
_MENTIONS = re.compile(r"[-!]?(linguist-(?:generated|vendored|documentation))(?:=(\S*))?$")


@dataclass(frozen=True, slots=True)
class _Line:
    base: bytes  # b"" for the root, else b"dir/sub/"
    rule: Rule
    marks: tuple[tuple[str, bool | None], ...]  # (role, set / unset / unspecified)


class Attributes:
    """The linguist lines of a codebase's attribute files, and :attr:`fingerprint`: a hash of every
    attribute file's place and bytes, which changes when any of them does (roles are re-derived).

    Args:
        files: ``(base, bytes)`` per attribute file, lowest precedence first; ``base`` is the
            directory it applies to (``""`` the root, else ``"dir/sub/"``).
    """

    def __init__(self, files: Sequence[tuple[str, bytes]] = ()) -> None:
        digest = hashlib.sha256()
        self.files = list(files)  # kept with a scan's record (scan_stats.py)
        self.lines: list[_Line] = []
        for base, data in files:
            digest.update(f"{len(base)}:{base}{len(data)}:".encode() + data)
            self.lines.extend(_parse(os.fsencode(base), split_lines(data)))
        self.fingerprint = digest.hexdigest()

    def __eq__(self, other: object) -> bool:
        """Equal when read from the same attribute files: two scans of one tree compare equal."""
        return isinstance(other, Attributes) and other.fingerprint == self.fingerprint

    def marks(self, path: str) -> dict[str, bool]:
        """``{role: True (set) or False (unset)}`` for the file at relative POSIX ``path``."""
        out: dict[str, bool | None] = {}
        encoded = os.fsencode(path)
        for line in self.lines:
            if encoded.startswith(line.base) and line.rule.matches_itself(encoded[len(line.base):], False):
                out.update(line.marks)
        return {role: value for role, value in out.items() if value is not None}


def _parse(base: bytes, lines: list[bytes]) -> list[_Line]:
    """The lines of one attribute file that mention a linguist attribute."""
    out = []
    for raw in lines:
        pattern, *attrs = raw.split() or (b"#",)
        marks = tuple(m for m in map(_mark, (os.fsdecode(a) for a in attrs)) if m is not None)
        if not marks or pattern.startswith((b"#", b"[", b"!", b'"')):
            continue  # comment, macro, invalid negation, or quoted pattern
        parsed = wildmatch.parse(pattern)
        if parsed is not None:
            rule = Rule(re.compile(parsed.regex, re.DOTALL), excludes=True, rescues=False, dir_only=parsed.dir_only)
            out.append(_Line(base, rule, marks))
    return out


def _mark(attr: str) -> tuple[str, bool | None] | None:
    """``(role, state)`` for one attribute token, or None when it is not linguist's."""
    m = _MENTIONS.match(attr)
    if m is None:
        return None
    role = LINGUIST[m.group(1)]
    if attr[0] == "!":
        return role, None
    if attr[0] == "-":
        return role, False
    return role, m.group(2) != "false"
