"""Verifying a candidate file: its lines that match a :class:`~.pattern.GrepPattern`, with byte columns and context, bounded in time."""

from __future__ import annotations

import contextlib
import gc
import re
import sys
import threading
import time
from collections.abc import Iterator

import regex

from ..text import UTF16_BOMS, holds_surrogates
from .grep_lines import GrepLine, as_text, lines_of
from .pattern import GrepPattern

#: Seconds one file's matching may take. An ordinary pattern reads a 1 MiB file in 0.01-0.05 s here
#: (measured on Django's largest files); only a pathological one (``(a+)+$`` on a long run of ``a``)
#: reaches this, and the file is then reported as timed out instead of holding the answer.
FILE_TIMEOUT_SECONDS = 1.0
#: Bytes between two matches past which their line breaks are counted by numpy (a compare and a count,
#: ~4x the throughput of ``bytes.count`` but ~1.5 us a call): over the kernel's `return -EINVAL`
#: candidates counting took 196 ms of CPU with ``bytes.count`` alone, 103 ms so from 2-4 KiB up, 132 ms
#: from 16 KiB (docs/benchmarks.md "Grep", fourth round). Only where numpy is loaded already (a server, a
#: search): importing it costs a CLI grep ~0.13 s, more than it saves on the kernel's most common pattern.
NUMPY_COUNT_BYTES = 4096


#: Later matches of already matched lines a first-match grep steps over before it walks from line to line
#: (and only while they outnumber the matched lines): a few long lines of many matches do not switch it.
_SKIPS_BEFORE_WALKING = 64

_PAUSES = {"depth": 0, "was_on": False}
_PAUSE_LOCK = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a grep builds its answer (it is on again after, as
    it was; nested or concurrent greps share one pause). The lines of a common pattern are millions of
    small objects in no cycle, which reference counting frees, and the collector's full passes over
    them were 40% of `\\w+` over Django (12.5 -> 7.2 s) and stalled the matching threads past the per-file
    time bound: ordinary files were reported timed out (a new user's `grep -c '\\w+'` lost two)."""
    with _PAUSE_LOCK:
        if _PAUSES["depth"] == 0:
            _PAUSES["was_on"] = gc.isenabled()
            gc.disable()
        _PAUSES["depth"] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSES["depth"] -= 1
            if _PAUSES["depth"] == 0 and _PAUSES["was_on"]:
                gc.enable()


#: ripgrep's read buffer (grep-searcher's DEFAULT_BUFFER_CAPACITY, 64 KiB): it searches a file a buffer at a time
#: and quits at the first buffer that holds a NUL byte, reporting the lines before that buffer.
RG_BLOCK_BYTES = 64 * 1024


def before_binary(data: bytes, sniffed: int) -> bytes:
    """The lines of a file's ``data`` that rg searches: all of it, or for a file with a NUL byte past its first
    ``sniffed`` bytes (those found none: the file was taken for text) the lines before the 64 KiB block holding
    it (a new user's grep printed the NUL and the lines after it). A UTF-16 file is whole."""
    if data.startswith(UTF16_BOMS) or (nul := data.find(b"\0", sniffed)) < 0:
        return data
    return data[:data.rfind(b"\n", 0, nul - nul % RG_BLOCK_BYTES) + 1]


class FileTimeout(Exception):
    """The pattern took longer than its bound on one file."""


def matching_lines(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS,
                   first_only: bool = False) -> list[GrepLine]:
    """The lines of ``text`` that ``pattern`` matches, in order, each with its match spans (with ``first_only``,
    the line's first match alone, enough to print it: `.` over Django printed 10 s of matches, rg 0.17 s).

    A line-bound pattern runs once over the whole text (MULTILINE: its matches are each line's own); another
    runs line by line. ``text`` may be the file's bytes when :func:`matches_bytes` says so (no decoding).

    Raises:
        FileTimeout: matching took more than ``timeout`` seconds.
    """
    deadline = deadline_for(pattern, timeout)
    forbid = forbidden(text)
    compiled = pattern.ascii_regex if isinstance(text, bytes) else pattern.regex_for(text)
    try:
        if first_only and pattern.line_bound:
            return _first_per_line(compiled, text, b"\n" if isinstance(text, bytes) else "\n", deadline, forbid)
        if isinstance(text, bytes):
            return _whole(compiled, text, b"\n", deadline)
        if pattern.line_bound:
            return _whole(compiled, text, "\n", deadline, forbid)
        return _by_line(pattern, compiled, text, deadline, forbid)
    except TimeoutError:
        raise FileTimeout() from None


def count_lines(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> int:
    """How many lines of ``text`` :func:`matching_lines` would give, without building them: one search
    per matching line, from the next line's start (``-c`` and ``-l`` of `\\w+` over Django were 8-10 s of
    line objects for a count). ``text`` and errors as for :func:`matching_lines`."""
    if not text:
        return 0
    if forbidden(text):  # a match through a byte rg matches nothing against is none: the lines' spans tell
        return len(matching_lines(pattern, text, timeout))
    deadline = deadline_for(pattern, timeout)
    try:
        compiled, newline = ((pattern.ascii_regex, b"\n") if isinstance(text, bytes)
                             else (pattern.regex_for(text), "\n"))
        if not isinstance(text, bytes) and not pattern.line_bound:
            return sum(1 for line in lines_of(text) if compiled.search(line, concurrent=True, timeout=time_left(deadline)))
        end_of_lines = len(text) - 1 if text.endswith(newline) else len(text)  # a match past it is on no line
        count = pos = 0
        while pos <= end_of_lines:
            m = compiled.search(text, pos, concurrent=True, timeout=time_left(deadline))
            if m is None or m.start() > end_of_lines:
                break
            count += 1
            pos = text.find(newline, m.start()) + 1
            if pos == 0:  # the last line, without a line break
                break
        return count
    except TimeoutError:
        raise FileTimeout() from None


def inverted_lines(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> list[GrepLine]:
    """The lines of ``text`` that ``pattern`` does not match (rg's ``-v``), in order, without spans;
    ``text`` and errors as for :func:`matching_lines`."""
    matched = {g.line for g in matching_lines(pattern, text, timeout)}
    return [GrepLine(n, line) for n, line in enumerate(lines_of(as_text(text)), 1) if n not in matched]


def inverted_count(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> int:
    """How many lines :func:`inverted_lines` would give, without building them."""
    newline = b"\n" if isinstance(text, bytes) else "\n"
    lines = text.count(newline) + (bool(text) and not text.endswith(newline))  # as lines_of numbers them
    return lines - count_lines(pattern, text, timeout)


def matches_bytes(pattern: GrepPattern, data: bytes) -> bool:
    """Whether ``pattern`` may run over the raw ``data`` as it is: an ASCII file without ``\\r`` decodes
    to the same characters (text.decode_source), and the pattern has an ASCII form that means the same
    there (:attr:`~.pattern.GrepPattern.ascii_regex`). Decoding was a fifth of a common pattern's
    time over the kernel's files (docs/benchmarks.md "Grep")."""
    return pattern.ascii_regex is not None and data.isascii() and b"\r" not in data


def forbidden(text: str | bytes) -> re.Pattern | None:
    """The characters of ``text`` no match may hold, as a class, None when it holds none: a byte that is not
    UTF-8 (:func:`~codii_sql.text.decode_kept`'s lone surrogates), which rg matches nothing against. A line
    whose match runs into one is matched again as rg would (:func:`_refound`)."""
    if isinstance(text, bytes) or text.isascii() or not holds_surrogates(text):
        return None
    return _KEPT


_KEPT = re.compile("[\udc80-\udcff]")


def _refound(compiled: regex.Pattern, line: str, forbid: re.Pattern) -> list[tuple[int, int]]:
    """``compiled``'s matches in ``line`` (character offsets) as rg finds them where it matches nothing against
    the characters of ``forbid``: a match that runs into one is the match from its start that ends before it
    (``caf.*`` over ``caf\\xe9 x`` is ``caf``; ``\\S+`` over ``ab\\xffcd`` gives ``ab`` and ``cd``), else the search
    goes on from its next character (``[^ ]+ x`` over ``na\\xefve x`` finds ``ve x``). Not exact for a ``$``
    just before such a character. No empty match where the last ended, as rg."""
    out: list[tuple[int, int]] = []
    pos, last = 0, -1
    while pos <= len(line):
        m = compiled.search(line, pos)
        if m is None:
            break
        a, b = m.span()
        if bad := forbid.search(line, a, b):
            m = compiled.match(line, a, bad.start())  # the line as if it ended at the byte
            if m is None:
                pos = a + 1
                continue
            a, b = m.span()
        if a != b or a != last:
            out.append((a, b))
        last, pos = b, (b if b > a else b + 1)
    return out


def deadline_for(pattern: GrepPattern, timeout: float) -> float | None:
    """When matching must stop (``time.monotonic()`` seconds), None for a pattern that needs no bound."""
    return None if pattern.linear else time.monotonic() + timeout


def time_left(deadline: float | None) -> float | None:
    """The regex module's ``timeout`` for the next call: what is left till ``deadline``, at least 1 ms."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.001)


def _whole(compiled: regex.Pattern, text: str | bytes, newline: str | bytes, deadline: float | None,
           forbid: re.Pattern | None = None) -> list[GrepLine]:
    # One pass of the engine over the file, then one step per line, not per match, with the methods
    # looked up once: the line assembly, not the engine, was most of the time for common patterns
    # (`self` in Django: 106k matches on 99k lines; docs/benchmarks.md "Grep").
    if not text:
        return []
    end_of_lines = len(text) - 1 if text.endswith(newline) else len(text)  # a match past it is on no line
    raw = isinstance(text, bytes)
    ascii_text = raw or text.isascii()
    out: list[GrepLine] = []
    count, rfind, find = text.count, text.rfind, text.find
    np = sys.modules.get("numpy") if raw else None
    as_array = None  # the bytes as numpy sees them, once a long gap asks
    line_no, cursor, start, stop = 1, 0, 0, -1
    spans: list[tuple[int, int]] | None = None
    for m in compiled.finditer(text, concurrent=True, timeout=time_left(deadline)):
        at, end = m.span()
        if at <= stop:
            if at == end and spans[-1][1] == at - start:
                continue  # an empty match where the last one ended: Rust's regex (rg's) has none there
            spans.append((at - start, end - start))
            continue
        if at > end_of_lines:  # a new line, past the last one
            break
        if spans is not None:
            line = text[start:stop]
            if raw:
                out.append(GrepLine(line_no, line.decode("ascii"), spans, False))
            elif g := _line(line_no, line, spans, ascii_text, forbid, compiled):
                out.append(g)
        if np is not None and at - cursor > NUMPY_COUNT_BYTES:
            if as_array is None:
                as_array = np.frombuffer(text, np.uint8)
            line_no += int(np.count_nonzero(as_array[cursor:at] == 10))
        else:
            line_no += count(newline, cursor, at)
        cursor = at
        start = rfind(newline, 0, at) + 1
        stop = find(newline, at)
        if stop < 0:
            stop = len(text)
        spans = [(at - start, end - start)]
    if spans is not None and (g := _line(line_no, text[start:stop], spans, ascii_text, forbid, compiled)):
        out.append(g)
    return out


def _first_per_line(compiled: regex.Pattern, text: str | bytes, newline: str | bytes,
                    deadline: float | None, forbid: re.Pattern | None = None) -> list[GrepLine]:
    # The engine's own iteration while lines hold about one match (a search call a line was 13% slower on
    # Django's `self`); once the later matches of lines outnumber the lines (`.`, `\w+`), count_lines' walk:
    # a search from each matched line's end, so those matches are never visited.
    if not text:
        return []
    end_of_lines = len(text) - 1 if text.endswith(newline) else len(text)  # a match past it is on no line
    raw = isinstance(text, bytes)
    ascii_text = raw or text.isascii()
    count, rfind, find = text.count, text.rfind, text.find
    out: list[GrepLine] = []
    line_no, cursor, stop, skipped = 1, 0, -1, 0

    def add(at: int, end: int) -> int:
        nonlocal line_no, cursor
        line_no += count(newline, cursor, at)
        cursor = start = rfind(newline, 0, at) + 1
        stop = find(newline, at)
        if stop < 0:
            stop = len(text)
        line = text[start:stop]
        spans = [(at - start, min(end, stop) - start)]
        if raw:
            out.append(GrepLine(line_no, line.decode("ascii"), spans, False))
        elif g := _line(line_no, line, spans, ascii_text, forbid, compiled):
            g.spans[1:] = []
            out.append(g)
        return stop

    for m in compiled.finditer(text, concurrent=True, timeout=time_left(deadline)):
        at, end = m.span()
        if at <= stop:
            skipped += 1
            if skipped > _SKIPS_BEFORE_WALKING and skipped > len(out):
                break
            continue
        if at > end_of_lines:
            return out
        stop = add(at, end)
    else:
        return out
    pos = stop + 1
    while pos <= end_of_lines:
        m = compiled.search(text, pos, concurrent=True, timeout=time_left(deadline))
        if m is None or m.start() > end_of_lines:
            break
        pos = add(*m.span()) + 1
    return out


def _line(number: int, line: str | bytes, spans: list[tuple[int, int]], ascii_text: bool,
          forbid: re.Pattern | None = None, compiled: regex.Pattern | None = None) -> GrepLine | None:
    """A matched line from spans given as character offsets into it (byte offsets once converted); when a
    span holds a character of ``forbid`` (:func:`forbidden`), the line's spans found again by
    :func:`_refound` with ``compiled``, None when none is left."""
    if isinstance(line, bytes):
        return GrepLine(number, line.decode("ascii"), spans, False)
    if forbid is not None and any(forbid.search(line, a, b) for a, b in spans):
        spans = _refound(compiled, line, forbid)
        if not spans:
            return None
    if ascii_text or line.isascii():
        return GrepLine(number, line, spans, False)
    return GrepLine(number, line, [_span(line, a, b) for a, b in spans], False)


def _by_line(pattern: GrepPattern, compiled: regex.Pattern, text: str, deadline: float | None,
             forbid: re.Pattern | None = None) -> list[GrepLine]:
    # One search over the file first: most candidates of a selective pattern hold its trigrams but
    # no match, and a call per line costs ~1 us each.
    if pattern.prefilter and compiled.search(text, concurrent=True, timeout=time_left(deadline)) is None:
        return []
    out: list[GrepLine] = []
    for number, line in enumerate(lines_of(text), 1):
        spans, last = [], -1
        for m in compiled.finditer(line, concurrent=True, timeout=time_left(deadline)):
            if m.start() != m.end() or m.start() != last:  # none empty where the last ended, as rg
                spans.append((m.start(), m.end()))
            last = m.end()
        if spans and (g := _line(number, line, spans, False, forbid, compiled)):
            out.append(g)
    return out


def _span(line: str, start: int, end: int) -> tuple[int, int]:
    """Character offsets ``[start, end)`` in ``line`` as byte offsets in the file (UTF-8, a kept byte one)."""
    if line.isascii():
        return start, end
    head = len(line[:start].encode("utf-8", "surrogateescape"))
    return head, head + len(line[start:end].encode("utf-8", "surrogateescape"))
