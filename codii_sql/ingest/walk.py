"""Which files of a codebase to index: a directory walk that honours Git's ignore rules.

The walk reads only directory listings, ``stat`` results and ignore files, never file
contents, so re-scanning an unchanged tree costs no reads; :func:`read_file` reads one file
later and does the binary sniffing.

Ignore rules are Git's (``gitignore(5)``, matched as Git's wildmatch does: :mod:`.wildmatch`), so
that inside a Git work tree the files walked are those ``git ls-files --cached --others
--exclude-standard`` lists. From lowest to highest precedence:

1. Git's ``core.excludesFile`` (default ``$XDG_CONFIG_HOME/git/ignore``, else
   ``~/.config/git/ignore``), then ``$GIT_DIR/info/exclude`` of the work tree the root lies in
   (``.git`` a directory, or a ``gitdir:`` file as in worktrees and submodules), both relative to
   the work tree's top; then, when the root is a subfolder of the work tree, the ``.gitignore``
   of each folder from the top down to the root's parent, each relative to its folder;
2. ``.gitignore`` then ``.codiiignore`` in each directory under the root, relative to that
   directory; a deeper directory's files override its parents'. ``.codiiignore`` uses the same
   syntax and overrides ``.gitignore`` of the same directory (ripgrep's ``.ignore`` convention);
3. ``ignore_patterns`` (from ``.codii.yaml`` or the argument), relative to the root, like
   patterns given to ``git`` on the command line.

Within one file the last matching pattern wins. An ignored directory is not descended into,
so as in Git a negation cannot re-include a file under it. Files Git tracks are listed whatever
Git's own rules (1 and the ``.gitignore`` files) say, as ``git ls-files --cached`` lists them; a
``.codiiignore`` or ``ignore_patterns`` still excludes them. Outside a work tree, ``core.excludesFile``
and ``info/exclude`` are not read. One deliberate difference from Git: the root itself is never
ignored (a pattern of a parent folder matching it, ``build/``, does not empty the index of
``build/docs``). Any other
``.*ignore`` file (``.dockerignore``, ``.npmignore``...) has no effect.

After the ignore rules come the default exclusions (:mod:`.exclusions`: VCS metadata, dependency,
virtualenv and cache directories; lock files; minified bundles; binary extensions; files
that usually hold credentials, such as ``.env``, ``*.pem``, ``id_rsa``), and build output
(``build-output``): a ``target``, ``build`` or ``dist`` folder only beside its build tool's file
(``Cargo.toml``, ``CMakeLists.txt``, ``package.json``...), and any folder holding a
``CMakeCache.txt`` or ``CACHEDIR.TAG``; a folder of such a name elsewhere is source, and Git's
ignore rules already hide the output they name. They match
names of path components relative to the root only, so a root that itself lives under
``build/`` is indexed. A negation in a ``.codiiignore`` or in ``ignore_patterns`` (for
example ``!src/build/``) re-includes a default-excluded path; a ``.gitignore`` negation does
not, because whitelist idioms such as ``!*/`` would otherwise re-include ``node_modules``.

A directory holding its own ``.git`` (a directory, or a ``gitdir:`` file as in submodules and
``git worktree add``) is another repository, which Git leaves out of this one's: it is not
entered (``nested-repository``) when the root belongs to a Git work tree; a folder of several
repositories, itself in none, is indexed whole. A ``.codiiignore`` negation re-includes one.

The ``.gitattributes`` of each walked directory are read for the linguist marks of file roles
(:mod:`.attributes`), with ``$GIT_DIR/info/attributes`` over them.

A symlink to a directory is never entered, as Git stores a link as a link: the files behind it
are indexed once, under their own folder's path (``symlink-folder``; the Linux kernel's 12 links
under ``scripts/dtc/include-prefixes/`` indexed 6,578 files twice when they were followed), or not
at all when that folder lies outside the root (``symlink-outside-root``) or is on the walk's own
chain (``symlink-loop``). A symlink to a file is not read either (``symlink-file``), as Git and
ripgrep leave it: its target is indexed under its own path when the rules allow it, and the link
never serves a file they exclude (a link ``notes.py -> .env`` served the secret).
"""

from __future__ import annotations

import collections
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .attributes import Attributes
from .attributes import FILE_NAME as ATTRIBUTES_FILE
from .config import DEFAULT_MAX_FILE_BYTES, normalize_extensions, positive_int, size_cap
from .exclusions import default_file_reason, excluded_dir, marked_output
from .ignore import IGNORE_FILE_NAMES, IgnoreLevel, Rule, compile_level, outer_levels, read_ignore_file
from .repositories import git_info_path, is_repository, read_bytes, tracked_but_ignored, work_tree

#: Files found between two calls of :func:`scan`'s ``on_progress``.
PROGRESS_EVERY = 500

#: Every reason :func:`scan` counts in :attr:`ScanResult.skipped`.
SKIP_REASONS = (
    "ignored", "default-excluded", "build-output", "nested-repository", "too-large", "binary-extension", "lock-file",
    "minified", "secret",
    "extension-filter", "symlink-outside-root", "symlink-loop", "symlink-dangling", "symlink-folder", "symlink-file",
    "unreadable", "not-regular-file", "undecodable-name",
)

@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to index.

    Attributes:
        path: POSIX path relative to the codebase root, e.g. ``"src/pkg/mod.py"``.
        size: bytes, from ``stat`` (of the target, for a symlink).
        mtime_ns: modification time in nanoseconds since the epoch, from ``stat``.
    """

    path: str
    size: int
    mtime_ns: int


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
            ``"undecodable-name"`` a name that is not UTF-8; ``"unreadable"`` a directory
            that cannot be listed or an entry that cannot be stat-ed.
        skipped_paths: ``(path, reason)`` of each skip counted in ``skipped``, in walk order: a
            folder's path ends in ``/``; an undecodable name is shown with ``\\xNN`` escapes.
        dirs: the directories walked, relative (``""`` the root, else ``"dir/sub/"``): a file
            watcher's changes outside them (ignored trees, nested repositories) need no build.
        attributes: the linguist marks of the walked ``.gitattributes`` files.
        ignored_by: ``(where, pattern)`` -> paths that rule ignored (``where`` is ``file:line``, an
            ignore file under the root relative to it): see :meth:`hiding_rules`.
    """

    files: list[SourceFile]
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)
    dirs: set[str] = field(default_factory=set)
    attributes: Attributes = field(default_factory=Attributes)
    ignored_by: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)

    def hiding_rules(self, limit: int = 3) -> list[dict]:
        """When no file is left but ignore rules left paths out (the Debian kernel tarball's root
        ``.gitignore`` ends with ``/*``): the ``limit`` rules that ignored most of them,
        ``[{"where", "rule", "paths"}]``; else ``[]``."""
        if self.files:
            return []
        return [{"where": where, "rule": text, "paths": n} for (where, text), n in self.ignored_by.most_common(limit)]


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

    def chain_reals(self) -> Iterator[str]:
        d: _Dir | None = self
        while d is not None:
            yield d.real
            d = d.parent


class _Walker:
    """One scan: the root's settings, the skip counter and the files found so far.

    Ignore levels match paths relative to the anchor: the top of the Git work tree the root lies
    in (``prefix`` is the root's path from there), else the root itself.
    """

    def __init__(self, root: Path, max_file_bytes: int, ignore_patterns: Sequence[str],
                 extensions: tuple[str, ...] | None) -> None:
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(self.root)
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
        #: Files Git tracks that its rules ignore, and their folders ("a/b/"): listed all the same.
        self.tracked: set[str] = set()
        for path in tracked_but_ignored(self.root) if self.tree else ():
            self.tracked.add(path)
            parts = path.split("/")[:-1]
            self.tracked.update("/".join(parts[:i]) + "/" for i in range(1, len(parts) + 1))

    def run(self, on_progress: Callable[[int], None] | None = None) -> ScanResult:
        levels = outer_levels(self.tree) if self.tree else ()
        stack = [_Dir(self.root, "", self.root_real, levels, None)]
        reported = 0
        while stack:
            stack.extend(self._visit(stack.pop()))
            if on_progress is not None and len(self.files) >= reported + PROGRESS_EVERY:
                reported = len(self.files)
                on_progress(reported)
        self.files.sort(key=lambda f: f.path)
        # Lowest precedence first: shallower directories, then info/attributes.
        self.attribute_files.sort(key=lambda base_data: base_data[0].count("/"))
        info = read_bytes(git_info_path(self.root, "attributes"))
        self.attribute_files.extend([("", info)] if info else [])
        return ScanResult(self.files, self.skipped, self.skipped_paths, self.dirs, Attributes(self.attribute_files),
                          self.ignored_by)

    def _skip(self, reason: str, path: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((path, reason))

    def listed(self, rel: str) -> bool:
        """Whether :meth:`run` would list the file ``rel`` (a relative POSIX path): the same rules,
        applied along that path only (one directory listing per folder on it, not the whole tree)."""
        parts = rel.split("/")
        d = _Dir(self.root, "", self.root_real, outer_levels(self.tree) if self.tree else (), None)
        for depth, name in enumerate(parts):
            found = self._visit(d, only=name)
            if depth == len(parts) - 1:
                return any(f.path == rel for f in self.files)
            if not found:
                return False
            d = found[0]
        return False

    def _visit(self, d: _Dir, only: str | None = None) -> list[_Dir]:
        """List one directory: record its files, return its subdirectories to walk (with ``only``,
        the entry of that name alone: :meth:`listed`)."""
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
        if d.parent is not None and self.tree and not d.rescued and is_repository(names.get(".git")):
            self._skip("nested-repository", d.rel)
            return []
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
        levels = list(d.levels)
        for name in IGNORE_FILE_NAMES:
            entry = names.get(name)
            # Git (>= 2.32) does not follow a symlinked .gitignore in the working tree.
            if entry is not None and entry.is_file(follow_symlinks=False):
                level = read_ignore_file(entry.path, self.prefix + os.fsencode(d.rel), can_rescue=name != ".gitignore",
                                         git=name == ".gitignore")
                if level:
                    levels.append(level)
        return tuple(levels)

    def _read_attributes(self, d: _Dir, entry: os.DirEntry | None) -> None:
        # Not followed when a symlink, as Git (>= 2.32) does not follow a symlinked .gitattributes.
        if entry is not None and entry.is_file(follow_symlinks=False):
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
            self._skip("undecodable-name", d.rel + escaped(name))
            return None
        rel = d.rel + name
        if name == ".git":  # before the rules: Git itself never matches its own folder against them
            self._skip("default-excluded", rel + "/" if entry.is_dir(follow_symlinks=False) else rel)
            return None
        try:
            is_dir = entry.is_dir()  # follows symlinks; False for a dangling one
        except OSError:
            is_dir = False
        shown = rel + "/" if is_dir else rel
        tracked = shown in self.tracked
        rule = self._verdict(d, rel, is_dir, tracked)
        if (d.git_ignored and not tracked) or (rule is not None and rule.excludes):
            self._skip("ignored", shown)
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
        return _Dir(entry.path, rel + "/", os.path.join(d.real, entry.name), d.levels, d, rescued)

    def _add_file(self, entry: os.DirEntry, rel: str, rescued: bool) -> None:
        name = entry.name
        reason = None if rescued else default_file_reason(name)
        if reason is None and self.extensions is not None and not name.lower().endswith(self.extensions):
            reason = "extension-filter"
        checked = reason or self._stat_file(entry)
        if isinstance(checked, str):
            self._skip(checked, rel)
        else:
            self.files.append(SourceFile(rel, checked.st_size, checked.st_mtime_ns))

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


def listed(root: Path, rel: str, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
           ignore_patterns: Sequence[str] = (), extensions: Sequence[str] | None = None) -> bool:
    """Whether :func:`scan` with these settings lists the file ``rel`` (a relative POSIX path, no
    ``..``), decided along that path alone: a few directory listings, not a walk of the tree (the
    kernel's 86k files took 1.5-2 s to walk for one symbol look-up)."""
    walker = _Walker(root, positive_int(max_file_bytes), ignore_patterns, normalize_extensions(extensions))
    return walker.listed(rel)


def scan(root: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
         ignore_patterns: Sequence[str] = (), extensions: Sequence[str] | None = None,
         on_progress: Callable[[int], None] | None = None) -> ScanResult:
    """List the files to index under ``root`` (see the module docstring for the rules).

    Reads directory listings, ``stat`` results and ignore files only, never file contents.
    The settings usually come from :func:`load_config`.

    Args:
        root: the codebase root directory.
        max_file_bytes: files larger than this (bytes) are skipped as ``"too-large"``.
        ignore_patterns: gitignore-style patterns relative to the root, with the highest
            precedence; a negation here also re-includes a default-excluded path.
        extensions: suffixes such as ``[".py", ".md"]`` (case-insensitive); when given,
            only files ending in one of them are indexed.
        on_progress: called with the number of files found so far, every :data:`PROGRESS_EVERY`.
    Returns:
        ScanResult: files sorted by path, and skip counts by reason.
    Raises:
        FileNotFoundError / NotADirectoryError: ``root`` is not a directory.
        ValueError: ``extensions`` is empty or ``max_file_bytes`` is not a positive integer.
    """
    if not os.path.isdir(root):
        raise (NotADirectoryError if os.path.exists(root) else FileNotFoundError)(
            f"{root}: not a directory")
    walker = _Walker(root, positive_int(max_file_bytes), ignore_patterns,
                     normalize_extensions(extensions))
    return walker.run(on_progress)
