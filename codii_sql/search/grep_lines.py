"""A grep answer's lines: one line with its matches, a text's lines as grep numbers them, context and byte offsets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class GrepLine:
    """One line of a file in a grep answer: ``line`` 1-based, ``text`` without its line break,
    ``spans`` the matches as ``[start, end)`` byte offsets into the line's UTF-8 (as rg reports
    them; a multiline match's part on this line), ``context`` for a line shown around a match (no spans),
    ``offset`` and the rest below."""

    line: int
    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    context: bool = False
    #: Byte offset of the line's start in the file's text as UTF-8 (rg --json's ``absolute_offset``; the
    #: file's own for UTF-8 and ASCII files), when asked for (:func:`set_offsets`), else None.
    offset: int | None = None
    #: Whether the line is the file's last and no line break ends it (set with ``offset``): rg --json's
    #: ``lines.text`` then has no ``\n``.
    unended: bool = False
    #: Where ``text`` starts in the line (bytes) when a long line was cut around its first match (``text``
    #: then begins with "…"); 0 for a line shown from its start.
    cut_from: int = 0
    #: A multiline match's block (rg's ``-U``: the lines its matches span, those touching merged), on the block's
    #: first line: its matches as ``[start, end)`` byte offsets into the block's text, its lines each with its
    #: line break (rg --json's one ``match`` event); None on every other line.
    block: list[tuple[int, int]] | None = None
    #: A later line of such a block: shown as matched, its ``spans`` the parts of the block's matches it holds,
    #: which are counted on the block's first line.
    joined: bool = False

    @property
    def match_count(self) -> int:
        """The matches this line stands for: its spans, or for a multiline block's lines, the block's on its first."""
        return len(self.block) if self.block is not None else 0 if self.joined else len(self.spans)

    @property
    def matched(self) -> bool:
        return not self.context

    @property
    def shown(self) -> str:
        """``text`` without a CRLF line's CR, as agents and pages show it (the CLI keeps it, as rg does)."""
        return self.text.removesuffix("\r")


def lines_of(text: str) -> list[str]:
    """``text``'s lines as grep numbers them: split at ``\\n`` only (a ``\\r`` stays in its line, as
    rg keeps it), no empty last line after a final line break."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def as_text(text: str | bytes) -> str:
    """A candidate's text as :func:`~.grep.matching_lines` took it, as a string."""
    return text if isinstance(text, str) else text.decode("ascii")


def set_offsets(text: str | bytes, lines: list[GrepLine]) -> None:
    """Set each of ``lines``' ``offset`` (in line order) from ``text``, the file's bytes or its decoded
    text (encoded to UTF-8 once: a Latin-1 file's offsets are those of its UTF-8 form), and whether each
    is the last line with no line break after it (``unended``)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    number, at = 1, 0
    for g in lines:
        while number < g.line:
            at = data.index(b"\n", at) + 1
            number += 1
        g.offset = at
        g.unended = data.find(b"\n", at) < 0


def with_context(text: str, matched: list[GrepLine], before: int, after: int,
                 also_matching: Sequence[GrepLine] = ()) -> list[GrepLine]:
    """``matched`` and up to ``before``/``after`` lines around each (context lines, no spans), in line
    order, each line once; a line of ``also_matching`` (those past rg's ``-m``) in that context is shown
    as the match it is, as rg shows it, without context of its own."""
    if not (before or after) or not matched:
        return matched
    lines = lines_of(text)
    by_number = {m.line: m for m in also_matching}
    by_number.update((m.line, m) for m in matched)
    wanted: set[int] = set()
    for m in matched:
        wanted.update(range(max(1, m.line - before), min(len(lines), m.line + after) + 1))
    return [by_number.get(n) or GrepLine(n, lines[n - 1], context=True) for n in sorted(wanted)]
