"""Which candidate files a grep keeps: its scopes, file types and roles, and rg's globs, read as gitignore
lines from the root or, on the command line, from the folder it runs in."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from ..errors import UsageError
from ..ingest import wildmatch
from ..languages import KNOWN_LANGUAGES, language_name

#: Wildcards a ``-g`` glob holds at most: '*a*a*a...*z' backtracked for minutes over one long path.
MAX_GLOB_STARS = 10


def rebased(globs: list[str], folder: str, root: Path) -> list[str]:
    """``globs`` as written in ``folder`` (rg reads them from its working directory), written from ``root``:
    one anchored by a ``/`` before its end gets the folder's relative path in front (``ssautil/*`` in
    ``go/ssa``: ``go/ssa/ssautil/*``); one without matches a name at any depth and stays as it is, as
    do all when ``folder`` is the root or outside it."""
    base = os.path.relpath(os.path.realpath(folder), os.path.realpath(root)).replace(os.sep, "/")
    if base == "." or base == ".." or base.startswith("../"):
        return list(globs)
    out = []
    for glob in globs:
        negated = glob.startswith("!")
        body = glob[1:] if negated else glob
        anchored = "/" in body.rstrip("/") and not body.startswith("**/")  # `**/x` is at any depth, as rg reads it
        out.append(("!" if negated else "") + base + "/" + body.lstrip("/") if anchored else glob)
    return out


@functools.cache
def rg_types() -> dict[str, tuple[str, ...]]:
    """rg's file types: name -> file-name globs, as ripgrep 13 defines them (``rg --type-list``, bundled as
    codii_sql/data/rg_types.txt: see its NOTICE)."""
    text = (resources.files("codii_sql.data") / "rg_types.txt").read_text(encoding="utf-8")
    return {name: tuple(g.strip() for g in globs.split(",")) for name, _, globs in
            (line.partition(":") for line in text.splitlines() if line.strip())}


def check_type(name: str) -> None:
    """Raises UsageError unless ``name`` is one of rg's file types or a language files are detected as."""
    if name != "all" and name not in rg_types() and language_name(name) not in KNOWN_LANGUAGES:
        raise UsageError(f"{name!r} is not a file type known here",
                         "pass one of rg's types (`codii-sql grep --type-list`) or a language such as python",
                         field="type")


def _of_type(name: str) -> Callable[[dict], bool]:
    """The test a row passes when its file is of type ``name`` (``all``: any of rg's): rg's globs over the
    file's name, as rg decides it (a new user's `-t c` left out a `.h` whose text reads as C++, `-t css` the
    `.scss` files), or, for a language rg has no type for (``python``, ``typescript``), the language its
    content was detected as."""
    globs = tuple(g for gs in rg_types().values() for g in gs) if name == "all" else rg_types().get(name)
    if globs is None:
        language = language_name(name)
        return lambda row: row["language"] == language
    # read as -g's globs are (rg's globset for both): one without '/' names a file at any depth
    named = re.compile(b"|".join(b"(?:%s)" % wildmatch.parse(g.encode("utf-8")).regex for g in globs)).fullmatch
    return lambda row: named(row["path"].encode("utf-8")) is not None


def keeper(types: list[str], roles: list[str], globs: list[str], scopes: list[str], *,
           hidden: bool = True, types_not: list[str] = ()) -> Callable[[dict], bool]:
    """The test a candidate row (``path``, ``language``, ``role``) passes: under one of ``scopes``
    (relative folders or files; [] for all), of one of the ``types`` (rg's, or languages) and ``roles`` ([]:
    any) and of none of ``types_not`` (rg's ``-T``), kept by the ``globs`` (rg's ``-g``); without
    ``hidden``, none whose name, or a folder's below
    the scope it lies in, starts with ``.`` (rg's default: a scope named so is searched, as rg searches
    a path it is given).

    Raises:
        UsageError: a glob that matches nothing (``[``), opens a ``{`` it never closes, or holds too many
            wildcards.
    """
    wanted = [_of_type(t) for t in types]
    unwanted = [_of_type(t) for t in types_not]
    roles = set(roles)
    for text in globs:
        if wildmatch.unclosed_brace(text):  # rg refuses it; read literally it matched nothing, and read as "no match"
            raise UsageError(f"{text!r} is not a glob: an alternate group is not closed (a '{{' lacks its '}}')",
                             "close it, as in '*.{py,rst}', or escape the brace as '\\{'", field="glob")
    globs = [_glob(g) for text in globs for g in wildmatch.expand_braces(text)]
    includes = any(not negated for negated, _, _ in globs)

    def keep(row: dict) -> bool:
        path = row["path"]
        if scopes and not any(path == s or path.startswith(s + "/") for s in scopes):
            return False
        if not hidden and _hidden(path, scopes, globs):
            return False
        if (wanted and not any(test(row) for test in wanted)) or (roles and row["role"] not in roles) \
                or any(test(row) for test in unwanted):
            return False
        return _globbed(path, globs, includes) if globs else True
    return keep


def _hidden(path: str, scopes: list[str], globs: list) -> bool:
    """Whether ``path`` is, or lies in, a hidden entry (``.name``) below the scope that holds it that no
    include glob names: rg lets ``-g '*.rs'`` take in ``src/.dot.rs``, not ``.hidden/a.rs`` (the glob names
    no folder ``.hidden``)."""
    if path in scopes:  # a file given by name
        return False
    scope = next((s for s in scopes if path.startswith(s + "/")), "")
    start = len(scope) + 1 if scope else 0
    parts = path[start:].split("/")
    for i, part in enumerate(parts):
        if part.startswith("."):
            entry = path[:start] + "/".join(parts[:i + 1])
            if not _named(entry.encode("utf-8"), globs, folder=i < len(parts) - 1):
                return True
    return False


def _named(entry: bytes, globs: list, *, folder: bool) -> bool:
    """Whether the last glob matching ``entry`` (a folder, or the file) includes it."""
    last = None
    for negated, regex, dir_only in globs:
        if (folder or not dir_only) and regex.fullmatch(entry):
            last = not negated
    return bool(last)


def path_order(path: str) -> str:
    """A sort key putting paths in rg's order (``--sort path``, and a folder's walk): by component, so
    ``open_options/mock.rs`` comes before ``open_options.rs`` ('/' below every other character)."""
    return path.replace("/", "\x00")


def _glob(text: str) -> tuple[bool, re.Pattern[bytes], bool]:
    """``(negated, regex, dir_only)`` of one ``-g`` glob, read as a gitignore line is (rg's globs)."""
    parsed = wildmatch.parse(text.encode("utf-8"))
    if parsed is None or parsed.core == wildmatch.NEVER:  # '[' matches nothing: a mistake, not a filter
        raise UsageError(f"{text!r} is not a glob", "pass a glob such as '*.py' or '!tests/'", field="glob")
    if text.count("*") > MAX_GLOB_STARS:  # '*a*a*a...*z' backtracked for minutes over one long path
        raise UsageError(f"{text!r} has more than {MAX_GLOB_STARS} wildcards", "use fewer '*'", field="glob")
    return parsed.negated, re.compile(parsed.regex), parsed.dir_only


def _globbed(path: str, globs: list, includes: bool) -> bool:
    """rg's verdict (measured against rg 13): a folder above the file whose last matching glob excludes it
    is never entered (`-g '!tests/' -g '*.py'` keeps no tests/*.py); then the last glob matching the
    file itself decides (an include glob that matches a folder lists none of its files: `-g 'src/'`
    lists nothing); no glob matching keeps the file only when no include glob was given."""
    raw = path.encode("utf-8")
    for folder in (raw[:i] for i in range(len(raw)) if raw[i:i + 1] == b"/"):
        last = None
        for negated, regex, _ in globs:
            if regex.fullmatch(folder):
                last = negated
        if last:
            return False
    verdict = None
    for negated, regex, dir_only in globs:
        if not dir_only and regex.fullmatch(raw):
            verdict = not negated
    return (not includes) if verdict is None else verdict
