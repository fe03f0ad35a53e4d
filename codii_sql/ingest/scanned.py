"""What a scan found: the files to index (path, size, mtime) and every path it skipped, with why."""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field

from .attributes import Attributes

#: Every reason :func:`scan` counts in :attr:`ScanResult.skipped`.
SKIP_REASONS = (
    "ignored", "codii-ignored", "default-excluded", "build-output", "nested-repository", "too-large", "binary-extension",
    "lock-file", "minified", "secret",
    "extension-filter", "symlink-outside-root", "symlink-loop", "symlink-dangling", "symlink-folder", "symlink-file",
    "unreadable", "not-regular-file", "undecodable-name",
)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to index.

    Attributes:
        path: POSIX path relative to the codebase root, e.g. ``"src/pkg/mod.py"``.
        size: bytes, from ``stat`` (of the target, for a symlink).
        mtime_ns: when it last changed, in nanoseconds since the epoch: the later of its mtime and ctime
            (:func:`~codii_sql.paths.changed_ns`), a hint the content hash confirms.
    """

    path: str
    size: int
    mtime_ns: int


def signature(path: str, *, follow: bool = True) -> tuple[int, int, int, int] | None:
    """``(size, mtime_ns, ctime_ns, inode)`` of ``path`` (of the link itself with ``follow`` false), None
    when it cannot be stat'ed (missing counts as a state too: a rule file created later differs)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@dataclass
class ScanStats:
    """What one scan read besides its listed files: ``taken_ns`` (``time.time_ns()`` at its start),
    ``folders`` (relative path, ``""`` or ``"a/b/"`` -> :func:`signature` of the folder itself, taken
    before it was listed), ``others`` (files stat'ed and left out for it, as too large or unreadable)
    and ``rules`` (absolute paths of the rule files read or looked for -> their signatures)."""

    taken_ns: int = 0
    folders: dict[str, tuple | None] = field(default_factory=dict)
    others: dict[str, tuple | None] = field(default_factory=dict)
    rules: dict[str, tuple | None] = field(default_factory=dict)

    def depend(self, path: str) -> None:
        """Record the rule file at ``path`` (present or not) as one the scan's answer depends on."""
        self.rules[path] = signature(path)


@dataclass
class ScanResult:
    """The outcome of :func:`scan`.

    Attributes:
        files: the files to index, sorted by ``path``.
        skipped: reason (one of :data:`SKIP_REASONS`) -> number of skipped paths. A pruned
            directory counts once, whatever it holds. Besides the obvious ones:
            ``"symlink-dangling"`` is a symlink to nothing; ``"symlink-loop"`` a symlinked
            directory already on the walk chain, or a symlink cycle (ELOOP); ``"symlink-folder"``
            a symlink to a folder inside the root, whose files are listed under that folder's path;
            ``"symlink-file"`` a symlink to a file inside the root (listed under the target's path, if at all);
            ``"undecodable-name"`` a name that is not UTF-8; ``"ignored"`` by an ignore file rg reads too
            (``.gitignore``, ``.ignore``, ``.rgignore``, Git's excludes); ``"codii-ignored"`` by codii-sql's
            own rules alone (a ``.codiiignore``, the config's ``ignore_patterns``); ``"unreadable"`` a directory
            that cannot be listed or an entry that cannot be stat-ed.
        skipped_paths: ``(path, reason)`` of each skip counted in ``skipped``, in walk order: a
            folder's path ends in ``/``; an undecodable name is shown with ``\\xNN`` escapes.
        dirs: the directories walked, relative (``""`` the root, else ``"dir/sub/"``): a file
            watcher's changes outside them (ignored trees, nested repositories) need no build.
        attributes: the linguist marks of the walked ``.gitattributes`` files.
        ignored_by: ``(where, pattern)`` -> paths that rule ignored (``where`` is ``file:line``, an
            ignore file under the root relative to it): see :meth:`hiding_rules`.
        stats: what else the answer depends on (:class:`ScanStats`; :mod:`.scan_stats` keeps it).
    """

    files: list[SourceFile]
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)
    dirs: set[str] = field(default_factory=set)
    attributes: Attributes = field(default_factory=Attributes)
    ignored_by: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    stats: ScanStats = field(default_factory=ScanStats, compare=False)  # a time and stats: not the listing

    def hiding_rules(self, limit: int = 3) -> list[dict]:
        """When no file is left but ignore rules left paths out (the Debian kernel tarball's root
        ``.gitignore`` ends with ``/*``): the ``limit`` rules that ignored most of them,
        ``[{"where", "rule", "paths"}]``; else ``[]``."""
        if self.files:
            return []
        return [{"where": where, "rule": text, "paths": n} for (where, text), n in self.ignored_by.most_common(limit)]
