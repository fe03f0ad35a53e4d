"""The directory walk behind :func:`~.walk.scan` and :func:`~.walk.listed`: one directory listing at a
time, Git's ignore rules and the default exclusions applied to each entry (the rules: :mod:`.walk`)."""

from __future__ import annotations

import collections
import dataclasses
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..paths import changed_ns, home
from .attributes import Attributes
from .attributes import FILE_NAME as ATTRIBUTES_FILE
from .config import CONFIG_FILE_NAME, size_cap
from .exclusions import default_file_reason, excluded_dir, marked_output
from .ignore import IGNORE_FILE_NAMES, IgnoreLevel, Rule, compile_level, outer_levels, read_ignore_file
from .repositories import (git_config_paths, git_dir, git_info_path, is_repository, read_bytes, tracked_but_ignored,
                           work_tree)
from .scanned import ScanResult, ScanStats, SourceFile, signature

#: Files found between two calls of :func:`scan`'s ``on_progress``.
PROGRESS_EVERY = 500


@dataclass(slots=True)
class _Dir:
    """A directory on the walk: as reached (``abs``, ``rel``) and where it really is."""

    abs: str
    rel: str  # "" for the root, else "dir/sub/"
    real: str
    levels: tuple[IgnoreLevel, ...]  # lowest precedence first
    parent: _Dir | None
    rescued: bool = False  # re-included by a .codiiignore or config negation
    git_ignored: bool = False  # ignored by Git's rules, entered only for the files Git tracks in it
    in_git: bool = False  # inside a Git work tree: only then are .gitignore files read

    def chain_reals(self) -> Iterator[str]:
        d: _Dir | None = self
        while d is not None:
            yield d.real
            d = d.parent


class Walker:
    """One scan: the root's settings, the skip counter and the files found so far.

    Ignore levels match paths relative to the anchor: the top of the Git work tree the root lies
    in (``prefix`` is the root's path from there), else the root itself.
    """

    def __init__(self, root: Path, max_file_bytes: int, ignore_patterns: Sequence[str],
                 extensions: tuple[str, ...] | None) -> None:
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(self.root)
        self.home = os.path.realpath(home())
        self.max_file_bytes = max_file_bytes
        self.extensions = extensions
        self.tree = work_tree(self.root)
        self.prefix = os.fsencode(self.tree.prefix) if self.tree else b""
        top = compile_level(list(ignore_patterns), self.prefix, can_rescue=True)
        self.top = (top,) if top else ()
        self.files: list[SourceFile] = []
        self.skipped: collections.Counter[str] = collections.Counter()
        self.skipped_paths: list[tuple[str, str]] = []
        self.dirs: set[str] = set()
        self.attribute_files: list[tuple[str, bytes]] = []
        self.ignored_by: collections.Counter[tuple[str, str]] = collections.Counter()
        self.stats = ScanStats(taken_ns=time.time_ns())
        self.stats.depend(os.path.join(self.root, CONFIG_FILE_NAME))
        if self.tree:  # what `git ls-files` and the config read: the index (its folder changes as it is
            # rewritten), the config files
            for path in (git_dir(self.tree.top), *git_config_paths(self.tree.top)):
                self.stats.depend(path)
        #: Files Git tracks that its rules ignore, and their folders ("a/b/"): listed all the same.
        self.tracked: set[str] = set()
        for path in tracked_but_ignored(self.root) if self.tree else ():
            self.tracked.add(path)
            parts = path.split("/")[:-1]
            self.tracked.update("/".join(parts[:i]) + "/" for i in range(1, len(parts) + 1))

    def run(self, on_progress: Callable[[int], None] | None = None) -> ScanResult:
        levels = outer_levels(self.tree, self.stats.depend) if self.tree else ()
        stack = [_Dir(self.root, "", self.root_real, levels, None, in_git=self.tree is not None)]
        reported = 0
        while stack:
            stack.extend(self._visit(stack.pop()))
            if on_progress is not None and len(self.files) >= reported + PROGRESS_EVERY:
                reported = len(self.files)
                on_progress(reported)
        self.files.sort(key=lambda f: f.path)
        # Lowest precedence first: shallower directories, then info/attributes.
        self.attribute_files.sort(key=lambda base_data: base_data[0].count("/"))
        info_path = git_info_path(self.root, "attributes")
        self.stats.depend(info_path)
        info = read_bytes(info_path)
        self.attribute_files.extend([("", info)] if info else [])
        return ScanResult(self.files, self.skipped, self.skipped_paths, self.dirs, Attributes(self.attribute_files),
                          self.ignored_by, self.stats)

    def _skip(self, reason: str, path: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((path, reason))

    def unlisted(self, rel: str) -> str | None:
        """None when :meth:`run` would list the file ``rel`` (a relative POSIX path), else why not: the
        skip reason of it or of a folder above it, or ``"missing"``. The same rules, applied along that
        path only (one directory listing per folder on it, not the whole tree)."""
        parts = rel.split("/")
        if ".git" in parts:  # a repository's own, passed over with no skip recorded (_visit_entry)
            return "default-excluded"
        d = _Dir(self.root, "", self.root_real, outer_levels(self.tree) if self.tree else (), None,
                 in_git=self.tree is not None)
        for depth, name in enumerate(parts):
            found = self._visit(d, only=name)
            if depth < len(parts) - 1 and found:
                d = found[0]
                continue
            if any(f.path == rel for f in self.files):
                return None
            return next((reason for path, reason in self.skipped_paths
                         if path == rel or (path.endswith("/") and rel.startswith(path))), "missing")
        return "missing"

    def _visit(self, d: _Dir, only: str | None = None) -> list[_Dir]:
        """List one directory: record its files, return its subdirectories to walk (with ``only``,
        the entry of that name alone: :meth:`listed`)."""
        if only is None:  # before the listing: an entry added during it changes the folder's mtime after
            self.stats.folders[d.rel] = signature(d.abs, follow=False)
        try:
            with os.scandir(d.abs) as it:
                entries = list(it)
        except OSError:
            self._skip("unreadable", d.rel)
            return []
        names = {e.name: e for e in entries}
        marked = marked_output(names) if d.parent is not None and not d.rescued else None
        if marked:
            self._skip(marked, d.rel)
            return []
        repository = d.parent is not None and is_repository(names.get(".git"))
        if repository and self.tree and not d.rescued:
            self._skip("nested-repository", d.rel)
            return []
        if repository:  # in a folder of several: its own .gitignore files hold, not an outer repository's (as for rg)
            d.in_git = True
            d.levels = tuple(level for level in d.levels if not level.git)
        d.levels = self._with_ignore_files(d, names)
        self._read_attributes(d, names.get(ATTRIBUTES_FILE))
        self.dirs.add(d.rel)
        subdirs = []
        for entry in entries if only is None else filter(None, [names.get(only)]):
            child = self._visit_entry(d, entry, names)
            if child is not None:
                subdirs.append(child)
        return subdirs

    def _with_ignore_files(self, d: _Dir, names: dict[str, os.DirEntry]) -> tuple[IgnoreLevel, ...]:
        """``d``'s levels with its own ignore files', in the order :meth:`_verdict` reads backwards: by kind
        (:attr:`IgnoreLevel.rank`), then by depth (a root .ignore negation took back what a deeper .gitignore
        left out for rg, not for us: a new user)."""
        levels = list(d.levels)
        for rank, name in enumerate(IGNORE_FILE_NAMES):
            # Outside a work tree a .gitignore rules nothing, for Git as for rg: a tarball's or sdist's
            # (ujson's ignores lib/, its whole C core; the Debian kernel's root one ends with /*) left
            # out the files its repository tracks.
            entry = names.get(name) if d.in_git or name != ".gitignore" else None
            # Git (>= 2.32) does not follow a symlinked .gitignore in the working tree.
            if entry is not None and entry.is_file(follow_symlinks=False):
                self.stats.depend(entry.path)
                level = read_ignore_file(entry.path, self.prefix + os.fsencode(d.rel), can_rescue=name == ".codiiignore",
                                         git=name == ".gitignore")
                if level:
                    levels.append(dataclasses.replace(level, rank=rank) if rank else level)
        return tuple(sorted(levels, key=lambda level: level.rank))  # stable: each kind stays in depth order

    def _read_attributes(self, d: _Dir, entry: os.DirEntry | None) -> None:
        # Not followed when a symlink, as Git (>= 2.32) does not follow a symlinked .gitattributes.
        if entry is not None and entry.is_file(follow_symlinks=False):
            self.stats.depend(entry.path)
            data = read_bytes(entry.path)
            if data:
                self.attribute_files.append((d.rel, data))

    def _verdict(self, d: _Dir, rel: str, is_dir: bool, tracked: bool) -> Rule | None:
        """The deciding rule for a path: the highest-precedence level with a matching rule (for a
        path Git tracks, among codii-sql's own levels only)."""
        path = self.prefix + os.fsencode(rel)
        for level in (*self.top, *reversed(d.levels)):
            rule = None if tracked and level.git else level.verdict(path, is_dir)
            if rule is not None:
                return rule
        return None

    def _visit_entry(self, d: _Dir, entry: os.DirEntry, siblings: dict[str, os.DirEntry]) -> _Dir | None:
        name = entry.name
        if not _encodable(name):
            self._skip("undecodable-name", d.rel + escaped(name) + ("/" if entry.is_dir(follow_symlinks=False) else ""))
            return None
        rel = d.rel + name
        if name == ".git":  # before the rules: Git itself never matches its own folder against them, and no
            return None     # skip of it is counted (every build of a repository listed its .git/: a new user)
        try:
            is_dir = entry.is_dir()  # follows symlinks; False for a dangling one
        except OSError:
            is_dir = False
        shown = rel + "/" if is_dir else rel
        tracked = shown in self.tracked
        rule = self._verdict(d, rel, is_dir, tracked)
        if (d.git_ignored and not tracked) or (rule is not None and rule.excludes):
            self._skip("codii-ignored" if rule is not None and rule.excludes and rule.own else "ignored", shown)
            if rule is not None and rule.excludes:
                self.ignored_by[(rule.where.removeprefix(self.root.rstrip("/") + "/"), rule.text)] += 1
            return None
        rescued = rule is not None and rule.rescues
        if is_dir:
            child = self._enter_dir(d, entry, rel, rescued, siblings)
            if child is not None and tracked:  # entered for its tracked files: is the rest ignored?
                git_rule = self._verdict(d, rel, True, False)
                child.git_ignored = d.git_ignored or (git_rule is not None and git_rule.excludes)
            return child
        self._add_file(entry, rel, rescued)
        return None

    def _enter_dir(self, d: _Dir, entry: os.DirEntry, rel: str, rescued: bool,
                   siblings: dict[str, os.DirEntry]) -> _Dir | None:
        excluded = None if rescued else excluded_dir(entry.name, siblings)
        if excluded is None and os.path.join(d.real, entry.name) == self.home:
            # codii-sql's own folder ($CODII_SQL_HOME) inside the root: its index's sidecar files change with
            # every build, so a new user's tree was never up to date and `watch` updated ~8 times a second.
            excluded = "default-excluded"
        if excluded:
            self._skip(excluded, rel + "/")
            return None
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            reason = self._symlink_reason(real)
            if reason is None:
                reason = "symlink-loop" if real in d.chain_reals() else "symlink-folder"
            self._skip(reason, rel + "/")
            return None
        return _Dir(entry.path, rel + "/", os.path.join(d.real, entry.name), d.levels, d, rescued, in_git=d.in_git)

    def _add_file(self, entry: os.DirEntry, rel: str, rescued: bool) -> None:
        name = entry.name
        reason = None if rescued else default_file_reason(name)
        if reason is None and self.extensions is not None and not name.lower().endswith(self.extensions):
            reason = "extension-filter"
        checked = reason or self._stat_file(entry)
        if isinstance(checked, str):
            if checked in ("too-large", "unreadable"):  # it may shrink, or become readable, unlisted
                self.stats.others[rel] = signature(entry.path)
            self._skip(checked, rel)
        else:
            self.files.append(SourceFile(rel, checked.st_size, changed_ns(checked)))

    def _stat_file(self, entry: os.DirEntry) -> str | os.stat_result:
        """The target's stat, or a skip reason; never opens the file (a FIFO would block)."""
        is_link = entry.is_symlink()
        try:
            st = entry.stat()
        except OSError as exc:
            if not is_link:
                return "unreadable"
            return ("symlink-loop" if exc.errno == errno.ELOOP
                    else "symlink-dangling" if exc.errno in (errno.ENOENT, errno.ENOTDIR)
                    else "unreadable")
        if is_link:
            return self._symlink_reason(os.path.realpath(entry.path)) or "symlink-file"
        if not stat.S_ISREG(st.st_mode):
            return "not-regular-file"
        return "too-large" if st.st_size > size_cap(entry.name, self.max_file_bytes) else st

    def _symlink_reason(self, real: str) -> str | None:
        inside = real == self.root_real or real.startswith(self.root_real.rstrip("/") + "/")
        return None if inside else "symlink-outside-root"


def escaped(name: str) -> str:
    """``name`` as it can be shown and stored: bytes that are not UTF-8 (``os`` gave them as lone
    surrogates) as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _encodable(name: str) -> bool:
    """False for names holding bytes that are not UTF-8 (``os`` maps them to lone surrogates,
    which cannot be stored as SQLite TEXT)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
