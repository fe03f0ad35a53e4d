"""MCP tool grep_code: exact or regular-expression search of an indexed codebase's files, line by line."""

from __future__ import annotations

import os
from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from ..service import SHOWN_LINE_CHARS, GrepRequest, grep, is_index_file
from ..text import escaped, utf8_safe
from .app import DEFAULT_MAX_TOKENS, READ_ONLY, SESSION, MaxTokensArg, agent_errors, answer, codebase_at, \
    server, with_note
from .words import words

@server.tool(
    description=(
        "Search an indexed codebase's files for a regular expression (Python re syntax) or, with literal=true, "
        "an exact string, like ripgrep: every matching line with its path, 1-based line number, text and "
        "submatches (byte offsets into the line, end exclusive), source files first (path order with "
        "sort=path). Exact: candidate files come from the index's trigrams and every one is read and matched. "
        "Use it for identifiers with punctuation (foo->bar, TODO(security)), error messages, regexes; "
        "search_code for meaning. matched_lines and matched_files count every match; truncated says the "
        "limit or max_tokens cut the lines shown. Files the index skips (ignored, binary, secrets) are not searched."),
    annotations=READ_ONLY,
)
@agent_errors
def grep_code(
    path: Annotated[str, Field(description="Absolute path of the codebase root directory, a folder inside it, or "
                                           "one file.")],
    pattern: Annotated[str, Field(min_length=1, max_length=10_000, description="The regular expression, or the "
                                                                               "string with literal=true.")],
    literal: Annotated[bool, Field(description="Match pattern as a literal string (rg -F).")] = False,
    ignore_case: Annotated[bool, Field(description="Case-insensitive (rg -i).")] = False,
    word: Annotated[bool, Field(description="Only matches with no word character around them (rg -w).")] = False,
    multiline: Annotated[bool, Field(description="Matches may span lines: \\n, \\s and . take a line break (rg -U "
                                                 "--multiline-dotall); every line a match spans is returned, the "
                                                 "later ones marked joined.")] = False,
    pathGlob: Annotated[Annotated[list[str], Field(max_length=20)] | str, Field(  # noqa: N803
        description="gitignore-style globs over the relative path, e.g. ['*.{py,md}', '!tests/'] (one may "
                    "be a string, as search_code's); '!' excludes (an excluded folder is never entered), "
                    "else the last match wins, as rg -g; [] = all files.")] = [],
    context: Annotated[int, Field(ge=0, le=10, description="Lines of context before and after each match.")] = 0,
    sort: Annotated[str, Field(pattern="^(path|role)$", description=(
        "role (default): source files first, then tests, docs, config...; path: rg's order. With a limit, role "
        "keeps a common name's source lines from being crowded out by changelogs and docs."))] = "role",
    limit: Annotated[int, Field(ge=1, le=2000, description="Matching lines shown at most.")] = 100,
    max_tokens: MaxTokensArg = None,
) -> CallToolResult:
    # A file greps that file, as the CLI's PATH does (a new user's agent was told to pass its folder), and an
    # index file greps its stored texts (its folder was taken for a codebase: "not indexed")
    alone = is_index_file(path)
    cb = codebase_at(os.path.dirname(path) if os.path.isfile(os.path.expanduser(path)) and not alone else path)
    SESSION.require_index(cb)
    found = grep(GrepRequest([pattern], fixed=literal, ignore_case=ignore_case, word=word, paths=[path],
                             multiline=multiline, multiline_dotall=multiline,
                             globs=[pathGlob] if isinstance(pathGlob, str) else list(pathGlob), before=context, after=context, limit=limit, sort=sort, update=False,
                             max_columns=SHOWN_LINE_CHARS, max_tokens=max_tokens or DEFAULT_MAX_TOKENS))
    shown = sum(g.matched for f in found.files for g in f.lines)
    summary = (f"{found.matched_lines} matching line{'' if found.matched_lines == 1 else 's'} in {found.matched_files} "
               f"file{'' if found.matched_files == 1 else 's'} of {found.codebase}"
               + (f" ({shown} shown)" if found.truncated else "") + f" ({found.seconds * 1000:.0f} ms)")
    body = "\n".join(f"{escaped(f.path)}{':' if g.matched else '-'}{g.line}{':' if g.matched else '-'}{escaped(utf8_safe(g.shown))}"
                     for f in found.files for g in f.lines)
    return answer(with_note(summary, found.note(words)), found.to_dict(words), body)
