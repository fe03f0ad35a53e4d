"""Grep over one codebase's index: the request, its candidates, their filters, reading and matching them, the notes.

Candidates come from the trigram index (:mod:`codii_sql.search.trigrams`), then every candidate is
read (from disk; for an index alone, the text it stores) and matched line by line, so the lines
and columns are exact. The files are the indexed ones: what the index skips is not grep'd (a note names those the request names). The use
case that resolves a request's paths and updates the index first is :mod:`.grep`.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import Remedy, UsageError
from ..ingest.config import size_cap
from ..ingest.read import SNIFF_BYTES
from ..languages import detect_language
from ..search.answer import Note
from ..search.grep import (FileTimeout, before_binary, collector_paused, count_lines, inverted_count, inverted_lines,
                           matches_bytes, matching_lines)
from ..search.grep_answer import GrepAnswer, GrepFile, cut_line
from ..search.grep_blocks import block_count, block_lines, cut_lines, outside_count, outside_lines
from ..search.grep_lines import GrepLine, as_text, set_offsets, with_context
from ..search.pattern import GrepPattern
from ..search.results import ROLES
from ..storage.store import Store
from ..text import UTF16_BOMS, decode_kept, unpacked
from . import boundary, grep_filter, grep_left_out, grep_notes, grep_split
from .grep_notes import MAX_SLOW_FILES
from .stored import not_stored, stored_lines
from .status import committed_files, open_store, refuse_damaged, scan_rules

#: Lines around a match at most (``-A``/``-B``/``-C``): rg takes any (``-C 150`` was refused at 100); a window
#: is at most its file's lines, and an agent's or a page's answer is cut by its token budget.
MAX_CONTEXT = 1_000_000
#: Characters of a line an agent's or a page's answer shows (MCP grep_code, HTTP /grep): a longer one is cut
#: around its first match (``max_columns``); a minified or data line would spend a budget alone, and a
#: 200 KB line was sent whole by HTTP, or dropped whole by its token budget.
SHOWN_LINE_CHARS = 300
#: Roles in ``sort="role"`` order: the code people search for, then its tests, the rest after.
ROLE_ORDER = {"source": 0, "test": 1, "docs": 2, "config": 3}


@dataclass
class GrepRequest:
    """One grep, as every face asks it.

    Attributes:
        patterns: one or more patterns (``-e``); a line matches when one of them does.
        fixed, ignore_case, word: ``-F``, ``-i``, ``-w`` (see :class:`~codii_sql.search.pattern.GrepPattern`).
        paths: files or folders to search in (rg's ``PATH...``), inside one codebase; none: the current
            folder's codebase (or the ``db``'s), all of it.
        db: the index file (``--db``): with no source here, its stored text is searched.
        globs: rg's ``-g``: gitignore-style globs over the path relative to the root, ``!`` excludes,
            ``{a,b}`` alternates; a folder excluded is never entered, else the last one that matches the
            file decides, and with any include glob a file must match one.
        types: rg's ``-t``: rg's file types (their file-name globs: ``py``, ``c``, ``h``...) or languages files are
            detected as (``python``), a file must be one of them; ``types_not``
            (rg's ``-T``): none of these.
        roles: a file's role must be one of them (``source``, ``test``...: search's roles); []: any.
        before, after: context lines (``-B``, ``-A``; ``-C`` sets both), 0 to :data:`MAX_CONTEXT`.
        limit: matched lines at most (None: all); reading stops there, ``truncated`` says so.
        sort: ``path`` (rg's order) or ``role`` (source files first, then tests, docs, config, the rest).
        update: bring the index up to date first (a CLI grep), else the last committed state.
        max_columns: a line longer than this (characters) is shown cut to it (rg's ``--max-columns``), around
            its first match when that lies past them (``cut_from``), the matches outside dropped from
            ``spans``; None: whole.
        max_tokens: fit the lines shown in about this many tokens (search/budget.py's estimate): the
            last files' lines are dropped, ``truncated`` and a note say so; None: no budget.
        glob_base: the folder whose relative paths anchored globs (those holding a ``/`` before their end)
            are written in, as rg reads them from its working directory (the CLI's); None: the
            codebase's root (MCP, HTTP).
        counts_only: each file's number of matching lines alone (rg's ``-c`` and ``-l``), no ``lines``
            built (:func:`~codii_sql.search.grep.count_lines`); context does not apply, and ``limit``
            stops reading after the file whose count reaches it.
        smart_case: rg's ``-S``: case-insensitive when no pattern holds an upper-case letter (escapes
            such as ``\\W`` aside).
        max_count: rg's ``-m``: each file's first this many matching lines at most (its count too).
        invert: rg's ``-v``: the lines no pattern matches, in every indexed file (no trigram narrows them).
        hidden: also the files whose name, or a folder's below the paths asked, starts with ``.`` (the CLI
            leaves them out unless ``--hidden``, as rg does; MCP and HTTP grep what the index holds).
        line_regexp: rg's ``-x``: only matches that are a whole line.
        offsets: set each line's byte ``offset`` in its file (rg --json's ``absolute_offset``).
        processes: rg's ``-j``: processes that read and match the files (1: one; 2: a forked child joins a
            long grep, :mod:`.grep_split`); None: two only while a CPU is idle.
        text: bytes to grep in place of a codebase (rg's ``-`` PATH: standard input), one file named
            ``<stdin>``, no index read; ``paths`` are then none.
        first_match: each matched line's first match alone in its spans (a face that prints lines, not
            matches: one search a line, see search/grep.py matching_lines).
        without_match: rg's ``--files-without-match``: ``files`` lists the selected files where no line
            matched (``matches`` 0, no lines), in answer order; the totals still count the matches.
        multiline: rg's ``-U``: a match may span lines, which are then shown as one block (the first line's
            ``block``, the next ones ``joined``: :mod:`~codii_sql.search.grep_blocks`); ``-c`` counts matches and
            ``max_count`` blocks, as rg's do. ``multiline_dotall``: ``.`` takes a line break too.
    """

    patterns: list[str]
    fixed: bool = False
    ignore_case: bool = False
    word: bool = False
    paths: list[str] = field(default_factory=list)
    db: str | None = None
    globs: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    before: int = 0
    after: int = 0
    limit: int | None = None
    sort: str = "path"
    update: bool = True
    max_columns: int | None = None
    max_tokens: int | None = None
    glob_base: str | None = None
    counts_only: bool = False
    smart_case: bool = False
    max_count: int | None = None
    invert: bool = False
    hidden: bool = True
    line_regexp: bool = False
    without_match: bool = False
    processes: int | None = None
    offsets: bool = False
    types_not: list[str] = field(default_factory=list)
    first_match: bool = False
    text: bytes | None = None
    multiline: bool = False
    multiline_dotall: bool = False

    def check(self) -> None:
        """Raises UsageError for an option out of range (before any indexing work)."""
        for name in ("before", "after"):
            if not 0 <= getattr(self, name) <= MAX_CONTEXT:
                raise UsageError(f"must be from 0 to {MAX_CONTEXT} (lines)", field=name)
        for name in ("limit", "max_columns", "max_tokens", "max_count", "processes"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError("must be 1 or more", field=name)
        if self.sort not in ("path", "role"):
            raise UsageError(f"must be path or role, got {self.sort!r}", field="sort")
        for r in self.roles:
            if r not in ROLES:
                raise UsageError(f"{r!r} is not a role", f"pass one of {', '.join(ROLES)}", field="role")
        for t in [*self.types, *self.types_not]:
            grep_filter.check_type(t)


def search_codebase(codebase: Codebase, pattern: GrepPattern, request: GrepRequest, scopes: list[str],
                    notes: list[Note], on_file: Callable[[GrepAnswer, GrepFile], None] | None = None,
                    committed: Callable[[Store], Note | None] | None = None) -> GrepAnswer:
    """``request`` over ``codebase``'s files under ``scopes`` (relative paths; [] for all), its last committed
    state, lines cut and fitted as the request asks; ``notes`` (an update's) come first.

    ``on_file(answer, file)`` takes each file in answer order as it is read, its lines cut to
    ``max_columns``, in place of ``answer.files`` (rg prints as it reads: ``grep '\\w+' | head -1``
    waited 9 s and held 716 MB for a 770k-line answer built whole); the totals count them still.
    ``without_match``'s files, known only at the end, stay in ``answer.files``; a face that prints as
    it goes asks for no token budget. An exception it raises (a closed pipe) ends the grep, a forked
    child with it. ``committed(store)``: the note of an answer from the last committed state, after
    ``notes``."""
    started = time.perf_counter()
    with open_store(codebase) as store, collector_paused():
        refuse_damaged(codebase, store)
        if committed is not None and (note := committed(store)):
            notes = [*notes, note]
        meta = store.meta()
        answer = _search(store, meta, codebase, pattern, request, scopes, notes, on_file)
        answer.notes += grep_left_out.named(store, codebase, scopes)
        if not answer.nothing_selected:
            # The request's globs and types choose among those paths too: a helper's `-g '*_test.go'` was told
            # of the go.sum it would never have read.
            keep = grep_filter.keeper(request.types, [], request.globs, scopes, types_not=request.types_not)
            answer.notes += grep_left_out.unread(meta, codebase, scopes, matched=bool(answer.matched_lines),
                                                 keep=lambda path: keep({"path": path, "role": None,
                                                                         "language": detect_language(path)}))
    if request.max_tokens:
        answer.fit(request.max_tokens)
    answer.seconds = time.perf_counter() - started
    return answer


def grep_chunk_ids(codebase: Codebase, pattern: str) -> list[int]:
    """Ids of the chunks of ``codebase`` that hold a line ``pattern`` matches (``search --grep``), from
    its last committed state; a line no chunk holds adds none.

    Raises:
        UsageError: a bad pattern.
    """
    request = GrepRequest([pattern], update=False)
    found = search_codebase(codebase, GrepPattern(request.patterns), request, [], [])
    lines = [[f.path, g.line] for f in found.files for g in f.lines]
    with open_store(codebase) as store:
        return sorted(r["id"] for r in store.rows("chunks_at_lines", {"lines": json.dumps(lines)}))


def _search(store: Store, meta: dict, codebase: Codebase, pattern: GrepPattern, request: GrepRequest,
            scopes: list[str], notes: list[Note], on_file: Callable[[GrepAnswer, GrepFile], None] | None) -> GrepAnswer:
    answer = GrepAnswer(list(request.patterns), codebase.shown,
                        trigrams=pattern.fts, scan=pattern.scans)

    gaps_seen = False

    def add(f: GrepFile) -> None:
        nonlocal gaps_seen
        gaps_seen = gaps_seen or bool(f.not_stored)
        if request.max_columns:
            f.lines = [cut_line(g, request.max_columns) for g in f.lines]
        if on_file is None or request.without_match:
            answer.files.append(f)
        else:  # handed over, not kept: a 770k-line grep held 716 MB until its end
            on_file(answer, f)

    has_tables = store.value("grep_tables") == 2
    answer.files_indexed = committed_files(store, meta)
    started = time.perf_counter()
    every_file = "grep_files_all" if has_tables else "files_for_grep"
    if pattern.scans or request.invert or not has_tables:  # -v: a file without the trigrams has lines too
        rows = store.rows(every_file)
    else:
        rows = store.rows("grep_candidates" if meta.get("grep_complete") else "grep_candidates_partial",
                          {"trigrams": pattern.fts})
    answer.candidate_seconds = time.perf_counter() - started
    keep = grep_filter.keeper(request.types, request.roles, request.globs, scopes, hidden=request.hidden,
                              types_not=request.types_not)
    rows = [r for r in rows if keep(r)]
    within = grep_filter.path_order

    def order(path: str) -> tuple:  # rg --sort path: the PATHs in the order given, each one's files in path order
        given = next((i for i, s in enumerate(scopes) if path == s or path.startswith(s + "/")), 0)
        return given, within(path)

    key = ((lambda r: (ROLE_ORDER.get(r["role"], len(ROLE_ORDER)), order(r["path"]))) if request.sort == "role"
           else (lambda r: order(r["path"])))
    rows.sort(key=key)
    unpacked = shown_lines = unreadable = 0
    retry, unread = True, False
    match = matcher(request, pattern)
    for row, text, gaps, matched in _verified(store, codebase, meta, pattern, rows, match, request, answer):
        if request.limit is not None and shown_lines >= request.limit:
            answer.truncated = unread = True
            break
        if text is None:
            unreadable += 1
            continue
        unpacked += not row["has_text"]
        answer.files_read += 1
        answer.bytes_read += row["size"] or 0
        if matched is None and retry:  # once more alone: a busy machine's stall is no pathological pattern
            matched = matched_or_none(match, pattern, text)
            retry = matched is not None  # it timed out alone too: the pattern's, no use trying again
        if matched is None:
            answer.timed_out.append(row["path"])
            if len(answer.timed_out) >= MAX_SLOW_FILES:  # each file is bounded, the whole grep too
                answer.truncated = True
                break
            continue
        if not matched:
            continue
        shown_lines = take_file(answer, request, row, text, gaps, matched, shown_lines, add)
        if request.counts_only and request.limit is not None and answer.matched_lines >= request.limit:
            answer.truncated = unread = True  # this file counted whole, the next ones not read
            break
    filtered = not answer.matched_lines and (request.globs or request.types or request.types_not or request.roles)
    if filtered or request.without_match:  # every file the request selects, candidate or not
        selected = sorted((r for r in store.rows(every_file) if keep(r)), key=key)
        # rg exits 2 when its filters leave no file to search: "no match" would hide a glob that missed.
        answer.nothing_selected = bool(filtered) and not selected
        if request.without_match:  # the selected files no line matched, those without the trigrams too
            matched = {f.path for f in answer.files}
            answer.files = [GrepFile(r["path"], r["role"], r["language"], 0) for r in selected
                            if r["path"] not in matched]
    answer.notes = notes + grep_notes.notes(answer, pattern, has_tables, unpacked, codebase, request.limit, gaps_seen,
                                            unread)
    if unreadable and codebase.alone:  # a new user's one damaged text failed every grep of the shard
        answer.notes.append(Note("grep", f"the stored text of {unreadable} files in this index is damaged and was not "
                                         f"searched (`codii-sql doctor --check-only --db {codebase.db_path}` names them)",
                                 "export the index again from its source"))
    elif unreadable:
        answer.notes.append(Note("grep", f"{unreadable} indexed files could not be read now (gone, or no longer a "
                                         "regular text file inside the root) and were not searched",
                                 Remedy("build", {"root": answer.codebase})))
    return answer


def matcher(request: GrepRequest, pattern: GrepPattern) -> Callable:
    """The matching a request asks of each file: its lines, or their count, matched or not (-v), or each
    line's first match alone (search/grep.py); for a pattern whose matches span lines, their blocks
    (search/grep_blocks.py)."""
    if pattern.spans_lines:
        return ((outside_count if request.counts_only else outside_lines) if request.invert
                else block_count if request.counts_only else block_lines)
    return ((inverted_count if request.counts_only else inverted_lines) if request.invert
            else count_lines if request.counts_only
            else functools.partial(matching_lines, first_only=True) if request.first_match else matching_lines)


def take_file(answer: GrepAnswer, request: GrepRequest, row: dict, text: str | bytes, gaps: list[list[int]],
              matched: list[GrepLine] | int, shown_lines: int, add: Callable[[GrepFile], None]) -> int:
    """Count one file's ``matched`` lines (or their number) into ``answer`` and hand the file to ``add``,
    cut by rg's ``-m`` and the request's ``limit`` (``shown_lines`` shown before it), with its context
    lines and offsets when asked; returns the lines shown so far."""
    spilt: list[GrepLine] = []  # matching lines past -m: shown as matches where they fall in the context, as rg
    if request.max_count is not None and request.counts_only:  # rg's -m: the file's first lines, and its count
        matched = min(matched, request.max_count)
    elif request.max_count is not None:
        kept = _block_ends(matched, request.max_count)
        matched, spilt = matched[:kept], matched[kept:]
    answer.matched_files += 1
    if request.counts_only:
        answer.matched_lines += matched
        add(GrepFile(row["path"], row["role"], row["language"], matched, [], gaps))
        return shown_lines
    answer.matched_lines += len(matched)
    in_file = len(matched)
    if request.limit is not None and len(matched) > request.limit - shown_lines:
        matched, spilt = cut_lines(matched, request.limit - shown_lines), []
        answer.truncated = True
    if request.before or request.after:
        matched = with_context(as_text(text), matched, request.before, request.after, spilt)
    size = None
    if request.offsets:
        set_offsets(text, matched)
        size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogateescape"))
    add(GrepFile(row["path"], row["role"], row["language"], in_file, matched, gaps, size))
    return shown_lines + in_file if request.limit is None else min(request.limit, shown_lines + in_file)


def _block_ends(lines: list[GrepLine], blocks: int) -> int:
    """How many of ``lines`` (matched lines, in order) the first ``blocks`` blocks hold: a line each, or a
    multiline match's block whole (its first line and those ``joined`` to it)."""
    starts = 0
    for i, g in enumerate(lines):
        if not g.joined:
            starts += 1
            if starts > blocks:
                return i
    return len(lines)


def matched_or_none(match: Callable, pattern: GrepPattern, text: str | bytes) -> list[GrepLine] | int | None:
    """``match(pattern, text)`` (matching_lines or count_lines), None when it passed the time bound."""
    try:
        return match(pattern, text)
    except FileTimeout:
        return None


def _verified(store: Store, codebase: Codebase, meta: dict, pattern: GrepPattern, rows: list[dict],
              match: Callable, request: GrepRequest, answer: GrepAnswer) -> Iterator[tuple]:
    """``(row, text, gaps, match(pattern, text))`` of each candidate in order (text None: unreadable; the
    match None: timed out), under the size cap of the build whose snapshot is ``meta``, one file at a time
    as the consumer asks (it may stop). A long list's later part may be verified by a forked child
    (:mod:`.grep_split`, sending back the matched files' texts when ``request`` asks for context or
    offsets; ``answer.processes`` says so): threads reading and matching ahead were 20-40% slower with
    the files in the page cache, for the GIL's hand-offs (docs/benchmarks.md, "Grep", third round)."""
    if codebase.alone:
        for row in rows:
            text, gaps = _text(store, codebase, pattern, row, None, 0)
            yield row, text, gaps, [] if text is None else matched_or_none(match, pattern, text)
        return
    max_bytes = scan_rules(codebase, meta)["max_file_bytes"]
    with boundary.IndexedReader(os.path.realpath(codebase.root)) as disk:
        def verify(row: dict) -> tuple:
            text, gaps = _text(store, codebase, pattern, row, disk, max_bytes, not request.invert)
            return text, gaps, [] if text is None else matched_or_none(match, pattern, text)

        keep_text = bool(request.before or request.after or request.offsets) and not request.counts_only
        yield from grep_split.verified(verify, rows, keep_text, lambda: setattr(answer, "processes", 2),
                                       request.processes)


def _text(store: Store, codebase: Codebase, pattern: GrepPattern, row: dict, disk: boundary.IndexedReader | None,
          max_bytes: int, matches_only: bool = True) -> tuple[str | bytes | None, list[list[int]]]:
    """A candidate's text and the line ranges it lacks: from disk through the file boundary (None when
    the file is gone, or became something grep must not read: a symlink out of the root, a device, a
    binary or a private key, larger than ``max_bytes``; its bytes as they are when ``pattern`` can match
    them so, :func:`~codii_sql.search.grep.matches_bytes`; ``b""`` when ``matches_only`` and the bytes
    lack one of the pattern's literal runs: -v asks for every line, so never then), or for an index alone its stored
    text (None when it does not unpack), else its chunks' stored lines."""
    if not codebase.alone:
        data = disk.read(row["path"], size_cap(row["path"], max_bytes))
        if data is None:
            return None, []
        data = before_binary(data, SNIFF_BYTES)  # the reader found no NUL in the first SNIFF_BYTES
        if matches_only and pattern.needles and not data.startswith(UTF16_BOMS) \
                and not all(n in data for n in pattern.needles):
            # no match once decoded either: the decoding (a third of a selective grep of Django) and the
            # engine's pass skipped (docs/benchmarks.md "Grep", eighth round)
            return b"", []
        return (data if matches_bytes(pattern, data) else decode_kept(data)), []
    if row["has_text"]:
        # None for a damaged stored text: that file is not read, the others are (a new user's one flipped
        # blob failed every grep of the shard)
        return unpacked(store.value("file_text_by_id", {"id": row["id"]})), []
    lines = stored_lines(codebase, row["path"])
    last = max(lines)
    return "\n".join(lines.get(n, "") for n in range(1, last + 1)) + "\n", not_stored(lines, 1, last)
