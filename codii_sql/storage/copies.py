"""Whole-index copies: a consistent snapshot out and an atomic replacement in (SQLite's backup API),
an export (a compact file to search alone, renamed into place), and the log folded into the file.

An index built aside (a Ray task's scratch folder) comes back to its place as one write
transaction of the target file (https://sqlite.org/backup.html): readers of the target see the
old index or the new one, never a mix, and a long-lived reader needs no reopening, because the
file stays the same file. Renaming a copy over a WAL-mode index would not do: its readers and its
``-wal`` still belong to the old file. A target that does not exist yet is written beside its place
and renamed into it, so nobody opens a half-written file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import apsw

from ..errors import DiskFullError, StorageError
from . import health, queries
from .store import BUSY_TIMEOUT_MS, Store


def fold_log(store: Store) -> None:
    """Fold ``store``'s write-ahead log into its file and empty it (a copied ``.db`` alone then holds the
    whole index), without waiting for readers: while one reads an older snapshot, the log is folded as
    far as it can be and kept (the next build's fold empties it). Waiting for them held a watcher's update
    up to BUSY_TIMEOUT_MS after its commit while an agent searched (a kernel edit's update: 11 s instead
    of 0.7), and the next edit waited behind it. Nor on a full disk: the log holds the committed index
    whole and readers read it, so the file's growth waits for the next fold (a new user's build that
    had committed every file ended in "the disk is full")."""
    store.conn.set_busy_timeout(0)
    try:
        store.run("wal_checkpoint")
    except DiskFullError:
        pass
    finally:
        store.conn.set_busy_timeout(BUSY_TIMEOUT_MS)


def snapshot(source: Path, target: Path) -> None:
    """Copy the index at ``source`` to the new file ``target``: the state of its last commit, even
    while another process writes to it.

    Raises:
        StorageError: either file cannot be read or written (the message names which).
    """
    _backup(source, target)


def publish(source: Path, target: Path) -> None:
    """Make ``target`` hold the index at ``source`` (a finished build, closed by its writer): in one
    transaction of ``target`` when it exists (the caller holds its writer lock), else by renaming a
    full copy into place. ``source`` is left as it was.

    A backup reads its source through the source's write-ahead log, and a backup into a new file
    writes no log of its own (checked: no ``-wal`` after it), so nothing needs checkpointing.

    Raises:
        StorageError: ``target`` cannot be written; it is left as it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_file():
        _backup(source, target)
        return
    part = target.with_name(f"{target.name}.part-{os.getpid()}")
    try:
        _backup(source, part)
        for suffix in ("-wal", "-shm"):  # a fresh file has no log; a stale one would replay into it
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(part, target)
    finally:
        for leftover in (part, Path(f"{part}-wal"), Path(f"{part}-shm")):
            leftover.unlink(missing_ok=True)


def export(source: Path, target: Path, meta: dict, drop: tuple[str, ...]) -> None:
    """Write a compact, self-contained copy of the index at ``source`` to ``target``: ``VACUUM INTO``
    a file beside ``target`` (the state of the source's last commit, its WAL folded in, no free
    pages), made a rollback-journal file (read alone, it needs no ``-wal`` or ``-shm``), its
    snapshot keys ``drop`` removed, ``meta`` set and the digest of its rows
    (:func:`~codii_sql.storage.health.content_digest`, checked whenever its pages are) stored, then
    renamed into place: a reader of ``target`` sees the old file or the new one whole. ``source`` is
    only read.

    Raises:
        StorageError: ``source`` cannot be read or ``target``'s folder written; ``target`` is as it was.
    """
    part = target.with_name(f".{target.name}.part-{os.getpid()}")
    try:
        src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            src.set_busy_timeout(BUSY_TIMEOUT_MS)
            src.execute(queries.sql("vacuum_into"), {"target": str(part)}).fetchall()
        finally:
            src.close()
        dst = apsw.Connection(str(part))
        try:
            meta = {**meta, health.DIGEST_KEY: health.content_digest(dst, part)}
            for _ in dst.execute(queries.sql("export_finish"), {"drop": json.dumps(list(drop)),
                                                                 "meta": json.dumps({k: json.dumps(v) for k, v in meta.items()})}):
                pass
        finally:
            dst.close()
        with open(part, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(part, target)
    except apsw.Error as err:
        raise StorageError(f"cannot export the index {source} to {target}: {err}",
                           "check that the target folder is writable and has space") from None
    finally:
        part.unlink(missing_ok=True)
    health.vouch(target, readonly=True)  # as sound as it was written: its first search need not read it all


def _backup(source: Path, target: Path) -> None:
    """Every page of ``source`` into ``target`` in one step (one write transaction of ``target``)."""
    try:
        src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            dst = apsw.Connection(str(target))
            try:
                src.set_busy_timeout(BUSY_TIMEOUT_MS)
                dst.set_busy_timeout(BUSY_TIMEOUT_MS)
                with dst.backup("main", src, "main") as copy:
                    copy.step(-1)
            finally:
                dst.close()
        finally:
            src.close()
    except apsw.Error as err:
        raise StorageError(f"cannot copy the index {source} to {target}: {err}",
                           "check that both folders are writable and have space, then build again") from None

