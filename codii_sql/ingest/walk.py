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
2. ``.gitignore``, ``.ignore``, ``.rgignore`` and ``.codiiignore`` in each directory under the root,
   relative to that directory, in the same syntax: a file of a later kind decides before one of an
   earlier kind at any depth, and of one kind a deeper directory's before its parents' (ripgrep's
   order for ``.rgignore``, ``.ignore`` and ``.gitignore``);
3. ``ignore_patterns`` (from ``.codii.yaml`` or the argument), relative to the root, like
   patterns given to ``git`` on the command line.

Within one file the last matching pattern wins. An ignored directory is not descended into,
so as in Git a negation cannot re-include a file under it. Files Git tracks are listed whatever
Git's own rules (1 and the ``.gitignore`` files) say, as ``git ls-files --cached`` lists them; a
``.ignore``, ``.rgignore``, ``.codiiignore`` or ``ignore_patterns`` still excludes them. Outside a work tree, ``core.excludesFile``,
``info/exclude`` and ``.gitignore`` files are not read, as rg reads none there (a tarball's or an sdist's holds
the files its repository tracks, which its ``.gitignore`` may match); a repository in a folder of several, itself
in none, reads its own. One deliberate difference from Git: the root itself is never
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
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from .attributes import FILE_NAME as ATTRIBUTES_FILE
from .config import CONFIG_FILE_NAME, DEFAULT_MAX_FILE_BYTES, normalize_extensions, positive_int
from .exclusions import FOLDER_MARKERS
from .ignore import IGNORE_FILE_NAMES
from .scanned import SKIP_REASONS, ScanResult, ScanStats, SourceFile
from .walker import Walker, escaped

__all__ = ["SKIP_REASONS", "ScanResult", "SourceFile", "escaped", "listed", "rescan", "scan", "unlisted"]

#: Changed paths :func:`rescan` looks at one by one; more (a branch switch) and the caller walks, which is
#: then cheaper than a listing of every folder on each path.
RESCAN_MAX = 200
#: Names whose change may reach beyond their own path: ignore, attribute and config files, and the files
#: that make a folder, or the folder beside them, build output.
_REACHING = frozenset({*IGNORE_FILE_NAMES, ATTRIBUTES_FILE, CONFIG_FILE_NAME, *FOLDER_MARKERS})


def unlisted(root: Path, rel: str, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
             ignore_patterns: Sequence[str] = (), extensions: Sequence[str] | None = None) -> str | None:
    """None when :func:`scan` with these settings lists the file ``rel`` (a relative POSIX path, no
    ``..``), else why not (a :data:`SKIP_REASONS` reason of it or a folder above it, or ``"missing"``),
    decided along that path alone: a few directory listings, not a walk of the tree (the kernel's
    86k files took 1.5-2 s to walk for one symbol look-up)."""
    walker = Walker(root, positive_int(max_file_bytes), ignore_patterns, normalize_extensions(extensions))
    return walker.unlisted(rel)


def listed(root: Path, rel: str, **rules) -> bool:
    """Whether :func:`scan` with these ``rules`` lists the file ``rel`` (see :func:`unlisted`)."""
    return unlisted(root, rel, **rules) is None


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
    walker = Walker(root, positive_int(max_file_bytes), ignore_patterns,
                     normalize_extensions(extensions))
    return walker.run(on_progress)


def rescan(root: Path, saved: ScanResult, changed: Collection[str], *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
           ignore_patterns: Sequence[str] = (), extensions: Sequence[str] | None = None) -> ScanResult | None:
    """What :func:`scan` with these rules would answer now, from ``saved`` (its answer some time ago, as
    :func:`~.scan_stats.load` gives it) and ``changed``: the relative POSIX paths of every entry changed
    since, as a file watcher heard them. Each is decided along its own path (:func:`unlisted`), none
    else is looked at: a kernel edit reached its index in 1.3 s with a walk (1 s of it) per update.

    None when the answer needs a walk: more than :data:`RESCAN_MAX` changes, a folder among them (made,
    removed or renamed), a rule, attribute, config or build-tool file, Git's own files, a change outside
    the folders ``saved`` walked, a file left out for a folder above it, or no file left.
    """
    if len(changed) > RESCAN_MAX:
        return None
    files = {f.path: f for f in saved.files}
    skipped = dict(saved.skipped_paths)
    others = dict(saved.stats.others)
    walker = None
    for rel in sorted(changed):
        folder, _, name = rel.rpartition("/")
        full = os.path.join(root, rel)
        if (not rel or rel == ".." or rel.startswith("../") or name in _REACHING or ".git" in rel.split("/")
                or rel + "/" in saved.stats.folders or full in saved.stats.rules
                or os.path.isdir(full)):  # a folder, or a link to one (skipped as symlink-folder, by a walk)
            return None
        if (folder + "/" if folder else "") not in saved.dirs:
            if os.path.lexists(full):
                return None
            continue  # made and removed in a folder no scan walked (an editor's temporary file)
        if walker is None:
            walker = Walker(root, positive_int(max_file_bytes), ignore_patterns, normalize_extensions(extensions))
        reason = walker.unlisted(rel)
        files.pop(rel, None)
        skipped.pop(rel, None)
        others.pop(rel, None)
        if reason is None:
            files[rel] = next(f for f in reversed(walker.files) if f.path == rel)
        elif reason != "missing":
            if (rel, reason) not in walker.skipped_paths:
                return None  # a folder above it is left out now: its other files too
            skipped[rel] = reason
            if rel in walker.stats.others:
                others[rel] = walker.stats.others[rel]
    if not files:
        return None
    stats = saved.stats
    return ScanResult(sorted(files.values(), key=lambda f: f.path), collections.Counter(skipped.values()),
                      list(skipped.items()), saved.dirs, saved.attributes, collections.Counter(),
                      ScanStats(stats.taken_ns, stats.folders, others, stats.rules))
