"""The MCP server (stdio) for coding agents, on the same engine as the CLI.

Tools keep the names and parameters agents know from Codii and claude-context
(``index_codebase``, ``get_indexing_status``, ``search_code``, ``clear_index``) and add
``list_codebases``, ``find_similar_code``, ``get_content`` and ``get_chunk``. Every tool
returns ``structured_content`` (JSON) plus two text blocks: a short summary and the same
JSON (clients that only read text content still see every field).

Concurrency: builds run in a background thread per codebase (the tool call returns at
once); the cross-process writer lock of :mod:`index` makes one indexer per codebase across
the CLI and any number of servers. Searches read the last committed state through one
cached connection per codebase; the model loads on the first embedding, not at start-up.
Files are read back only through :mod:`safe_paths`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import apsw
import numpy as np
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from . import api, safe_paths
from .ingest.config import normalize_extensions
from .codebase import Codebase
from .errors import CodiiError, DamagedIndexError, IndexBusyError, IndexMismatchError, UsageError
from .search.results import Result, SearchOptions
from .search.searcher import Searcher
from .search.staleness import StaleCheck
from .storage.store import Store
from .text import decode_source

#: search_code's result bound: enough for an agent to pick from, small enough for its context.
MAX_SEARCH_LIMIT = 50
#: get_content returns at most this many lines per call (then ``next_start_line``).
MAX_CONTENT_LINES = 2000
#: Seconds index_codebase waits for its build thread to take the writer lock (or learn that
#: another process holds it), so that the answer says which of the two happened.
START_WAIT_SECONDS = 2.0
#: Seconds the server waits at exit for a cancelled build to commit its current batch.
SHUTDOWN_WAIT_SECONDS = 5.0


class BuildCancelled(Exception):
    """Raised from the progress callback to stop a build at a batch boundary (server exit)."""


def _agent_errors(fn):
    """Turn :class:`CodiiError` into :class:`ToolError`, whose one-line message reaches the agent."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (IndexMismatchError, DamagedIndexError) as err:
            raise ToolError(f"{err} (over MCP: call index_codebase with force=true)") from None
        except CodiiError as err:
            raise ToolError(str(err)) from None
        except apsw.Error as err:  # broken pages found while reading rows
            if api.disk_was_full(err):  # a write failure, not a damaged index
                raise ToolError("the disk is full (SQLite could not write): free some space, then call the tool "
                                "again (the index keeps its last committed state)") from None
            raise ToolError(f"reading the index failed ({err}): call index_codebase with force=true to "
                            "replace a damaged index") from None

    return wrapper


def _iso(ts: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds") if ts else None


def _answer(summary: str, data: dict, body: str | None = None) -> CallToolResult:
    """A tool result: ``data`` as structured content, and text blocks ``summary`` then ``body`` (default: the JSON)."""
    text = body if body is not None else json.dumps(data, ensure_ascii=False, indent=1, default=str)
    return CallToolResult(content=[TextContent(type="text", text=summary), TextContent(type="text", text=text)],
                          structured_content=data)


# -- background builds ----------------------------------------------------------------------


@dataclass
class Job:
    """One background build in this process. ``outcome``: running, indexed, failed, busy, cancelled."""

    codebase: Codebase
    started_at: float = field(default_factory=time.time)
    phase: str = "scan"
    done: int = 0
    total: int = 0
    outcome: str = "running"
    error: str | None = None
    finished_at: float | None = None
    report: dict | None = None
    warnings: list[str] = field(default_factory=list)
    signal: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self.outcome == "running"


class Jobs:
    """Background builds and every writer-lock probe of this process.

    ``api.is_locked`` probes by taking the lock for an instant, which would make a build starting
    in that instant fail as busy; so probes and build starts of one codebase are serialised here.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._codebase_locks: dict[str, threading.Lock] = {}
        self.cancel = threading.Event()

    @contextlib.contextmanager
    def guard(self, cb: Codebase) -> Iterator[Job | None]:
        """Hold ``cb``'s lock; yields its latest in-process job (or None)."""
        key = str(cb.db_path)
        with self._lock:
            lock = self._codebase_locks.setdefault(key, threading.Lock())
        with lock:
            yield self._jobs.get(key)

    def status(self, cb: Codebase) -> tuple[dict, Job | None]:
        """``api.status`` (probing the lock safely) and the latest in-process job."""
        with self.guard(cb) as job:
            return api.status(cb), job

    def locked(self, cb: Codebase) -> bool:
        """Whether any process is indexing ``cb``."""
        with self.guard(cb) as job:
            return (job is not None and job.alive) or api.is_locked(cb)

    def start(self, cb: Codebase, force: bool, ignore_patterns: list[str] | None, extensions: list[str] | None) -> str:
        """Start a build unless one runs or the index is current: ``started``, ``already indexing``,
        ``already up to date``.

        Raises:
            ToolError: the build failed at once (bad ``.codii.yaml``, model/index mismatch...).
        """
        with self.guard(cb) as job:
            if (job is not None and job.alive) or api.is_locked(cb):
                return "already indexing"
            if not force and api.status(cb, check_stale=False)["status"] == "indexed" \
                    and not api.is_stale(cb, ignore_patterns, extensions):
                return "already up to date"
            job = Job(cb)
            job.thread = threading.Thread(target=self._run, args=(job, force, ignore_patterns, extensions),
                                          name=f"codii-build-{cb.root.name}", daemon=True)
            self._jobs[str(cb.db_path)] = job
            job.thread.start()
            job.signal.wait(START_WAIT_SECONDS)
        if job.outcome == "busy":
            return "already indexing"
        if job.outcome == "failed":
            raise ToolError(f"indexing failed: {job.error}")
        return "started"

    def _run(self, job: Job, force: bool, ignore_patterns: list[str] | None, extensions: list[str] | None) -> None:
        def progress(phase: str, done: int, total: int) -> None:
            if self.cancel.is_set():
                raise BuildCancelled("the MCP server shut down; call index_codebase to resume")
            job.phase, job.done, job.total = phase, done, total
            job.signal.set()

        try:
            report = api.build(job.codebase, force=force, wait=False, progress=progress, warn=job.warnings.append,
                               ignore_patterns=ignore_patterns, extensions=extensions)
            job.report = report.to_dict()
            job.outcome, job.phase = "indexed", "done"
        except IndexBusyError:
            job.outcome = "busy"
        except BuildCancelled as err:
            job.outcome, job.error = "cancelled", str(err)
        except Exception as err:  # reported through get_indexing_status; the thread must not die silently
            job.outcome = "failed"
            job.error = str(err) if isinstance(err, CodiiError) else f"{type(err).__name__}: {err}"
        finally:
            job.finished_at = time.time()
            job.signal.set()

    def shutdown(self) -> None:
        """Stop running builds at their next batch commit; wait a little for them."""
        self.cancel.set()
        deadline = time.monotonic() + SHUTDOWN_WAIT_SECONDS
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join(max(0.0, deadline - time.monotonic()))


# -- open indexes and file boundaries ----------------------------------------------------------


@dataclass
class _Open:
    searcher: Searcher
    identity: tuple[int, int]
    lock: threading.Lock = field(default_factory=threading.Lock)


class OpenIndexes:
    """One read connection per index, reused across calls; reopened when the file is replaced.

    An apsw connection must not run two statements at once from two threads, so each is used
    under its own lock.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        self._filesets: dict[str, tuple[str, safe_paths.FileSet]] = {}

    @contextlib.contextmanager
    def searcher(self, cb: Codebase) -> Iterator[Searcher]:
        """The cached :class:`Searcher` of ``cb``, held exclusively for the ``with`` block.

        Raises:
            NotIndexedError, IndexMismatchError: see :func:`api.open_searcher`.
        """
        key = str(cb.db_path)
        with self._lock:
            entry = self._open.get(key)
            identity = _identity(cb.db_path)
            if entry is not None and entry.identity != identity:
                self._close(key)
                entry = None
            if entry is None:
                entry = self._open[key] = _Open(api.open_searcher(cb), identity)
        with entry.lock:
            yield entry.searcher

    def forget(self, cb: Codebase) -> None:
        """Close ``cb``'s connection (before its file is deleted)."""
        with self._lock:
            self._close(str(cb.db_path))
            self._filesets.pop(str(cb.db_path), None)

    def _close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        if entry is not None:
            with entry.lock:
                entry.searcher.store.close()

    def fileset(self, cb: Codebase) -> safe_paths.FileSet:
        """The boundary's file set for ``cb`` under its current rules (``.codii.yaml`` + last build's options)."""
        rules = api.scan_rules(cb)
        fingerprint = json.dumps(rules, sort_keys=True, default=list)
        key = str(cb.db_path)
        with self._lock:
            cached = self._filesets.get(key)
            if cached is None or cached[0] != fingerprint:
                cached = self._filesets[key] = (fingerprint, safe_paths.FileSet(cb.root, rules))
            return cached[1]


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


JOBS = Jobs()
INDEXES = OpenIndexes()


def _check_path(path: str) -> str:
    """``path`` unless it is empty: Path("") is the server's own working directory, which the
    agent never meant (and would index or read back that folder)."""
    if not path.strip():
        raise ToolError("path is empty: pass the codebase's absolute path")
    return path


def _open_codebase(path: str) -> Codebase:
    return Codebase.open(_check_path(path))


def _require_index(cb: Codebase) -> dict:
    """The codebase's status, or a tool error telling the agent to index it first."""
    st, job = JOBS.status(cb)
    if st["status"] != "not_indexed":
        return st
    if job is not None and job.alive:
        raise ToolError(f"{cb.root} is being indexed for the first time and has no committed chunks yet: "
                        "poll get_indexing_status and retry when it reports progress")
    outer = cb.enclosing()
    if outer is not None:
        raise ToolError(f"{cb.root} has no index of its own but lies inside the indexed codebase {outer.root}: "
                        f"pass path={str(outer.root)!r} (search_code accepts the subfolder as it is)")
    raise ToolError(f"{cb.root} is not indexed: call index_codebase with path={str(cb.root)!r} first, "
                    "then poll get_indexing_status until it reports 'indexed'")


# -- the tools ------------------------------------------------------------------------------

server = MCPServer(
    name="codii-sql",
    instructions=(
        "Local hybrid code search (BM25 + embeddings) over indexed codebases. Call index_codebase once per "
        "repository (it returns at once; poll get_indexing_status), then search_code with natural language or "
        "identifiers. Results carry path and 1-based inclusive line ranges; read more with get_content."),
    log_level="WARNING",
)

PathArg = Annotated[str, Field(description="Absolute path of the codebase root directory.")]
FileArg = Annotated[str, Field(description="File path relative to the codebase root (as search_code returns it), "
                                           "or an absolute path inside the root.")]
LineArg = Annotated[int | None, Field(ge=1, description="1-based line number, inclusive; null for the file's start/end.")]

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


@server.tool(
    description=(
        "Index a codebase for search_code, in the background: returns at once with status 'started', "
        "'already indexing' (a build is running, maybe in another process) or 'already up to date'. Poll "
        "get_indexing_status until 'indexed'. Re-run after code changes: only changed files are re-embedded. "
        "force=true re-reads and re-chunks every file (search keeps working meanwhile). customExtensions LIMITS indexing to files with those extensions "
        "(e.g. ['.py', '.md']); by default every text file not ignored is indexed. ignorePatterns adds "
        "gitignore-style patterns on top of .gitignore/.codiiignore."),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False),
)
@_agent_errors
def index_codebase(
    path: PathArg,
    force: Annotated[bool, Field(description="Re-read and re-chunk every file (in place; emptied first only after a model change).")] = False,
    customExtensions: Annotated[list[str], Field(  # noqa: N803 - the name agents already use
        max_length=100, description="Index ONLY files ending in these extensions, e.g. ['.py']; [] = as the last build "
                    "(all text files at first).")] = [],
    ignorePatterns: Annotated[list[str], Field(  # noqa: N803
        max_length=1000, description="Extra gitignore-style patterns to exclude, e.g. ['tests/fixtures/']; [] = as the "
                    "last build.")] = [],
    resetFilters: Annotated[bool, Field(  # noqa: N803
        description="Forget customExtensions/ignorePatterns recorded by earlier builds; [] then means all files.")] = False,
) -> CallToolResult:
    cb = _open_codebase(path)
    try:
        extensions = list(normalize_extensions(customExtensions)) if customExtensions else (
            [] if resetFilters else None)
    except ValueError as err:
        raise ToolError(str(err)) from None
    ignore = list(ignorePatterns) if ignorePatterns or resetFilters else None
    outcome = JOBS.start(cb, force, ignore, extensions)
    data = {"codebase": str(cb.root), "status": outcome}
    hint = {"started": "poll get_indexing_status", "already indexing": "poll get_indexing_status",
            "already up to date": "search_code is ready"}[outcome]
    if outcome == "already indexing" and (force or extensions is not None or ignore is not None):
        # The running build keeps its own options: say so rather than drop the request silently.
        hint += "; this call's force/filters were not applied: call index_codebase again when it finishes"
        data["options_applied"] = False
    return _answer(f"{cb.root}: {outcome}; {hint}.", data)


def _progress(st: dict, job: Job | None) -> dict:
    """Phase and file counts of a running build: the in-process job's (fresher) or the index's snapshot."""
    if job is not None and job.alive:
        return {"phase": job.phase, "done": job.done, "total": job.total}
    return {"phase": st.get("phase"), "done": st.get("files_done") or 0, "total": st.get("files_total") or 0}


@server.tool(
    description=(
        "Indexing state of a codebase: status is not_indexed, indexing, indexed, failed or stale (files changed "
        "since the last build: call index_codebase to update). Includes phase, percent, files and chunks "
        "done/total, skipped files by reason, last error and last indexed time. A build killed mid-way shows "
        "'failed'; index_codebase then resumes it."),
    annotations=_READ_ONLY,
)
@_agent_errors
def get_indexing_status(path: PathArg) -> CallToolResult:
    cb = _open_codebase(path)
    st, job = JOBS.status(cb)
    status = st["status"]
    error = st.get("error")
    if job is not None and job.alive and status == "not_indexed":
        status = "indexing"
    late_failure = job is not None and job.outcome in ("failed", "cancelled") and \
        (job.finished_at or 0) >= (st.get("last_indexed_at") or 0)
    if late_failure and status != "indexing":
        status, error = "failed", job.error
    prog = _progress(st, job)
    percent = 100 if status in ("indexed", "stale") else \
        min(99, round(100 * prog["done"] / prog["total"])) if status == "indexing" and prog["total"] else 0
    data = {
        "codebase": str(cb.root), "status": status, "phase": prog["phase"] if status == "indexing" else st.get("phase"),
        "percent": percent,
        "files": {"done": prog["done"], "total": prog["total"], "indexed": st.get("files", 0)},
        "chunks": {"indexed": st.get("chunks", 0), "total": st.get("chunks") if status in ("indexed", "stale") else None},
        "skipped": st.get("skipped") or {}, "failed_files": st.get("failed") or {},
        "last_error": error if status in ("failed", "indexing") else None,
        "last_indexed_at": _iso(st.get("last_indexed_at")), "build_seconds": st.get("build_seconds"),
        "size_bytes": st.get("size_bytes", 0), "db": st["db"],
    }
    if status == "indexing":
        data["indexer_pid"] = _meta(cb).get("pid")
    if job is not None and job.warnings:  # this server's latest build went on past them
        data["note"] = "; ".join(job.warnings)
    summary = f"{cb.root}: {status}"
    if status == "indexing":
        summary += f" ({data['phase']}, {prog['done']}/{prog['total']} files, {percent}%)"
    elif status in ("indexed", "stale"):
        summary += f" ({data['files']['indexed']} files, {data['chunks']['indexed']} chunks)"
    elif status == "failed":
        summary += f": {error}; call index_codebase to resume"
    if data.get("note"):
        summary += f"\nNote: {data['note']}"
    return _answer(summary, data)


def _meta(cb: Codebase) -> dict:
    with Store(cb.db_path, create=False) as store:
        return store.meta()


def _result_lines(results: list[Result]) -> str:
    return "\n".join(f"{i}. {r.path}:{r.start_line}-{r.end_line} {r.symbol or r.kind} score={r.score:.4f}"
                     + (" [stale]" if r.stale else "") for i, r in enumerate(results, 1))


@server.tool(
    description=(
        "Search an indexed codebase with natural language or identifiers (hybrid BM25 + embedding search, "
        "fused by RRF). Returns chunks with path, start_line/end_line (1-based, inclusive), score, language, "
        "kind, symbol, content and stale (file changed since indexing). A path inside an indexed codebase "
        "searches that codebase's files under it. Does not index: if the codebase is "
        "not indexed, call index_codebase first; while indexing runs, results come from the last committed "
        "state. mode: hybrid (default), bm25 (exact words/identifiers) or vector (meaning)."),
    annotations=_READ_ONLY,
)
@_agent_errors
def search_code(
    path: PathArg,
    query: Annotated[str, Field(min_length=1, max_length=100_000, description="What to look for: words, identifiers or a question.")],
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="Number of results.")] = 10,
    extensionFilter: Annotated[list[str], Field(  # noqa: N803
        max_length=50, description="Keep only files with these extensions, e.g. ['.ts', '.tsx']; [] = all.")] = [],
    pathGlob: Annotated[str | None, Field(  # noqa: N803
        max_length=1000, description="Glob over the relative path, e.g. 'src/*' or '*_test.go'; * also matches /.")] = None,
    mode: Annotated[Literal["hybrid", "bm25", "vector"], Field(description="Retrieval mode.")] = "hybrid",
    rerank: Annotated[bool, Field(description="Re-score the top 30 fused results with the cross-encoder of "
                                              "$CODII_SQL_RERANK_MODEL, when the server has one.")] = False,
) -> CallToolResult:
    cb, scope = Codebase.find(_check_path(path))
    st = _require_index(cb)
    opts = SearchOptions(limit=limit, mode=mode, exts=list(extensionFilter), glob=pathGlob or None, rerank=rerank,
                         under=scope or None)
    t = time.perf_counter()
    # An issue pasted as the query can be 100k characters: the agent has it, echo its start.
    shown = query if len(query) <= 200 else query[:200] + "…"
    data: dict = {"query": shown, "codebase": str(cb.root), **({"scope": scope} if scope else {})}
    with INDEXES.searcher(cb) as searcher:
        try:
            results = searcher.search(query, opts)
            if rerank:
                data["rerank"] = "applied"
        except UsageError as err:
            if not rerank:
                raise
            # No cross-encoder configured: still answer, and say why the order is the fused one.
            data["rerank"] = f"unavailable: {err}".replace("pass --rerank-model PATH or ", "")
            results = searcher.search(query, dataclasses.replace(opts, rerank=False))
        indexing = st["status"] == "indexing"
        narrowed = "; ".join(filter(None, (api.filter_note(searcher.store, indexing=indexing),
                                           None if results else api.scope_note(searcher.store, scope)))) or None
    data.update(results=[r.to_dict() for r in results], seconds=round(time.perf_counter() - t, 4))
    # A running build with nothing committed yet: filter_note's first-build note says it all.
    fresh = None if indexing and not st.get("files") else _freshness_note(st)
    note = "; ".join(filter(None, (fresh, narrowed)))
    if note:
        data["note"] = note
    where = f"{cb.root}/{scope}" if scope else cb.root
    summary = (f"{len(results)} result{'' if len(results) == 1 else 's'} for {shown!r} in {where} "
               f"({data['seconds'] * 1000:.0f} ms)")
    if note:
        summary += f"\nNote: {note}"
    if data.get("rerank", "applied") != "applied":
        summary += f"\nRe-rank {data['rerank']}"
    if results:
        summary += "\n" + _result_lines(results)
    return _answer(summary, data)


def _freshness_note(st: dict) -> str | None:
    if st["status"] == "indexing":
        return (f"indexing is running ({st.get('files_done') or 0}/{st.get('files_total') or 0} files of this build "
                "committed): results come from the last committed state")
    if st["status"] == "failed":
        return f"the last indexing run did not finish ({st.get('error')}): call index_codebase to complete the index"
    return None


@server.tool(
    description="Delete a codebase's index (its .db file). Refused while it is being indexed. Source files are not touched.",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
)
@_agent_errors
def clear_index(path: PathArg) -> CallToolResult:
    cb = _open_codebase(path)
    with JOBS.guard(cb) as job:
        if job is not None and job.alive:
            raise ToolError(f"{cb.root} is being indexed: wait until get_indexing_status reports it finished")
        INDEXES.forget(cb)
        cleared = api.clear(cb)
    data = {"codebase": str(cb.root), "cleared": cleared}
    return _answer(f"{cb.root}: {'index deleted' if cleared else 'was not indexed'}.", data)


@server.tool(
    description="List every indexed codebase: root, status, files, chunks, index size in bytes and last indexed time.",
    annotations=_READ_ONLY,
)
@_agent_errors
def list_codebases() -> CallToolResult:
    rows = []
    for row in api.list_codebases():
        if row.get("status") == "indexing" and row.get("root"):
            # The snapshot says indexing even after its indexer died: ask the lock.
            if not JOBS.locked(Codebase(Path(row["root"]), Path(row["db"]))):
                row["status"] = "failed"
        row["last_indexed_at"] = _iso(row.get("last_indexed_at"))
        rows.append(row)
    data = {"codebases": rows}
    summary = f"{len(rows)} indexed codebases" + "".join(
        f"\n- {r.get('root') or r['db']}: {r.get('status')}, " + (
            f"{r['files']} files, {r['chunks']} chunks" if "files" in r else f"{r['size_bytes']} bytes: {r.get('error')}")
        for r in rows)
    return _answer(summary, data)


@server.tool(
    description=(
        "Find code most similar to a file, or to a line range of it, in the same indexed codebase (embedding "
        "similarity over the file's stored chunk vectors). Returns at most one result per file, the query file "
        "excluded, each with path, lines, score and content. The file must be indexed."),
    annotations=_READ_ONLY,
)
@_agent_errors
def find_similar_code(
    path: PathArg,
    file: FileArg,
    start_line: LineArg = None,
    end_line: LineArg = None,
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="Number of files returned.")] = 10,
) -> CallToolResult:
    cb = _open_codebase(path)
    _require_index(cb)
    if start_line and end_line and end_line < start_line:
        raise ToolError(f"end_line {end_line} is before start_line {start_line}")
    f = INDEXES.fileset(cb).check(file)
    span = f" lines {start_line or 1}-{end_line or 'end'}" if start_line or end_line else ""
    with INDEXES.searcher(cb) as searcher:
        rows = searcher.store.rows("file_vectors", {"path": f.rel, "start_line": start_line, "end_line": end_line})
        if not rows:
            raise ToolError(f"{f.rel}{span} has no indexed chunks: call index_codebase if the file is new")
        vectors = np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])
        results = searcher.similar(vectors, SearchOptions(limit=limit, mode="vector", exclude_path=f.rel,
                                                          group_by_file=True))
    data = {"codebase": str(cb.root), "file": f.rel, "start_line": start_line, "end_line": end_line,
            "query_chunks": len(rows), "results": [r.to_dict() for r in results]}
    summary = f"{len(results)} files similar to {f.rel}{span}"
    if results:
        summary += "\n" + _result_lines(results)
    return _answer(summary, data)


def _numbered(content: str, first_line: int) -> str:
    """``cat -n`` style: right-aligned 1-based line number, a tab, the line."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first_line))


@server.tool(
    description=(
        "Read a file of an indexed codebase, whole or a line range, as exact text plus a line-numbered view. "
        "Lines are 1-based and inclusive; at most 2000 lines per call (next_start_line says where to go on). "
        "Only files inside the codebase root and not excluded by its ignore rules can be read."),
    annotations=_READ_ONLY,
)
@_agent_errors
def get_content(path: PathArg, file: FileArg, start_line: LineArg = None, end_line: LineArg = None) -> CallToolResult:
    cb = _open_codebase(path)
    _require_index(cb)
    fileset = INDEXES.fileset(cb)
    f = fileset.check(file)
    text = decode_source(safe_paths.read_bytes(f, fileset.rules["max_file_bytes"]))
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    total = len(lines)
    start = start_line or 1
    if start > max(total, 1):
        raise ToolError(f"start_line {start} is past the end of {f.rel} ({total} lines)")
    end = min(end_line or total, total, start + MAX_CONTENT_LINES - 1)
    if end < start and total:
        raise ToolError(f"end_line {end_line} is before start_line {start}")
    content = "".join(lines[start - 1:end])
    data = {"codebase": str(cb.root), "path": f.rel, "start_line": start, "end_line": end, "total_lines": total,
            "content": content}
    if end < min(end_line or total, total):
        data["next_start_line"] = end + 1
    summary = f"{f.rel} lines {start}-{end} of {total}" + (
        f" (truncated: continue at start_line={end + 1})" if "next_start_line" in data else "")
    return _answer(summary, data, _numbered(content, start))


@server.tool(
    description=(
        "Get one indexed chunk by its id (the 'id' field of search_code results): exact indexed text with line "
        "numbers, path, lines, kind, symbol and stale (the file changed since indexing). Ids change when a "
        "file is re-indexed: search again if one is gone."),
    annotations=_READ_ONLY,
)
@_agent_errors
def get_chunk(path: PathArg, chunk_id: Annotated[int, Field(ge=1, description="Chunk id from search_code.")]) -> CallToolResult:
    cb = _open_codebase(path)
    _require_index(cb)
    with INDEXES.searcher(cb) as searcher:
        row = searcher.store.row("chunk_by_id", {"id": chunk_id})
    if row is None:
        raise ToolError(f"no chunk {chunk_id} in the index of {cb.root}: ids change on re-indexing; search again")
    if os.path.lexists(cb.root / row["path"]):
        INDEXES.fileset(cb).check(row["path"])
    data = {"codebase": str(cb.root), "id": row["id"], "path": row["path"], "start_line": row["start_line"],
            "end_line": row["end_line"], "kind": row["kind"], "symbol": row["symbol"], "language": row["language"],
            "content": row["content"], "stale": StaleCheck(cb.root)(row)}
    summary = f"chunk {row['id']}: {row['path']}:{row['start_line']}-{row['end_line']} {row['symbol'] or row['kind']}" \
        + (" [stale: the file changed since indexing]" if data["stale"] else "")
    return _answer(summary, data, _numbered(row["content"], row["start_line"]))


def main() -> None:
    """Serve MCP over stdio until the client closes the connection (``codii-sql-server``)."""
    try:
        server.run("stdio")
    finally:
        JOBS.shutdown()


if __name__ == "__main__":
    main()
