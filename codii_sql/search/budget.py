"""Fitting an answer into a token budget: merge a file's overlapping chunks, trim each to the lines
around its matches, drop the lowest results, and say what was cut.

Tokens are estimated as characters / :data:`CHARS_PER_TOKEN` (the common rule of thumb for code
and English with BPE tokenizers; an agent's own tokenizer differs by some 10-20%), but a character
outside ASCII counts a token (CJK text is about one a character) and a control character
:data:`CONTROL_TOKENS` (JSON writes each as a six-character escape): a file of either passed an agent's
25,000 tokens at a budget of 6,000 when every character counted a quarter.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..text import content_lines, numbered_lines, term_spans, terms_held
from .results import Result

if TYPE_CHECKING:
    import regex

CHARS_PER_TOKEN = 4
#: Lines kept around each line that holds a query word, and at the start of a chunk without one.
CONTEXT_LINES = 2
HEAD_LINES = 6
#: Ends a line cut short because it alone is longer than a result's share of the budget.
CUT_MARK = " …[cut]"
#: Fewest tokens of lines worth showing for a result: below, the lower results are dropped instead
#: of every result being cut to a line or two.
MIN_RESULT_TOKENS = 20
#: Fewest tokens of a line cut around its match worth showing (about 40 characters).
MIN_CUT_TOKENS = 10


#: Tokens a control character costs (JSON escapes it as six characters, some 3-4 tokens).
CONTROL_TOKENS = 3
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ESCAPED_CONTROL = re.compile(r"\\u00[01][0-9a-f]|\\u007f")


def tokens(text: str) -> int:
    """Estimated tokens of ``text`` (see the module docstring)."""
    controls = len(_CONTROL.findall(text)) if _CONTROL.search(text) else 0
    wide = 0 if text.isascii() else len(text) - len(text.encode("ascii", "ignore"))
    return math.ceil((len(text) - wide - controls) / CHARS_PER_TOKEN) + wide + CONTROL_TOKENS * controls


def json_tokens(value, *, plus: str = "") -> int:
    """Estimated tokens of ``value`` as JSON (spaced as json.dumps writes it), and of the text ``plus``:
    a control character JSON escaped counts as :data:`CONTROL_TOKENS`."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    escaped = len(_ESCAPED_CONTROL.findall(text)) if "\\u00" in text else 0
    return tokens(text + plus) + escaped * (CONTROL_TOKENS - 1)


def fitting(costs: Iterable[int], max_tokens: int) -> int:
    """How many items, from the first, fit in ``max_tokens`` when they cost ``costs`` tokens each
    (read lazily, up to the first that does not fit). The first always counts, so a caller that goes
    on after the last item shown always moves."""
    used = n = 0
    for cost in costs:
        if n and used + cost > max_tokens:
            break
        used += cost
        n += 1
    return n


def page(items: list, offset: int, limit: int, max_tokens: int | None, cost=json_tokens) -> list:
    """``items[offset:offset + limit]``, then only as many whole ones as fit in ``max_tokens`` (None:
    no cut) at ``cost(item)`` tokens each (see :func:`fitting`: at least one)."""
    window = items[offset:offset + limit]
    return window[:fitting(map(cost, window), max_tokens)] if max_tokens else window


@dataclass
class BudgetReport:
    """What :func:`fit` did: the budget, the tokens used, and how many results it merged into another,
    trimmed to fewer lines, and dropped."""

    max_tokens: int
    used_tokens: int = 0
    merged: int = 0
    trimmed: int = 0
    dropped: int = 0

    def note(self) -> str | None:
        if not (self.merged or self.trimmed or self.dropped):
            return None
        trimmed = ("trimmed to the lines around their matches, or their first telling lines (a line cut short "
                   f"ends in '{CUT_MARK.strip()}')")
        merged = "merged with an overlapping or adjacent chunk of their file"
        parts = [f"{n} {what}" for n, what in ((self.trimmed, trimmed), (self.merged, merged),
                                                (self.dropped, "dropped (lower-ranked)")) if n]
        return f"to fit max_tokens={self.max_tokens} (~{self.used_tokens} used): {', '.join(parts)}"


def fit(results: list[Result], terms: list[str], max_tokens: int,
        places: Sequence[tuple[str, int]] = (), reserved: int = 0,
        lines_of: regex.Pattern | None = None) -> tuple[list[Result], BudgetReport]:
    """``results`` (best first) within ``max_tokens`` estimated tokens, less the ``reserved`` tokens of the
    answer's other fields (:func:`envelope_tokens`), and the report.

    When they all fit as they are, they are returned as they are. Else overlapping or adjacent chunks of
    one file become one result at the best one's rank (MCP's default budget merged them where nothing needed
    cutting, and its answer differed from the other faces'); each
    result keeps the contiguous lines from :data:`CONTEXT_LINES` before its line holding the most query
    terms (``terms``, as :func:`~codii_sql.text.term_spans` finds them: ``expiry`` in ``keepalive_expiry``
    too, where word boundaries left a new user's trimmed results without one matching line), or the line of
    one of ``places``
    it holds (``(path, line)`` as :func:`~.locations.places` reads them: a new user's
    `sessions.py:703` kept lines 691-692 of its chunk), to as many after its last as the budget's
    fair share allows (a chunk with none keeps the lines from the one naming its symbol, or its first that is
    more than punctuation), never fewer than :data:`MIN_RESULT_TOKENS`, and never less than that line whole
    while what is left holds it; results that no longer fit are dropped, a lower one whose line only a cut
    would fit too when that line matches nothing (one that matches is cut around its match), but the first
    always stays, cut to the budget. With ``lines_of`` (a search's ``--grep``,
    compiled as grep compiles it), the lines it matches are kept (a new user's grep hit, line 182, was cut
    for lines 175-180 that held the query's words).
    """
    report = BudgetReport(max_tokens)
    whole = reserved + sum(result_tokens(r) for r in results)
    if whole <= max_tokens:  # nothing to cut: the results as every face without a budget gives them
        report.used_tokens = whole
        return list(results), report
    merged = _merge(results, report)
    words = [t.lower() for t in terms if t]
    out, left, used = [], max(max_tokens - reserved, 0), reserved
    for i, r in enumerate(merged):
        # The next three results share what is left, each with at least MIN_RESULT_TOKENS of lines.
        overhead = result_overhead(r)
        share = max(left // min(len(merged) - i, 3), MIN_RESULT_TOKENS + overhead)
        if out and left < MIN_RESULT_TOKENS + overhead:
            report.dropped += len(merged) - i
            break
        at = next((line - r.start_line for path, line in places if r.start_line <= line <= r.end_line
                   and r.path.lower().rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1]), None)
        at = at if _by_line(r) else None
        # A result's best line is shown whole where what is left holds it: a helper's first result was cut to
        # columns 2-78 of its 89 while two weaker one-line results were kept, and a third was cut by 7 of 80.
        hits, best = _focus(r, words, at, lines_of)
        need = overhead + json_tokens(_joined([(content_lines(r.content) or [""])[best]]))
        if out and need > left and not hits:  # a part of a line matching nothing: the room goes to the next
            report.dropped += 1
            continue
        share = max(share, min(need, left))
        # The first result stays whatever the answer's other fields left: some lines of it, not a few characters.
        room = min(share, left) - overhead if out else max(min(share, left) - overhead, MIN_RESULT_TOKENS)
        trimmed = _trim(r, words, max(room, 1), (hits, best), lines_of)
        cost = result_tokens(trimmed)  # a cut line adds its columns
        for _ in range(3):  # smaller, as the columns' cost is known (monolog's #2 was dropped for them)
            if not out or cost <= left or room - (cost - left) < MIN_CUT_TOKENS:
                break
            room -= cost - left
            trimmed = _trim(r, words, room, (hits, best), lines_of)
            cost = result_tokens(trimmed)
        if out and cost > left:
            report.dropped += len(merged) - i
            break
        report.trimmed += trimmed.content != r.content
        out.append(trimmed)
        left -= cost
        used += cost
    report.used_tokens = used
    return out, report


def result_tokens(r: Result) -> int:
    """Tokens ``r`` costs an answer: its JSON (lines as a JSON string, each line break and quote escaped:
    raw text undercounted 8,000-token answers by ~4%)."""
    return json_tokens(r.to_dict())


def result_overhead(r: Result) -> int:
    """Tokens ``r`` costs besides its lines: its other JSON fields (path, lines, symbol, scores, ids). The
    JSON is the larger of an agent's two views (a text listing gives each result one header line, shorter
    than its fields). A fixed 30 tokens undercounted them: 40 results at 1,390-character paths were 32k
    tokens within a budget of 8,000, and ordinary ones 8,590 (new users)."""
    return json_tokens(dataclasses.replace(r, content="").to_dict())


#: Tokens a face's words for the budget's remedy may take (the CLI's, the longest: "search without
#: --max-tokens (or with a larger one) for whole chunks").
REMEDY_TOKENS = 24


def envelope_tokens(fields: dict) -> int:
    """Tokens of an answer's fields besides its results (``fields`` as its JSON, ``results`` left out; its
    ``note`` is one of them), with room for what the budget adds: its report, its note at its longest and
    that note's remedy (:data:`REMEDY_TOKENS`)."""
    rest = {k: v for k, v in fields.items() if k != "results"}
    report = BudgetReport(10**6, 10**6, 999, 999, 999)
    return json_tokens({**rest, "budget": dataclasses.asdict(report)}, plus=report.note() or "") + REMEDY_TOKENS


def _merge(results: list[Result], report: BudgetReport) -> list[Result]:
    """A file's overlapping or adjacent chunks as one result (lines united, at the best one's rank)."""
    out: list[Result] = []
    for r in results:
        host = next((o for o in out if o.path == r.path and o.codebase == r.codebase and _by_line(o) and _by_line(r)
                     and r.start_line <= o.end_line + 1 and o.start_line <= r.end_line + 1), None)
        if host is None:
            out.append(r)
            continue
        report.merged += 1
        out[out.index(host)] = _united(host, r)
    return out


def _by_line(r: Result) -> bool:
    """Whether ``r``'s content holds exactly the file lines of its span (a notebook cell does not:
    its lines share the line of their JSON string, and neither does a window of a long line, whose
    columns say which part it is: they cannot be cut or united by number; a window united with the
    function below it claimed that function's name and lines, with the window's columns)."""
    return r.start_column is None and len(content_lines(r.content)) == r.end_line - r.start_line + 1


def _united(a: Result, b: Result) -> Result:
    lines = dict(numbered_lines(a.content, a.start_line, a.end_line))
    for n, line in numbered_lines(b.content, b.start_line, b.end_line):
        lines.setdefault(n, line)
    start, end = min(lines), max(lines)
    content = _joined([lines.get(n, "") for n in range(start, end + 1)])
    return dataclasses.replace(a, start_line=start, end_line=end, content=content,
                               symbol=a.symbol if a.symbol == b.symbol else a.symbol or b.symbol)


def _joined(lines: list[str]) -> str:
    """``lines`` as a chunk's content: each ends in a newline, so a blank last line is a line
    (joined without the last one, it read as a final newline, one line short of the span)."""
    return "".join(line + "\n" for line in lines)


def _cut_line(r: Result, line: str, words: list[str], budget: int, index: int,
              lines_of: regex.Pattern | None = None) -> Result:
    """``r`` cut to the part of its line ``index`` (``line``) that fits ``budget``, from a quarter of it
    before the first match (a new user's one-line bundle kept its window's start and dropped `f4999`,
    the match, with half the budget unused), ending in :data:`CUT_MARK` when the line goes on; its
    columns say which part of the line it is (see :class:`~.results.Result`)."""
    keep = max(budget * CHARS_PER_TOKEN - len(CUT_MARK), 1)
    found = lines_of.search(line) if lines_of is not None else None
    hit = found.span() if found else next(iter(term_spans(line, words)), None)
    start = 0 if hit is None else max(0, min(hit[0] - keep // 4, len(line) - keep))
    if 0 < start < (hit[0] if hit else 0) and line[start - 1].isalnum():  # not from the middle of a word
        start = next((i for i in range(start, hit[0]) if not line[i].isalnum()), start)
    part = line[start:start + keep]
    content = part + (CUT_MARK if start + keep < len(line) else "") + "\n"
    first = (r.start_column or 1) + start
    out = dataclasses.replace(r, content=content, start_column=first, end_column=first + len(part) - 1,
                              line_chars=r.line_chars or len(line))
    if not _by_line(r):
        return out
    return dataclasses.replace(out, start_line=r.start_line + index, end_line=r.start_line + index)


def _focus(r: Result, words: list[str], at: int | None, lines_of: regex.Pattern | None) -> tuple[list[int], int]:
    """The lines of ``r`` a trim grows towards (0-based: its line ``at``, else those ``lines_of`` matches, else
    those holding a query word; [] for none) and the line it starts from (see :func:`_trim`)."""
    lines = content_lines(r.content) or [""]
    if at is not None and at < len(lines):
        return [at], at
    grepped = [i for i, line in enumerate(lines) if lines_of.search(line)] if lines_of is not None else []
    if grepped:
        return grepped, grepped[0]
    # From the line holding the most query terms, counted as terms, not spellings (httpx: `keepalive_expiry`, not
    # `max_keepalive_connections`; a helper's "Untrusted Host" kept `$host ... $trustedHosts` above the line
    # raising the message).
    # Of lines holding as many, the one whose terms fewer lines hold (an agent's stand-in: "panic when the same
    # flag is defined twice" kept pflag's `if flag.Shorthand == ""`, first of the chunk's six lines naming a flag,
    # not its `panic(msg)`).
    held = {i: found for i, text in enumerate(lines) if (found := terms_held(text, words))}
    holding = Counter(term for found in held.values() for term in found)
    hits = sorted(held)
    if not hits:
        return hits, _first_telling(lines, r.symbol)
    return hits, max(hits, key=lambda i: (len(held[i]), sum(1 / holding[t] for t in held[i]), -i))


#: A line that tells nothing alone: blank, or only a comment's or a block's punctuation (``/**``, ``*/``, ``{``).
_MUTE_LINE = re.compile(r"[\s/*#{}()\[\];,'\"`<>!-]*")


def _first_telling(lines: list[str], symbol: str | None) -> int:
    """Where a chunk holding no query word starts when trimmed: the first line naming its symbol, else its
    first line that is more than punctuation (a helper's trimmed result was `  /**`, a doc comment's opener)."""
    name = (symbol or "").rsplit(".", 1)[-1]
    named = next((i for i, line in enumerate(lines) if name and re.search(rf"\b{re.escape(name)}\b", line)), None)
    if named is not None:
        return named
    return next((i for i, line in enumerate(lines) if not _MUTE_LINE.fullmatch(line)), 0)


def _trim(r: Result, words: list[str], budget: int, focus: tuple[list[int], int],
          lines_of: regex.Pattern | None = None) -> Result:
    """``r`` cut to contiguous lines worth at most ``budget`` tokens: from its line ``focus`` starts at (see
    :func:`_focus`), grown towards the others it names and :data:`CONTEXT_LINES` around them, then further
    down while it fits. The span shrinks with the lines (a chunk whose lines are not the file's keeps its
    span)."""
    if json_tokens(r.content) <= budget:  # measured as result_tokens counts it: a control character escaped
        return r
    lines = content_lines(r.content)
    hits, best = focus
    lo = hi = best
    floor = max(0, lo - CONTEXT_LINES) if hits else lo  # above a chunk's telling line: its comment's punctuation
    ceiling = min(len(lines) - 1, (hits[-1] + CONTEXT_LINES) if hits else best + HEAD_LINES - 1)

    def fits(a: int, b: int) -> bool:  # the text as it is returned: a newline short, 2 lines passed and
        return json_tokens(_joined(lines[a:b + 1])) <= budget  # were cut to "  …[cut]", longer than the line

    grown = True
    while grown:
        grown = False
        if hi < ceiling and fits(lo, hi + 1):
            hi, grown = hi + 1, True
        if lo > floor and fits(lo - 1, hi):
            lo, grown = lo - 1, True
    while hi + 1 < len(lines) and fits(lo, hi + 1):
        hi += 1
    text = _joined(lines[lo:hi + 1])
    if json_tokens(text) > budget:  # one line longer than the budget: cut it, visibly, around its first match
        return _cut_line(r, lines[lo], words, budget, lo, lines_of)
    if not _by_line(r):
        return dataclasses.replace(r, content=text)
    return dataclasses.replace(r, start_line=r.start_line + lo, end_line=r.start_line + hi, content=text)
