"""The indexer: a lexical phase (every changed file searchable by BM25) then a vector phase (embed the queue)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Collection, Iterable

from ..codebase import Codebase
from ..errors import (BuildStopped, DamagedIndexError, EmbeddingFailedError, IndexBusyError, IndexMismatchError, Remedy,
                      UsageError)
from ..paths import in_indexes_dir
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..storage import ann, health, widths
from ..storage.copies import fold_log
from ..storage.lock import vector_lock, vectors_running, writer_lock
from ..storage.store import Store
from .chunking.version import CHUNKER_VERSION, rechunk_scope
from .chunking.layout import ChunkSizes
from .config import (DEFAULT_MAX_FILE_BYTES, CodebaseConfig, HistoryBound, bounded, extension_filter, history_wanted,
                     load_config, scan_rules, vectors_wanted)
from . import scan_stats
from .embedding import embed_queued
from .history import update_history
from .history_rules import HistoryRules
from .history_vectors import embed_history, fit_history_vec, history_dims
from .lexical import LexicalPhase, compact_text_indexes, described, stopped_at
from .plan import Plan, make_plan, nothing_to_do, same_settings
from .report import BuildReport, Progress, skip_listing
from .settings import check_compatible, index_settings

#: Seconds after a provider's server failed the lexical phase's probe within which the vector phase reports
#: that failure again instead of asking (each ask is ~6 s of retries); a longer lexical phase (a large tree)
#: asks again, as the server may be up by then.
PROBE_AGAIN_SECONDS = 60.0


class Indexer:
    """Builds or updates one codebase's index.

    Args:
        codebase: root and ``.db`` path.
        embedder: the :class:`~codii_sql.models.embedder.Embedder` of this build (None for :meth:`plan` alone).
        progress, cache: optional callback (:data:`Progress`), and the shared embedding cache (None: none).
        ignore_patterns, extensions: extra scan rules on top of ``.codii.yaml``; None keeps those recorded by the
            last build (so an update indexes the same file set).
        vectors: embed the queued chunks (True), or leave them for a later build (False:
            BM25 and symbols only; recorded, so later builds keep it until told otherwise);
            None: as recorded, else ``.codii.yaml``'s ``vectors``, else True.
        max_inline: embed here only when at most this many chunks are queued after the lexical phase (a
            search embeds a few edited chunks itself, in a query's time, and leaves a large queue to a
            background worker); None: whatever is queued.
        prefer: asked before each vector batch for the files whose chunks go first.
        workers: chunking processes (0: one per core, up to 4); recorded, so later builds keep it
            until told otherwise; None: as recorded, else ``.codii.yaml``'s ``workers``, else 0.
        history: which commits the history holds (:func:`history_wanted`); recorded, kept by later builds till told.
        with_history: update the history in this build (a search's own update leaves it alone:
            the ``history`` use case updates it before it searches).
        changed: the relative paths of every entry changed since the last build, as a file watcher heard
            them: the scan looks at those alone when it can (:func:`~.walk.rescan`); None: it walks.

    ``.codii.yaml``'s ``max_chunk_size``, ``min_chunk_size`` and ``embedding_batch_size`` are read
    at each build and recorded in the snapshot; a change of the chunk sizes re-chunks every file.

    Raises:
        UsageError: ``workers`` is out of range.
    """

    def __init__(self, codebase: Codebase, embedder: Embedder | None, *, progress: Progress | None = None,
                 cache: EmbeddingCache | None = None, ignore_patterns: Iterable[str] | None = None,
                 extensions: Iterable[str] | None = None, vectors: bool | None = None,
                 max_inline: int | None = None, prefer: Callable[[], Iterable[str]] | None = None,
                 workers: int | None = None, history: HistoryBound | None = None, with_history: bool = True,
                 changed: Collection[str] | None = None):
        self.codebase = codebase
        self.changed = changed
        self.history = history
        self.with_history = with_history
        self._unanswered: tuple[float, EmbeddingFailedError] | None = None  # (when, why) the server failed a probe
        self.embedder = embedder
        self.progress = progress or (lambda phase, done, total: None)
        self.cache = cache
        self.ignore_patterns = list(ignore_patterns) if ignore_patterns is not None else None
        self.extensions = extension_filter(extensions)
        self.vectors = vectors
        self.max_inline = max_inline
        self.prefer = prefer
        self.max_file_bytes = DEFAULT_MAX_FILE_BYTES
        self.removed_paths: list[str] = []  # the files this build took out of the index
        self.added_paths: list[str] = []  # ... and those it took in
        self.reuse_index_vectors = True
        try:
            self.workers = bounded(workers, "workers")
        except ValueError as err:
            raise UsageError(str(err)) from None
        self.embedding_batch_size: int | None = None

    def build(self, *, force: bool = False, wait: bool = True) -> BuildReport:
        """Bring the index up to date with the files on disk and return what changed.

        The lexical phase runs under the writer lock: each batch of files commits in one
        transaction (chunks, FTS5 rows, file rows, Merkle nodes, and the vectors already known),
        so a crash or kill leaves every file in its old or its new state. The vector phase then
        runs under the vector lock (see :mod:`codii_sql.storage.lock`), committing per batch.

        Args:
            force: re-read and re-chunk every file (in place; after a model change the index is emptied first);
                with no ``cache`` every chunk is embedded again.
            wait: wait for another process's lexical or vector phase to finish; if false raise
                for the writer lock, and leave the queue to the process that holds the vector lock.
        Raises:
            IndexBusyError: ``wait`` is false and another process holds the writer lock.
            IndexMismatchError: the index was built with another model or schema.
            EmbeddingFailedError: the model failed in the vector phase (the lexical phase and the
                vectors before the failure are committed).
            UsageError: ``.codii.yaml`` is malformed.
            StorageError: the index file cannot be opened or written.
        """
        # The store opens first: it refuses someone else's database before a lock file is left
        # beside it (opening only creates the idempotent schema, as every reader does).
        # The log is folded and the file vouched for (health.py) under this build's lock, writer or vector: a
        # search between a commit and its vouch took the change for another writer's and read every page
        # (13-15 s on the kernel, for each watched edit a search met).
        with Store(self.codebase.db_path) as store, contextlib.ExitStack() as held, contextlib.ExitStack() as writing:
            writing.enter_context(writer_lock(self.codebase, wait=wait))
            store.run("pragma_write_cache")
            self._refuse_damaged(store, force)
            report = self._lexical(store, force)
            if self.with_history:  # its time counts in the build's (a build of 1.5 s said 0.03 s: a new user)
                report.history = self.update_history(store)
                report.seconds += report.phase_seconds.setdefault("history", report.history.get("seconds") or 0.0)
            pending = store.row("vector_counts")["pending"]
            report.vectors_enabled = self._vectors_on(store)
            # A search's inline embedding is for a few edited chunks: the commits wait for a build.
            commits = store.row("history_counts")["pending"] if self.max_inline is None else 0
            embed = report.vectors_enabled and (
                (pending and (self.max_inline is None or pending <= self.max_inline)) or commits)
            # The vector lock is taken before the writer lock goes, when it is free: no instant
            # in which the index looks finished with its vectors about to start.
            locked = embed and self._take_vector_lock(held)
            if embed:
                writing.close()  # the vector phase runs beside searches and updates
                self._embed_queued(store, report, wait, locked)
            report.vectors_pending = store.row("vector_counts")["pending"]
            if report.vectors_enabled and not report.vectors_pending:
                # Every vector is written: cluster (or re-cluster) it for approximate KNN, or not.
                ann.maintain(store, self._config().ann_min_vectors)
            fold_log(store)
            health.vouch(self.codebase.db_path, store.value("index_bytes"))  # only this build wrote since its check
        return report

    def _refuse_damaged(self, store: Store, force: bool) -> None:
        """Raise DamagedIndexError when quick_check finds broken pages: writing on would spread the damage.
        Not with ``force``: the service has deleted a damaged file first (``discard_damaged``)."""
        problem = None if force else health.damage(store)
        if problem:
            root = self.codebase.root
            custom = {} if in_indexes_dir(store.path) else {"db": str(store.path)}
            raise DamagedIndexError(f"{store.path} is damaged ({problem})",
                                    Remedy("force_build", {"root": str(root), **custom}))

    def _lexical(self, store: Store, force: bool) -> BuildReport:
        started = time.perf_counter()
        meta = store.meta()
        known = meta.get("model_id") == self.embedder.model_id and meta.get("dims")
        if self.embedder.dims is None and self._vectors_on(store) and not known and self.max_inline != 0:
            # A new HTTP provider index: one request says the width (and that it answers). An index
            # that records its width needs none: its lexical update works with the server down. A
            # server that does not answer leaves the width to the vector phase, which says why it
            # failed: the lexical phase needs no vector (a new user's first build with Ollama down
            # committed nothing, and status said not_indexed without the error). An update that embeds
            # nothing (a search's, after a failure) does not ask at all.
            try:
                self.embedder.load()
            except EmbeddingFailedError as err:
                self._unanswered = (time.monotonic(), err)
        settings = index_settings(self.embedder)
        self.reuse_index_vectors = not (force and self.cache is None)  # --force --no-cache: embed every chunk again
        if force:
            self._start_over(store, settings)
        config = self._config()
        sizes = {"max_chunk_size": config.max_chunk_size, "min_chunk_size": config.min_chunk_size}
        meta = store.meta()
        resized = meta.get("chunk_sizes", sizes) != sizes
        if meta.get("chunker_version") not in (None, CHUNKER_VERSION) or resized:
            # New rules or sizes: re-chunk every file (or those the rules changed); unchanged texts keep their vectors
            scope = None if resized else rechunk_scope(meta["chunker_version"], CHUNKER_VERSION)
            with store.transaction():
                store.run(*(("files_mark_reindex",) if scope is None else ("files_mark_reindex_scoped", dict(
                    zip(("languages", "suffixes"), map(json.dumps, scope))))))
                store.set_meta(chunker_version=CHUNKER_VERSION)
        workers = next((w for w in (self.workers, meta.get("workers"), config.workers) if w is not None), 0)
        self.embedding_batch_size = config.embedding_batch_size
        check_compatible(store, settings)
        if self.embedder.dims is not None:
            widths.fit_vector_tables(store, self.embedder.dims)
        # Every file a build writes gets its grep text and trigram row and its definitions, so an index
        # that starts empty is complete for grep and symbols; an upgraded one is checked once its build
        # has finished.
        complete = {"grep_complete": True, "definitions_complete": True} if not store.value("has_files") else {}
        recorded = dict(**settings, root=str(self.codebase.root), vectors_enabled=self._vectors_on(store),
                        embedder=self.embedder.name, chunk_sizes=sizes, embedding_batch_size=config.embedding_batch_size,
                        **({"vectors": self.vectors} if self.vectors is not None else {}),
                        **({"workers": self.workers} if self.workers is not None else {}))
        plan = None
        intact = store.value("lookup_indexes_present")  # a first build stopped before making them has work left
        if not force and not complete and intact and meta.get("status") == "indexed" and same_settings(meta, recorded):
            plan = self.plan(store)  # read-only: a build that finds nothing to do writes nothing
            report = described(plan, BuildReport())
            # A path newly left out (a file or folder whose name is not UTF-8, a new excluded folder) changes
            # no indexed file but must reach the snapshot's skip list, which status --skipped shows.
            if nothing_to_do(plan, meta, self._options(store)) and dict(report.skipped) == (meta.get("skipped") or {}):
                self.max_file_bytes = plan.max_file_bytes
                scan_stats.keep(store, plan, failed=0)
                report.files, report.chunks, report.merkle_root = meta.get("files"), meta.get("chunks"), plan.old.root_hash
                report.seconds = report.phase_seconds["lexical"] = time.perf_counter() - started
                return report
        with store.transaction():
            # Roles are re-derived after the scan (reclassify.py), which reads the .gitattributes.
            store.set_meta(**complete, **recorded, status="indexing", pid=os.getpid(), started_at=time.time(),
                           phase="scan", error=None)
        report = BuildReport()
        try:
            plan = plan or self.plan(store)
            self.max_file_bytes = plan.max_file_bytes
            # The history phase reads again the commits of files left out, or taken back in, by a rule.
            self.removed_paths, self.added_paths = list(plan.removed), list(plan.added)
            LexicalPhase(store, self.codebase.root, self.embedder.model_id, self.cache, self.progress,
                         self.reuse_index_vectors, ChunkSizes(sizes["max_chunk_size"], sizes["min_chunk_size"]),
                         workers).run(plan, report, self._options(store))
            compact_text_indexes(store, report, self.progress)
        except (BuildStopped, KeyboardInterrupt) as err:  # stopped on request (Ctrl-C, SIGTERM too: status said
            # "failed" to a new user's Ctrl-C): what it committed is the index, now stale
            with store.transaction():
                store.set_meta(status="indexed", error=None, finished_at=time.time(),
                               stopped=stopped_at(store, err if isinstance(err, BuildStopped) else "interrupted"))
            raise
        except BaseException as err:
            with store.transaction():
                store.set_meta(status="failed", error=f"{type(err).__name__}: {err}", finished_at=time.time())
            raise
        report.seconds = report.phase_seconds["lexical"] = time.perf_counter() - started
        counts = store.row("counts")
        report.files, report.chunks = counts["files"], counts["chunks"]
        # A no-op update keeps the last real build's duration (status shows how long a build took).
        wrote = report.added or report.modified or report.removed or report.reindexed
        took = {"build_seconds": round(report.seconds, 3)} if wrote else {}
        meta = store.meta()
        complete = {} if meta.get("grep_complete") or store.value("grep_without_text") else {"grep_complete": True}
        if not meta.get("definitions_complete") and not store.value("definitions_unread"):
            complete["definitions_complete"] = True
        with store.transaction():
            store.set_meta(status="indexed", phase="done", stopped=None, finished_at=time.time(), last_indexed_at=time.time(),
                           merkle_root=report.merkle_root, files=report.files, chunks=report.chunks,
                           skipped=dict(report.skipped), skipped_files=skip_listing(report.skipped_files),
                           failed=report.failed, **took, **complete)
        scan_stats.keep(store, plan, failed=len(report.failed or ()))
        return report

    def update_history(self, store: Store) -> dict:
        """The history phase (:func:`~.history.update_history`) under the writer lock the caller holds, with
        this build's scan rules; a missing git command is its one-line note, not the build's error."""
        bound = history_wanted(self.history, store.meta(), self.codebase.root)
        if self.history is not None:
            with store.transaction():
                store.set_meta(history_asked=bound.to_dict())
        scan = scan_rules(self.codebase.root, *self._options(store))
        rules = HistoryRules(self.codebase.root, {r["path"] for r in store.rows("files_all")},
                             scan["ignore_patterns"], scan["extensions"])
        if history_dims(store) != store.vector_dims():  # the search statement reads history_vec, vectors or not
            with store.transaction():
                fit_history_vec(store, store.vector_dims(), self.embedder.name)
        try:
            return update_history(store, self.codebase.root, bound, rules, self.progress,
                                  left_out=self.removed_paths, taken_in=self.added_paths)
        except UsageError as err:
            return {"state": "no_git", "note": str(err)}

    def refresh_history(self, *, embed_up_to: int) -> dict:
        """The history phase alone, as the ``history`` search runs it first: under the writer lock
        (not waiting), then the vectors of the new commits when at most ``embed_up_to`` wait and
        the vector lock is free (more are left to a build). Returns :meth:`update_history`'s answer.

        Raises:
            IndexBusyError: another process holds the writer lock.
            StorageError: the index cannot be opened or written.
        """
        with Store(self.codebase.db_path, create=False) as store, contextlib.ExitStack() as held:
            with writer_lock(self.codebase, wait=False):
                out = self.update_history(store)
            pending = store.row("history_counts")["pending"]
            if 0 < pending <= embed_up_to and self._vectors_on(store) and self._take_vector_lock(held):
                embed_history(store, self.embedder, self.cache, self.progress)
        return out

    def _config(self) -> CodebaseConfig:
        """``.codii.yaml`` of the codebase. Raises UsageError: it is malformed."""
        try:
            return load_config(self.codebase.root)
        except ValueError as err:
            raise UsageError(str(err)) from None

    def _vectors_on(self, store: Store) -> bool:
        return vectors_wanted(self.vectors, store.meta(), self.codebase.root)

    def _take_vector_lock(self, held: contextlib.ExitStack) -> bool:
        """Take the vector lock into ``held`` if no process holds it; False if one does."""
        if vectors_running(self.codebase):
            return False
        try:
            held.enter_context(vector_lock(self.codebase, wait=False))
        except IndexBusyError:
            return False
        return True

    def _embed_queued(self, store: Store, report: BuildReport, wait: bool, locked: bool) -> None:
        """The vector phase under the vector lock (``locked``: held already); without ``wait`` a phase
        running in another process is left alone, with ``wait`` this one waits for it to end."""
        if not locked and not wait:
            return
        started = time.perf_counter()
        with contextlib.ExitStack() as held:
            held.enter_context(self.embedder.quick() if self.max_inline is not None else contextlib.nullcontext())
            if not locked:
                counts = store.row("vector_counts")
                # Heard as phase "waiting": the CLI says whom it waits for instead of sitting silent.
                self.progress("waiting", counts["chunks"] - counts["pending"], counts["chunks"])
                held.enter_context(vector_lock(self.codebase, wait=True))
            with store.transaction():
                store.set_meta(vectors_pid=os.getpid(), vectors_started_at=time.time(), vectors_error=None)
            try:
                if self.embedder.dims is None and not store.meta().get("dims"):  # the lexical phase's probe failed
                    try:
                        if self._unanswered and time.monotonic() - self._unanswered[0] < PROBE_AGAIN_SECONDS:
                            raise self._unanswered[1]
                        self.embedder.load()
                    except EmbeddingFailedError as err:
                        raise EmbeddingFailedError(f"{err.what}; every file is indexed for BM25, symbols and grep, "
                                                   "and the next build embeds the chunks", err.hint) from None
                    widths.fit_vector_tables(store, self.embedder.dims)
                    with store.transaction():
                        store.set_meta(dims=self.embedder.dims)
                embed_queued(store, self.embedder, self.cache, report, self.progress, prefer=self.prefer,
                             reuse_index=self.reuse_index_vectors, batch_size=self.embedding_batch_size)
                if self.max_inline is None:
                    t = time.perf_counter()
                    report.commits_embedded = embed_history(store, self.embedder, self.cache, self.progress)
                    report.phase_seconds["history_vectors"] += time.perf_counter() - t
            except BuildStopped:
                raise  # on request: the queue keeps the rest, nothing failed
            except Exception as err:
                with store.transaction():
                    store.set_meta(vectors_error=str(err))
                raise
        report.seconds += time.perf_counter() - started

    @staticmethod
    def _start_over(store: Store, settings: dict) -> None:
        """``--force``: every file is read, chunked and written again.

        With the same model this happens in place, file by file, so a search during the
        rebuild, or after a kill, still sees every file (old or new state). Another model's
        vectors cannot share the vec0 tables, so only then is the index emptied first.
        """
        try:
            check_compatible(store, settings | {"chunker_version": store.meta().get("chunker_version")})
        except IndexMismatchError:
            with store.transaction():
                store.run("wipe")
                store.run("history_wipe")
                store.create_schema()
            return
        with store.transaction():
            store.run("files_mark_reindex")

    def plan(self, store: Store) -> Plan:
        """Scan and hash without writing: what a build would add, modify and remove.

        Reads only files whose size or mtime differ from their indexed row. Also the basis
        of ``status`` = stale.

        Raises:
            UsageError: ``.codii.yaml`` is malformed.
        """
        rules = scan_rules(self.codebase.root, *self._options(store))
        saved = scan_stats.saved_scan(store, rules) if self.changed is not None else None
        return make_plan(store, self.codebase.root, rules, self.progress, saved=saved, changed=self.changed)

    def _options(self, store: Store) -> tuple[list[str], list[str] | None]:
        """This build's extra ignore patterns and extensions; None means: those of the last build."""
        meta = store.meta()
        ignore = self.ignore_patterns if self.ignore_patterns is not None else meta.get("scan_ignore_patterns") or []
        exts = self.extensions if self.extensions is not None else meta.get("scan_extensions")
        return list(ignore), (list(exts) if exts else None)
