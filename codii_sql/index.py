"""The indexer: scan -> hash -> Merkle diff -> chunk (worker processes) -> embed -> write, one transaction per batch."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import merkle, roles, scan
from .models.cache import EmbeddingCache, text_key
from .chunk import CHUNKER_VERSION, Chunk, chunk_text
from .codebase import Codebase
from .errors import IndexMismatchError, UsageError
from .languages import detect_language
from .storage.lock import writer_lock
from .storage.store import SCHEMA_VERSION, Store
from .text import decode_source, identifier_subtokens

#: A write transaction closes after this many chunks (or files): large enough that commit cost
#: vanishes, small enough that a kill loses little work and readers see progress.
BATCH_CHUNKS = 512
BATCH_FILES = 256
#: Texts per embedder call within a batch: progress moves while a 512-chunk batch is embedded
#: (~50 s at 10 chunks/s; an MCP client polling get_indexing_status saw 0% until the commit).
EMBED_STEP = 128
#: ``files.size`` of a file marked for re-chunking (``build --force``, a chunker change): it
#: never equals a real size, so the file is read, and the plan re-indexes it even if unchanged.
REINDEX_SIZE = -1
#: Below this many files to chunk, worker processes cost more to start than they save.
POOL_MIN_FILES = 64

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``; phases: scan, hash, chunk, embed, write."""


@dataclass
class Prepared:
    """One file read, hashed and chunked (in a worker process). ``error`` set means: not indexed this run.

    ``subtokens[i]`` is the FTS5 ``subtokens`` text of ``chunks[i]`` (see :func:`chunk_subtokens`),
    computed in the worker so the writer only inserts.
    """

    path: str
    size: int
    mtime_ns: int
    hash: str = ""
    language: str | None = None
    chunks: list[Chunk] = field(default_factory=list)
    subtokens: list[str] = field(default_factory=list)
    skip: str | None = None
    error: str | None = None


@dataclass
class Plan:
    """What a build would do, from a scan and the hashes of changed files (see :meth:`Indexer.plan`)."""

    files: dict[str, scan.SourceFile]
    skipped: Counter
    max_file_bytes: int
    skipped_after_read: Counter = field(default_factory=Counter)
    touched: list[scan.SourceFile] = field(default_factory=list)
    old: merkle.Tree | None = None
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reindexed: list[str] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)

    @property
    def changed(self) -> bool:
        """True when a build would write anything."""
        return bool(self.added or self.modified or self.removed or self.reindexed)


def scan_rules(root: Path, ignore_patterns: list[str], extensions: list[str] | None) -> dict:
    """``scan.scan`` keyword arguments: ``.codii.yaml`` merged with a build's own options.

    The config's ignore patterns come first, then ``ignore_patterns``; ``extensions``
    replaces the config's when given.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    try:
        config = scan.load_config(root)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return {"ignore_patterns": [*config.ignore_patterns, *ignore_patterns],
            "extensions": extensions or config.extensions, "max_file_bytes": config.max_file_bytes}


@dataclass
class BuildReport:
    """What a build did. Times are wall seconds; ``phase_seconds`` splits them by stage.

    Phases: ``scan`` (directory walk), ``hash`` (reading and hashing changed files, Merkle
    diff), ``chunk_wait`` (the main process blocked on the chunking workers), ``lookup``
    (vectors reused from the index or the cache), ``embed`` (tokenizer + model), ``write``
    (SQL transactions).
    """

    files: int = 0
    chunks: int = 0
    added: int = 0
    modified: int = 0
    removed: int = 0
    reindexed: int = 0
    touched: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    vectors_reused: int = 0
    skipped: Counter = field(default_factory=Counter)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    phase_seconds: Counter = field(default_factory=Counter)
    merkle_root: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        out = dict(self.__dict__)
        out["skipped"] = dict(self.skipped)
        out["phase_seconds"] = {k: round(v, 3) for k, v in self.phase_seconds.items()}
        out["seconds"] = round(self.seconds, 3)
        return out


def index_settings(embedder) -> dict:
    """The snapshot keys that must match between an index and this build (else rebuild)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model_id": embedder.model_id,
        "dims": embedder.dims,
        "model_sha256": embedder.sha256,
        "chunker_version": CHUNKER_VERSION,
    }


def prepare_file(root: str, f: scan.SourceFile, max_file_bytes: int) -> Prepared:
    """Read, hash, decode and chunk one file. Never raises: failures land in ``skip``/``error``."""
    out = Prepared(f.path, f.size, f.mtime_ns)
    try:
        data = scan.read_file(Path(root), f, max_file_bytes=max_file_bytes)
        if isinstance(data, str):
            out.skip = data
            return out
        out.hash = hashlib.sha256(data).hexdigest()
        out.language = detect_language(f.path)
        out.chunks = chunk_text(decode_source(data), out.language)
        out.subtokens = chunk_subtokens(f.path, out.chunks)
    except Exception as err:  # one bad file must not stop the build; it is retried next run
        out.error = f"{type(err).__name__}: {err}"
    return out


def chunk_subtokens(path: str, chunks: list[Chunk]) -> list[str]:
    """Per chunk, its FTS5 ``subtokens`` text: the identifier sub-tokens of its symbol, of the
    file's ``path`` and of its content, space-separated (:func:`text.identifier_subtokens`).

    The path's parts are included so a query word found only in a file name (``sessions.py``)
    still matches that file's chunks.
    """
    path_tokens = identifier_subtokens(path.replace("/", " ").replace(".", " "))
    return [" ".join(filter(None, (identifier_subtokens(c.symbol or ""), path_tokens, identifier_subtokens(c.content))))
            for c in chunks]


def _hash_file(root: Path, f: scan.SourceFile, max_file_bytes: int) -> str:
    data = scan.read_file(root, f, max_file_bytes=max_file_bytes)
    return data if isinstance(data, str) else "sha256:" + hashlib.sha256(data).hexdigest()


class Indexer:
    """Builds or updates one codebase's index.

    Args:
        codebase: root and ``.db`` path.
        embedder: an object with ``model_id``, ``dims``, ``sha256`` and
            ``embed(list[str]) -> float32[n, dims]`` (normally :func:`embed.get_embedder`).
        progress: optional callback, see :data:`Progress`.
        cache: the shared embedding cache; None disables it.
        ignore_patterns, extensions: extra scan rules on top of ``.codii.yaml``; None keeps
            those recorded by the last build (so an update indexes the same file set).
    """

    def __init__(self, codebase: Codebase, embedder, *, progress: Progress | None = None,
                 cache: EmbeddingCache | None = None, ignore_patterns: Iterable[str] | None = None,
                 extensions: Iterable[str] | None = None):
        self.codebase = codebase
        self.embedder = embedder
        self.progress = progress or (lambda phase, done, total: None)
        self.cache = cache
        self.ignore_patterns = list(ignore_patterns) if ignore_patterns is not None else None
        self.extensions = list(extensions) if extensions is not None else None
        self.max_file_bytes = scan.DEFAULT_MAX_FILE_BYTES
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

    # -- the stages ---------------------------------------------------------------------

    def plan(self, store: Store) -> Plan:
        """Scan and hash without writing: what a build would add, modify and remove.

        Reads only files whose size or mtime differ from their indexed row. Also the basis
        of ``status`` = stale.

        Raises:
            UsageError: ``.codii.yaml`` is malformed.
        """
        t = time.perf_counter()
        rules = scan_rules(self.codebase.root, *self._options(store))
        result = scan.scan(self.codebase.root, **rules)
        self.progress("scan", len(result.files), len(result.files))
        plan = Plan(files={f.path: f for f in result.files}, skipped=Counter(result.skipped),
                    max_file_bytes=rules["max_file_bytes"])
        plan.seconds["scan"] = time.perf_counter() - t
        t = time.perf_counter()
        stored = {r["path"]: r for r in store.rows("files_all")}
        hashes = self._hash(result.files, stored, plan)
        plan.old = merkle.Tree({r["path"]: merkle.Node(r["path"], r["parent"], bool(r["is_dir"]), r["hash"])
                                for r in store.rows("merkle_all")})
        new = merkle.build(hashes)
        plan.added, plan.modified, plan.removed = merkle.changed_files(plan.old.nodes, new.nodes)
        changed = {*plan.added, *plan.modified}
        plan.reindexed = sorted(p for p, r in stored.items()
                                if r["size"] == REINDEX_SIZE and p in hashes and p not in changed)
        plan.seconds["hash"] = time.perf_counter() - t
        return plan

    def _options(self, store: Store) -> tuple[list[str], list[str] | None]:
        """This build's extra ignore patterns and extensions; None means: those of the last build."""
        meta = store.meta()
        ignore = self.ignore_patterns if self.ignore_patterns is not None else meta.get("scan_ignore_patterns") or []
        exts = self.extensions if self.extensions is not None else meta.get("scan_extensions")
        return list(ignore), (list(exts) if exts else None)

    def _run(self, store: Store, report: BuildReport) -> None:
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
            self._remove(store, plan.old, plan.removed)
        report.merkle_root = plan.old.root_hash

    def _hash(self, files: list[scan.SourceFile], stored: dict, plan: Plan) -> dict[str, str]:
        """Content hashes for the Merkle tree; size+mtime equal to the stored row means unchanged (a hint)."""
        hashes: dict[str, str] = {}
        need = []
        for f in files:
            row = stored.get(f.path)
            if row is not None and row["size"] == f.size and row["mtime_ns"] == f.mtime_ns:
                hashes[f.path] = row["hash"]
            else:
                need.append(f)
        root, cap = self.codebase.root, plan.max_file_bytes
        with cf.ThreadPoolExecutor(max_workers=4) as pool:
            for i, (f, digest) in enumerate(zip(need, pool.map(lambda f: _hash_file(root, f, cap), need))):
                if not digest.startswith("sha256:"):
                    plan.skipped_after_read[digest] += 1
                    continue
                hashes[f.path] = digest[len("sha256:"):]
                row = stored.get(f.path)
                if row is not None and row["hash"] == hashes[f.path] and row["size"] != REINDEX_SIZE:
                    plan.touched.append(f)
                if i % 256 == 0:
                    self.progress("hash", i, len(need))
        return hashes

    def _remove(self, store: Store, tree: merkle.Tree, paths: list[str]) -> None:
        for path in paths:
            _delete_file_rows(store, path)
            store.run("file_delete", {"path": path})
            store.run("merkle_delete", {"path": path})
            tree.set_file(path, None)
        self._flush_tree(store, tree)

    def _flush_tree(self, store: Store, tree: merkle.Tree) -> None:
        upserts, deletes = tree.flush()
        for path in deletes:
            store.run("merkle_delete", {"path": path})
        store.many("merkle_upsert", [_node_params(n) for n in upserts])

    def _index_files(self, store: Store, tree: merkle.Tree, todo: list[scan.SourceFile], report: BuildReport) -> None:
        done = 0
        self.progress("embed", 0, len(todo))
        with store.transaction():
            store.set_meta(phase="embed", files_done=0, files_total=len(todo))
        batches = _batches(self._prepared(todo))
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
                vectors = self._vectors(store, ok, report, step)
            except Exception as err:  # the model failed on this batch: keep old rows, retry next run
                for p in ok:
                    report.failed[p.path] = f"embedding failed: {type(err).__name__}: {err}"
                ok, vectors = [], []
            t = time.perf_counter()
            with store.transaction():
                _write_files(store, tree, ok, vectors)
                report.chunks_written += sum(len(p.chunks) for p in ok)
                self._flush_tree(store, tree)
                done += len(batch)
                store.set_meta(phase="embed", files_done=done, files_total=len(todo))
            report.phase_seconds["write"] += time.perf_counter() - t
            self.progress("embed", done, len(todo))

    def _prepared(self, todo: list[scan.SourceFile]) -> Iterator[Prepared]:
        """Prepared files in order; chunking runs in worker processes while the model works."""
        root = str(self.codebase.root)
        if len(todo) < POOL_MIN_FILES:
            for f in todo:
                yield prepare_file(root, f, self.max_file_bytes)
            return
        workers = max(1, min(4, (os.cpu_count() or 2)))
        # forkserver/spawn, not fork: a forked worker would inherit the writer lock's file
        # descriptor and keep the codebase locked after this process is killed.
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            # A bounded window of futures: never the whole repository in memory at once.
            window = 4 * BATCH_FILES
            futures = [pool.submit(prepare_file, root, f, self.max_file_bytes) for f in todo[:window]]
            nxt = len(futures)
            for i in range(len(todo)):
                yield futures[i].result()
                futures[i] = None
                if nxt < len(todo):
                    futures.append(pool.submit(prepare_file, root, todo[nxt], self.max_file_bytes))
                    nxt += 1

    def _vectors(self, store: Store, files: list[Prepared], report: BuildReport,
                 step: Callable[[int, int], None]) -> list[tuple[list[str], np.ndarray]]:
        """Per file: the chunks' text keys and their float32[n_chunks, dims] vectors, reused by key
        from this index or the cache, else embedded in steps of :data:`EMBED_STEP` texts, after
        each of which ``step(texts embedded, texts to embed)`` reports progress."""
        t = time.perf_counter()
        model = self.embedder.model_id
        keys = [[text_key(model, c.content) for c in p.chunks] for p in files]
        flat = sorted({k for ks in keys for k in ks})
        found: dict[str, bytes] = {}
        if flat and self.reuse_index_vectors:
            found.update({r["text_hash"]: r["embedding"]
                          for r in store.rows("vectors_by_text_hash", {"keys": json.dumps(flat)})})
        missing = [k for k in flat if k not in found]
        if self.cache is not None and missing:
            found.update(self.cache.get(missing))
        texts = {}
        for p, ks in zip(files, keys):
            for k, c in zip(ks, p.chunks):
                if k not in found:
                    texts[k] = c.content
        report.vectors_reused += sum(len(ks) for ks in keys) - sum(1 for ks in keys for k in ks if k in texts)
        report.phase_seconds["lookup"] += time.perf_counter() - t
        if texts:
            t = time.perf_counter()
            order = list(texts)
            fresh = {}
            for start in range(0, len(order), EMBED_STEP):
                keys_now = order[start:start + EMBED_STEP]
                vecs = dict(zip(keys_now, self.embedder.embed([texts[k] for k in keys_now])))
                if self.cache is not None:  # each step at once: an interrupted build keeps its model time
                    self.cache.put(vecs)
                fresh.update(vecs)
                step(min(start + EMBED_STEP, len(order)), len(order))
            report.phase_seconds["embed"] += time.perf_counter() - t
            report.chunks_embedded += len(order)
            found.update({k: v.astype(np.float32).tobytes() for k, v in fresh.items()})
        return [(ks, np.frombuffer(b"".join(found[k] for k in ks), dtype=np.float32).reshape(len(ks), -1)
                 if ks else np.zeros((0, self.embedder.dims), np.float32)) for ks in keys]


def _write_files(store: Store, tree: merkle.Tree, files: list[Prepared],
                 vectors: list[tuple[list[str], np.ndarray]]) -> None:
    """Replace the rows of ``files`` (chunks, FTS5, vectors, file and Merkle rows) in the caller's transaction.

    ``vectors[i]`` is ``(text keys, float32[n_chunks, dims])`` of ``files[i]``. Each table gets
    one bulk statement per batch (``executemany``, FTS5 by id range) instead of one statement
    per chunk, which made the write phase the slowest stage of a build (issue 4).
    """
    _delete_old_rows(store, [p.path for p in files])
    # Ids chosen here as SQLite would (max + 1: chunks.id is not AUTOINCREMENT), so the chunk,
    # FTS5 and vector rows of the whole batch go in as three bulk statements.
    first = next_id = store.value("chunk_next_id")
    chunks, vec_rows, nodes = [], [], []
    for p, (keys, vecs) in zip(files, vectors, strict=True):
        file_id = store.value("file_upsert", {
            "path": p.path, "size": p.size, "mtime_ns": p.mtime_ns, "hash": p.hash, "language": p.language,
            "role": roles.classify(p.path), "chunk_count": len(p.chunks), "indexed_at": time.time()})
        for c, subtokens, key, vec in zip(p.chunks, p.subtokens, keys, vecs, strict=True):
            chunks.append({"id": next_id, "file_id": file_id, "path": p.path, "start_line": c.start_line,
                           "end_line": c.end_line, "start_byte": c.start_byte, "end_byte": c.end_byte,
                           "kind": c.kind, "symbol": c.symbol, "language": p.language, "content": c.content,
                           "subtokens": subtokens, "text_hash": key})
            vec_rows.append({"id": next_id, "embedding": vec.tobytes()})
            next_id += 1
        nodes.append({"path": p.path, "parent": merkle.parent_of(p.path), "is_dir": 0, "hash": p.hash})
        tree.set_file(p.path, p.hash)
    store.many("chunk_insert_with_id", chunks)
    store.run("chunks_insert_fts_range", {"first": first, "last": next_id - 1})
    store.many("chunk_insert_vec", vec_rows)
    store.many("merkle_upsert", nodes)


def _delete_old_rows(store: Store, paths: list[str]) -> None:
    """Delete the chunk rows of those ``paths`` that are indexed already.

    New files skip the delete statements (a cold build has nothing to delete).
    """
    present = store.rows("files_present", {"paths": json.dumps(paths)})
    for path in sorted(r["path"] for r in present):
        _delete_file_rows(store, path)


def _delete_file_rows(store: Store, path: str) -> None:
    ids = [{"id": r["id"]} for r in store.rows("chunk_ids_of_file", {"path": path})]
    store.run("chunks_delete_fts", {"path": path})
    store.many("vectors_delete", ids)
    store.run("chunks_delete", {"path": path})


def _node_params(n: merkle.Node) -> dict:
    return {"path": n.path, "parent": n.parent, "is_dir": int(n.is_dir), "hash": n.hash}


def _batches(items: Iterator[Prepared]) -> Iterator[list[Prepared]]:
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
