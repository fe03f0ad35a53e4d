"""The embedding cache shared across codebases: vectors keyed by sha256(model id, text), so no text is embedded twice."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import apsw
import numpy as np

from . import queries
from .codebase import home


def text_key(model_id: str, text: str) -> str:
    """The cache key of ``text`` embedded by ``model_id``: sha256 hex of ``model_id NUL text`` (UTF-8)."""
    return hashlib.sha256(f"{model_id}\0{text}".encode("utf-8")).hexdigest()


class EmbeddingCache:
    """``$CODII_SQL_HOME/cache/embeddings.db``: ``{key: float32[dims] blob}``.

    Git worktrees, branches, forks and releases of one project share most chunks, so a
    second checkout costs little model time. Any failure to open or write the cache is
    swallowed: it only ever saves work, and each codebase's index stays self-contained.
    """

    def __init__(self, path: Path | None = None):
        self.path = path or home() / "cache" / "embeddings.db"
        self.conn: apsw.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = apsw.Connection(str(self.path))
            self.conn.set_busy_timeout(5_000)
            for _ in self.conn.execute(queries.sql("pragmas_write")):
                pass
            self.conn.execute(queries.sql("cache_schema"))
        except (apsw.Error, OSError):
            self.conn = None

    def get(self, keys: list[str]) -> dict[str, bytes]:
        """The cached vectors (float32 blobs) of those ``keys`` that are present."""
        if self.conn is None or not keys:
            return {}
        try:
            return dict(self.conn.execute(queries.sql("cache_get"), {"keys": json.dumps(keys)}))
        except apsw.Error:
            return {}

    def put(self, items: dict[str, np.ndarray]) -> None:
        """Store ``{key: float32[dims]}`` in one transaction; errors (disk full, locked) are ignored."""
        if self.conn is None or not items:
            return
        try:
            with self.conn:
                self.conn.executemany(
                    queries.sql("cache_put"),
                    ({"key": k, "embedding": np.asarray(v, dtype=np.float32).tobytes()} for k, v in items.items()),
                )
        except apsw.Error:
            pass

    def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
