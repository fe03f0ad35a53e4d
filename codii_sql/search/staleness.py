"""Whether a result's file changed on disk since it was indexed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ..paths import changed_ns


class StaleCheck:
    """Whether a result's file on disk still matches the indexed content (memoised per path).

    size + last change (:func:`~codii_sql.paths.changed_ns`) equal to the indexed row is taken as unchanged (a hint, as in the indexer);
    otherwise the content sha256 decides. A missing or unreadable file is stale.
    """

    def __init__(self, root: Path):
        self.root = root
        self.memo: dict[str, bool] = {}

    def __call__(self, row: dict) -> bool:
        path = row["path"]
        if path not in self.memo:
            self.memo[path] = self._stale(path, row)
        return self.memo[path]

    def _stale(self, path: str, row: dict) -> bool:
        full = self.root / path
        try:
            st = os.stat(full)
            if not stat.S_ISREG(st.st_mode):  # a folder, FIFO or device now: changed (and a FIFO would block)
                return True
            if st.st_size == row["file_size"] and changed_ns(st) == row["file_mtime_ns"]:
                return False
            # Non-blocking: the path may have become a FIFO since the stat.
            fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with open(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    return True
                return hashlib.sha256(fh.read()).hexdigest() != row["file_hash"]
        except OSError:
            return True
