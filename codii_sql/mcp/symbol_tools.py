"""MCP tools that navigate by symbol: get_file_outline, find_symbol and find_references."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from ..codebase import Codebase
from ..service import find_codebase
from ..service import find_references as find_uses
from ..service import find_symbol as find_definitions
from ..text import escaped
from .app import (
    DEFAULT_MAX_TOKENS,
    READ_ONLY,
    SESSION,
    SQLITE_MAX_INTEGER,
    FileArg,
    ListTokensArg,
    OffsetArg,
    PathArg,
    agent_errors,
    answer,
    check_path,
    codebase_at,
    file_of,
    refuse_shard_folder,
    server,
    with_note,
)


@server.tool(
    description=(
        "Outline of one file: its classes, functions, methods... nested as in the source, each with kind, "
        "qualified symbol, start_line/end_line (1-based, inclusive; decorators and leading comments included) "
        "and signature (its first line of code). Cheaper than reading the file to find where things are. At "
        "most limit definitions and max_tokens (default 6,000) from start_line on: a cut outline says truncated "
        "and next_start_line."),
    annotations=READ_ONLY,
)
@agent_errors
def get_file_outline(
    path: PathArg,
    file: FileArg,
    start_line: Annotated[int, Field(ge=1, le=SQLITE_MAX_INTEGER, description="Definitions from this line on.")] = 1,
    limit: Annotated[int, Field(ge=1, le=1000, description="Definitions at most.")] = 300,
    max_tokens: ListTokensArg = None,
) -> CallToolResult:
    cb = codebase_at(path)
    data = SESSION.outline(cb, file_of(path, cb, file), limit=limit, start_line=start_line,
                           max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    lines = []

    def walk(nodes: list[dict], depth: int) -> None:
        for n in nodes:
            lines.append(f"{'  ' * depth}{n['start_line']}-{n['end_line']} {n['kind']} {n['symbol']}: {n['signature']}")
            walk(n["children"], depth + 1)

    walk(data["symbols"], 0)
    summary = f"{data['path']} ({data['language'] or 'text'}): {len(data['symbols'])} top-level definition{'' if len(data['symbols']) == 1 else 's'}" + (
        f" (cut: call again with start_line={data['next_start_line']} for the rest)" if data.get("truncated") else "")
    summary = with_note(summary, data.get("note"))
    return answer(summary, data, "\n".join(lines))


@server.tool(
    description=(
        "Where a symbol is defined, from the index: by exact name (parse_header), qualified name (Session.send, "
        "pkg.module.func, Type::method; generics like <'a> ignored) or, with prefix=true, its start. Each "
        "definition has path, symbol, kind, start_line/end_line (1-based, inclusive), signature, role and match "
        "(exact, qualified, prefix, or name: nothing is qualified as asked, e.g. requests.get, and these end in its "
        "longest tail that some symbol ends in) and stale (the file changed since the index took it); exact matches and source files come first. At most limit definitions "
        "and max_tokens (default 6,000) from offset on: a cut answer says truncated, total and next_offset. "
        "A path that is a subfolder of an indexed codebase keeps to its files. For uses, find_references."),
    annotations=READ_ONLY,
)
@agent_errors
def find_symbol(
    path: PathArg,
    name: Annotated[str, Field(min_length=1, max_length=500, description="The symbol, e.g. send or Session.send.")],
    kind: Annotated[str | None, Field(max_length=40, description="Only this kind: function, method, class, type (any type: classes, structs, interfaces, aliases), macro, constant, variable or section (Markdown).")] = None,
    prefix: Annotated[bool, Field(description="Also symbols starting with name.")] = False,
    limit: Annotated[int, Field(ge=1, le=100, description="Definitions at most.")] = 20,
    offset: OffsetArg = 0,
    max_tokens: ListTokensArg = None,
) -> CallToolResult:
    cb, under = _indexed(path)
    data = find_definitions(cb, name, kind=kind, prefix=prefix, limit=limit, offset=offset, under=under,
                            max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    defs = data["definitions"]
    where = f"{cb.root}/{under}" if under else cb.shown  # the folder asked about, not the whole codebase
    total = max(data.get("total") or 0, data.get("offset", 0) + len(defs))  # a cut answer lists fewer than it found
    shown = f"{len(defs)} of {total:,}" if total > len(defs) else f"{len(defs)}"
    summary = f"{shown} definition{'' if total == 1 else 's'} of {data['name']!r} in {where}"
    summary = with_note(summary, data.get("note"))
    body = "\n".join(f"{escaped(d['path'])}:{d['start_line']}-{d['end_line']} {d['kind']} {d['symbol']}: {d['signature']}"
                     + ("  [stale]" if d["stale"] else "") for d in defs)
    return answer(summary, data, body)


@server.tool(
    description=(
        "Where an identifier is used: every occurrence on identifier boundaries, with its exact 1-based line "
        "and text, grouped by file (source first), the name's definitions excluded; for Session.send it looks "
        "for send. Lexical (a same-named other thing counts too), from the indexed text. At most limit lines "
        "and max_tokens (default 6,000) from offset on: total, truncated and next_offset say how many there are "
        "and where the next call starts. A path that is a subfolder of an indexed codebase keeps to its files."),
    annotations=READ_ONLY,
)
@agent_errors
def find_references(
    path: PathArg,
    name: Annotated[str, Field(min_length=1, max_length=500, description="The identifier, e.g. merge_setting.")],
    limit: Annotated[int, Field(ge=1, le=500, description="Lines at most.")] = 100,
    offset: OffsetArg = 0,
    max_tokens: ListTokensArg = None,
) -> CallToolResult:
    cb, under = _indexed(path)
    data = find_uses(cb, name, limit=limit, offset=offset, max_tokens=max_tokens or DEFAULT_MAX_TOKENS, under=under)
    shown = sum(len(f["lines"]) for f in data["files"])
    where = f"{cb.root}/{under}" if under else cb.shown
    summary = (f"{data['total']} uses of {data['identifier']!r} in {data['total_files']} files of {where}"
               + (f" ({shown} shown: call again with offset={data['next_offset']} for the rest)"
                  if data.get("next_offset") is not None else "") + f"; {data['note']}")
    body = "\n".join(f"{escaped(f['path'])}:{ln['line']}: {escaped(ln['text'])}" for f in data["files"] for ln in f["lines"])
    return answer(summary, data, body)


def _indexed(path: str) -> tuple[Codebase, str | None]:
    """The indexed codebase holding ``path`` and the subfolder ``path`` names in it (None: the whole), as
    a CLI call from that folder keeps to its files; brought up to date first when this server does not
    follow it yet (:meth:`~codii_sql.service.session.Session.require_index`)."""
    cb, scope = find_codebase(refuse_shard_folder(check_path(path)))
    SESSION.require_index(cb)
    return cb, scope or None
