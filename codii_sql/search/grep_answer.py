"""One grep answer for every face: the matching lines by file, the counts, how the candidates were found, the notes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import hint_text
from ..text import char_spans, utf8_safe
from .answer import Note, Words, with_notes, worded_notes
from .budget import json_tokens, tokens
from .grep_lines import GrepLine


@dataclass
class GrepFile:
    """One file's lines in a grep answer: ``matches`` is how many of its lines matched (all of them,
    also when ``lines`` was cut by a limit), ``lines`` the matched and context lines in line order,
    ``not_stored`` the line ranges ``[first, last]`` an index alone does not hold (never searched), ``size``
    the bytes searched (known when offsets are asked for: rg's ``--json`` stats; None otherwise)."""

    path: str
    role: str
    language: str | None
    matches: int
    lines: list[GrepLine] = field(default_factory=list)
    not_stored: list[list[int]] = field(default_factory=list)
    size: int | None = None

    def to_dict(self) -> dict:
        out = {"path": self.path, "role": self.role, "language": self.language, "matches": self.matches,
               "lines": [_line(g) for g in self.lines]}
        if self.not_stored:
            out["not_stored"] = self.not_stored
        return out


def cut_line(g: GrepLine, columns: int) -> GrepLine:
    """``g`` with its text cut to ``columns`` characters (a cut end marked "…"): from the line's start, or,
    when its first match lies past them, from a quarter of them before that match or so that they end the
    line (``cut_from`` then says where, and the text begins with "…"): a new user's agent got a long
    line's head and ``"submatches": []``. The spans stay offsets into the whole line, those starting
    inside the window kept."""
    if len(g.text) <= columns:
        return g
    first = char_spans(g.text, g.spans[:1])[0][0] if g.spans else 0
    start = 0 if first < columns * 3 // 4 else min(first - columns // 4, len(g.text) - columns)
    text = g.text[start:start + columns]
    head = len(g.text[:start].encode("utf-8", "surrogateescape"))
    limit = head + len(text.encode("utf-8", "surrogateescape"))
    shown = ("…" if start else "") + text + ("…" if start + columns < len(g.text) else "")
    # the spans stay the line's facts: a match running past the window keeps its end (a new user's agent was
    # told [100006, 100231] of a match ending at 100517)
    return GrepLine(g.line, shown, [(a, b) for a, b in g.spans if head <= a < limit], g.context, cut_from=head,
                    block=g.block, joined=g.joined)


_BUDGET_NOTE = "the lines shown were cut to fit about {max_tokens:,} tokens"
#: Characters of the trigram plan an answer under a budget keeps (then "…"): it says how candidates were chosen,
#: and an alternation's spent a quarter of an agent's 400 tokens (a helper's `function (handleBatch|handle)\(`).
TRIGRAMS_SHOWN = 120
_BUDGET_HINT = "narrow the pattern, paths or globs, or ask with a larger budget"


def line_tokens(path: str, g: GrepLine) -> int:
    """Tokens one line costs an answer that carries it twice, as text (``path:line:text``) and as JSON
    (with its submatches), plus one per submatch: a run of small numbers in brackets takes about two
    characters a token, not four (``.`` over 300-character lines made 84k-token MCP answers)."""
    as_json = _line(g)
    return tokens(f"{path}:{g.line}:{as_json['text']}") + json_tokens(as_json) + len(g.spans)


def _line(g: GrepLine) -> dict:
    out: dict = {"line": g.line, "text": utf8_safe(g.shown)}
    if g.cut_from:
        out["text_from"] = g.cut_from
    if g.context:
        out["context"] = True
    else:
        out["submatches"] = [list(s) for s in g.spans]
    if g.joined:
        out["joined"] = True
    return out


@dataclass
class GrepAnswer:
    """The answer to one grep request.

    Attributes:
        patterns: the patterns as asked.
        codebase: the root searched (an index file's path for an index alone).
        files: files with a matching line, in path order (or by role: source first).
        matched_lines, matched_files: the totals over every file read (a ``limit`` cuts ``files``,
            not these, unless ``truncated``: reading stopped, so they count what was read).
        files_indexed: the codebase's indexed files; ``files_read``: the candidates verified, ``bytes_read`` their
            sizes in bytes (as indexed; rg's ``bytes_searched``).
        trigrams: the FTS5 expression the candidates satisfied, None when every file was read
            (``scan``: the patterns require no trigram).
        timed_out: files whose matching passed the time bound (their matches are not counted).
        processes: how many processes read and matched the candidates (2: a forked child took the later
            part of a long list, service/grep_split.py).
        truncated: the ``limit`` or token budget stopped the answer early.
        nothing_selected: the request's globs, types or roles leave no indexed file to search (rg exits 2).
        missing_paths: paths asked for that do not exist (the others were searched; rg exits 2).
        seconds: wall time (the update excluded); ``candidate_seconds`` of it in the trigram query.
        notes: why lines may be missing or the answer cut.
    """

    patterns: list[str]
    codebase: str
    files: list[GrepFile] = field(default_factory=list)
    matched_lines: int = 0
    matched_files: int = 0
    files_indexed: int = 0
    files_read: int = 0
    bytes_read: int = 0
    trigrams: str | None = None
    scan: bool = False
    timed_out: list[str] = field(default_factory=list)
    processes: int = 1
    truncated: bool = False
    nothing_selected: bool = False
    missing_paths: list[str] = field(default_factory=list)
    seconds: float = 0.0
    candidate_seconds: float = 0.0
    notes: list[Note] = field(default_factory=list)

    def fit(self, max_tokens: int) -> None:
        """Keep the lines that fit ``max_tokens`` (each costs its text and JSON forms: :func:`line_tokens`; a
        file its JSON head), in answer order, after the answer's other fields and notes (told in the JSON and
        the text summary: `self` over MCP at 100 answered 420 tokens, a new user). The first matching line
        stays; context lines stay only with a match they stand beside (a helper's grep at 300 tokens showed
        two context lines and none of the 6 matches, "0 shown")."""
        if self.trigrams and len(self.trigrams) > TRIGRAMS_SHOWN:  # an alternation's plan took ~100 of 400 tokens
            self.trigrams = self.trigrams[:TRIGRAMS_SHOWN] + " …"
        fields = {k: v for k, v in self.to_dict(hint_text).items() if k not in ("files", "note", "notes")}
        said = (self.note(hint_text) or "") + _BUDGET_NOTE.format(max_tokens=max_tokens) + _BUDGET_HINT
        used, kept, shown, cut = json_tokens(fields, plus=2 * said), [], 0, False
        for f in self.files:
            head = json_tokens({"path": f.path, "role": f.role, "language": f.language, "matches": f.matches})
            lines: list[GrepLine] = []
            waiting: list[GrepLine] = []  # context lines, kept once the match they stand beside is
            for g in f.lines:
                if g.context:
                    waiting.append(g)
                    continue
                cost = (0 if lines else head) + line_tokens(f.path, g)
                before = sum(line_tokens(f.path, w) for w in waiting)
                if used + before + cost > max_tokens:
                    if shown:
                        cut = True
                        break
                    waiting, before = [], 0  # the first match stays; its context only where there is room
                lines += [*waiting, g]
                used += before + cost
                shown += 1
                waiting = []
            if waiting and lines and not cut:  # the last match's context after it
                after = sum(line_tokens(f.path, w) for w in waiting)
                cut = used + after > max_tokens
                if not cut:
                    lines += waiting
                    used += after
            if lines:
                f.lines = lines
                kept.append(f)
            if cut:
                self.truncated = True
                self.notes.append(Note("budget", _BUDGET_NOTE.format(max_tokens=max_tokens), _BUDGET_HINT))
                break
        self.files = kept

    def note(self, words: Words) -> str | None:
        """Every note in one line, hints in ``words`` (None without notes)."""
        return worded_notes(self.notes, words)

    def to_dict(self, words: Words) -> dict:
        """``{"patterns", "codebase", "files": [{"path", "role", "language", "matches", "lines": [{"line",
        "text", ["text_from"], "submatches": [[start, end]] | "context": true, ["joined": true]}], ["not_stored"]}],
        "matched_lines",
        "matched_files", "files_indexed", "files_read", "bytes_read", "trigrams", "scan", "timed_out", "processes",
        "truncated", "seconds", ["note", "notes"]}``: lines 1-based, submatches byte offsets into the line as the
        file holds it (end exclusive; its UTF-8, where a byte that is not UTF-8 is one and ``text`` shows it as
        U+FFFD; ``text_from``: the byte where a long line's text, cut around its first match, starts; ``joined``: a
        multiline match's later line, its submatches the parts of matches begun above), the hints in ``words``."""
        out: dict = {"patterns": self.patterns, "codebase": self.codebase, "files": [f.to_dict() for f in self.files],
                     "matched_lines": self.matched_lines, "matched_files": self.matched_files,
                     "files_indexed": self.files_indexed, "files_read": self.files_read, "bytes_read": self.bytes_read,
                     "trigrams": self.trigrams,
                     "scan": self.scan, "timed_out": self.timed_out, "processes": self.processes,
                     "truncated": self.truncated,
                     "seconds": round(self.seconds, 4)}
        return with_notes(out, self.notes, words)
