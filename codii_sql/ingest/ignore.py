"""Git's ignore rules: one level per ignore file, each pattern a regex of :mod:`.wildmatch`.

Within one file the last matching pattern wins; a deeper directory's files override its
parents'. A negation may rescue a default-excluded path only from a ``.codiiignore`` or the
config, and only when its last component is literal (see :func:`compile_level`). Files are read
as Git reads them: bytes, a UTF-8 byte-order mark at the start dropped, lines ended by ``\\n``
(a ``\\r`` before it dropped), trailing unescaped spaces trimmed.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import wildmatch
from .repositories import WorkTree, excludes_file, git_info_path, read_bytes

#: Ignore files read in every directory, lowest precedence first: Git's, then the ones ripgrep, fd and ag
#: read (``.ignore``, then ripgrep's own ``.rgignore``: grep answered from files rg leaves out), then ours.
IGNORE_FILE_NAMES = (".gitignore", ".ignore", ".rgignore", ".codiiignore")
#: Those that are not Git's: they exclude tracked files too (as ripgrep, which reads no index, does).
OWN_IGNORE_FILE_NAMES = IGNORE_FILE_NAMES[1:]


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern: ``regex`` fullmatches the UTF-8 path relative to its level's folder."""

    regex: re.Pattern[bytes]
    excludes: bool  # False for a negation ("!pattern")
    rescues: bool  # a negation that re-includes default-excluded paths
    dir_only: bool  # the pattern ended with "/"
    where: str = ""  # "file:line" (1-based) as git check-ignore -v names it; "ignore_patterns:N" for the config's
    text: str = ""  # the pattern as written

    @property
    def own(self) -> bool:
        """Whether it is codii-sql's own rule (a ``.codiiignore``'s or the config's ``ignore_patterns``),
        which rg does not read: the path it leaves out is skipped as ``codii-ignored``, not ``ignored``."""
        origin = self.where.rpartition(":")[0]
        return origin == "ignore_patterns" or os.path.basename(origin) == ".codiiignore"

    def matches_itself(self, path: bytes, is_dir: bool) -> bool:
        """Whether the pattern matches ``path`` itself (never merely a folder above it: the walk
        prunes ignored folders itself)."""
        return (is_dir or not self.dir_only) and self.regex.fullmatch(path) is not None


@dataclass(frozen=True, slots=True)
class IgnoreLevel:
    """The patterns of one ignore file (or of the config), matched relative to ``base``.

    ``base`` is the folder relative to the walk's anchor (``""``, else ``"dir/sub/"``) as UTF-8
    bytes; ``git`` marks Git's own files (``.gitignore``, ``info/exclude``, ``core.excludesFile``),
    whose rules do not apply to files Git tracks.
    """

    base: bytes
    rules: tuple[Rule, ...]  # in file order
    any_rule: re.Pattern[bytes]  # all rules in one alternation: most paths match none
    git: bool = False
    #: Its file's place in :data:`IGNORE_FILE_NAMES` (Git's own files 0): a higher one decides first, at any
    #: depth, and the deepest of one kind before the others, as ripgrep orders .rgignore, .ignore, .gitignore.
    rank: int = 0

    def verdict(self, rel: bytes, is_dir: bool) -> Rule | None:
        """The last rule matching the path ``rel`` (UTF-8, relative to the anchor; it lies under ``base``)."""
        path = rel[len(self.base):]
        if self.any_rule.fullmatch(path) is None:
            return None
        for rule in reversed(self.rules):
            if rule.matches_itself(path, is_dir):
                return rule
        return None


def split_lines(data: bytes) -> list[bytes]:
    """The lines of an ignore or attributes file as Git splits them: a leading UTF-8 BOM dropped
    (Git's skip_utf8_bom; kept, it made the first pattern ``\\ufeffsecrets/`` and indexed the
    secrets), ``\\n`` ends a line and a ``\\r`` before it is dropped; no other character ends one."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    lines = data.split(b"\n")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def compile_level(lines: Sequence[bytes | str], base: bytes, can_rescue: bool, *, git: bool = False,
                  origin: str = "ignore_patterns") -> IgnoreLevel | None:
    """The level for these pattern lines (str lines are encoded as UTF-8), or ``None`` when they hold no pattern.
    ``origin`` names where they come from (an ignore file's path) in each rule's ``where``.

    A negation rescues default-excluded paths only from ``.codiiignore`` or the config
    (``can_rescue``), and only when its last path component is literal (``!src/build/``, not ``!*/``).
    """
    rules, basenames, anchored = [], [], []
    for number, line in enumerate(lines, 1):
        raw = line if isinstance(line, bytes) else os.fsencode(line)
        pattern = wildmatch.parse(raw)
        if pattern is None:
            continue
        (basenames if pattern.basename else anchored).append(pattern.core)
        rules.append(Rule(
            regex=re.compile(pattern.regex, re.DOTALL),
            excludes=not pattern.negated,
            rescues=can_rescue and pattern.negated and not any(c in pattern.last for c in b"*?["),
            dir_only=pattern.dir_only,
            where=f"{origin}:{number}",
            text=raw.decode("utf-8", "backslashreplace"),
        ))
    if not rules:
        return None
    # Basename patterns share one "any leading folders" prefix: a miss costs one pass, not one per pattern.
    parts = ([wildmatch.ANY_FOLDERS + b"(?:" + b"|".join(basenames) + b")"] if basenames else []) + anchored
    return IgnoreLevel(base, tuple(rules), re.compile(b"|".join(b"(?:" + p + b")" for p in parts), re.DOTALL), git)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` (a config ``ignore_patterns`` entry) can match nothing, or None: an empty
    negation, a trailing backslash, an unclosed ``[`` or an unknown ``[:class:]``."""
    parsed = wildmatch.parse(os.fsencode(pattern))
    if parsed is not None and parsed.core == wildmatch.NEVER:
        return f"{pattern!r} is not a valid gitignore pattern (it can match nothing)"
    return None


def read_ignore_file(path: str, base: bytes, can_rescue: bool, *, git: bool = False) -> IgnoreLevel | None:
    """The level of the ignore file at ``path``; an unreadable one is ignored like a missing one, as Git does."""
    return _compiled(read_bytes(path), base, can_rescue, git, path)


@functools.lru_cache(maxsize=1024)
def _compiled(data: bytes, base: bytes, can_rescue: bool, git: bool, origin: str) -> IgnoreLevel | None:
    """:func:`compile_level` of an ignore file's bytes, kept by its content: a process checks the same
    files again and again (``refs`` checks each file it reads along its folders: the kernel's root
    .gitignore was compiled 471 times, 0.84 s of a 4.0 s profile of 6 names; a watcher walks again after
    each update). Levels are frozen, so sharing one is safe."""
    return compile_level(split_lines(data), base, can_rescue, git=git, origin=origin)


def outer_levels(tree: WorkTree, seen: Callable[[str], None] = lambda path: None) -> tuple[IgnoreLevel, ...]:
    """Git's levels above the root's own ``.gitignore`` files, lowest precedence first:
    ``core.excludesFile`` and ``info/exclude`` (relative to the work tree's top), then, for a
    root below the top, the ``.gitignore`` of each folder from the top down to the root's parent.
    ``seen`` hears the path of each file looked for, there or not."""
    excludes, info = excludes_file(tree.top), git_info_path(tree.top, "exclude")
    seen(excludes)
    seen(info)
    levels = [read_ignore_file(excludes, b"", can_rescue=False, git=True),
              read_ignore_file(info, b"", can_rescue=False, git=True)]
    parts = tree.prefix.split("/")[:-1]
    for depth in range(len(parts)):
        folder = "".join(part + "/" for part in parts[:depth])
        path = os.path.join(tree.top, folder, ".gitignore")
        seen(path)
        if not os.path.islink(path):  # Git does not follow a symlinked .gitignore
            levels.append(read_ignore_file(path, os.fsencode(folder), can_rescue=False, git=True))
    return tuple(level for level in levels if level is not None)
