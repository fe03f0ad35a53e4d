"""MCP tools that build and manage indexes: index_codebase, get_indexing_status, clear_index, list_codebases."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from ..errors import UsageError
from ..service import clear_target, is_index_file
from .app import (
    DEFAULT_MAX_TOKENS,
    READ_ONLY,
    SESSION,
    ListTokensArg,
    OffsetArg,
    PathArg,
    StatusTokensArg,
    agent_errors,
    answer,
    check_path,
    codebase_at,
    refuse_shard_folder,
    server,
    with_note,
)
from .words import words

#: Members an index_codebase summary names one per line at most (the JSON lists up to 50).
LISTED_ROWS = 20


@server.tool(
    description=(
        "Index a codebase for search_code, in the background: returns at once with status 'started', "
        "'already indexing' (a build is running, maybe in another process) or 'already up to date'. Poll "
        "get_indexing_status until 'indexed'. Re-run after code changes: only changed files are re-embedded. "
        "force=true re-reads and re-chunks every file (search keeps working meanwhile). customExtensions LIMITS indexing to files with those extensions "
        "(e.g. ['.py', '.md']); by default every text file not ignored is indexed. ignorePatterns adds "
        "gitignore-style patterns on top of .gitignore/.codiiignore (they only exclude: a negation '!x' is refused)."),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False),
)
@agent_errors
def index_codebase(
    path: Annotated[str, Field(description="Absolute path of the codebase root directory (or use workspace).")] = "",
    force: Annotated[bool, Field(description="Re-read and re-chunk every file (in place; emptied first only after a model change).")] = False,
    customExtensions: Annotated[list[str], Field(  # noqa: N803 - the name agents already use
        max_length=100, description="Index ONLY files ending in these extensions, e.g. ['.py']; [] = as the last build "
                    "(all text files at first).")] = [],
    ignorePatterns: Annotated[list[str], Field(  # noqa: N803
        max_length=1000, description="Extra gitignore-style patterns to exclude, e.g. ['tests/fixtures/']; [] = as the "
                    "last build.")] = [],
    resetFilters: Annotated[bool, Field(  # noqa: N803
        description="Forget customExtensions/ignorePatterns recorded by earlier builds; [] then means all files.")] = False,
    embedder: Annotated[str | None, Field(
        max_length=200, description="Embedding model: local (bundled, offline; default), local:fast, "
                                    "ollama:MODEL or openai:MODEL (the server's OLLAMA_HOST / OPENAI_BASE_URL); "
                                    "another than the index's needs force=true.")] = None,
    workspace: Annotated[str | None, Field(max_length=200, description="Index every codebase of this workspace "
                                                                       "instead of path (see list_workspaces).")] = None,
    workers: Annotated[int | None, Field(ge=0, le=64, description="Chunking processes (0: one per core, up to 4); "
                                                                  "null: as the last build.")] = None,
) -> CallToolResult:
    if workspace:
        data = SESSION.index_workspace(workspace, force=force, embedder=embedder, words=words)
        rows = data["codebases"]
        lines = "".join(f"\n- {row['codebase']}: {row['status']}" for row in rows[:LISTED_ROWS])
        more = len(rows) - LISTED_ROWS + sum(data.get("codebases_left_out", {}).values())
        lines += f"\n- and {more} more (list_workspaces lists every member)" if more > 0 else ""
        summary = with_note(f"workspace {data['workspace']}: poll get_indexing_status for each member{lines}",
                            data.get("note"))
        return answer(summary, data, "")
    everything = [p for p in ignorePatterns if p.strip().strip("/") in ("*", "**", "**/*", "*.*")]
    if everything:
        # Kept for every later build, whoever runs it: an agent's ['*'] emptied a user's index.
        raise ToolError(f"ignorePatterns {everything[0]!r} would leave every file out of the index: pass the "
                        "folders or files to leave out")
    negations = [p for p in ignorePatterns if p.lstrip().startswith("!")]
    if negations:
        # A negation would take back what the user's rules leave out, secrets included (.env, keys):
        # that is the user's call, in the codebase's .codiiignore, not a tool argument's.
        raise ToolError(f"ignorePatterns may only leave files out: {negations[0]!r} is a negation; the user can take "
                        "files back in the codebase's .codiiignore")
    data, hint = SESSION.index(codebase_at(path, enclosing=False), force=force, extensions=customExtensions,
                               ignore_patterns=ignorePatterns, reset_filters=resetFilters, embedder=embedder,
                               workers=workers)
    return answer(f"{data['codebase']}: {data['status']}; {hint}.", data)


@server.tool(
    description=(
        "Indexing state of a codebase: status is not_indexed, indexing, indexed, failed or stale (files changed "
        "since the last build: call index_codebase to update). Includes phase, percent, files and chunks "
        "done/total, vectors {done, total, state, eta_seconds}, skipped files by reason (skipped) and by path "
        "(skipped_files: the first 200 with their reason, as many as fit in max_tokens, default 6,000), last error, last "
        "indexed time and watched_by (processes keeping it fresh on file changes: this server does so for every "
        "codebase it indexed or searched). A build first makes every file searchable by BM25 (phase scan/hash/chunk), then embeds "
        "(phase vectors): search_code works during both. A build killed mid-way shows 'failed'; index_codebase "
        "then resumes it."),
    annotations=READ_ONLY,
)
@agent_errors
def get_indexing_status(path: PathArg, max_tokens: StatusTokensArg = None) -> CallToolResult:
    # The folder's own index when it has one or this server builds it, else the index that answers for it,
    # as search_code reads it (a new user's agent was told a subfolder search_code answered from was not indexed).
    own = codebase_at(path, enclosing=False)
    cb = own if own.db_path.is_file() or SESSION.jobs.locked(own) else codebase_at(path)
    data = SESSION.indexing_status(cb, max_tokens or DEFAULT_MAX_TOKENS)
    summary = f"{data['codebase']}: {data['status']}"
    vectors = data.get("vectors") or {}  # absent with no index and no build
    if data["status"] == "indexing" and data["phase"] == "vectors":
        left = vectors.get("eta_seconds")
        eta = "" if not left else f", about {left} s left" if left < 90 else f", about {round(left / 60)} min left"
        summary += (f" (every file searchable by BM25; vectors {vectors['done']}/{vectors['total']} chunks embedded, "
                    f"the build {data['percent']}% done{eta})")
    elif data["status"] == "indexing":
        files = data["files"]
        summary += f" ({data['phase']}, {files['done']}/{files['total']} files, {data['percent']}%)"
    elif data["status"] in ("indexed", "stale"):
        summary += f" ({data['files']['indexed']} files, {data['chunks']['indexed']} chunks)"
        if vectors.get("state") == "pending":
            summary += (f"; {vectors['total'] - vectors['done']} chunks have no vector yet: call index_codebase "
                        "to embed them")
    elif data["status"] == "failed":
        summary += f": {data['last_error']}" + ("; call index_codebase to resume" if data.get("resumable", True) else "")
    summary = with_note(summary, data.get("note"))
    return answer(summary, data)


@server.tool(
    description="Delete a codebase's index (its .db file). Refused while it is being indexed. Source files are not touched.",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
)
@agent_errors
def clear_index(path: PathArg) -> CallToolResult:
    path = check_path(path)
    if is_index_file(path):  # a new user's agent was told to pass the folder holding it
        raise UsageError(f"{path} is an index file searched alone (a shard or an export): clear_index deletes the "
                         "index of a codebase folder", "delete the file, or move it out of the folder served, "
                         "to stop searching it")
    cb = clear_target(refuse_shard_folder(path))  # also the index of a folder that is gone
    cleared = SESSION.clear(cb)
    data = {"codebase": str(cb.root), "cleared": cleared}
    return answer(f"{cb.root}: {'index deleted' if cleared else 'was not indexed'}.", data)


@server.tool(
    description=("List the indexed codebases: root, status, files, chunks, index size in bytes and last indexed "
                 "time; at most limit of them and max_tokens (default 6,000) from offset on (total says how many "
                 "there are, next_offset where a cut list goes on)."),
    annotations=READ_ONLY,
)
@agent_errors
def list_codebases(
    limit: Annotated[int, Field(ge=1, le=1000, description="Codebases at most.")] = 100,
    offset: OffsetArg = 0,
    max_tokens: ListTokensArg = None,
) -> CallToolResult:
    data = SESSION.list_codebases(limit=limit, offset=offset, max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    rows = data["codebases"]
    summary = f"{data['total']} indexed codebases" + (
        f" ({len(rows)} shown: call again with offset={data['next_offset']} for the rest)" if data.get("truncated")
        else "") + "".join(
        f"\n- {r.get('root') or r['db']}: {r.get('status')}, " + (
            f"{r['files']} files, {r['chunks']} chunks" if "files" in r else f"{r['size_bytes']} bytes: {r.get('error')}")
        for r in rows)
    return answer(summary, data)


@server.tool(
    description=(
        "List the workspaces (named sets of codebases, from WORKSPACE_<NAME> variables of the server's environment "
        "or `codii-sql workspace add`): each member's status (indexed, stale, indexing, not_indexed, failed, "
        "missing), files, chunks and index size, as many members as fit in max_tokens (default 6,000; "
        "more_members counts the others). search_code and index_codebase take a workspace name."),
    annotations=READ_ONLY,
)
@agent_errors
def list_workspaces(max_tokens: ListTokensArg = None) -> CallToolResult:
    data = SESSION.list_workspaces(max_tokens or DEFAULT_MAX_TOKENS)
    rows = data["workspaces"]
    more = f" ({data['more_workspaces']} more not listed)" if data.get("more_workspaces") else ""
    summary = f"{len(rows)} workspaces{more}" + "".join(
        f"\n- {ws['name']} ({ws['source']}): " + ", ".join(f"{m['codebase']} {m['status']}" for m in ws["members"])
        + (f"{' and' if ws['members'] else ''} {ws['more_members']} more" if ws.get("more_members") else "")
        for ws in rows)
    return answer(with_note(summary, data.get("note")), data)
