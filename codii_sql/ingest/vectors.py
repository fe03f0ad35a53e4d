"""Vectors a build need not compute: those this index or the shared cache already holds, by text key."""

from __future__ import annotations

import json

from ..models.cache import EmbeddingCache, finite_only
from ..storage.store import Store


def known_vectors(store: Store, cache: EmbeddingCache | None, keys: list[str], *,
                  reuse_index: bool = True) -> dict[str, bytes]:
    """``{text key: float32 blob}`` for those of ``keys`` this index holds (renames, moves, copies;
    skipped when ``reuse_index`` is false) or the ``cache`` holds (other codebases, earlier runs)."""
    found: dict[str, bytes] = {}
    wanted = sorted(set(keys))
    if wanted and reuse_index:
        found.update(finite_only({r["text_hash"]: r["embedding"]
                                  for r in store.rows("vectors_by_text_hash", {"keys": json.dumps(wanted)})}))
    missing = [k for k in wanted if k not in found]
    if cache is not None and missing:
        found.update(cache.get(missing))
    return found
