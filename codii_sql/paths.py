"""Where things live under ``$CODII_SQL_HOME`` (index files, the embedding cache, derived models), and when a file last changed."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path


def changed_ns(st: os.stat_result) -> int:
    """When the file of ``st`` last changed, in nanoseconds since the epoch: the later of its mtime and
    ctime. What the index keeps as a file's ``mtime_ns`` hint: a same-size rewrite that keeps the mtime
    (``cp -p``, ``rsync --inplace``, npm tarballs' fixed 1985 dates) still moves the ctime, which no
    user can set, as git's index also checks."""
    return max(st.st_mtime_ns, st.st_ctime_ns)


def home() -> Path:
    """``$CODII_SQL_HOME``, default ``~/.codii-sql``: indexes, the embedding cache and derived models."""
    return Path(os.environ.get("CODII_SQL_HOME") or Path.home() / ".codii-sql").expanduser()


def indexes_dir() -> Path:
    """The folder holding one ``.db`` per codebase."""
    return home() / "indexes"


def models_dir() -> Path:
    """``$CODII_SQL_HOME/models``: derived ONNX graphs (``*.onnx``) and pulled folders (``hf/<repo id>``)."""
    return home() / "models"


def logs_dir() -> Path:
    """``$CODII_SQL_HOME/logs``: one log per background build (``<index name>.log``)."""
    return home() / "logs"


def checks_dir() -> Path:
    """``$CODII_SQL_HOME/checked``: the stamps of clean checks of index files read only (exports, shards),
    beside which nothing is written."""
    return home() / "checked"


def cache_path() -> Path:
    """The embedding cache shared by every codebase: ``$CODII_SQL_HOME/cache/embeddings.db``."""
    return home() / "cache" / "embeddings.db"


def in_indexes_dir(db_path: Path) -> bool:
    """True when ``db_path`` lies directly in :func:`indexes_dir`: provably a codii-sql index, so
    a damaged one may be deleted or replaced (a ``--db`` file elsewhere may be someone else's)."""
    return db_path.resolve().parent == indexes_dir().resolve()


def index_bytes(db_path: Path) -> int:
    """Bytes of an index file and its write-ahead log on disk; either gone meanwhile counts 0 (the last connection
    to close deletes the log: an exists-then-stat answered a new user's HTTP status page with a 500)."""
    size = 0
    for p in (db_path, Path(f"{db_path}-wal")):
        try:
            size += p.stat().st_size
        except FileNotFoundError:
            pass
    return size


def default_db_path(root: Path) -> Path:
    """``$CODII_SQL_HOME/indexes/<dirname>-<first 12 hex of sha256(resolved root)>.db``: the folder's
    name (NFC) keeps letters and digits of any script and ``._-`` (``ünïcode-repo`` was
    ``n_code-repo``), other runs become ``_``. An index made under the ASCII-only name of earlier
    versions stays in use while no file has the new name."""
    digest = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:12]
    path = indexes_dir() / f"{_safe_name(unicodedata.normalize('NFC', root.name), _UNSAFE)}-{digest}.db"
    legacy = path.with_name(f"{_safe_name(root.name, _UNSAFE_BEFORE)}-{digest}.db")
    return legacy if legacy != path and legacy.is_file() and not path.exists() else path


#: What an index file name leaves out of a folder name: all but letters and digits (any script) and ``._-``.
_UNSAFE = re.compile(r"[^\w.-]+")
#: ... and what it left out before (all but ASCII letters and digits).
_UNSAFE_BEFORE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe_name(name: str, unsafe: re.Pattern[str]) -> str:
    """``name`` with each run of ``unsafe`` characters as ``_``, at most 40 characters."""
    return (unsafe.sub("_", name or "root").strip("._") or "root")[:40]
