"""MCP tools over a codebase's history: search_history (commits and hunks) and explain_line (blame, then git log -L)."""

from __future__ import annotations

import datetime
from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from ..service import (
    DEFAULT_WHY_LIMIT,
    MAX_HISTORY_LIMIT,
    MAX_QUERY_CHARS,
    MAX_WHY_LIMIT,
    HistoryRequest,
    explain_served_line as explain,
    search_history as search,
)
from .app import (
    DEFAULT_MAX_TOKENS,
    READ_ONLY,
    FileArg,
    MaxTokensArg,
    PathArg,
    agent_errors,
    answer,
    check_path,
    codebase_at,
    file_of,
    server,
    with_note,
)
from .words import words


@server.tool(
    description=(
        "Search the git history of an indexed codebase: commit messages and diff hunks by BM25 and commits by "
        "embedding similarity, fused by RRF. One result per commit: sha, date (unix seconds), author, subject, "
        "body, files, and its matching hunks (path, old_start/old_lines, new_start/new_lines, content as a "
        "unified diff). Use it for 'when/why did X change', 'which commit added Y'. The codebase must be "
        "indexed (index_codebase reads the history of the branch the work tree is on; new commits are read "
        "before each search). pathGlob keeps commits with a hunk in matching paths; since is a date (2024-01-31)."),
    annotations=READ_ONLY,
)
@agent_errors
def search_history(
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What changed: words, identifiers or a question.")],
    path: PathArg,
    pathGlob: Annotated[str | None, Field(  # noqa: N803
        max_length=1000, description="Glob over a hunk's relative path, e.g. 'src/*' ; * also matches /.")] = None,
    since: Annotated[str | None, Field(max_length=40, description="Only commits authored on or after this date, "
                                                                  "e.g. 2024-01-31.")] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_HISTORY_LIMIT, description="Number of commits.")] = 10,
    max_tokens: MaxTokensArg = None,
) -> CallToolResult:
    found = search(HistoryRequest(query, check_path(path), pathGlob or None, since, limit,
                                  max_tokens or DEFAULT_MAX_TOKENS))
    n = len(found.results)
    summary = f"{n} commit{'' if n == 1 else 's'} for {query[:200]!r} in {found.codebase} ({found.seconds * 1000:.0f} ms)"
    return answer(with_note(summary, found.note(words)), found.to_dict(words), _listing(found.results))


@server.tool(
    description=(
        "Explain one line of a file by the commits that made it what it is: git blame names the last commit "
        "that changed it, git log -L follows the line back through earlier commits (renames followed). Each "
        "commit with sha, date (unix seconds), author, subject, body and the hunk of that line. Needs a git "
        "work tree, not an index. file is relative to path, and must be a file get_content may read; line is 1-based."),
    annotations=READ_ONLY,
)
@agent_errors
def explain_line(
    path: PathArg,
    file: FileArg,
    line: Annotated[int, Field(ge=1, le=10_000_000, description="1-based line number in the file as it is on disk.")],
    limit: Annotated[int, Field(ge=1, le=MAX_WHY_LIMIT, description="Commits at most, newest first.")] = DEFAULT_WHY_LIMIT,
    max_tokens: MaxTokensArg = None,
) -> CallToolResult:
    cb = codebase_at(path)
    found = explain(cb, file_of(path, cb, file), line, limit=limit, max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    n = len(found.results)
    summary = f"{n} commit{'' if n == 1 else 's'} made {found.file}:{found.line} what it is"
    return answer(with_note(summary, found.note(words)), found.to_dict(words), _listing(found.results))


def _listing(results) -> str:
    """The commits as text: ``sha date author: subject``, the body, each hunk under its path."""
    out = []
    for hit in results:
        date = datetime.datetime.fromtimestamp(hit.date, datetime.timezone.utc).date().isoformat()
        out.append(f"{hit.sha[:12]} {date} {hit.author}: {hit.subject}")
        out += [f"  {ln}" for ln in hit.body.split("\n") if ln.strip()]
        for h in hit.hunks:
            out.append(f"  {h.path}" + (f" (from {h.old_path})" if h.old_path else ""))
            out += [f"    {ln}" for ln in h.content.split("\n")]
    return "\n".join(out)
