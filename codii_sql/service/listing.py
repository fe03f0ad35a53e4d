"""The one text listing of search results, for every face that prints text: the CLI (for people) and
the MCP server (for agents), each line after its file line number.

Numbers come from :func:`codii_sql.text.numbered_lines` alone, so a trimmed or merged chunk (a
token budget) is numbered as the file is: an agent quotes these numbers back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..search.results import Result
from ..text import numbered_lines


@dataclass(frozen=True)
class Style:
    """How a face lays results out: lines shown per result (None: all), the header of a result
    (rank, result, where), and a numbered line (number, width of the last number, text)."""

    max_lines: int | None
    header: Callable[[int, Result, str], str]
    line: Callable[[int, int, str], str]


def _lines(r: Result) -> str:
    """``start-end``, or for a part of one long line ``line (columns a-b of n)``."""
    if r.start_column is None:
        return f"{r.start_line}-{r.end_line}"
    return f"{r.start_line}-{r.end_line} (columns {r.start_column:,}-{r.end_column:,} of {r.line_chars:,})"


def _person_header(rank: int, r: Result, where: str) -> str:
    label = f"{r.kind} {r.symbol}" if r.symbol else r.kind
    return f"{rank}. {where}:{_lines(r)}  {label}  score={r.score:.4f}{'  [stale]' if r.stale else ''}"


def _agent_header(rank: int, r: Result, where: str) -> str:
    return (f"{rank}. {where}:{_lines(r)} {r.symbol or r.kind} score={r.score:.4f}"
            + (f" id={r.id}" if r.id else "") + (" [stale: the file changed since indexing]" if r.stale else ""))


#: The CLI's: 12 lines a result, numbers right-aligned in 5 columns after two spaces.
PERSON = Style(12, _person_header, lambda n, width, text: f"  {n:>5}  {text}")
#: The MCP server's: every line, ``number<TAB>line`` (as ``cat -n``), numbers as wide as the last.
AGENT = Style(None, _agent_header, lambda n, width, text: f"{n:>{width}}\t{text}")


def listing(results: list[Result], style: Style, *, with_codebase: bool = False,
            safe: Callable[[str], str] = str) -> list[str]:
    """The lines of a listing of ``results``: per result its header, then its numbered lines (at
    most ``style.max_lines``, then how many more); over several codebases each path is preceded
    by its codebase's root (and whenever the results come from more than one: a server's answer for one
    URL may merge several). ``safe`` makes a file's text safe for the output (a terminal's escapes of
    control characters)."""
    with_codebase = with_codebase or len({r.codebase for r in results} - {None}) > 1
    out: list[str] = []
    for rank, r in enumerate(results, 1):
        where = f"{r.codebase}/{r.path}" if with_codebase and r.codebase else r.path
        if out and style.max_lines is None:
            out.append("")
        out.append(safe(style.header(rank, r, where)))
        lines = numbered_lines(r.content, r.start_line, r.end_line)
        width = len(str(r.end_line))
        shown = lines if style.max_lines is None else lines[:style.max_lines]
        # A CRLF file's lines end in "\r" (its content is kept exact): a listing shows the line.
        out += [style.line(n, width, safe(text.removesuffix("\r"))) for n, text in shown]
        if len(lines) > len(shown):
            out.append(f"         ... {len(lines) - len(shown)} more lines")
    return out
