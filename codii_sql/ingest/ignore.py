"""Git's ignore rules compiled by pathspec: one level per ignore file, the last matching pattern wins.

Within one file the last matching pattern wins; a deeper directory's files override its
parents'. A negation may rescue a default-excluded path only from a ``.codiiignore`` or the
config, and only when its last component is literal (see :func:`compile_level`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

#: Ignore files read in every directory, lowest precedence first.
IGNORE_FILE_NAMES = (".gitignore", ".codiiignore")


#: pathspec's name for the regex group that captures the ``/`` after a directory match.
_DIR_MARK = "ps_d"
#: How pathspec starts the regex of a pattern without an inner slash (``*.log``, ``logs/``).
_ANY_LEADING_DIRS = "^(?:.+/)?"


@dataclass(frozen=True, slots=True)
class Rule:
    """One gitignore pattern, as a regex compiled by pathspec."""

    regex: re.Pattern[str]
    excludes: bool  # False for a negation ("!pattern")
    rescues: bool  # a negation that re-includes default-excluded paths

    def matches_itself(self, path: str, is_dir: bool) -> bool:
        """Whether the pattern matches ``path`` itself, as Git matches it.

        pathspec's regexes also match every path under a matching directory (it checks
        flat file lists); such a match captures the ``/`` after that directory in the
        ``ps_d`` group. The walk prunes ignored directories itself, so those matches are
        discarded here: otherwise ``!*/`` (any directory) would re-include the files under
        every directory. A directory-only pattern (``logs/``) matches a directory when
        ``ps_d`` captures the slash appended after the directory's own name.
        """
        regex = self.regex
        if _DIR_MARK not in regex.groupindex:
            return regex.search(path) is not None
        m = regex.search(path)
        if m is not None and m.group(_DIR_MARK) is None:
            return True
        end = len(path) + 1
        return is_dir and any(m.end(_DIR_MARK) == end for m in regex.finditer(path + "/"))


@dataclass(frozen=True, slots=True)
class IgnoreLevel:
    """The patterns of one ignore file (or of the config), matched relative to ``base``."""

    base: str  # "" for the root, else "dir/sub/" (with the trailing slash)
    rules: tuple[Rule, ...]  # in file order
    any_rule: re.Pattern[str]  # all rules in one alternation: most paths match none

    def verdict(self, rel: str, is_dir: bool) -> Rule | None:
        """The last rule matching the path itself (Git: the last matching pattern wins)."""
        path = rel[len(self.base):]
        if not (self.any_rule.search(path) or is_dir and self.any_rule.search(path + "/")):
            return None
        for rule in reversed(self.rules):
            if rule.matches_itself(path, is_dir):
                return rule
        return None


def compile_level(lines: Sequence[str], base: str, can_rescue: bool) -> IgnoreLevel | None:
    """The level for these pattern lines, or ``None`` when they hold no pattern.

    A negation rescues default-excluded paths only from ``.codiiignore`` or the config, and
    only when its last path component is literal (``!src/build/``, not ``!*/``).
    """
    rules = []
    for line in lines:
        try:
            pattern = GitIgnoreSpecPattern(_fix_trailing_globstar(line))
        except ValueError:
            continue  # Git ignores an invalid pattern (``!``, a trailing ``\\``)
        if pattern.include is None:
            continue
        last = pattern.pattern.rstrip().lstrip("!").rstrip("/").rsplit("/", 1)[-1]
        rules.append(Rule(
            # DOTALL: file names may hold newlines, which pathspec's ``.`` would not match.
            regex=re.compile(pattern.regex.pattern, pattern.regex.flags | re.DOTALL),
            excludes=pattern.include,
            rescues=can_rescue and not pattern.include and not any(c in last for c in "*?["),
        ))
    if not rules:
        return None
    return IgnoreLevel(base, tuple(rules), _alternation(r.regex.pattern for r in rules))


def _alternation(regexes: Iterator[str]) -> re.Pattern[str]:
    """One regex matching (with ``.search``) wherever any of ``regexes`` does.

    Each alternative is anchored at the start (``.*?`` before an unanchored one), and the
    alternatives of pathspec's "any leading directories" form share one ``(?:.+/)?`` prefix,
    so a miss costs a few passes instead of one per pattern and start position. A group
    name may appear only once per regex, so pathspec's ``ps_d`` group becomes a plain ``/``.
    """
    any_dirs, rest = [], []
    for regex in regexes:
        regex = regex.replace(f"(?P<{_DIR_MARK}>/)", "/")
        if regex.startswith(_ANY_LEADING_DIRS):
            any_dirs.append(regex[len(_ANY_LEADING_DIRS):])
        else:
            rest.append(regex[1:] if regex.startswith("^") else ".*?" + regex)
    if any_dirs:
        rest.append(_ANY_LEADING_DIRS[1:] + "(?:" + "|".join(any_dirs) + ")")
    return re.compile("^(?:" + "|".join(f"(?:{p})" for p in rest) + ")", re.DOTALL)


def _fix_trailing_globstar(line: str) -> str:
    """``a/**/`` -> ``a/**/*/``: the same directories for Git (those under ``a``), but
    pathspec 1.1.1 turns ``a/**/`` into a match of ``a`` itself."""
    stripped = line.rstrip()
    return stripped + "*/" if stripped.endswith("/**/") else line


def read_ignore_file(path: str, base: str, can_rescue: bool) -> IgnoreLevel | None:
    # Git reads ignore files as bytes; an unreadable one is ignored like a missing one.
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return compile_level(text.splitlines(), base, can_rescue)
