"""SQL definitions found by a small scanner: tree-sitter's SQL grammar stops at SQLite's dialect.

tree-sitter-language-pack 0.13.0's ``sql`` grammar parses ``CREATE TABLE`` but not ``CREATE
TRIGGER ... BEGIN ... END`` or ``CREATE VIRTUAL TABLE ... USING fts5(...)``, and its error recovery
then swallows every statement after: this repository's ``sql/schema.sql`` became one error node.
The scanner follows strings, quoted names, comments and parentheses instead, and finds:

* ``-- name: NAME`` blocks (aiosql's convention, as in ``sql/*.sql``), from the header to the
  next one: kind ``function``; the comment lines right under the header are its documentation;
* ``CREATE [TEMP|UNIQUE|VIRTUAL|MATERIALIZED|OR REPLACE ...] TABLE|VIEW|INDEX|TRIGGER|FUNCTION|
  PROCEDURE|TYPE [IF NOT EXISTS] name``, to the ``;`` that ends it (a trigger's ``BEGIN ... END``
  and a ``$$`` body included): kind ``class`` for tables and types, else (views, indexes,
  triggers, routines) ``function``;
* the common table expressions of a ``WITH`` clause, ``name [(columns)] AS [NOT] [MATERIALIZED] (...)``,
  each to its closing parenthesis: kind ``function``, inside the block or statement that holds it.

The tree-sitter parse still serves the comments kept with the definition below them.
"""

from __future__ import annotations

import dataclasses
import re

import tree_sitter

from .nodes import Span

_NAME_HEADER = re.compile(rb"--[ \t]*name:[ \t]*([A-Za-z_][\w$]*)")
_WORD = re.compile(rb"[A-Za-z_][\w$]*")
_TRIGGER = re.compile(rb"CREATE\s+(?:(?:TEMP|TEMPORARY)\s+)?TRIGGER\b", re.IGNORECASE)
_CREATE = re.compile(
    rb"CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:TEMP|TEMPORARY|UNIQUE|VIRTUAL|MATERIALIZED|GLOBAL|LOCAL|UNLOGGED)\s+)*"
    rb"(TABLE|VIEW|INDEX|TRIGGER|FUNCTION|PROCEDURE|TYPE)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    rb"((?:[A-Za-z_][\w$]*|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\])(?:\s*\.\s*(?:[A-Za-z_][\w$]*|\"(?:[^\"]|\"\")*\"))?)",
    re.IGNORECASE)
_CTE = re.compile(rb"([A-Za-z_][\w$]*|\"(?:[^\"]|\"\")*\")\s*(?:\([^()]*\)\s*)?AS\s*(?:(?:NOT\s+)?MATERIALIZED\s*)?\(",
                  re.IGNORECASE)
_RECURSIVE = re.compile(rb"\s+RECURSIVE\b", re.IGNORECASE)
_TYPES = frozenset({b"TABLE", b"TYPE"})
_QUOTES = {ord("'"): b"'", ord('"'): b'"', ord("`"): b"`"}
_DOLLAR = re.compile(rb"\$[A-Za-z_]*\$")


def sql_spans(root: tree_sitter.Node) -> list[Span]:
    """The definitions of the SQL text that ``root`` was parsed from (see the module docstring)."""
    data = root.text or b""
    rows = _Rows(data)
    spans = _named_blocks(data, rows)
    for start, end, withs in _statements(data):
        create = _CREATE.match(data, start)
        if create is not None:
            kind = "class" if create.group(1).upper() in _TYPES else "function"
            spans.append(rows.span(start, end, kind, _unquoted(create.group(2))))
        for at in withs:
            spans += _ctes(data, at, end, rows)
    return spans


class _Rows:
    """Row numbers of byte offsets, and the last row that holds text before an offset."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]

    def row(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def span(self, start: int, end: int, kind: str, name: str) -> Span:
        """A definition over bytes ``start..end`` (end exclusive, trailing white space left out)."""
        while end > start and self.data[end - 1:end].isspace():
            end -= 1
        return Span(start, end, self.row(start), self.row(max(start, end - 1)), kind, name)


def _named_blocks(data: bytes, rows: _Rows) -> list[Span]:
    """One span per ``-- name:`` header that opens a line, up to the next header; its head row is
    the last of the comment lines right under the header (its documentation, not its first
    statement's: the chunker keeps a definition's own-line comments above it with it)."""
    heads = [m for m in _NAME_HEADER.finditer(data) if m.start() == 0 or data[m.start() - 1:m.start()] == b"\n"]
    # The last block ends at the end of the text; a text with no header has no block at all
    # (a plain schema file: its CREATE statements are still found by sql_spans).
    ends = [m.start() for m in heads[1:]] + [len(data)] * bool(heads)
    spans = []
    for m, end in zip(heads, ends, strict=True):
        span = rows.span(m.start(), end, "function", m.group(1).decode("utf-8", "replace"))
        docs = re.match(rb"[^\n]*(?:\n[ \t]*--[^\n]*)*", data[m.start():end]).end()
        spans.append(dataclasses.replace(span, head=rows.row(m.start() + docs)))
    return spans


def _statements(data: bytes) -> list[tuple[int, int, list[int]]]:
    """``(start, end, withs)`` of each statement: from its first code byte to the ``;`` ending it
    at depth 0 (outside strings, quoted names, comments, ``$$`` bodies and a trigger's ``BEGIN ...
    END``), or to the end of the text; ``withs`` are the offsets after each ``WITH`` keyword in it."""
    out, i, n = [], 0, len(data)
    start, depth, blocks, trigger, withs = None, 0, 0, False, []
    while i < n:
        ch = data[i]
        if data.startswith(b"--", i):
            i = _line_end(data, i)
            continue
        if data.startswith(b"/*", i):
            close = data.find(b"*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if start is None and not data[i:i + 1].isspace():
            start, depth, blocks, withs = i, 0, 0, []
            trigger = _TRIGGER.match(data, i) is not None
        if ch in _QUOTES:
            close = data.find(_QUOTES[ch], i + 1)
            i = n if close < 0 else close + 1
            continue
        dollar = _DOLLAR.match(data, i) if ch == 0x24 else None
        if dollar is not None:
            close = data.find(dollar.group(), dollar.end())
            i = n if close < 0 else close + len(dollar.group())
            continue
        word = _WORD.match(data, i) if ch == 0x5F or chr(ch).isalpha() else None
        if word is not None:
            upper = word.group().upper()
            if trigger and upper in (b"BEGIN", b"CASE"):
                blocks += 1
            elif trigger and upper == b"END":
                blocks -= 1
            elif upper == b"WITH":
                withs.append(word.end())
            i = word.end()
            continue
        depth += (ch == 0x28) - (ch == 0x29)
        if ch == 0x3B and depth <= 0 and blocks <= 0 and start is not None:
            out.append((start, i + 1, withs))
            start = None
        i += 1
    if start is not None:
        out.append((start, n, withs))
    return out


def _line_end(data: bytes, i: int) -> int:
    end = data.find(b"\n", i)
    return len(data) if end < 0 else end


def _ctes(data: bytes, at: int, end: int, rows: _Rows) -> list[Span]:
    """The CTEs of the ``WITH`` clause whose keyword ends at ``at``, in a statement ending at ``end``."""
    spans = []
    recursive = _RECURSIVE.match(data, at, end)
    at = recursive.end() if recursive else at
    while True:
        at = _skip_comments(data, at, end)
        cte = _CTE.match(data, at, end)
        if cte is None:
            return spans
        close = _closing(data, cte.end() - 1, end)
        spans.append(rows.span(cte.start(), close + 1, "function", _unquoted(cte.group(1))))
        at = _skip_comments(data, close + 1, end)
        if not data.startswith(b",", at):
            return spans
        at += 1


def _skip_comments(data: bytes, at: int, end: int) -> int:
    """The offset of the first byte at or after ``at`` (before ``end``) that is neither white space nor in a comment."""
    while True:
        while at < end and data[at:at + 1].isspace():
            at += 1
        if data.startswith(b"--", at):
            at = min(_line_end(data, at), end)
        elif data.startswith(b"/*", at):
            close = data.find(b"*/", at + 2, end)
            at = end if close < 0 else close + 2
        else:
            return at


def _closing(data: bytes, at: int, end: int) -> int:
    """The offset of the parenthesis closing the one at ``at`` (strings and comments skipped), or ``end - 1``."""
    depth, i = 0, at
    while i < end:
        ch = data[i]
        if data.startswith(b"--", i):
            i = _line_end(data, i)
            continue
        if ch in _QUOTES:
            close = data.find(_QUOTES[ch], i + 1, end)
            i = end if close < 0 else close + 1
            continue
        depth += (ch == 0x28) - (ch == 0x29)
        if depth == 0:
            return i
        i += 1
    return end - 1


def _unquoted(name: bytes) -> str:
    """A possibly quoted (and schema-qualified) SQL name as it is searched for: ``"main"."t"`` -> ``main.t``."""
    parts = re.split(rb"\s*\.\s*", name)
    return ".".join(p.strip(b'"`[]').replace(b'""', b'"').decode("utf-8", "replace") for p in parts)
