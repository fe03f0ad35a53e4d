"""``build --dry-run``: what a build would index and about how long the model would take, writing nothing."""

from __future__ import annotations

import time

from ..codebase import Codebase
from ..ingest.config import extension_filter, scan_rules
from ..ingest.config import vectors_wanted
from ..ingest.survey import survey
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..models.wordpiece import count_tokens
from ..paths import cache_path
from ..storage.store import Store
from .embedders import embedder_for_build


def dry_run(codebase: Codebase, *, ignore_patterns: list[str] | None = None, extensions: list[str] | None = None,
            vectors: bool | None = None, embedder_name: str | None = None) -> dict:
    """The files and chunks a build of ``codebase`` would index, by language and role, the files it
    would skip by reason, the largest folders, and the model time for the texts no index or cache
    holds: ``{"codebase", "files", "chunks", "estimate", "languages", "roles", "skipped", "largest_folders",
    "hidden_by", "embed": {"texts", "word_pieces", "estimated_seconds", "chunks_per_second", "vectors"}}``.
    A large tree is walked whole and chunked from a random sample: ``estimate`` is then
    ``{"sample_files", "files"}`` and the chunk, text and word-piece counts are estimates (else None).

    The estimate times the model on a sample of those texts spread over their lengths (after
    loading it), and scales by word pieces. Neither the index nor the cache is created or written.

    Raises:
        UsageError: ``.codii.yaml`` is malformed. ReadOnlyIndexError: an index file alone has no
            source to survey.
    """
    codebase.refuse_writes()
    embedder = embedder_for_build(codebase, embedder_name, force=False)
    store = Store(codebase.db_path, create=False) if codebase.db_path.is_file() else None
    cache = EmbeddingCache() if cache_path().is_file() else None
    try:
        meta = store.meta() if store is not None else {}
        ignore = ignore_patterns if ignore_patterns is not None else meta.get("scan_ignore_patterns") or []
        exts = extension_filter(extensions) if extensions is not None else meta.get("scan_extensions")
        rules = scan_rules(codebase.root, list(ignore), list(exts) if exts else None)
        found = survey(codebase.root, rules, store=store, cache=cache, model_id=embedder.model_id,
                       max_tokens=embedder.max_tokens)
        wanted = vectors_wanted(vectors, meta, codebase.root)
    finally:
        for handle in (store, cache):
            if handle is not None:
                handle.close()
    embed = {"texts": found.new_texts, "word_pieces": found.new_tokens, "vectors": wanted,
             "model": embedder.model_id, "estimated_seconds": 0.0, "chunks_per_second": None}
    if wanted and found.sample:
        embed.update(_estimate(embedder, found.sample, found.new_texts, found.new_tokens))
    return {"codebase": str(codebase.root), "db": str(codebase.db_path), "files": found.files,
            "chunks": found.chunks, "estimate": found.estimate, "languages": _rows(found.by_language),
            "roles": _rows(found.by_role), "skipped": dict(found.skipped.most_common()),
            "largest_folders": found.largest_folders(), "hidden_by": found.hidden_by, "embed": embed}


def _estimate(embedder: Embedder, sample: list[str], texts: int, tokens: int) -> dict:
    """Model seconds for ``texts`` of ``tokens`` word pieces, from one timed pass over ``sample``."""
    embedder.load()
    embedder.embed(sample[:2])  # the first call pays for kernel set-up, not for the texts
    started = time.perf_counter()
    embedder.embed(sample)
    seconds = time.perf_counter() - started
    sample_tokens = sum(min(n, embedder.max_tokens) for n in count_tokens(sample)) or 1
    estimate = seconds * tokens / sample_tokens
    return {"estimated_seconds": round(estimate, 3), "chunks_per_second": round(texts / estimate, 1) if estimate else None,
            "sample": len(sample), "sample_seconds": round(seconds, 3)}


def _rows(counts: dict[str, list[int]]) -> list[dict]:
    return [{"name": name, "files": f, "chunks": c}
            for name, (f, c) in sorted(counts.items(), key=lambda kv: (-kv[1][1], kv[0]))]
