"""A build done aside: in a scratch folder, from a snapshot of the current index, its chunks embedded
wherever the caller likes (Ray tasks on other machines), then published atomically in its place.

The scratch folder is local to the machine that builds (SQLite's WAL needs a local file system);
the published index is an ordinary one at its usual path, which may be a folder shared by the
machines. Vectors embedded elsewhere go through the embedding cache, keyed by text (see
:func:`codii_sql.models.cache.text_key`): the build's own vector phase then finds every one of
them and runs no model, and a task that is retried finds the batches already done.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..processes import alive
from ..codebase import Codebase
from ..ingest.config import vectors_wanted
from ..ingest.report import BuildReport
from ..ingest.vectors import known_vectors
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..models.registry import get_embedder
from ..paths import cache_path
from ..storage import copies
from ..storage.lock import writer_lock
from ..storage.store import Store
from .builds import build, reword_disk_full
from .embedders import embedder_for_build
from .status import inspect

#: The scratch folders' name prefix, followed by the building process's pid (see :func:`sweep_scratch`).
SCRATCH_PREFIX = "codii-sql-aside-"
#: ``embed_elsewhere(embedder name, {text key: text})`` yields ``{text key: float32[dims]}`` batches
#: as they are done, in any order, until every text has its vector.
EmbedElsewhere = Callable[[str, dict[str, str]], Iterable[dict[str, np.ndarray]]]


@dataclass
class AsideReport:
    """What a build aside did: the build's own report, the chunks embedded by ``embed_elsewhere``,
    the machine that built, the seconds spent publishing, and whether it published (a build that
    changed nothing leaves the index in place alone)."""

    report: BuildReport
    embedded_elsewhere: int
    host: str
    publish_seconds: float
    published: bool = True

    def to_dict(self) -> dict:
        return {**self.report.to_dict(), "embedded_elsewhere": self.embedded_elsewhere, "host": self.host,
                "publish_seconds": round(self.publish_seconds, 3), "published": self.published}


def build_aside(codebase: Codebase, *, embed_elsewhere: EmbedElsewhere | None = None, force: bool = False,
                use_cache: bool = True, ignore_patterns: list[str] | None = None,
                extensions: list[str] | None = None, embedder_name: str | None = None,
                vectors: bool | None = None, scratch_dir: str | None = None) -> AsideReport:
    """Build ``codebase`` in a scratch folder under ``scratch_dir`` (default: the system's temp
    folder) and publish the result to ``codebase.db_path`` (:func:`copies.publish`).

    Without ``force`` the build starts from a snapshot of the current index, so it is incremental
    (the Merkle tree of the last build says what changed); with it, from an empty file (every file
    is re-chunked anyway; vectors still come from the cache). When vectors are wanted and
    ``embed_elsewhere`` is given, the lexical phase runs first, the queued chunks that neither the
    index nor the cache holds go to ``embed_elsewhere``, and the vector phase then writes them.
    Other options as :func:`codii_sql.service.build`. With ``use_cache`` false the vectors pass
    through a cache file in the scratch folder instead of the shared one.

    Raises:
        as :func:`codii_sql.service.build`; StorageError: the index could not be published (the
        one in place is untouched).
    """
    began = time.perf_counter()
    sweep_scratch(scratch_dir)
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=scratch_dir) as tmp:
        work = Codebase(codebase.root, Path(tmp) / "index.db")
        if codebase.db_path.is_file() and not force:
            copies.snapshot(codebase.db_path, work.db_path)
        embedder = embedder_for_build(work, embedder_name, force=force)
        cache_file = cache_path() if use_cache else Path(tmp) / "vectors.db"
        options = dict(ignore_patterns=ignore_patterns, extensions=extensions, embedder=embedder,
                       cache_path=cache_file)
        with reword_disk_full(codebase):
            report, elsewhere = _build(work, embedder, embed_elsewhere, force, vectors, options)
            started = time.perf_counter()
            asked = (ignore_patterns, extensions, embedder_name, vectors) != (None, None, None, None)
            publish = force or asked or not codebase.db_path.is_file() or _changed(report)
            if publish:
                with writer_lock(codebase):
                    copies.publish(work.db_path, codebase.db_path)
    report.seconds = time.perf_counter() - began  # the whole job: snapshot, build, embedding elsewhere, publish
    return AsideReport(report, elsewhere, socket.gethostname(), time.perf_counter() - started, publish)


def _changed(report: BuildReport) -> bool:
    """Whether a build changed anything an index holds: files, chunks or vectors. A build that changed
    nothing and was asked to record nothing new is not published: a scheduled rebuild of a shared
    folder of shards would otherwise rewrite every one of them."""
    return any((report.added, report.modified, report.removed, report.reindexed, report.touched,
                report.chunks_written, report.chunks_embedded, report.vectors_reused))


def _build(work: Codebase, embedder: Embedder, embed_elsewhere: EmbedElsewhere | None, force: bool,
           vectors: bool | None, options: dict) -> tuple[BuildReport, int]:
    """The scratch build: lexical phase, vectors from ``embed_elsewhere``, vector phase; its
    report (counting the chunks embedded elsewhere as embedded) and how many those were."""
    meta = inspect(work)["snapshot"] if work.db_path.is_file() else {}
    if embed_elsewhere is None or not vectors_wanted(vectors, meta, work.root):
        return build(work, force=force, vectors=vectors, **options), 0
    lexical = build(work, force=force, vectors=False, **options)
    cache = EmbeddingCache(options["cache_path"])
    try:
        pending, reused, shared = unembedded(work, cache)
        elsewhere = 0
        for done in embed_elsewhere(embedder.name, pending):
            cache.put(done)
            elsewhere += len(done)
    finally:
        cache.close()
    final = build(work, vectors=True, **options)  # every vector is in the cache now: no model runs
    lexical.chunks_embedded = final.chunks_embedded + elsewhere
    lexical.vectors_reused += reused  # the lexical phase reuses the vectors of texts it finds in the cache itself
    lexical.vectors_deduplicated += shared
    lexical.vectors_pending, lexical.vectors_enabled = final.vectors_pending, final.vectors_enabled
    lexical.phase_seconds.update(final.phase_seconds)
    return lexical, elsewhere


def unembedded(work: Codebase, cache: EmbeddingCache | None) -> tuple[dict[str, str], int, int]:
    """``{text key: chunk text}`` of the queued chunks whose vectors neither the index nor ``cache``
    holds, how many queued chunks have a known vector (reused, as the vector phase counts them),
    and how many hold the text of another of the first kind (embedded once for all of them)."""
    with Store(work.db_path, create=False) as store:
        rows = store.rows("vector_queue_next", {"n": -1})
        known = known_vectors(store, cache, [r["text_hash"] for r in rows])
    texts = {r["text_hash"]: r["content"] for r in rows if r["text_hash"] not in known}
    reused = sum(1 for r in rows if r["text_hash"] in known)
    return texts, reused, len(rows) - reused - len(texts)


def sweep_scratch(scratch_dir: str | None = None) -> None:
    """Delete the scratch folders of builds aside whose process is gone (killed: no ``finally`` ran).
    A folder names its process (``codii-sql-aside-<pid>-*``); a live process's folder is kept."""
    root = Path(scratch_dir or tempfile.gettempdir())
    for folder in root.glob(f"{SCRATCH_PREFIX}*-*"):
        pid = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)



def embed_texts(embedder_name: str, texts: list[str]) -> np.ndarray:
    """``float32[len(texts), dims]``: the embeddings of ``texts`` by the embedder ``embedder_name``
    (made once per process, see :func:`get_embedder`).

    Raises:
        EmbeddingFailedError: the model or server failed. UsageError: an unknown embedder name.
    """
    return np.asarray(get_embedder(embedder_name).embed(texts), dtype=np.float32)
