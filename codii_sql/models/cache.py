"""The embedding cache shared across codebases: vectors keyed by sha256(model id, text), so no text is embedded twice."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import apsw
import numpy as np

from ..paths import cache_path
from ..storage import queries


def text_key(model_id: str, text: str) -> str:
    """The cache key of ``text`` embedded by ``model_id``: sha256 hex of ``model_id NUL text`` (UTF-8)."""
    return hashlib.sha256(f"{model_id}\0{text}".encode("utf-8")).hexdigest()


def finite_only(blobs: dict[str, bytes]) -> dict[str, bytes]:
    """``blobs`` (``{key: float32 blob}``) without those holding a NaN or an infinity: a provider's NaN vectors,
    stored before they were refused, came back from the cache and the index at every later build (a helper's)."""
    if not blobs:
        return blobs
    widths = {len(b) for b in blobs.values()}
    if len(widths) == 1:  # as a rule: one matrix, one test
        rows = np.frombuffer(b"".join(blobs.values()), dtype=np.float32).reshape(len(blobs), -1)
        fine = np.isfinite(rows).all(axis=1)
        return blobs if fine.all() else {k: b for (k, b), ok in zip(blobs.items(), fine, strict=True) if ok}
    return {k: b for k, b in blobs.items() if np.isfinite(np.frombuffer(b, dtype=np.float32)).all()}


class EmbeddingCache:
    """``$CODII_SQL_HOME/cache/embeddings.db``: ``{key: float32[dims] blob}``.

    Git worktrees, branches, forks and releases of one project share most chunks, so a
    second checkout costs little model time. Any failure to open or write the cache is
    swallowed: it only ever saves work, and each codebase's index stays self-contained.
    A cache file SQLite reports damaged is the exception: left in place it would make every
    later build embed everything again, silently, so it is deleted and started afresh (a
    cache loses nothing by that), and ``warning`` (also passed to ``on_warning``) says so.

    Args:
        path: the cache file; default ``$CODII_SQL_HOME/cache/embeddings.db``.
        on_warning: called with a one-line message when a damaged cache is replaced.
    """

    def __init__(self, path: Path | None = None, on_warning: Callable[[str], None] | None = None):
        self.path = path or cache_path()
        self.conn: apsw.Connection | None = None
        self.warning: str | None = None
        self._on_warning = on_warning
        found = _identity(self.path)
        try:
            self._open()
        except (apsw.CorruptError, apsw.NotADBError) as err:
            self._start_over(err, found)
        except (apsw.Error, OSError):
            self._close_quietly()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = apsw.Connection(str(self.path))
        self.conn.set_busy_timeout(5_000)
        for _ in self.conn.execute(queries.sql("pragmas_write")):
            pass
        self.conn.execute(queries.sql("cache_schema"))

    def _start_over(self, err: apsw.Error, found: tuple[int, int] | None) -> None:
        """Delete the damaged cache file (with its WAL and SHM) and open an empty one.

        ``found`` is the file seen damaged: if another process has replaced it meanwhile,
        its fresh cache is kept, not deleted in turn.
        """
        self._close_quietly()
        if self.warning is not None:  # once per instance: a cache that breaks again is just not used
            return
        try:
            if found is not None and _identity(self.path) == found:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self._open()
            done = "deleted it and started an empty one"
        except (apsw.Error, OSError) as again:
            self._close_quietly()
            done = f"could not replace it ({again}), so this build does not use it: delete the file by hand"
        self.warning = (f"the embedding cache {self.path} was damaged ({err}): {done}; "
                        "vectors are cached again from this build on")
        if self._on_warning is not None:
            self._on_warning(self.warning)

    def _close_quietly(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except apsw.Error:
                pass
        self.conn = None

    def get(self, keys: list[str]) -> dict[str, bytes]:
        """The cached vectors (float32 blobs) of those ``keys`` that are present."""
        if self.conn is None or not keys:
            return {}
        try:
            return finite_only(dict(self.conn.execute(queries.sql("cache_get"), {"keys": json.dumps(keys)})))
        except (apsw.CorruptError, apsw.NotADBError) as err:  # broken pages found past the header
            self._start_over(err, _identity(self.path))
            return {}
        except apsw.Error:
            return {}

    def put(self, items: dict[str, np.ndarray]) -> None:
        """Store ``{key: float32[dims]}`` in one transaction; errors (disk full, locked) are ignored,
        and a cache found damaged is replaced (see the class) and written to afresh."""
        for attempt in (1, 2):
            if self.conn is None or not items:
                return
            try:
                with self.conn:
                    self.conn.executemany(
                        queries.sql("cache_put"),
                        ({"key": k, "embedding": np.asarray(v, dtype=np.float32).tobytes()} for k, v in items.items()),
                    )
                return
            except (apsw.CorruptError, apsw.NotADBError) as err:
                if attempt == 2:
                    return
                self._start_over(err, _identity(self.path))
            except apsw.Error:
                return

    def close(self) -> None:
        """Close the connection."""
        self._close_quietly()


def _identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``path``, or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
