"""MCP tools that read code back through the file boundary: get_content and get_chunk."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from .app import (
    DEFAULT_MAX_TOKENS,
    READ_ONLY,
    SESSION,
    FileArg,
    LineArg,
    MaxTokensArg,
    SQLITE_MAX_INTEGER,
    PathArg,
    agent_errors,
    answer,
    codebase_at,
    file_of,
    numbered,
    server,
)


@server.tool(
    description=(
        "Read a file of an indexed codebase, whole or a line range, as exact text plus a line-numbered view. "
        "Lines are 1-based and inclusive; at most 2000 lines and max_tokens (default 6,000) per call "
        "(next_start_line says where to go on; a longer line is cut, truncated says so, and next_start_column "
        "where its rest starts: pass it as start_column). "
        "Only files inside the codebase root and not excluded by its ignore rules can be read."),
    annotations=READ_ONLY,
)
@agent_errors
def get_content(path: PathArg, file: FileArg, start_line: LineArg = None, end_line: LineArg = None,
                max_tokens: MaxTokensArg = None,
                start_column: Annotated[int | None, Field(ge=1, le=SQLITE_MAX_INTEGER, description=(
                    "Start the first line at this character (1-based): the rest of a line too long to show "
                    "whole, from next_start_column."))] = None) -> CallToolResult:
    cb = codebase_at(path)
    data = SESSION.content(cb, file_of(path, cb, file), start_line, end_line, max_tokens or DEFAULT_MAX_TOKENS,
                           start_column)
    start, end, total = data["start_line"], data["end_line"], data["total_lines"]
    go_on = (f"start_line={data['next_start_line']}, start_column={data['next_start_column']}"
             if "next_start_column" in data else f"start_line={data.get('next_start_line')}")
    summary = f"{data['path']} lines {start}-{end} of {total}" + (
        f" (truncated: continue at {go_on})" if "next_start_line" in data else "") + (
        f"\nNote: {data['truncated']}" if "truncated" in data else "")
    return answer(summary, data, numbered(data["content"], start))


@server.tool(
    description=(
        "Get one indexed chunk by its id (the 'id' field of search_code results): exact indexed text with line "
        "numbers, path, lines, kind, symbol and stale (the file changed since indexing); at most max_tokens "
        "(default 6,000) of its lines (truncated and next_start_line say where get_content goes on). Ids change "
        "when a file is re-indexed: search again if one is gone."),
    annotations=READ_ONLY,
)
@agent_errors
def get_chunk(path: PathArg, chunk_id: Annotated[int, Field(ge=1, le=SQLITE_MAX_INTEGER, description="Chunk id from search_code.")],
              max_tokens: MaxTokensArg = None) -> CallToolResult:
    data = SESSION.chunk(codebase_at(path), chunk_id, max_tokens or DEFAULT_MAX_TOKENS)
    summary = (f"chunk {data['id']}: {data['path']}:{data['start_line']}-{data['end_line']} "
               f"{data['symbol'] or data['kind']}" + (" [stale: the file changed since indexing]" if data["stale"] else "")) + (
        f"\nNote: {data['truncated']}: get_content with start_line={data['next_start_line']} reads on"
        if "truncated" in data else "")
    return answer(summary, data, numbered(data["content"], data["start_line"], data.get("shown_end_line", data["end_line"])))
