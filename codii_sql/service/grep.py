"""The grep use case: one request -> one :class:`~codii_sql.search.grep_answer.GrepAnswer`, for every face.

It resolves the request's paths to one codebase and scopes in it, brings the index up to date when
asked (a CLI grep), and greps it (:mod:`.grepping`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
import unicodedata
from collections.abc import Callable

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.report import Progress
from ..search.answer import Note
from ..search.grep import matches_bytes
from ..search.grep_answer import GrepAnswer, GrepFile
from ..search.pattern import GrepPattern
from ..text import decode_kept
from .builds import committed_state_note, ensure_index
from .codebases import find_codebase, is_index_file
from .status import open_store
from .stored import stored_path
from . import grep_filter
from .grepping import GrepRequest, matched_or_none, matcher, search_codebase, take_file


#: The name of the text a grep reads from standard input (rg's).
STDIN = "<stdin>"
#: A backslash escape (``\\W``, ``\\S``, ``\\x41``): no letter of the text to match, for smart case.
_ESCAPES = re.compile(r"\\(?:[xu]\{([0-9a-fA-F]{1,8})\}|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|"
                      r"N\{([^}]*)\}|p\{[^}]*\}|P\{[^}]*\}|.)")


#: What of a pattern is syntax, not a literal character, once its escapes are read (:func:`_literal_text`):
#: a POSIX class's name, a group's opening with its flags or name, a repeat's count, the metacharacters.
_SYNTAX = re.compile(r"\[:\^?[a-z]+:\]|\(\?(?:P?<[^>]*>|#[^)]*\)|[^:)]*[:)])?|\{\d*,?\d*\}|(?<!\\)[\[\]^$.|?*+(){}-]")


def _literal_text(pattern: str) -> str:
    """``pattern``'s literal characters as rg's ``-S`` reads them: an escape of a letter (``\\x46``,
    ``\\u{46}``, ``\\N{...}``) is that letter (a new user's ``-S '\\x46oo'`` matched ``foo`` where rg's does
    not), a class escape (``\\W``, ``\\p{Lu}``) none."""
    def letter(m: re.Match) -> str:
        code = next((g for g in m.groups()[:4] if g), None)
        if code is not None:
            return chr(int(code, 16)) if int(code, 16) <= 0x10FFFF else ""
        try:
            return unicodedata.lookup(m.group(5)) if m.group(5) else ""
        except KeyError:  # no such name: the pattern's own error says so
            return ""
    return _SYNTAX.sub("", _ESCAPES.sub(lambda m: re.escape(letter(m)), pattern)).replace("\\", "")


@functools.lru_cache(maxsize=64)
def compiled(patterns: tuple[str, ...], fixed: bool, ignore_case: bool, word: bool, line: bool, multiline: bool,
             dotall: bool) -> GrepPattern:
    """The :class:`GrepPattern` of these options, kept for the next grep that asks for it (a server's agents
    repeat patterns): its three parses and four compiles were ~1 ms of a 6-9 ms selective grep over Django.

    Raises:
        UsageError: as :class:`GrepPattern` (an error is not kept: the next call raises it again).
    """
    return GrepPattern(list(patterns), fixed=fixed, ignore_case=ignore_case, word=word, line=line,
                       multiline=multiline, dotall=dotall)


def grep(request: GrepRequest, *, progress: Progress | None = None,
         on_file: Callable[[GrepAnswer, GrepFile], None] | None = None) -> GrepAnswer:
    """Answer ``request``; ``on_file(answer, file)`` (a face that prints as it goes) takes each file as
    it is read, in place of ``answer.files`` (see :func:`~.grepping.search_codebase`).

    Raises:
        UsageError: a bad pattern (naming its position), option or path.
        NotIndexedError, StorageError: the codebase cannot be searched.
    """
    request.check()
    literals = "".join(p if request.fixed else _literal_text(p) for p in request.patterns)
    # rg's -S: case-blind when the patterns hold a literal character and none in upper case (a class of
    # letters alone, `[[:lower:]]+`, is no literal: rg stays case-sensitive)
    ignore_case = request.ignore_case or (request.smart_case and literals != "" and not any(map(str.isupper, literals)))
    pattern = compiled(tuple(request.patterns), request.fixed, ignore_case, request.word, request.line_regexp,
                       request.multiline, request.multiline_dotall)
    if request.text is not None:
        return _grep_text(pattern, request, on_file)
    missing = [p for p in request.paths if not os.path.lexists(p)]
    if missing and len(missing) < len(request.paths) and not (request.db or is_index_file(request.paths[0])):
        # rg searches the paths that exist, says which do not, and exits 2: one typo lost every answer here
        request = dataclasses.replace(request, paths=[p for p in request.paths if p not in missing])
    else:
        missing = []
    codebase, scopes, absent = _scopes(request.paths, request.db)
    missing = missing or absent
    if request.glob_base is not None and not codebase.alone:
        request = dataclasses.replace(request, globs=grep_filter.rebased(request.globs, request.glob_base, codebase.root))
    notes: list[Note] = []
    committed = None  # the last committed state's note, taken with the store the grep opens anyway
    if not codebase.alone and (request.update or not codebase.db_path.is_file()):
        update = ensure_index(codebase, update=request.update, progress=progress, vectors=False)
        if update:
            notes.append(update)
    elif not codebase.alone:
        committed = functools.partial(committed_state_note, codebase)
    notes[:0] = [Note("grep", f"{p}: no such file or folder, not searched") for p in missing]
    answer = search_codebase(codebase, pattern, request, scopes, notes, on_file, committed)
    answer.missing_paths = missing
    return answer


def _scopes(paths: list[str], db: str | None) -> tuple[Codebase, list[str], list[str]]:
    """The codebase the ``paths`` lie in, each one relative to its root ([] for the whole), and those an
    index alone does not hold (said and left out, as rg does with a missing path).

    Raises:
        UsageError: a path outside that codebase, or paths of several codebases.
    """
    given = db is None and paths and is_index_file(paths[0])  # an index file given as the path (MCP, HTTP)
    if given:
        db, paths = paths[0], paths[1:]
    if db is not None:
        codebase, _ = find_codebase(None, db)
        if codebase.alone:
            return codebase, *_stored_scopes(codebase, paths)
        if given and paths:  # its folders beside it were refused in words about --db, which nobody typed
            raise UsageError(f"{db} is the index of {codebase.root}, given with other paths",
                             "grep the index file alone, or the folders of its codebase without it")
    for p in paths:
        if not os.path.lexists(p):  # rg: "No such file or directory", exit 2 (not 1, as for no match)
            raise UsageError(f"{p}: no such file or folder", "pass a file or folder of an indexed codebase")
    first = os.path.abspath(paths[0]) if paths else None
    anchor = first if first is None or os.path.isdir(first) else os.path.dirname(first)
    codebase, scope = find_codebase(anchor, db)
    if not paths:
        return codebase, [scope] if scope else [], []
    scopes = []
    for p in paths:  # every one checked: a later PATH of another codebase was dropped without a word
        rel = os.path.relpath(os.path.realpath(p), os.path.realpath(codebase.root))
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            # No field: the CLI's PATH is an argument, and it named it "--path".
            where = "leads outside (a link)" if os.path.islink(p) else "is outside"
            raise UsageError(f"{p} {where} the codebase {codebase.root}", "grep one codebase at a time")
        scopes.append(rel.replace(os.sep, "/"))
    return codebase, [] if "." in scopes else scopes, []


def _stored_scopes(codebase: Codebase, paths: list[str]) -> tuple[list[str], list[str]]:
    """``paths`` inside an index alone, relative to its root as a folder's are (``./src``, ``src//a``,
    ``src/``: ``src``), those it holds a file at or under, and those it does not.

    Raises:
        UsageError: it holds none of them (rg's "No such file or directory", exit 2: an agent's absolute
            path to the source gave no line and exit 1, "nothing matches").
    """
    given = [(p, stored_path(p)) for p in paths]
    if any(rel == "" for _, rel in given):
        return [], []
    with open_store(codebase) as store:
        held = [(p, rel) for p, rel in given if not rel.startswith("..") and store.value("holds_path", {"path": rel})]
    if given and not held:
        raise UsageError(f"{given[0][0]}: no such file or folder in the index {codebase.db_path}",
                         "an index alone holds paths relative to its codebase's root, as its answers "
                         "show them (`src`, `src/app.py`): pass one of those, or none for all of it")
    return [rel for _, rel in held], [p for p, rel in given if (p, rel) not in held]


def _grep_text(pattern: GrepPattern, request: GrepRequest,
               on_file: Callable[[GrepAnswer, GrepFile], None] | None) -> GrepAnswer:
    """``request.text`` grepped as one file named ``<stdin>`` (rg's ``-``: a new user's `git diff | codii-sql
    grep x` searched the folder's index instead, exit 0), read as a file on disk is."""
    started = time.perf_counter()
    data = request.text
    text = data if matches_bytes(pattern, data) else decode_kept(data)
    answer = GrepAnswer(list(request.patterns), STDIN, files_indexed=1, files_read=1, scan=True,
                        bytes_read=len(data))
    matched = matched_or_none(matcher(request, pattern), pattern, text)
    row = {"path": STDIN, "role": "source", "language": None}
    if matched is None:
        answer.timed_out.append(STDIN)
    elif matched:
        take_file(answer, request, row, text, [], matched, 0,
                  answer.files.append if on_file is None else lambda f: on_file(answer, f))
    answer.seconds = time.perf_counter() - started
    return answer
