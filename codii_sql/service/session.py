"""A long-lived face's state (the MCP server's): background builds, open indexes, watchers.

Searches answer an :class:`~codii_sql.search.answer.Answer`; the other methods JSON-ready data.
Errors are :mod:`codii_sql.errors` types whose remedies the face words.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import os
from pathlib import Path

from ..codebase import Codebase, is_remote
from ..errors import CodiiError, IndexBusyError, NotIndexedError, Remedy, UsageError
from ..ingest.config import extension_filter
from ..processes import alive
from ..search.answer import LISTED_MEMBERS, Answer, Words, with_notes
from ..search.budget import envelope_tokens, fit
from ..search.results import Result
from ..search.staleness import StaleCheck
from ..text import content_lines
from .indexes import OpenIndexes
from .following import Following
from .jobs import Job, Jobs
from .codebases import find_codebase, is_index_file
from .maintenance import clear
from .reading import file_text
from .searching import SearchRequest, search
from .shard_folder import ShardFolder
from .similar import similar_code
from .targets import member_paths
from .status import inspect, list_codebases, not_indexed
from .stored import stored_path
from .outline import outline
from .paging import MAX_CONTENT_CHARS, codebases_page, fit_file_lists, fit_workspaces, lines_within_tokens
from .workspaces import describe, missing_member, workspaces

#: get_content returns at most this many lines per call (then ``next_start_line``).
MAX_CONTENT_LINES = 2000


def iso(ts: float | None) -> str | None:
    """``ts`` (epoch seconds) as ISO 8601 in UTC, or None."""
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds") if ts else None


class Session:
    """Background builds (:class:`Jobs`) and open indexes (:class:`OpenIndexes`) shared by every call."""

    def __init__(self, by: str = "mcp") -> None:
        self.jobs = Jobs()
        self.indexes = OpenIndexes()
        self.following = Following(self.jobs, by=by)
        #: A folder of index files this server also serves (``serve --shards DIR``), or None.
        self.shards: ShardFolder | None = None

    def shutdown(self) -> None:
        """Hand running builds to background processes first (the mcp SDK SIGTERMs 2 s after closing stdin)."""
        self.jobs.hand_over()
        self.following.shutdown()
        self.jobs.shutdown()

    # -- building -----------------------------------------------------------------------

    def index(self, cb: Codebase, *, force: bool, extensions: list[str], ignore_patterns: list[str],
              reset_filters: bool, embedder: str | None = None, workers: int | None = None) -> tuple[dict, str]:
        """Start a background build: ``({"codebase", "status", ["options_applied"]}, hint)``.

        Empty ``extensions``/``ignore_patterns`` keep the last build's, unless ``reset_filters``;
        ``embedder`` names one (see :mod:`.embedders`), else the index's own or the default;
        ``workers`` the chunking processes (0: one per core; None: as recorded).

        Raises:
            UsageError: a malformed extension list. BuildFailedError: the build failed at once."""
        exts = extension_filter(extensions) if extensions else ([] if reset_filters else None)
        ignore = list(ignore_patterns) if ignore_patterns or reset_filters else None
        outcome = self.jobs.start(cb, force, ignore, exts, embedder or None, workers)
        if outcome == "already up to date":
            # the watcher's first check holds the index a moment: a status asked right after "up to date"
            # read "indexing" (a CI run); waited for as a first read of the codebase waits (catch_up)
            self.following.catch_up(cb)
        else:
            self.following.follow(cb)
        data = {"codebase": cb.shown, "status": outcome}
        hint = {"started": "poll get_indexing_status", "already indexing": "poll get_indexing_status",
                "already up to date": "search_code is ready"}[outcome]
        if outcome == "already indexing" and (force or exts is not None or ignore is not None or embedder):
            # The running build keeps its own options: say so rather than drop the request silently.
            hint += "; this call's force/filters/embedder were not applied: call index_codebase again when it finishes"
            data["options_applied"] = False
        return data, hint

    def indexing_status(self, cb: Codebase, max_tokens: int | None = None) -> dict:
        """``status`` (not_indexed, indexing, indexed, failed, stale), ``phase``, ``percent``, files and
        chunks done/total, skips, failures, last error, times (ISO 8601), size, and a ``note``; a
        failed one says whether building again can help (``resumable``: not on a read-only or full disk).
        With ``max_tokens``, the lists of skipped and failed paths fit in it (:func:`fit_file_lists`)."""
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
            "codebase": cb.shown, "status": status,
            "phase": prog["phase"] if status == "indexing" else st.get("phase"), "percent": percent,
            # In the vector phase every file is done (its own counts are batches: "1 of 1 files" was shown).
            "files": {"done": prog["done"], "total": prog["total"], "indexed": st.get("files", 0)}
            if prog["phase"] != "vectors" else {"done": st.get("files", 0), "total": st.get("files", 0),
                                                "indexed": st.get("files", 0)},
            "chunks": {"indexed": st.get("chunks", 0),
                       "total": st.get("chunks") if status in ("indexed", "stale") else None},
            "skipped": st.get("skipped") or {}, "skipped_files": st.get("skipped_files") or {},
            "failed_files": st.get("failed") or {},
            "last_error": error if status in ("failed", "indexing", "damaged") else None,
            **({"resumable": resumable} if status == "failed" else {}),
            "last_indexed_at": iso(st.get("last_indexed_at")), "lexical_seconds": st.get("lexical_seconds"),
            "size_bytes": st.get("size_bytes", 0), "db": st["db"], **({"vectors": vectors} if vectors else {}),
            "watched_by": [{**w, "started_at": iso(w.get("started_at"))} for w in st.get("watched_by") or []],
        }
        if status == "indexing" and cb.db_path.is_file() and (pid := os.getpid() if job is not None and job.alive else (
                inspect(cb)["snapshot"].get("pid") or 0)) > 0 and alive(pid):  # a dead one's is no indexer (a new user's)
            data["indexer_pid"] = pid
        if st.get("stopped") and status in ("indexed", "stale"):  # a build stopped on request left files unread
            data.update(percent=_percent("indexing", {**prog, "phase": "files"}, None), last_error=st["stopped"])
        notes = [*(job.warnings if job is not None else []), *([st["config_error"]] if st.get("config_error") else [])]
        if notes:  # this server's latest build went on past them; a .codii.yaml the next build refuses
            data["note"] = "; ".join(notes)
        return fit_file_lists(data, max_tokens) if max_tokens else data

    def require_index(self, cb: Codebase) -> dict:
        """The codebase's status unless it has no index yet (one not followed yet is caught up first: ``catch_up``).

        Raises:
            NotIndexedError: telling the agent to index it first (or that its first build runs, or what encloses it).
        """
        self.following.catch_up(cb)
        st, job = self.jobs.status(cb)
        if st["status"] != "not_indexed":
            return st
        if job is not None and job.alive:
            raise NotIndexedError(f"{cb.root} is being indexed for the first time and has no committed chunks yet",
                                  Remedy("poll_status", {"root": str(cb.root)}))
        raise not_indexed(cb)

    def clear(self, cb: Codebase) -> bool:
        """Delete the index (True) or say there was none (False).

        Raises:
            IndexBusyError: this server is building it; see also :func:`clear`.
        """
        self.following.unfollow(cb)  # else the next file change would build it again
        with self.jobs.guard(cb) as job:
            if job is not None and job.alive:
                raise IndexBusyError(f"{cb.root} is being indexed; it can be cleared once that build ends",
                                     Remedy("retry"))
            self.indexes.forget(cb)
            return clear(cb)

    def list_codebases(self, *, limit: int | None = None, offset: int = 0, max_tokens: int | None = None) -> dict:
        """Every index (see :func:`list_codebases`, which asks the writer and vector locks: a dead
        indexer's ``indexing`` is ``failed`` there, a running vector phase ``indexing``), as
        :func:`codebases_page` cuts them (no ``limit``: all)."""
        rows = [{**row, "last_indexed_at": iso(row.get("last_indexed_at"))} for row in list_codebases()]
        return codebases_page(rows, limit=limit or max(len(rows), 1), offset=offset, max_tokens=max_tokens)

    # -- reading ------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> Answer:
        """:func:`~.searching.search` from the last committed states (this server's watchers keep
        the indexes fresh: no update first), over this server's open indexes; each codebase searched
        is followed from then on, and its running vector phase embeds the files found first.

        Raises:
            as :func:`~.searching.search`.
        """
        for p in request.paths or ():  # a codebase not followed yet is first brought up to date, as symbol
            if is_remote(p) or is_index_file(p) or request.db:  # and grep do (a new user's first search of a
                continue  # fresh server missed files added while no server ran)
            with contextlib.suppress(CodiiError):
                cb, _ = find_codebase(p)
                if cb.db_path.is_file() and cb not in self.following.watched():
                    self.following.catch_up(cb)
        for cb in self.following.watched():  # an edit made before the call is searched, not missed
            if any(Path(p).expanduser().resolve().is_relative_to(cb.root) for p in request.paths or ()):
                self.following.settle(cb)
        answer = search(dataclasses.replace(request, update=False), indexes=self.indexes, building=self.jobs.locked)
        for member in answer.members:
            if member.status != "searched" or is_remote(member.codebase) or is_index_file(member.codebase):
                continue  # only a codebase folder here has a watcher and a build to steer
            cb = Codebase.open(member.codebase)
            self.following.follow(cb)
            self.jobs.prefer(cb, list(dict.fromkeys(r.path for r in answer.results
                                                    if (r.codebase or answer.codebase) == member.codebase)))
        return answer

    def index_workspace(self, workspace: str, *, force: bool, embedder: str | None, words: Words) -> dict:
        """Start a background build for every member of ``workspace``: ``{"workspace", "codebases":
        [{"codebase", "status"}], ["codebases_left_out"], ["note"], ["notes"]}`` (status as :meth:`index`,
        ``missing`` for a folder that is gone, told once in the note for all of them with the hint in
        ``words``, or ``failed: why``; at most :data:`LISTED_MEMBERS` rows, the others counted by status)."""
        name, found = member_paths(workspace, [])
        rows, notes = [], []
        for path in found:
            try:
                data, _ = self.index(Codebase.open(path), force=force, extensions=[], ignore_patterns=[],
                                     reset_filters=False, embedder=embedder)
                rows.append(data)
            except CodiiError as err:
                if not os.path.exists(path):
                    notes.append(missing_member(path, err, name))
                    rows.append({"codebase": path, "status": "missing"})
                else:
                    rows.append({"codebase": path, "status": f"failed: {err}"})
        out: dict = {"workspace": name, "codebases": rows[:LISTED_MEMBERS]}
        if len(rows) > LISTED_MEMBERS:
            out["codebases_left_out"] = dict(collections.Counter(r["status"] for r in rows[LISTED_MEMBERS:]))
        return with_notes(out, notes, words)

    def list_workspaces(self, max_tokens: int | None = None) -> dict:
        """``{"workspaces": [...]}``: every workspace with each member's state (see :func:`describe`),
        and the shard folder served (its members: each index file, searched alone); with
        ``max_tokens``, the members that fit in it (:func:`fit_workspaces`)."""
        rows = [describe(ws) for ws in workspaces().values()]
        if self.shards is not None:
            rows.append({"name": self.shards.name, "source": "shards", "members": [
                {"codebase": str(p), "status": "alone", "size_bytes": p.stat().st_size} for p in self.shards.files()]})
        return fit_workspaces(rows, max_tokens) if max_tokens else {"workspaces": rows}

    def similar(self, cb: Codebase, file: str, start_line: int | None, end_line: int | None, limit: int,
                max_tokens: int | None = None) -> tuple[dict, list[Result]]:
        """Code most like ``file`` or its line range (see :func:`similar_code`): its JSON-ready data
        and the results themselves (for a listing).

        Raises:
            UsageError: the range is reversed, the file is refused by the boundary or has no chunks.
        """
        self.require_index(cb)
        if start_line and end_line and end_line < start_line:
            raise UsageError(f"end_line {end_line} is before start_line {start_line}")
        # An index alone has no files here to check: its chunks are looked up by the path given (stored_path).
        rel = stored_path(file) if cb.alone else self.indexes.fileset(cb).check(file).rel
        with self.indexes.searcher(cb) as searcher:
            used, results = similar_code(searcher, rel, start_line, end_line, limit)
            chunks = searcher.store.rows("chunks_of_file", {"path": rel}) if not used else []
            counts, embedding = searcher.store.row("vector_counts"), searcher.store.meta().get("vectors") is not False
        budget = None
        head = {"codebase": cb.shown, "file": rel, "start_line": start_line, "end_line": end_line, "query_chunks": used}
        if max_tokens:  # the answer's other fields first (an agent's stand-in's 400 came to 456 tokens)
            results, budget = fit(results, [], max_tokens, reserved=envelope_tokens(head))
        if not used:
            span = f" lines {start_line or 1}-{end_line or 'end'}" if start_line or end_line else ""
            last = max((c["end_line"] for c in chunks), default=0)
            if chunks and start_line and start_line > last:
                raise UsageError(f"{rel}{span}: its indexed chunks end at line {last}; pass lines within 1-{last}")
            if chunks and counts["pending"] and not embedding:
                raise UsageError(f"{rel}{span} is indexed without vectors, which find_similar_code compares",
                                 Remedy("embed_vectors", {"root": str(cb.root)}))
            if chunks and counts["pending"]:
                raise UsageError(f"{rel}{span} is indexed but its chunks have no vectors yet ("
                                 f"{counts['chunks'] - counts['pending']:,} of {counts['chunks']:,} embedded): "
                                 "search_code finds it now; find_similar_code works once they are embedded")
            raise UsageError(f"{rel}{span} has no indexed chunks", Remedy("build", {"root": str(cb.root)}))
        return {**head, "results": [r.to_dict() for r in results],
                **({"budget": dataclasses.asdict(budget), "note": budget.note()} if budget and budget.note() else {})
                }, results

    def content(self, cb: Codebase, file: str, start_line: int | None, end_line: int | None,
                max_tokens: int | None = None, start_column: int | None = None) -> dict:
        """The exact text of a file or a line range (1-based, inclusive), at most
        :data:`MAX_CONTENT_LINES` lines; ``next_start_line`` says where to go on. ``start_column``
        (1-based, characters) starts the first line there: a line longer than the budget is shown cut,
        with ``next_start_column`` where the rest begins (a new user's agent could never read the end
        of a 133 KB line that grep found).

        Raises:
            UsageError: the boundary refuses the file (:mod:`.boundary`) or the range is off the file.
        """
        self.require_index(cb)
        read = file_text(cb, file, None if cb.alone else self.indexes.fileset(cb))
        rel, lines = read.path, read.lines
        total = len(lines)
        start = start_line or 1
        if start > max(total, 1):
            raise UsageError(f"start_line {start} is past the end of {rel} ({total} lines)")
        end = min(end_line or total, total, start + MAX_CONTENT_LINES - 1)
        if end < start and total:
            raise UsageError(f"end_line {end_line} is before start_line {start}")
        column = start_column or 1
        if column > 1:
            if column > (width := len(lines[start - 1].removesuffix("\n"))):  # its characters, as search's line_chars
                raise UsageError(f"start_column {column} is past the end of line {start} ({width} characters)")
            lines = [*lines[:start - 1], lines[start - 1][column - 1:], *lines[start:]]
        end, content, cut = lines_within_tokens(lines, start, end, max_tokens)
        data = {"codebase": cb.shown, "path": rel, "start_line": start, "end_line": end, "total_lines": total,
                "content": content, **({"start_column": column} if column > 1 else {})}
        if cb.alone:
            gaps = [[max(a, start), min(b, end)] for a, b in read.not_stored if a <= end and b >= start]
            data["note"] = ("the source is not here: this is the text the index stores (total_lines is its last "
                            "stored line)" + (f"; lines {', '.join(f'{a}-{b}' for a, b in gaps)} are not stored and "
                                              "shown empty" if gaps else ""))
            data["not_stored"] = gaps
        if cut:
            data["truncated"] = (f"line {end} is longer than the {'max_tokens' if max_tokens else f'{MAX_CONTENT_CHARS:,} characters'} "
                                 f"allowed: its characters {column:,}-{column + len(content) - 1:,} are shown, the rest from next_start_column")
            data.update(next_start_line=end, next_start_column=column + len(content))  # cut: the first line alone
        elif end < min(end_line or total, total):
            data["next_start_line"] = end + 1
        return data

    def outline(self, cb: Codebase, file: str, *, limit: int | None = None, start_line: int = 1,
                max_tokens: int | None = None) -> dict:
        """:func:`outline` of ``file`` under this server's boundary."""
        self.require_index(cb)
        return outline(cb, file, self.indexes.fileset(cb), limit=limit, start_line=start_line, max_tokens=max_tokens)

    def chunk(self, cb: Codebase, chunk_id: int, max_tokens: int | None = None) -> dict:
        """One indexed chunk by id, with ``stale`` (its file changed since indexing). With
        ``max_tokens``, its content is as many whole lines as fit (the head of the first when it
        alone is longer: a 200,000-character line is one chunk); a cut one has ``truncated`` (what
        was cut), ``shown_end_line`` and ``next_start_line`` (where get_content goes on), lines 1-based.

        Raises:
            UsageError: no such chunk, or the boundary now refuses its file.
        """
        self.require_index(cb)
        with self.indexes.searcher(cb) as searcher:
            row = searcher.store.row("chunk_by_id", {"id": chunk_id})
        if row is None:
            raise UsageError(f"no chunk {chunk_id} in the index of {cb.root}: ids change on re-indexing; search again")
        if not cb.alone and os.path.lexists(cb.root / row["path"]):
            self.indexes.fileset(cb).check(row["path"])
        data = {"codebase": cb.shown, "id": row["id"], "path": row["path"], "start_line": row["start_line"],
                "end_line": row["end_line"], "kind": row["kind"], "symbol": row["symbol"],
                "language": row["language"], "content": row["content"],
                "stale": None if cb.alone else StaleCheck(cb.root)(row)}
        return {**data, **_chunk_within(row, max_tokens)} if max_tokens else data


def _progress(st: dict, job: Job | None) -> dict:
    """Phase and file counts of a running build: the in-process job's (fresher) or the index's snapshot."""
    if job is not None and job.alive:
        return {"phase": job.phase, "done": job.done, "total": job.total}
    return {"phase": st.get("phase"), "done": st.get("files_done") or 0, "total": st.get("files_total") or 0}


def _vectors(st: dict, job: Job | None) -> dict | None:
    """The index's vector progress (:func:`~.vector_state.vector_progress`), with a running in-process job's fresher
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


def _chunk_within(row: dict, max_tokens: int) -> dict:
    """What a chunk's answer changes to fit ``max_tokens``: nothing when it fits, else its ``content``
    cut to whole lines (or the head of the first), ``shown_end_line``, ``next_start_line`` and ``truncated``."""
    lines = [line + "\n" for line in content_lines(row["content"])]
    last, content, cut = lines_within_tokens(lines, 1, len(lines), max_tokens)
    if not cut and last == len(lines):
        return {}
    first, by_line = row["start_line"], len(lines) == row["end_line"] - row["start_line"] + 1
    shown = first + last - 1 if by_line else first  # a notebook cell's lines share one file line
    what = f"the head of line {shown}" if cut else f"lines {first}-{shown}"
    return {"content": content, "shown_end_line": shown, "next_start_line": shown + 1,
            "truncated": f"{what} of the chunk's {first}-{row['end_line']} shown, to fit max_tokens={max_tokens}"}
