"""The indexer: plan (scan, hash, Merkle diff), then prepare, embed and write the changed files in batches."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator

from ..codebase import Codebase
from ..errors import IndexMismatchError
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..storage.lock import writer_lock
from ..storage.store import SCHEMA_VERSION, Store
from . import merkle, roles
from .chunking import CHUNKER_VERSION
from .config import DEFAULT_MAX_FILE_BYTES, scan_rules
from .plan import Plan, make_plan
from .prepare import Prepared, prepared_files
from .report import BuildReport, Progress
from .vectors import batch_vectors
from .walk import SourceFile
from .write import flush_tree, remove_files, write_files

#: A write transaction closes after this many chunks (or files): large enough that commit cost
#: vanishes, small enough that a kill loses little work and readers see progress.
BATCH_CHUNKS = 512
BATCH_FILES = 256


def index_settings(embedder: Embedder) -> dict:
    """The snapshot keys that must match between an index and this build (else rebuild)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model_id": embedder.model_id,
        "dims": embedder.dims,
        "model_sha256": embedder.sha256,
        "chunker_version": CHUNKER_VERSION,
    }


class Indexer:
    """Builds or updates one codebase's index.

    Args:
        codebase: root and ``.db`` path.
        embedder: the :class:`~codii_sql.models.embedder.Embedder` of this build (None for
            :meth:`plan` alone).
        progress: optional callback, see :data:`Progress`.
        cache: the shared embedding cache; None disables it.
        ignore_patterns, extensions: extra scan rules on top of ``.codii.yaml``; None keeps
            those recorded by the last build (so an update indexes the same file set).
    """

    def __init__(self, codebase: Codebase, embedder: Embedder | None, *, progress: Progress | None = None,
                 cache: EmbeddingCache | None = None, ignore_patterns: Iterable[str] | None = None,
                 extensions: Iterable[str] | None = None):
        self.codebase = codebase
        self.embedder = embedder
        self.progress = progress or (lambda phase, done, total: None)
        self.cache = cache
        self.ignore_patterns = list(ignore_patterns) if ignore_patterns is not None else None
        self.extensions = list(extensions) if extensions is not None else None
        self.max_file_bytes = DEFAULT_MAX_FILE_BYTES
        self.reuse_index_vectors = True

    def build(self, *, force: bool = False, wait: bool = True) -> BuildReport:
        """Bring the index up to date with the files on disk and return what changed.

        Each batch of files commits in one transaction (chunks, FTS5 rows, vectors, file
        rows and Merkle nodes together), so a crash or kill leaves every file either in its
        old or its new state; the next build finishes the job.

        Args:
            force: re-read and re-chunk every file (in place; after a model change the index is emptied first);
                with no ``cache`` every chunk is embedded again.
            wait: wait for another process's build to finish; if false raise instead.
        Raises:
            IndexBusyError: ``wait`` is false and another process holds the writer lock.
            IndexMismatchError: the index was built with another model or schema.
            UsageError: ``.codii.yaml`` is malformed.
            StorageError: the index file cannot be opened or written.
        """
        # The store opens first: it refuses someone else's database before a lock file is left
        # beside it (opening only creates the idempotent schema, as every reader does).
        with Store(self.codebase.db_path) as store, writer_lock(self.codebase, wait=wait):
            store.run("pragma_write_cache")
            return self._build_locked(store, force)

    def _build_locked(self, store: Store, force: bool) -> BuildReport:
        started = time.perf_counter()
        settings = index_settings(self.embedder)
        # --force --no-cache is the way to embed every chunk again: reuse no vector at all.
        self.reuse_index_vectors = not (force and self.cache is None)
        if force:
            self._start_over(store, settings)
        if store.meta().get("chunker_version") not in (None, CHUNKER_VERSION):
            # New chunking rules: re-chunk every file instead of refusing the index. Chunk texts
            # that did not change keep their vectors (looked up by text hash), so it is cheap.
            with store.transaction():
                store.run("files_mark_reindex")
                store.set_meta(chunker_version=CHUNKER_VERSION)
        store.check_compatible(settings)
        with store.transaction():
            if store.meta().get("roles_version") != roles.VERSION:
                store.many("file_set_role", [{"path": r["path"], "role": roles.classify(r["path"])}
                                             for r in store.rows("files_all")])
            store.set_meta(**settings, root=str(self.codebase.root), status="indexing", pid=os.getpid(),
                           started_at=time.time(), phase="scan", error=None, roles_version=roles.VERSION)
        report = BuildReport()
        try:
            self._run(store, report)
        except BaseException as err:
            why = ("interrupted; every file committed so far is kept, run build again to finish"
                   if isinstance(err, KeyboardInterrupt) else f"{type(err).__name__}: {err}")
            with store.transaction():
                store.set_meta(status="failed", error=why, finished_at=time.time())
            raise
        report.seconds = time.perf_counter() - started
        counts = store.row("counts")
        report.files, report.chunks = counts["files"], counts["chunks"]
        # A no-op update keeps the last real build's duration (status shows how long a build took).
        wrote = report.added or report.modified or report.removed or report.reindexed
        took = {"build_seconds": round(report.seconds, 3)} if wrote else {}
        with store.transaction():
            store.set_meta(status="indexed", phase="done", finished_at=time.time(), last_indexed_at=time.time(),
                           merkle_root=report.merkle_root, files=report.files, chunks=report.chunks,
                           skipped=dict(report.skipped), failed=report.failed, **took)
        # Fold the WAL into the main file: a copied .db alone then holds the whole index.
        store.run("wal_checkpoint")
        return report

    @staticmethod
    def _start_over(store: Store, settings: dict) -> None:
        """``--force``: every file is read, chunked and written again.

        With the same model this happens in place, file by file, so a search during the
        rebuild, or after a kill, still sees every file (old or new state). Another model's
        vectors cannot share the vec0 tables, so only then is the index emptied first.
        """
        try:
            store.check_compatible(settings | {"chunker_version": store.meta().get("chunker_version")})
        except IndexMismatchError:
            with store.transaction():
                store.run("wipe")
                store.run("create_schema")
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
        return make_plan(store, self.codebase.root, rules, self.progress)

    def _options(self, store: Store) -> tuple[list[str], list[str] | None]:
        """This build's extra ignore patterns and extensions; None means: those of the last build."""
        meta = store.meta()
        ignore = self.ignore_patterns if self.ignore_patterns is not None else meta.get("scan_ignore_patterns") or []
        exts = self.extensions if self.extensions is not None else meta.get("scan_extensions")
        return list(ignore), (list(exts) if exts else None)

    def _run(self, store: Store, report: BuildReport) -> None:
        """Plan, write every added, modified and re-indexed file in batches, then the removals."""
        plan = self.plan(store)
        self.max_file_bytes = plan.max_file_bytes
        report.skipped.update(plan.skipped)
        report.phase_seconds.update(plan.seconds)
        report.added, report.modified, report.removed = len(plan.added), len(plan.modified), len(plan.removed)
        report.reindexed = len(plan.reindexed)
        report.unchanged = (len(plan.files) - sum(plan.skipped_after_read.values()) - report.added - report.modified
                            - report.reindexed)
        report.skipped.update(plan.skipped_after_read)
        with store.transaction():
            for f in plan.touched:
                store.run("file_touch", {"path": f.path, "size": f.size, "mtime_ns": f.mtime_ns})
            report.touched = len(plan.touched)
            ignore, exts = self._options(store)
            store.set_meta(scan_ignore_patterns=ignore, scan_extensions=exts)
        todo = [plan.files[p] for p in plan.added + plan.modified + plan.reindexed]
        if todo:
            self._index_files(store, plan.old, todo, report)
        # Removals last: a renamed file's new copy can still reuse the old copy's vectors.
        with store.transaction():
            remove_files(store, plan.old, plan.removed)
        report.merkle_root = plan.old.root_hash

    def _index_files(self, store: Store, tree: merkle.Tree, todo: list[SourceFile], report: BuildReport) -> None:
        """Prepare, embed and write ``todo`` in batches of :data:`BATCH_CHUNKS` chunks or :data:`BATCH_FILES` files."""
        done = 0
        self.progress("embed", 0, len(todo))
        with store.transaction():
            store.set_meta(phase="embed", files_done=0, files_total=len(todo))
        batches = _batches(prepared_files(self.codebase.root, todo, self.max_file_bytes, window=4 * BATCH_FILES))
        while True:
            # Time blocked on the worker processes: zero when chunking hides behind the model.
            t = time.perf_counter()
            batch = next(batches, None)
            report.phase_seconds["chunk_wait"] += time.perf_counter() - t
            if batch is None:
                break
            ok = []
            for p in batch:
                if p.skip:
                    report.skipped[p.skip] += 1
                elif p.error:
                    report.failed[p.path] = p.error
                else:
                    ok.append(p)

            def step(embedded: int, total: int, base: int = done, n: int = len(batch)) -> None:
                self.progress("embed", base + n * embedded // total, len(todo))

            try:
                vectors = batch_vectors(store, self.embedder, self.cache, ok, report, step,
                                        reuse_index=self.reuse_index_vectors)
            except Exception as err:  # the model failed on this batch: keep old rows, retry next run
                for p in ok:
                    report.failed[p.path] = f"embedding failed: {type(err).__name__}: {err}"
                ok, vectors = [], []
            t = time.perf_counter()
            with store.transaction():
                write_files(store, tree, ok, vectors)
                report.chunks_written += sum(len(p.chunks) for p in ok)
                flush_tree(store, tree)
                done += len(batch)
                store.set_meta(phase="embed", files_done=done, files_total=len(todo))
            report.phase_seconds["write"] += time.perf_counter() - t
            self.progress("embed", done, len(todo))


def _batches(items: Iterator[Prepared]) -> Iterator[list[Prepared]]:
    """``items`` cut into batches that close at :data:`BATCH_CHUNKS` chunks or :data:`BATCH_FILES` files."""
    batch: list[Prepared] = []
    n_chunks = 0
    for p in items:
        batch.append(p)
        n_chunks += len(p.chunks)
        if n_chunks >= BATCH_CHUNKS or len(batch) >= BATCH_FILES:
            yield batch
            batch, n_chunks = [], 0
    if batch:
        yield batch
