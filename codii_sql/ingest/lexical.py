"""The lexical phase of a build: every changed file's chunks, FTS5 rows and Merkle node, batch by batch.

After it every file of the codebase is searchable by BM25, symbol and path. Vectors the index or
the shared cache already holds are written with their chunks; the other chunks are queued for
the vector phase (:mod:`.embedding`). Each batch commits in one transaction, so a kill leaves
every file in its old or its new state.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..models.cache import EmbeddingCache, text_key
from ..storage.store import Store
from .chunking.layout import ChunkSizes
from .plan import Plan
from .prepare import Prepared, prepared_files
from . import roles
from .reclassify import reclassify
from .report import BuildReport, Progress
from .vectors import known_vectors
from .scanned import SourceFile
from .write import flush_tree, remove_files, write_files

#: A write transaction closes after this many chunks (or files): large enough that commit cost
#: (FTS5 segment flushes and merges, page writes) stays small, small enough that a kill loses
#: about a second of work and readers see progress. 512 / 256 made commits 40% of a kernel-size
#: write phase; 4,096 / 1,024 with the WAL checkpoint of sql/files.sql 1.7x faster (docs/benchmarks.md).
BATCH_CHUNKS = 4096
BATCH_FILES = 1024
#: A build that writes at least this share of the index's files (a first build, new chunking rules,
#: ``--force``) writes without the look-up indexes and sorts them after, and merges FTS5 segments 16 at
#: a time: the kernel's re-chunk in place wrote 63 GB with them kept (docs/benchmarks.md "Thirteenth round").
BULK_SHARE = 0.5


@dataclass
class LexicalPhase:
    """One build's lexical phase over a :class:`Plan` (see the module docstring).

    ``model_id`` keys the text hashes; ``reuse_index`` false reuses no vector of this index
    (``--force --no-cache``: embed everything again); ``sizes`` and ``workers`` are the chunk
    sizes and chunking processes of :func:`~.prepare.prepared_files`.
    """

    store: Store
    root: Path
    model_id: str
    cache: EmbeddingCache | None
    progress: Progress
    reuse_index: bool = True
    sizes: ChunkSizes = ChunkSizes()
    workers: int = 0

    def run(self, plan: Plan, report: BuildReport, scan_options: tuple[list[str], list[str] | None]) -> None:
        """Write every added, modified and re-indexed file of ``plan`` in batches, then the removals."""
        described(plan, report)
        written = {*plan.added, *plan.modified, *plan.reindexed}
        copies = roles.compiled_copies(plan.files)  # a role that depends on the tree's other paths
        if plan.reclassify:
            reclassify(self.store, self.root, [f for p, f in plan.files.items() if p not in written],
                       plan.attributes, plan.max_file_bytes, copies)
        with self.store.transaction():
            for f in plan.touched:
                self.store.run("file_touch", {"path": f.path, "size": f.size, "mtime_ns": f.mtime_ns})
            report.touched = len(plan.touched)
            ignore, exts = scan_options
            # The whole rules too: a read of the index (grep, a file's view) falls back on them while a
            # later .codii.yaml is malformed (one typo refused every grep and most MCP tools).
            self.store.set_meta(scan_ignore_patterns=ignore, scan_extensions=exts, scan_rules=plan.rules or None)
        todo = [plan.files[p] for p in plan.added + plan.modified + plan.reindexed]
        # An index without a vector has none to reuse: the look-up by text hash cost 107 s of a
        # 28-minute --no-vectors kernel build, all of it finding nothing.
        reuse_index = self.reuse_index and bool(self.store.value("has_vectors"))
        if todo and len(todo) >= BULK_SHARE * self.store.value("file_count"):
            with self.store.transaction():
                self.store.run("definitions_index_drop" if reuse_index else "lookup_indexes_drop")
                self.store.run("fts_merge_bulk")
        if todo:
            self._index_files(plan, todo, report, reuse_index, copies)
        # Removals last: a renamed file's new copy can still reuse the old copy's vectors.
        with self.store.transaction():
            remove_files(self.store, plan.old, plan.removed)
        started = time.perf_counter()
        with self.store.transaction():  # after a first build's writes (or a kill in one); else at hand already
            self.store.run("lookup_indexes")
            self.store.run("fts_merge_usual")
        report.phase_seconds["lookup_indexes"] = time.perf_counter() - started
        report.merkle_root = plan.old.root_hash

    def _index_files(self, plan: Plan, todo: list[SourceFile], report: BuildReport, reuse_index: bool,
                     copies: frozenset[str]) -> None:
        """Prepare and write ``todo`` in batches of :data:`BATCH_CHUNKS` chunks or :data:`BATCH_FILES` files,
        with the vectors this index holds for their texts when ``reuse_index``; ``copies``: the tree's files
        compiled from TypeScript (:func:`~.roles.compiled_copies`)."""
        done = 0
        with self.store.transaction():  # before the first progress, which may stop the build: what is left is known
            self.store.set_meta(phase="chunk", files_done=0, files_total=len(todo))
        self.progress("chunk", 0, len(todo))
        with prepared_files(self.root, todo, plan.max_file_bytes, window=2 * BATCH_FILES, sizes=self.sizes,
                            workers=self.workers) as prepared:
            for batch in _batches(self._counted(prepared, len(todo))):
                done = self._write_batch(batch, plan, report, reuse_index, copies, done, len(todo))

    def _write_batch(self, batch: list[Prepared], plan: Plan, report: BuildReport, reuse_index: bool,
                     copies: frozenset[str], done: int, total: int) -> int:
        """Write one batch in one transaction; the files done, ``done`` and this batch's."""
        ok = []
        for p in batch:
            if p.skip:
                report.skipped[p.skip] += 1
                report.skipped_files.append((p.path, p.skip))
            elif p.error:
                report.failed[p.path] = p.error
            else:
                ok.append(p)
        t = time.perf_counter()
        keys = [[text_key(self.model_id, c.content) for c in p.chunks] for p in ok]
        known = known_vectors(self.store, self.cache, [k for ks in keys for k in ks], reuse_index=reuse_index)
        report.vectors_reused += sum(1 for ks in keys for k in ks if k in known)
        report.phase_seconds["lookup"] += time.perf_counter() - t
        t = time.perf_counter()
        with self.store.transaction():
            write_files(self.store, plan.old, ok, keys, known, plan.attributes, copies)
            report.chunks_written += sum(len(p.chunks) for p in ok)
            flush_tree(self.store, plan.old)
            done += len(batch)
            self.store.set_meta(phase="chunk", files_done=done, files_total=total)
        report.phase_seconds["write"] += time.perf_counter() - t
        return done

    def _counted(self, prepared: Iterator[Prepared], total: int) -> Iterator[Prepared]:
        """``prepared`` as is, reporting ``progress("chunk", files chunked, total)`` as each arrives."""
        for i, p in enumerate(prepared, 1):
            self.progress("chunk", i, total)
            yield p


def described(plan: Plan, report: BuildReport) -> BuildReport:
    """``report`` filled with what ``plan`` finds: counts of added, modified, removed, re-indexed and
    unchanged files, the skips and the scan's phase times. Returns ``report``."""
    report.skipped.update(plan.skipped)
    report.phase_seconds.update(plan.seconds)
    report.added, report.modified, report.removed = len(plan.added), len(plan.modified), len(plan.removed)
    report.reindexed = len(plan.reindexed)
    report.unchanged = (len(plan.files) - sum(plan.skipped_after_read.values()) - report.added - report.modified
                        - report.reindexed)
    report.skipped.update(plan.skipped_after_read)
    report.skipped_files.extend(plan.skipped_paths)
    report.hidden_by = plan.hidden_by
    return report


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


#: Share of the indexed files a build must have written for it to compact the FTS5 indexes after.
COMPACT_SHARE = 0.1


def compact_text_indexes(store: Store, report: BuildReport, progress: Progress) -> None:
    """After a build that rewrote at least :data:`COMPACT_SHARE` of the files (a first build, a forced
    one, new chunking rules), merge each FTS5 index into one segment: incremental writes leave many
    segments and the rows of deleted chunks in them. Django after a forced build: the BM25 index's
    pages 11,822 -> 4,634, a plain MATCH p50 1.69 -> 0.63 ms, 0.8 s for both tables
    (docs/benchmarks.md "Compacting the text indexes")."""
    written = report.added + report.modified + report.removed + report.reindexed
    if not written or written < COMPACT_SHARE * store.value("file_count"):
        return
    progress("compact", 0, 1)
    started = time.perf_counter()
    with store.transaction():
        store.run("fts_optimize")
    report.phase_seconds["compact"] = time.perf_counter() - started
    progress("compact", 1, 1)


def stopped_at(store: Store, why: Exception | str) -> str | None:
    """What a build stopped on request (``why``) left, from the files its chunk phase recorded: ``"<why>
    after N of M files"``, None when it had written them all (a new user's MCP client closed during a
    first build, and status said stale, 100%, at 205 of 840 files)."""
    meta = store.meta()
    done, total = meta.get("files_done") or 0, meta.get("files_total") or 0
    return f"{why} after {done:,} of {total:,} files" if done < total else None
