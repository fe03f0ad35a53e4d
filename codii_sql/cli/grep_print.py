"""Printing a grep answer as rg prints it: lines, matches, counts, paths or JSON; on a terminal in colour, by file."""

from __future__ import annotations

import base64
import bisect
import itertools
import os
import sys
from collections.abc import Callable
from json.encoder import encode_basestring

from ..text import char_spans, has_controls
from .output import c1_escaped, json_text, shown
from .words import words

#: rg's default colours (its ``--colors`` defaults on Linux): paths magenta, line numbers green, matches
#: bold red, as SGR sequences.
PATH_STYLE, LINE_STYLE, MATCH_STYLE, RESET = "\x1b[35m", "\x1b[32m", "\x1b[1;31m", "\x1b[0m"


def wants_color(when: str) -> bool:
    """Whether to colour: ``always``, ``never``, or ``auto`` (rg's default): when standard output is a
    terminal, ``TERM`` is not ``dumb`` and ``NO_COLOR`` is unset (no-color.org)."""
    if when != "auto":
        return when == "always"
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb" and not os.environ.get("NO_COLOR")


class Printer:
    """Prints a grep answer file by file as the service adds them, in the form rg's flags ask: ``lines``
    (``path:line:text``), ``only`` (``-o``), ``vim`` (``--vimgrep``: each match, with ``only`` its text
    alone), ``count`` (``-c``), ``files`` (``-l``), ``json`` (``--json``) or ``quiet`` (``-q``), each
    path named as rg names it (:func:`rg_names`); ``column`` and ``byte_offset`` add rg's ``--column``
    (1-based) and ``-b`` (0-based bytes in the file: a line's start, or with ``-o`` a match's). ``color``
    marks paths, line numbers and matches with rg's colours; ``heading`` prints a file's path once above
    its lines, a blank line between files (rg's form on a terminal). rg's ``null`` (-0: a NUL after each
    path), ``max_columns`` and ``preview`` (-M: a line longer than that many bytes said omitted, or cut to
    that many characters) and ``trim`` (leading whitespace not printed) as rg 13 prints them. ``escape``
    writes control characters as escapes (``\\x1b``), for a terminal, which a file's own could drive; into a
    pipe they are written as the file holds them, as rg writes them (a new user's script read ``\\x0c``)."""

    def __init__(self, mode: str, *, numbers: bool, with_context: bool, with_filename: bool, count_matches: bool,
                 paths: tuple[str, ...], column: bool = False, byte_offset: bool = False, only: bool = False,
                 color: bool = False, heading: bool = False, null: bool = False, max_columns: int | None = None,
                 preview: bool = False, trim: bool = False, escape: bool = True) -> None:
        self.mode, self.numbers, self.with_context, self.with_filename = mode, numbers, with_context, with_filename
        self.count_matches, self.paths, self.column, self.byte_offset = count_matches, paths, column, byte_offset
        self.only, self.null, self.max_columns, self.preview, self.trim = only, null, max_columns, preview, trim
        self.escape = escape
        self.color = color and mode != "vim"  # rg 13 colours no --vimgrep line (editors read them)
        self.heading = heading and with_filename and mode in ("lines", "only")
        self.printed = False
        self._matches = 0  # submatches printed (--json's summary)
        self._bytes_printed = 0  # of the files' --json events, as rg counts them
        self._name = None
        self._last = None  # (path, line) last printed, for "--" between context groups

    def file(self, answer, f) -> None:
        """Print ``f`` (a GrepFile of ``answer``) now: a reader such as ``head -1`` has its line at once."""
        if self.mode == "quiet":
            self.printed = True
            return
        if self._name is None:
            self._name = rg_names(answer.codebase, self.paths)
        path = self._styled(self._safe(self._name(f.path)), PATH_STYLE)
        if self.mode == "json":
            text, printed = _json_lines(f, self._name(f.path))
            self._bytes_printed += printed
        elif self.mode == "count":  # the count says whether the file matched too (with -o: of matches)
            n = sum(g.match_count for g in f.lines) if self.count_matches else f.matches
            text = f"{path}{self._after_path(':')}{n}\n" if self.with_filename else f"{n}\n"
        elif self.mode == "files":
            text = path + self._after_path("\n")
        else:
            text = "".join(self._matches_alone(f, path) if self.mode in ("only", "vim") else self._lines(f, path))
            if self.heading:
                text = ("\n" if self.printed else "") + path + ("\0" if self.null else "\n") + text
        write(text)
        self.printed = True
        self._matches += sum(g.match_count for g in f.lines)

    def end(self, answer) -> None:
        """What follows the files: ``--json``'s summary."""
        if self.mode == "json":
            write(json_text(_json_summary(answer, self._matches, self._bytes_printed), compact=True) + "\n")

    def _lines(self, f, path: str):
        """rg's ``path:line:text`` (``path-line-text`` for context lines, ``--`` between groups; without the
        path when ``with_filename`` is false or under a heading)."""
        if not self.with_filename or self.heading:
            path = ""
        if not (self.with_context or self.column or self.byte_offset or self.color or self.max_columns or
                self.trim) and not (self.escape and has_controls("".join(g.text for g in f.lines))):
            # A file's lines at once, none needing an escape: a call per line was most of printing
            # Django's 99k `self` lines (docs/benchmarks.md "Grep", fifth round).
            head = f"{path}{self._after_path(':')}" if path else ""
            yield "".join([f"{head}{g.line}:{g.text}\n" for g in f.lines] if self.numbers
                          else [f"{head}{g.text}\n" for g in f.lines])
            return
        column = None
        for g in f.lines:
            yield self._separator(f.path, g.line)
            mark = ":" if g.matched else "-"
            if not g.joined:  # a multiline block's lines each show its first match's column, as rg 13's
                first = g.block[0] if g.block else g.spans[0] if g.spans else None
                column = first[0] + 1 if self.column and g.matched and first else None
            yield self._head(path, mark, g.line, column, g.offset) + self._text(g) + "\n"

    def _matches_alone(self, f, path: str):
        """rg's ``-o`` (each match's text alone on a line) and ``--vimgrep`` (each match, on its line's
        text unless ``-o``), after the path, line number, column and offset asked for; context lines whole."""
        vim = self.mode == "vim"
        if self.heading:
            path = ""
        for i, g in enumerate(f.lines):
            if g.block is not None:
                yield from self._block_matches(f, i, path)
                continue
            if g.joined:  # printed with its block's first line
                continue
            yield self._separator(f.path, g.line)
            if not g.matched:  # a context line whole, as rg prints it with -o too
                yield self._head(path, "-", g.line, None, g.offset, numbers=self.numbers or vim) + self._text(g) + "\n"
                continue
            raw = g.text.encode("utf-8", "surrogateescape")
            for start, end in g.spans:
                if self.only:
                    text = self._match_text(raw[start:end])
                else:
                    text = self._text(g, [(start, end)], vim=True)
                offset = None if g.offset is None else g.offset + start
                yield self._head(path, ":", g.line, start + 1 if self.column or vim else None, offset,
                                 numbers=self.numbers or vim) + text + "\n"

    def _block_matches(self, f, first: int, path: str):
        """A multiline block's matches as rg 13 prints them: with ``-o`` each match's part on each line it spans,
        under that line's number, the match's column and offset counted from the block's start; with
        ``--vimgrep`` each match once, on the line it starts on, its column in that line."""
        g = f.lines[first]
        lines = [g, *itertools.takewhile(lambda x: x.joined, f.lines[first + 1:])]
        raw = [x.text.encode("utf-8", "surrogateescape") for x in lines]
        starts = list(itertools.accumulate((len(r) + 1 for r in raw[:-1]), initial=0))  # each line's, in the block
        for start, end in g.block:
            k = bisect.bisect_right(starts, start) - 1
            offset = None if g.offset is None else g.offset + start
            if not self.only:  # --vimgrep: the line the match starts on
                at = start - starts[k]
                line = lines[k]
                yield self._separator(f.path, line.line)
                yield self._head(path, ":", line.line, at + 1, None if line.offset is None else line.offset,
                                 numbers=True) + self._text(line, [(at, min(end - starts[k], len(raw[k])))],
                                                             vim=True) + "\n"
                continue
            for j in range(k, len(lines)):
                a, b = max(start, starts[j]) - starts[j], min(end, starts[j] + len(raw[j])) - starts[j]
                if starts[j] >= end:
                    break
                if b > a:
                    yield self._separator(f.path, lines[j].line)
                    yield self._head(path, ":", lines[j].line, start + 1 if self.column else None, offset,
                                     numbers=self.numbers) + self._match_text(raw[j][a:b]) + "\n"

    def _separator(self, path: str, line: int) -> str:
        """rg's ``--`` before a line that does not follow the last one printed, with context asked for (not
        between files under headings, where a blank line parts them)."""
        last, self._last = self._last, (path, line)
        if not self.with_context or last is None or last == (path, line - 1) or (self.heading and last[0] != path):
            return ""
        return "--\n"

    def _head(self, path: str, mark: str, line: int, column: int | None, offset: int | None, *,
              numbers: bool | None = None) -> str:
        """``path:line:column:offset:`` as far as asked (``-`` after each for a context line)."""
        out = f"{path}{self._after_path(mark)}" if self.with_filename and path else ""
        if self.numbers if numbers is None else numbers:
            out += f"{self._styled(str(line), LINE_STYLE)}{mark}"
        if column is not None:
            out += f"{column}{mark}"
        if self.byte_offset and offset is not None:
            out += f"{offset}{mark}"
        return out

    def _after_path(self, mark: str) -> str:
        return "\0" if self.null else mark

    def _text(self, g, spans: list[tuple[int, int]] | None = None, vim: bool = False) -> str:
        """A line's text as printed: trimmed, said omitted or cut when it passes ``max_columns`` bytes with
        its line break (rg 13's words; ``vim``: --vimgrep's), its ``spans`` (default: all its matches)
        marked in colour."""
        text, spans = g.text, g.spans if spans is None else spans
        if self.trim:
            kept = text.lstrip(" \t\v\f\r")  # rg's ASCII whitespace
            cut = len(text) - len(kept)  # a byte each
            text, spans = kept, [(a - cut, b - cut) for a, b in spans if a >= cut]
        if self.max_columns is not None:
            raw = text.encode("utf-8", "surrogateescape")
            if len(raw) + 1 > self.max_columns:
                vim = vim or self.column  # rg 13 words it per match with --column too
                if not self.preview:
                    return (f"[Omitted long line with {len(g.spans)} matches]" if vim else
                            f"[Omitted long {'matching' if g.matched else 'context'} line]")
                head = text[:self.max_columns]  # rg 13 decides in bytes and cuts in characters
                limit = len(head.encode("utf-8", "surrogateescape"))
                left = sum(a >= limit for a, _ in g.spans)
                more = (f" [... {left} more match{'' if left == 1 else 'es'}]" if vim
                        else " [... omitted end of long line]")
                kept_spans = [(a, min(b, limit)) for a, b in spans if a < limit]
                return (_marked(head, kept_spans) if self.color and g.matched else self._safe(head)) + more
        return _marked(text, spans) if self.color and g.matched else self._safe(text)

    def _match_text(self, raw: bytes) -> str:
        """One match's text alone (``-o``): said omitted, or cut, past ``max_columns`` bytes (rg 13's words)."""
        if self.max_columns is not None and len(raw) > self.max_columns:
            if not self.preview:
                return "[Omitted long matching line]"
            head = raw.decode("utf-8", "replace")[:self.max_columns]
            return self._styled(self._safe(head), MATCH_STYLE) + " [... 0 more matches]"
        return self._styled(self._safe(raw.decode("utf-8", "replace")), MATCH_STYLE)

    def _safe(self, text: str) -> str:
        """``text`` as written: escaped for a terminal (:func:`_raw_cr`), as it is into a pipe."""
        return _raw_cr(text) if self.escape else text

    def _styled(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.color and text else text


def _marked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` as :func:`_raw_cr` shows it, each span (byte offsets into the line as the file holds it:
    :func:`~codii_sql.text.char_spans`) in :data:`MATCH_STYLE`."""
    out, at = [], 0
    for start, end in char_spans(text, spans):
        out += [shown(text[at:start]), MATCH_STYLE, shown(text[start:end]), RESET]
        at = end
    return "".join(out) + _raw_cr(text[at:])


def write(text: str) -> None:
    """``text`` to stdout now, a byte of a line that is not UTF-8 (a lone surrogate,
    :func:`~codii_sql.text.decode_kept`) as that byte, as rg prints it."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:  # the whole text is encoded before any of it is written
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode(sys.stdout.encoding or "utf-8", "surrogateescape"))
    sys.stdout.flush()


def _raw_cr(text: str) -> str:
    """``text`` safe for a terminal (:func:`shown`), a CRLF line's last CR kept as the byte rg prints."""
    return shown(text[:-1]) + "\r" if text.endswith("\r") else shown(text)


def rg_names(codebase: str, paths: tuple[str, ...]) -> Callable[[str], str]:
    """How rg names a file of the answer (whose path is relative to the codebase root): below the PATH it
    was found under, as typed (``./src/a.py``, ``../b.py``; an absolute PATH gives absolute names), or,
    with no PATH, relative to the working folder (a grep from ``src/`` prints ``a.py``), so the name
    opens from where the grep ran. An index alone (``codebase`` is its file) names its files as it
    stores them."""
    if not os.path.isdir(codebase):
        return lambda path: path
    root = os.path.realpath(codebase)
    if not paths:
        here = os.path.relpath(os.path.realpath(os.getcwd()), root)
        if here == "." or here.startswith(os.pardir):
            return lambda path: path
        return lambda path: os.path.relpath(path, here)
    scopes = []
    for typed in paths:
        rel = os.path.relpath(os.path.realpath(typed), root).replace(os.sep, "/")
        if not rel.startswith(os.pardir):
            scopes.append(("" if rel == "." else rel, typed))
    scopes.sort(key=lambda s: -len(s[0]))

    def name(path: str) -> str:
        for scope, typed in scopes:
            if path == scope:
                return typed
            if not scope or path.startswith(scope + "/"):
                rest = path[len(scope) + 1:] if scope else path
                return typed + rest if typed.endswith("/") else f"{typed}/{rest}"
        return path

    return name


def _json_lines(f, name: str) -> tuple[str, int]:
    """One file's JSON lines as ``rg --json`` prints them (compact, as rg does): ``begin``,
    ``match``/``context``, ``end`` with rg's stats (``bytes_printed``: the bytes before the ``end``), and that
    count; the events written around json's string encoder (a ``json.dumps`` an event was 1.1 s of the 1.9 s
    Django's 99k ``self`` lines took)."""
    path = f'{{"text":{_string_json(name)}}}'
    out = [f'{{"type":"begin","data":{{"path":{path}}}}}']
    for i, g in enumerate(f.lines):
        if g.joined:  # in its block's event
            continue
        if g.block is not None:  # a multiline block: one event, its lines' text whole
            out.append(_json_block(f.lines, i, path))
            continue
        raw = g.text.encode("utf-8", "surrogateescape")
        subs = ",".join(f'{{"match":{{"text":{_string_json(raw[s:e].decode("utf-8", "replace"))}}},'
                        f'"start":{s},"end":{e}}}' for s, e in g.spans)
        lines = _json_data(g.text + ("" if g.unended else "\n"))
        out.append(f'{{"type":"{"match" if g.matched else "context"}","data":{{"path":{path},"lines":{lines},'
                   f'"line_number":{g.line},"absolute_offset":{"null" if g.offset is None else g.offset},'
                   f'"submatches":[{subs}]}}}}')
    printed = len(c1_escaped("\n".join(out) + "\n").encode("utf-8", "surrogateescape"))
    stats = {"searches": 1, "searches_with_match": 1, **({"bytes_searched": f.size} if f.size is not None else {}),
             "bytes_printed": printed, "matched_lines": f.matches, "matches": sum(g.match_count for g in f.lines)}
    stats_json = json_text(stats, compact=True)
    out.append(f'{{"type":"end","data":{{"path":{path},"binary_offset":null,"stats":{stats_json}}}}}')
    return c1_escaped("\n".join(out) + "\n"), printed


def _json_block(lines: list, first: int, path: str) -> str:
    """rg --json's ``match`` event of the multiline block whose first line is ``lines[first]``."""
    g = lines[first]
    block = [g, *itertools.takewhile(lambda x: x.joined, lines[first + 1:])]
    text = "\n".join(x.text for x in block) + ("" if block[-1].unended else "\n")
    raw = text.encode("utf-8", "surrogateescape")
    subs = ",".join(f'{{"match":{{"text":{_string_json(raw[s:e].decode("utf-8", "replace"))}}},'
                    f'"start":{s},"end":{e}}}' for s, e in g.block)
    return (f'{{"type":"match","data":{{"path":{path},"lines":{_json_data(text)},"line_number":{g.line},'
            f'"absolute_offset":{"null" if g.offset is None else g.offset},"submatches":[{subs}]}}}}')


def _json_data(text: str) -> str:
    """rg's JSON for some text: ``{"text":...}``, or ``{"bytes":base64}`` when it is not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f'{{"bytes":"{base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")}"}}'
    return f'{{"text":{_string_json(text)}}}'


def _string_json(text: str) -> str:
    """``text`` as a JSON string (json's C encoder: quotes and C0 controls escaped, non-ASCII kept)."""
    return encode_basestring(text)


def _json_summary(answer, matches: int, printed: int) -> dict:
    """``rg --json``'s last line (``matches``: the submatches printed; ``printed``: the bytes of the files' events
    but their ``end``, as rg counts them), whose ``codii`` member tells how the candidates were found and the
    notes."""
    seconds = answer.seconds
    elapsed = {"secs": int(seconds), "nanos": int((seconds % 1) * 1e9), "human": f"{seconds:.6f}s"}
    return {"type": "summary", "data": {
        "elapsed_total": elapsed,
        "stats": {"elapsed": elapsed, "searches": answer.files_read, "searches_with_match": answer.matched_files,
                  "bytes_printed": printed, "bytes_searched": answer.bytes_read, "matched_lines": answer.matched_lines,
                  "matches": matches},
        "codii": {k: v for k, v in answer.to_dict(words).items() if k not in ("files", "patterns")}}}
