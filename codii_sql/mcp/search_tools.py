"""MCP tools that search: search_code (hybrid, BM25 or vector) and find_similar_code."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import Field

from ..errors import Remedy
from ..service import AGENT_LISTING, MAX_QUERY_CHARS, ROLES, SearchOptions, SearchRequest, listing
from ..text import escaped
from .app import (
    DEFAULT_MAX_TOKENS,
    MAX_SEARCH_LIMIT,
    READ_ONLY,
    SESSION,
    FileArg,
    LineArg,
    PathArg,
    SearchTokensArg,
    agent_errors,
    answer,
    check_path,
    codebase_at,
    file_of,
    is_shard_folder,
    server,
    with_note,
)
from .words import words


@server.tool(
    description=(
        "Search an indexed codebase with natural language or identifiers (hybrid BM25 + embedding search, "
        "fused by RRF). Returns chunks with path, start_line/end_line (1-based, inclusive), score, language, "
        "kind, symbol, content and stale (file changed since indexing), and no_good_match: true when nothing "
        "matched well (no named symbol, no chunk holding every query word, nearest chunk's cosine best_cosine "
        "under 0.33): the thing asked for is likely not in this codebase. A path inside an indexed codebase "
        "searches that codebase's files under it. Does not index: if the codebase is "
        "not indexed, call index_codebase first; while indexing runs, results come from the last committed "
        "state. mode: hybrid (default), bm25 (exact words/identifiers) or vector (meaning). workspace (in place "
        "of path, or with it) searches every codebase of a workspace at once (list_workspaces names them): one "
        "ranked list whose results carry their codebase. A path may also be an index file (.db) searched alone; "
        "on a server started with --shards DIR, no path and no workspace searches every index file of DIR."),
    annotations=READ_ONLY,
)
@agent_errors
def search_code(
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for: words, identifiers or a question.")],
    path: Annotated[str, Field(description="Absolute path of the codebase root directory (or use workspace).")] = "",
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="Number of results.")] = 10,
    extensionFilter: Annotated[list[str], Field(  # noqa: N803
        max_length=50, description="Keep only files with these extensions, e.g. ['.ts', '.tsx']; [] = all.")] = [],
    pathGlob: Annotated[Annotated[str, Field(max_length=1000)]  # noqa: N803
                        | Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=1)] | None, Field(
        description="Glob over the relative path, e.g. 'src/*' or '*_test.go' (one; a list of one is taken, as "
                    "grep_code's); * also matches /.")] = None,
    mode: Annotated[Literal["hybrid", "bm25", "vector"], Field(description="Retrieval mode.")] = "hybrid",
    rerank: Annotated[bool, Field(description="Re-score the top 30 fused results with the cross-encoder of "
                                              "$CODII_SQL_RERANK_MODEL, when the server has one.")] = False,
    workspace: Annotated[str | None, Field(max_length=200, description="A workspace to search instead of (or besides) "
                                                                       "path; see list_workspaces.")] = None,
    language: Annotated[str | None, Field(max_length=50, description="Keep only chunks of this language, e.g. "
                                                                     "'python', 'typescript'.")] = None,
    role: Annotated[Literal[ROLES] | None, Field(description="Keep only files of this role, e.g. 'source' (no tests, "
                                                             "docs or generated files) or 'test'.")] = None,
    group_by: Annotated[Literal["chunk", "file"], Field(description="file: one result per file, ranked by its best "
                                                                    "chunk.")] = "chunk",
    grep: Annotated[str | None, Field(max_length=1000, description="Keep only chunks holding a line this regular "
                                                                   "expression (Python re) matches, as grep_code "
                                                                   "finds them.")] = None,
    max_tokens: SearchTokensArg = None,
) -> CallToolResult:
    if isinstance(pathGlob, list):  # an agent passes grep_code's form (a list was refused: "should be a valid string")
        pathGlob = pathGlob[0] if pathGlob else None
    opts = SearchOptions(limit=limit, mode=mode, exts=list(extensionFilter), glob=pathGlob or None, rerank=rerank,
                         language=language or None, role=role, group_by_file=group_by == "file", grep=grep or None,
                         max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    folder, whole_folder = SESSION.shards, is_shard_folder(path)
    if folder is not None and ((workspace or "").lower() == folder.name.lower() or not (path.strip() or workspace)
                               or whole_folder):
        path = "" if whole_folder else path  # the folder itself: every shard in it
        # The server's folder of index files (serve --shards): each searched alone; a path names one.
        request = SearchRequest(query, opts, [path] if path.strip() else [], shards=str(folder.folder))
    else:
        request = SearchRequest(query, opts, [path] if path.strip() or not workspace else [], workspace or None)
        if not workspace:
            request.paths = [check_path(path)]
    found = SESSION.search(request)
    data = found.to_dict(words)
    n = len(found.results)
    where = (f"workspace {found.workspace or '-'}: " + found.named_members() if found.many
             else f"{found.codebase}/{found.scope}" if found.scope else found.codebase)
    summary = f"{n} result{'' if n == 1 else 's'} for {found.shown_query!r} in {where} ({found.seconds * 1000:.0f} ms)"
    return answer(with_note(summary, found.note(words)), data,
                  "\n".join(listing(found.results, AGENT_LISTING, with_codebase=found.many, safe=escaped)))


@server.tool(
    description=(
        "Find code most similar to a file, or to a line range of it, in the same indexed codebase (embedding "
        "similarity over the file's stored chunk vectors). Returns at most one result per file, the query file "
        "excluded, each with path, lines, score and content. The file must be indexed."),
    annotations=READ_ONLY,
)
@agent_errors
def find_similar_code(
    path: PathArg,
    file: FileArg,
    start_line: LineArg = None,
    end_line: LineArg = None,
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="Number of files returned.")] = 10,
    max_tokens: SearchTokensArg = None,
) -> CallToolResult:
    cb = codebase_at(path)
    data, results = SESSION.similar(cb, file_of(path, cb, file), start_line, end_line, limit,
                                    max_tokens or DEFAULT_MAX_TOKENS)
    span = f" lines {start_line or 1}-{end_line or 'end'}" if start_line or end_line else ""
    summary = f"{len(results)} files similar to {data['file']}{span}"
    if data.get("note"):
        data["note"] = f"{data['note']}; {words(Remedy('read_rest'))}"
    summary = with_note(summary, data.get("note"))
    return answer(summary, data, "\n".join(listing(results, AGENT_LISTING, safe=escaped)))

