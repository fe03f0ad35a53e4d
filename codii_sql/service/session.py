"""A long-lived face's state (the MCP server's): background builds and open indexes, answers worded for an agent.

Every method returns JSON-ready data; the face only formats it. Messages name tools
(``index_codebase``, ``get_indexing_status``), not CLI commands. Errors are
:mod:`codii_sql.errors` types whose one-line messages the face hands on.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from pathlib import Path

from ..codebase import Codebase
from ..errors import CodiiError, IndexBusyError, NotIndexedError, UsageError
from ..ingest.config import extension_filter
from ..search.budget import CHARS_PER_TOKEN
from ..search.results import SearchOptions
from ..search.staleness import StaleCheck
from ..storage.lock import vectors_running
from ..text import decode_source
from . import boundary
from .indexes import OpenIndexes
from .following import Following
from .jobs import Job, Jobs
from .fanout import member_paths, search_workspace
from .maintenance import clear
from .notes import filter_note, no_match_note, scope_note, vectors_note
from .searching import similar_code
from .status import inspect, list_codebases
from .symbols import outline
from .workspaces import describe, workspaces

#: get_content returns at most this many lines per call (then ``next_start_line``).
MAX_CONTENT_LINES = 2000
#: At most this many characters per get_content answer (~25k tokens): 2,000 lines do not bound a
#: minified bundle's single 1 MB line, which would fill an agent's context.
MAX_CONTENT_CHARS = 100_000
#: A query echoed back longer than this is cut: an issue pasted as the query can be 100k characters.
SHOWN_QUERY_CHARS = 200


def iso(ts: float | None) -> str | None:
    """``ts`` (epoch seconds) as ISO 8601 in UTC, or None."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds") if ts else None


class Session:
    """Background builds (:class:`Jobs`) and open indexes (:class:`OpenIndexes`) shared by every call."""

    def __init__(self) -> None:
        self.jobs = Jobs()
        self.indexes = OpenIndexes()
        self.following = Following(self.jobs)

    def shutdown(self) -> None:
        """Stop the watchers and running builds at their next batch commit (see :meth:`Jobs.shutdown`)."""
        self.following.shutdown()
        self.jobs.shutdown()

    # -- building -----------------------------------------------------------------------

    def index(self, cb: Codebase, *, force: bool, extensions: list[str], ignore_patterns: list[str],
              reset_filters: bool, embedder: str | None = None) -> tuple[dict, str]:
        """Start a background build: ``({"codebase", "status", ["options_applied"]}, hint)``.

        Empty ``extensions``/``ignore_patterns`` keep the last build's, unless ``reset_filters``;
        ``embedder`` names one (see :mod:`.embedders`), else the index's own or the default.

        Raises:
            UsageError: a malformed extension list. BuildFailedError: the build failed at once.
        """
        exts = extension_filter(extensions) if extensions else ([] if reset_filters else None)
        ignore = list(ignore_patterns) if ignore_patterns or reset_filters else None
        outcome = self.jobs.start(cb, force, ignore, exts, embedder or None)
        self.following.follow(cb)
        data = {"codebase": str(cb.root), "status": outcome}
        hint = {"started": "poll get_indexing_status", "already indexing": "poll get_indexing_status",
                "already up to date": "search_code is ready"}[outcome]
        if outcome == "already indexing" and (force or exts is not None or ignore is not None):
            # The running build keeps its own options: say so rather than drop the request silently.
            hint += "; this call's force/filters were not applied: call index_codebase again when it finishes"
            data["options_applied"] = False
        return data, hint

    def indexing_status(self, cb: Codebase) -> dict:
        """``status`` (not_indexed, indexing, indexed, failed, stale), ``phase``, ``percent``, files and
        chunks done/total, skips, failures, last error, times (ISO 8601), size, and a ``note``; a
        failed one says whether building again can help (``resumable``: not on a read-only or full disk)."""
        st, job = self.jobs.status(cb)
        status = st["status"]
        error = st.get("error")
        if job is not None and job.alive and status in ("not_indexed", "indexed", "stale"):
            status = "indexing"  # this server's build is still finishing (its last commit, the checkpoint)
        late_failure = job is not None and job.outcome in ("failed", "cancelled") and \
            (job.finished_at or 0) >= (st.get("last_indexed_at") or 0)
        resumable = True
        if late_failure and status != "indexing":
            status, error, resumable = "failed", job.error, job.resumable
        prog = _progress(st, job)
        vectors = _vectors(st, job)
        percent = _percent(status, prog, vectors)
        data = {
            "codebase": str(cb.root), "status": status,
            "phase": prog["phase"] if status == "indexing" else st.get("phase"), "percent": percent,
            "files": {"done": prog["done"], "total": prog["total"], "indexed": st.get("files", 0)},
            "chunks": {"indexed": st.get("chunks", 0),
                       "total": st.get("chunks") if status in ("indexed", "stale") else None},
            "skipped": st.get("skipped") or {}, "failed_files": st.get("failed") or {},
            "last_error": error if status in ("failed", "indexing", "damaged") else None,
            **({"resumable": resumable} if status == "failed" else {}),
            "last_indexed_at": iso(st.get("last_indexed_at")), "build_seconds": st.get("build_seconds"),
            "size_bytes": st.get("size_bytes", 0), "db": st["db"], **({"vectors": vectors} if vectors else {}),
            "watched_by": [{**w, "started_at": iso(w.get("started_at"))} for w in st.get("watched_by") or []],
        }
        if status == "indexing" and cb.db_path.is_file():  # a first build may not have made its file yet
            data["indexer_pid"] = inspect(cb)["snapshot"].get("pid")
        if job is not None and job.warnings:  # this server's latest build went on past them
            data["note"] = "; ".join(job.warnings)
        return data

    def require_index(self, cb: Codebase) -> dict:
        """The codebase's status, unless it has no index yet.

        Raises:
            NotIndexedError: telling the agent to index it first (or that its first build runs,
                or which indexed codebase encloses it).
        """
        st, job = self.jobs.status(cb)
        if st["status"] != "not_indexed":
            return st
        if job is not None and job.alive:
            raise NotIndexedError(f"{cb.root} is being indexed for the first time and has no committed chunks yet: "
                                  "poll get_indexing_status and retry when it reports progress")
        outer = cb.enclosing()
        if outer is not None:
            raise NotIndexedError(f"{cb.root} has no index of its own but lies inside the indexed codebase "
                                  f"{outer.root}: pass path={str(outer.root)!r} (search_code accepts the subfolder "
                                  "as it is)")
        raise NotIndexedError(f"{cb.root} is not indexed: call index_codebase with path={str(cb.root)!r} first, "
                              "then poll get_indexing_status until it reports 'indexed'")

    def clear(self, cb: Codebase) -> bool:
        """Delete the index (True) or say there was none (False).

        Raises:
            IndexBusyError: this server is building it; see also :func:`clear`.
        """
        self.following.unfollow(cb)  # else the next file change would build it again
        with self.jobs.guard(cb) as job:
            if job is not None and job.alive:
                raise IndexBusyError(f"{cb.root} is being indexed: wait until get_indexing_status reports it "
                                     "finished")
            self.indexes.forget(cb)
            return clear(cb)

    def list_codebases(self) -> list[dict]:
        """Every index (see :func:`list_codebases`), a dead indexer's ``indexing`` shown as ``failed``."""
        rows = []
        for row in list_codebases():
            if row.get("status") == "indexing" and row.get("root"):
                # The snapshot says indexing even after its indexer died: ask the lock.
                if not self.jobs.locked(Codebase(Path(row["root"]), Path(row["db"]))):
                    row["status"] = "failed"
            row["last_indexed_at"] = iso(row.get("last_indexed_at"))
            rows.append(row)
        return rows

    # -- reading ------------------------------------------------------------------------

    def search(self, cb: Codebase, scope: str, query: str, opts: SearchOptions) -> dict:
        """Search the last committed state: ``{"query" (its start), "codebase", ["scope"], "results",
        "seconds", ["note"], ["rerank"]}``. Without a cross-encoder a ``rerank`` request still answers,
        in fused order, and says why.

        Raises:
            NotIndexedError: see :meth:`require_index`. UsageError: a bad query or option.
        """
        st = self.require_index(cb)
        t = time.perf_counter()
        shown = query if len(query) <= SHOWN_QUERY_CHARS else query[:SHOWN_QUERY_CHARS] + "…"
        data: dict = {"query": shown, "codebase": str(cb.root), **({"scope": scope} if scope else {})}
        with self.indexes.searcher(cb) as searcher:
            try:
                results = searcher.search(query, opts)
                if opts.rerank:
                    data["rerank"] = "applied"
            except UsageError as err:
                if not opts.rerank:
                    raise
                data["rerank"] = f"unavailable: {err}".replace("pass --rerank-model PATH or ", "")
                results = searcher.search(query, dataclasses.replace(opts, rerank=False))
            indexing = st["status"] == "indexing"
            narrowed = "; ".join(filter(None, (
                no_match_note(searcher) if results else None, searcher.budget.note() if searcher.budget else None,
                searcher.note, filter_note(searcher.store, indexing=indexing), None if results else scope_note(searcher.store, scope),
                vectors_note(searcher.store, running=vectors_running(cb) or self.jobs.locked(cb),
                             mode=opts.mode)))) or None
        data.update(results=[r.to_dict() for r in results], seconds=round(time.perf_counter() - t, 4),
                    no_good_match=searcher.no_good_match,
                    **({"best_cosine": round(searcher.best_cosine, 4)} if searcher.best_cosine is not None else {}),
                    **({"budget": dataclasses.asdict(searcher.budget)} if searcher.budget else {}))
        self.jobs.prefer(cb, list(dict.fromkeys(r.path for r in results)))
        self.following.follow(cb)
        # A running build with nothing committed yet: filter_note's first-build note says it all.
        fresh = None if indexing and not st.get("files") else _freshness_note(st)
        note = "; ".join(filter(None, (fresh, narrowed)))
        if note:
            data["note"] = note
        return data

    def search_workspace(self, workspace: str | None, paths: list[str], query: str, opts: SearchOptions) -> dict:
        """Search a workspace's members (and ``paths``) at once from their last committed states:
        :meth:`ManyResponse.to_dict`, the query cut as in :meth:`search`.

        Raises:
            UsageError: an unknown or empty workspace, no indexed member, or a bad query or option.
        """
        resp = search_workspace(query, opts, workspace=workspace, paths=paths, update=False,
                                provide=self.indexes.searcher)
        for member in resp.members:
            if member["status"] == "ok":
                self.following.follow(Codebase.open(member["codebase"]))
        data = resp.to_dict()
        data["query"] = query if len(query) <= SHOWN_QUERY_CHARS else query[:SHOWN_QUERY_CHARS] + "…"
        return data

    def index_workspace(self, workspace: str, *, force: bool, embedder: str | None) -> dict:
        """Start a background build for every member of ``workspace``: ``{"workspace", "codebases":
        [{"codebase", "status"}]}`` (status as :meth:`index`, or ``missing`` / ``failed: why``)."""
        name, found = member_paths(workspace, [])
        rows = []
        for path in found:
            try:
                data, _ = self.index(Codebase.open(path), force=force, extensions=[], ignore_patterns=[],
                                     reset_filters=False, embedder=embedder)
                rows.append(data)
            except CodiiError as err:
                rows.append({"codebase": path, "status": f"failed: {err}"})
        return {"workspace": name, "codebases": rows}

    def list_workspaces(self) -> list[dict]:
        """Every workspace with each member's state (see :func:`describe`)."""
        return [describe(ws) for ws in workspaces().values()]

    def similar(self, cb: Codebase, file: str, start_line: int | None, end_line: int | None, limit: int,
                max_tokens: int | None = None) -> dict:
        """Code most like ``file`` or its line range (see :func:`similar_code`).

        Raises:
            UsageError: the range is reversed, the file is refused by the boundary or has no chunks.
        """
        self.require_index(cb)
        if start_line and end_line and end_line < start_line:
            raise UsageError(f"end_line {end_line} is before start_line {start_line}")
        f = self.indexes.fileset(cb).check(file)
        with self.indexes.searcher(cb) as searcher:
            used, results = similar_code(searcher, f.rel, start_line, end_line, limit, max_tokens)
            chunks = searcher.store.rows("chunks_of_file", {"path": f.rel}) if not used else []
            counts = searcher.store.row("vector_counts")
            budget = searcher.budget
        if not used:
            span = f" lines {start_line or 1}-{end_line or 'end'}" if start_line or end_line else ""
            last = max((c["end_line"] for c in chunks), default=0)
            if chunks and start_line and start_line > last:
                raise UsageError(f"{f.rel}{span}: its indexed chunks end at line {last}; pass lines within 1-{last}")
            if chunks and counts["pending"]:
                raise UsageError(f"{f.rel}{span} is indexed but its chunks have no vectors yet ("
                                 f"{counts['chunks'] - counts['pending']:,} of {counts['chunks']:,} embedded): "
                                 "search_code finds it now; find_similar_code works once they are embedded")
            raise UsageError(f"{f.rel}{span} has no indexed chunks: call index_codebase if the file is new")
        return {"codebase": str(cb.root), "file": f.rel, "start_line": start_line, "end_line": end_line,
                "query_chunks": used, "results": [r.to_dict() for r in results],
                **({"budget": dataclasses.asdict(budget), "note": budget.note()} if budget and budget.note() else {})}

    def content(self, cb: Codebase, file: str, start_line: int | None, end_line: int | None,
                max_tokens: int | None = None) -> dict:
        """The exact text of a file or a line range (1-based, inclusive), at most
        :data:`MAX_CONTENT_LINES` lines; ``next_start_line`` says where to go on.

        Raises:
            UsageError: the boundary refuses the file (:mod:`.boundary`) or the range is off the file.
        """
        self.require_index(cb)
        fileset = self.indexes.fileset(cb)
        f = fileset.check(file)
        text = decode_source(boundary.read_bytes(f, fileset.rules["max_file_bytes"]))
        lines = text.split("\n")
        lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        total = len(lines)
        start = start_line or 1
        if start > max(total, 1):
            raise UsageError(f"start_line {start} is past the end of {f.rel} ({total} lines)")
        end = min(end_line or total, total, start + MAX_CONTENT_LINES - 1)
        if end < start and total:
            raise UsageError(f"end_line {end_line} is before start_line {start}")
        end, content, cut = _within_chars(lines, start, end, max_tokens * CHARS_PER_TOKEN if max_tokens else None)
        data = {"codebase": str(cb.root), "path": f.rel, "start_line": start, "end_line": end, "total_lines": total,
                "content": content}
        if cut:
            data["truncated"] = f"line {end} is longer than the {'max_tokens' if max_tokens else f'{MAX_CONTENT_CHARS:,} characters'} allowed: only its start is shown"
        if end < min(end_line or total, total):
            data["next_start_line"] = end + 1
        return data

    def outline(self, cb: Codebase, file: str) -> dict:
        """:func:`outline` of ``file`` under this server's boundary."""
        self.require_index(cb)
        return outline(cb, file, self.indexes.fileset(cb))

    def chunk(self, cb: Codebase, chunk_id: int) -> dict:
        """One indexed chunk by id, with ``stale`` (its file changed since indexing).

        Raises:
            UsageError: no such chunk, or the boundary now refuses its file.
        """
        self.require_index(cb)
        with self.indexes.searcher(cb) as searcher:
            row = searcher.store.row("chunk_by_id", {"id": chunk_id})
        if row is None:
            raise UsageError(f"no chunk {chunk_id} in the index of {cb.root}: ids change on re-indexing; search again")
        if os.path.lexists(cb.root / row["path"]):
            self.indexes.fileset(cb).check(row["path"])
        return {"codebase": str(cb.root), "id": row["id"], "path": row["path"], "start_line": row["start_line"],
                "end_line": row["end_line"], "kind": row["kind"], "symbol": row["symbol"],
                "language": row["language"], "content": row["content"], "stale": StaleCheck(cb.root)(row)}


def _progress(st: dict, job: Job | None) -> dict:
    """Phase and file counts of a running build: the in-process job's (fresher) or the index's snapshot."""
    if job is not None and job.alive:
        return {"phase": job.phase, "done": job.done, "total": job.total}
    return {"phase": st.get("phase"), "done": st.get("files_done") or 0, "total": st.get("files_total") or 0}


def _vectors(st: dict, job: Job | None) -> dict | None:
    """The index's vector progress (:func:`vector_progress`), with a running in-process job's fresher
    counts; ``waiting`` before a first build has committed anything; None with no index and no build."""
    alive = job is not None and job.alive
    if not st.get("vectors"):
        return {"done": 0, "total": 0, "state": "waiting"} if alive else None
    vectors = dict(st["vectors"])
    if alive and job.phase == "vectors" and job.vectors_total:
        vectors.update(done=job.vectors_done, total=job.vectors_total, state="running")
    elif alive and vectors["state"] in ("pending", "complete") and job.phase != "vectors":
        vectors["state"] = "waiting"  # this server's lexical phase runs; its vector phase follows
    return vectors


#: The share of a build's percent that its lexical phase covers when vectors follow: the model
#: is the cost (Django: lexical phase 16.5 s, vector phase 1,037 s), so the rest is the vectors'.
LEXICAL_PERCENT = 10


def _percent(status: str, prog: dict, vectors: dict | None) -> int:
    """0-100, never going back within one build: the lexical phase's files, then the vectors' chunks."""
    if status in ("indexed", "stale"):
        return 100
    if status != "indexing":
        return 0
    with_vectors = vectors is not None and vectors["state"] != "off"
    if prog["phase"] == "vectors" and vectors and vectors["total"]:
        return min(99, LEXICAL_PERCENT + round((100 - LEXICAL_PERCENT) * vectors["done"] / vectors["total"]))
    lexical = prog["done"] / prog["total"] if prog["total"] else 0.0
    return min(99, round((LEXICAL_PERCENT if with_vectors else 100) * lexical))


def _freshness_note(st: dict) -> str | None:
    if st["status"] == "indexing" and st.get("phase") == "vectors":
        return None  # every file is committed; vectors_note says how far the vectors are
    if st["status"] == "indexing":
        return (f"indexing is running ({st.get('files_done') or 0}/{st.get('files_total') or 0} files of this build "
                "committed): results come from the last committed state")
    if st["status"] == "failed":
        return f"the last indexing run did not finish ({st.get('error')}): call index_codebase to complete the index"
    return None


def _within_chars(lines: list[str], start: int, end: int, cap: int | None = None) -> tuple[int, str, bool]:
    """Lines ``start``..``end`` (1-based, inclusive) up to ``cap`` characters (default and at most
    :data:`MAX_CONTENT_CHARS`): as many whole lines as fit, or the head of line ``start`` when it
    alone is longer (then ``cut``). Returns ``(last line given, text, cut)``."""
    cap = min(cap or MAX_CONTENT_CHARS, MAX_CONTENT_CHARS)
    size = 0
    for n in range(start, end + 1):
        size += len(lines[n - 1])
        if size > cap:
            if n == start:
                return n, lines[n - 1][:cap], True
            return n - 1, "".join(lines[start - 1:n - 1]), False
    return end, "".join(lines[start - 1:end]), False
