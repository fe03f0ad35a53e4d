"""Multiline grep (rg's ``-U``): matches that may span lines, reported in blocks of lines as rg groups them.

rg 13's multiline searcher (grep-searcher's ``MultiLine``) is the model: each match covers the lines from the
one it starts on to the one holding its last character (a match ending with a line break ends on that line);
a match whose lines touch or overlap the previous block's joins it, so no line is reported twice; ``-c``
counts matches, not lines; ``-v`` reports the lines outside every match's lines, searching on from the end
of each match's last line. Only a pattern that can match a line break is matched so
(:attr:`~.pattern.GrepPattern.spans_lines`); rg searches any other ``-U`` pattern line by line, and so does
:mod:`.grep`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import regex

from .grep import FILE_TIMEOUT_SECONDS, FileTimeout, deadline_for, forbidden, time_left
from .grep_lines import GrepLine, as_text
from .pattern import GrepPattern


def block_lines(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> list[GrepLine]:
    """The lines ``pattern``'s matches in ``text`` span, in order: each block's first line carries the block's
    matches (:attr:`~.grep_lines.GrepLine.block`, byte offsets into the block's lines with their line breaks),
    every line the parts of matches it holds (``spans``, byte offsets into the line), its later lines
    ``joined``. Linear in the block's lines plus its matches' parts: lines and matches are walked together
    (a block of every character of a 3,000-line file, `-U '[^x]'`, took 48 s when each line scanned them all).

    Raises:
        FileTimeout: matching took more than ``timeout`` seconds.
    """
    text = as_text(text)
    out: list[GrepLine] = []
    line_no, counted = 1, 0
    for start, end, matches in _blocks(pattern, text, timeout):
        line_no += text.count("\n", counted, start)
        counted = start
        block = text[start:end]
        in_block = _ByteOffsets(text, start, block.isascii())
        first = 0  # the first match that may reach the current line: matches ascend, and so do their ends
        at = start
        for k, line in enumerate(block.removesuffix("\n").split("\n")):
            stop = at + len(line)
            while first < len(matches) and matches[first][1] < at:
                first += 1
            in_line = _ByteOffsets(text, at, in_block.ascii or line.isascii())
            spans = []
            j = first
            while j < len(matches) and (m := matches[j])[0] <= stop:
                a, b = m
                if min(b, stop) > max(a, at) or a == b:
                    spans.append(in_line.span(max(a, at), min(b, stop)))
                j += 1
            out.append(GrepLine(line_no + k, line, spans, joined=k > 0,
                                block=[in_block.span(a, b) for a, b in matches] if k == 0 else None))
            at = stop + 1
    return out


def cut_lines(lines: list[GrepLine], kept: int) -> list[GrepLine]:
    """The first ``kept`` of ``lines`` (matched lines, in order); a multiline block the cut falls in keeps its
    matches' parts within its kept lines (a block of 8,997 lines was shown whole under a limit of 5, in a 3 MB
    answer: a new user)."""
    out = lines[:kept]
    if out and kept < len(lines) and lines[kept].joined:
        first = max(i for i, g in enumerate(out) if not g.joined)
        size = sum(len(g.text.encode("utf-8", "surrogateescape")) + 1 for g in out[first:])
        head = out[first]
        out[first] = dataclasses.replace(head, block=[(a, min(b, size)) for a, b in head.block or () if a < size])
    return out


def block_count(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> int:
    """How many matches ``pattern`` has in ``text`` (rg -U's ``-c``); errors as :func:`block_lines`."""
    return sum(len(matches) for _, _, matches in _blocks(pattern, as_text(text), timeout))


def outside_lines(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> list[GrepLine]:
    """The lines of ``text`` outside every match's lines (rg -U's ``-v``), in order, without spans; errors as
    :func:`block_lines`."""
    text = as_text(text)
    compiled = pattern.regex_for(text)
    deadline = deadline_for(pattern, timeout)
    out: list[GrepLine] = []
    pos, line_no = 0, 1
    try:
        while pos < len(text):
            m = compiled.search(text, pos, concurrent=True, timeout=time_left(deadline))
            start, end = (len(text), len(text)) if m is None else _lines_around(text, *m.span())
            for line in text[pos:start].removesuffix("\n").split("\n") if start > pos else ():
                out.append(GrepLine(line_no, line))
                line_no += 1
            line_no += text.count("\n", start, end)
            pos = max(end, pos + 1) if m is not None else len(text)
    except TimeoutError:
        raise FileTimeout() from None
    return out


def outside_count(pattern: GrepPattern, text: str | bytes, timeout: float = FILE_TIMEOUT_SECONDS) -> int:
    """How many lines :func:`outside_lines` would give."""
    return len(outside_lines(pattern, text, timeout))


def _blocks(pattern: GrepPattern, text: str, timeout: float) -> list[list]:
    """``[start, end, matches]`` of each block: the character range of its lines (``end`` past its last line's
    line break, or the text's end) and its matches as ``(start, end)`` character ranges."""
    compiled = pattern.regex_for(text)
    deadline = deadline_for(pattern, timeout)
    blocks: list[list] = []
    last = -1
    around = _LinesAround(text)
    try:
        for a, b in _matches(compiled, text, deadline):
            if a == b == last:  # an empty match where the last one ended: Rust's regex (rg's) has none there
                continue
            last = b
            start, end = around(a, b)
            if start == end:  # an empty match after the last line break: on no line (rg stops there)
                break
            if blocks and blocks[-1][1] >= start:
                blocks[-1][1] = max(blocks[-1][1], end)
                blocks[-1][2].append((a, b))
            else:
                blocks.append([start, end, [(a, b)]])
    except TimeoutError:
        raise FileTimeout() from None
    return blocks


def _matches(compiled: regex.Pattern, text: str, deadline: float | None) -> Iterator[tuple[int, int]]:
    """``compiled``'s matches in ``text`` as rg finds them: where the text holds bytes that are not UTF-8 (lone
    surrogates, :func:`~.grep.forbidden`), which rg matches nothing against, a match running into one is the
    match from its start that ends before it, else the search goes on from its next character (``-U '[^x]+'``
    printed such a byte as U+FFFD)."""
    forbid = forbidden(text)
    if forbid is None:
        for m in compiled.finditer(text, concurrent=True, timeout=time_left(deadline)):
            yield m.span()
        return
    pos = 0
    while pos <= len(text):
        m = compiled.search(text, pos, concurrent=True, timeout=time_left(deadline))
        if m is None:
            return
        a, b = m.span()
        if bad := forbid.search(text, a, b):
            m = compiled.match(text, a, bad.start(), concurrent=True, timeout=time_left(deadline))
            if m is None:
                pos = a + 1
                continue
            a, b = m.span()
        yield a, b
        pos = b if b > a else b + 1


def _lines_around(text: str, a: int, b: int) -> tuple[int, int]:
    """The character range of the lines match ``[a, b)`` lies on (rg's ``lines::locate``): from its first line's
    start to past its last line's line break (the text's end for an unended last line)."""
    start = text.rfind("\n", 0, a) + 1
    if b > start and text[b - 1] == "\n":
        return start, b
    stop = text.find("\n", b)
    return start, len(text) if stop < 0 else stop + 1


class _LinesAround:
    """:func:`_lines_around` for matches in ascending order, each search going on from the last one's: the
    matches of one long line (`-U --multiline-dotall .` over a line of 100k characters) searched back to its
    start and on to its end once each, which is quadratic in the line's length."""

    def __init__(self, text: str):
        self.text = text
        self.a, self.start = 0, 0  # the last match's start, and its first line's start
        self.b, self.stop = 0, text.find("\n")  # the last match's end, and the first line break from it (-1: none)

    def __call__(self, a: int, b: int) -> tuple[int, int]:
        text = self.text
        if a < self.a or b < self.b:  # not ascending
            return _lines_around(text, a, b)
        back = text.rfind("\n", self.a, a)
        self.a, self.start = a, (back + 1 if back >= 0 else self.start)
        if b > self.start and text[b - 1] == "\n":
            return self.start, b
        if self.stop != -1 and self.stop < b:
            self.stop = text.find("\n", b)
        self.b = b
        return self.start, len(text) if self.stop < 0 else self.stop + 1


class _ByteOffsets:
    """Character offsets of ``text`` as byte offsets from ``base`` (UTF-8, a kept byte one), asked in ascending
    order: each answer goes on from the last, so a block's thousands of matches cost its length once, not
    once each. ``ascii``: the text from ``base`` on is ASCII as far as it is asked (offsets are then the same)."""

    def __init__(self, text: str, base: int, ascii: bool):
        self.text, self.base, self.ascii = text, base, ascii
        self.char, self.byte = base, 0  # the last offset converted, and its bytes from base

    def at(self, char: int) -> int:
        if self.ascii:
            return char - self.base
        if char < self.char:  # not ascending: counted again from the base
            self.char, self.byte = self.base, 0
        self.byte += len(self.text[self.char:char].encode("utf-8", "surrogateescape"))
        self.char = char
        return self.byte

    def span(self, a: int, b: int) -> tuple[int, int]:
        return self.at(a), self.at(b)
