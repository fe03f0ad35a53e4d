"""How SQLite's failures reach a user: an apsw error met on an index as the codii-sql error to act on."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw

from ..errors import CodiiError, DamagedIndexError, DiskFullError, ReadOnlyIndexError, Remedy, StorageError
from ..paths import in_indexes_dir

#: Free bytes under which a failed open is blamed on a full disk: SQLite's WAL index (``-shm``)
#: alone needs 32 KiB, and a failed open of a disk with less reports a bare "disk I/O error".
DISK_FULL_BYTES = 1 << 20


def disk_full(folder: Path) -> bool:
    """True when ``folder``'s file system has less than :data:`DISK_FULL_BYTES` free."""
    try:
        return shutil.disk_usage(folder).free < DISK_FULL_BYTES
    except OSError:
        return False


def translate(err: apsw.Error, path: Path) -> CodiiError:
    """The :mod:`codii_sql.errors` type a user can act on for an apsw error met on the index ``path``.

    SQLITE_FULL is :class:`DiskFullError` (SQLite rolled the transaction back: the index keeps
    its last commit); a read-only file :class:`ReadOnlyIndexError`; broken pages found while
    reading rows (opening succeeded) :class:`DamagedIndexError`; anything else :class:`StorageError`.
    The returned error's ``sqlite`` attribute holds SQLite's own words, for callers that report
    the damage themselves (the page check, ``doctor``) rather than pass the advice on.
    """
    if isinstance(err, apsw.FullError):
        return DiskFullError("the disk is full (SQLite could not write)", Remedy("free_disk"))
    if isinstance(err, apsw.ReadOnlyError):
        return ReadOnlyIndexError(f"the index file is read-only ({err})", Remedy("make_writable"))
    if isinstance(err, (apsw.CorruptError, apsw.NotADBError)):
        out: CodiiError = DamagedIndexError(f"the index is damaged ({err})", Remedy("force_build") if in_indexes_dir(path)
                                            else "if it is an export or a shard, export it again from its source; a codebase's own index is "
                 "replaced by a forced build")
    else:
        out = StorageError(f"reading the index failed ({err})", Remedy("doctor"))
    out.sqlite = str(err)
    return out
