"""Which hunks of the history may be indexed: the ignore, default-exclusion and secrets rules applied to diffs."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path, PurePosixPath

from .exclusions import default_file_reason, excluded_dir
from .ignore import OWN_IGNORE_FILE_NAMES, IgnoreLevel, Rule, compile_level, read_ignore_file

#: A private key block anywhere in a hunk: read.py skips a file that starts with one ("secret");
#: a hunk starts mid-file, so it is searched for, not anchored.
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")


class HistoryRules:
    """The path and content rules of a codebase's history.

    A path that exists in the work tree now is kept exactly when the index holds it (``indexed``):
    the walk decided (ignore files, ``.codii.yaml``, default exclusions, secrets, size). A path
    gone since is judged by the rules that would apply to it now: ``ignore_patterns`` and the
    ``.ignore``, ``.rgignore`` and ``.codiiignore`` files of its folders (every file of a commit was tracked, and Git's own
    ``.gitignore`` rules do not apply to tracked files, as in the walk), then the default
    exclusions (dependency folders, build output beside its tool's file as the folder holds now,
    lock files, minified, binary extensions, names that usually hold credentials) unless a negation re-includes it, then ``extensions``.

    Args:
        root: the codebase folder; paths are relative to it (POSIX).
        indexed: the paths the index holds now.
        ignore_patterns: ``.codii.yaml``'s and the build's patterns, relative to the root.
        extensions: lower-case suffixes kept (None: every one).
    """

    def __init__(self, root: Path, indexed: set[str], ignore_patterns: list[str],
                 extensions: tuple[str, ...] | list[str] | None):
        self.root = Path(root)
        self.indexed = indexed
        top = compile_level(list(ignore_patterns), b"", can_rescue=True)
        self.top = (top,) if top else ()
        self.extensions = tuple(extensions) if extensions else None
        self._levels: dict[str, tuple[IgnoreLevel, ...]] = {}
        self._kept: dict[str, bool] = {}
        self._listed: dict[str, set[str]] = {}

    def keeps(self, path: str) -> bool:
        """Whether the hunks of ``path`` (relative POSIX) may be indexed, searched and shown."""
        if path not in self._kept:
            self._kept[path] = (path in self.indexed if os.path.lexists(self.root / path)
                                else self._gone_path_kept(path))
        return self._kept[path]

    @staticmethod
    def content_kept(text: str) -> bool:
        """False for a hunk holding a private key (the secrets rule read.py applies to a file's start)."""
        return _PRIVATE_KEY.search(text) is None

    def _gone_path_kept(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        if not parts or ".." in parts:
            return False
        rule = self._verdict(path)
        if rule is not None and rule.excludes:
            return False
        rescued = rule is not None and rule.rescues
        folders = parts[:-1]
        if not rescued and (any(p == ".git" or excluded_dir(p, self._names("/".join(folders[:i])))
                                for i, p in enumerate(folders)) or default_file_reason(parts[-1])):
            return False
        return self.extensions is None or parts[-1].lower().endswith(self.extensions)

    def _names(self, folder: str) -> set[str]:
        """The entries of ``folder`` ('' for the root) on disk now, empty when it is gone: what says
        whether a ``build``/``target`` in it is build output (beside a ``CMakeLists.txt``, ``Cargo.toml``...)."""
        if folder not in self._listed:
            try:
                self._listed[folder] = set(os.listdir(self.root / folder))
            except OSError:
                self._listed[folder] = set()
        return self._listed[folder]

    def _verdict(self, path: str) -> Rule | None:
        """The deciding rule: an excluding rule of a folder above it (the walk does not enter an
        ignored folder), else the path's own; each the config's patterns first, then the deepest
        ``.codiiignore`` up."""
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            rule = self._rule("/".join(parts[:depth]), depth < len(parts))
            if rule is not None and (rule.excludes or depth == len(parts)):
                return rule
        return None

    def _rule(self, path: str, is_dir: bool) -> Rule | None:
        raw = os.fsencode(path)
        for level in (*self.top, *reversed(self._folder_levels(path.rpartition("/")[0]))):
            rule = level.verdict(raw, is_dir)
            if rule is not None:
                return rule
        return None

    def _folder_levels(self, folder: str) -> tuple[IgnoreLevel, ...]:
        """The levels of the ignore files that are not Git's (``.ignore``, ``.rgignore``, ``.codiiignore``) from
        the root down to ``folder`` ('' for the root), as on disk now."""
        if folder not in self._levels:
            parent = self._folder_levels(folder.rpartition("/")[0]) if folder else ()
            base = (folder + "/") if folder else ""
            levels = [read_ignore_file(str(self.root / base / name), os.fsencode(base), can_rescue=name == ".codiiignore")
                      for name in OWN_IGNORE_FILE_NAMES]
            ranked = [dataclasses.replace(level, rank=rank) for rank, level in enumerate(levels, 1) if level]
            self._levels[folder] = tuple(sorted((*parent, *ranked), key=lambda level: level.rank))  # as the walk
        return self._levels[folder]
