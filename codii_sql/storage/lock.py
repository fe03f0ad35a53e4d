"""The locks beside an index, OS file locks that die with their process: writer, vector worker, daemon.

The writer lock serialises builds' lexical phases (files, chunks, FTS5 rows, Merkle nodes). The
vector lock keeps one process embedding a codebase's queued chunks; it does not block lexical
updates, since each vector commit re-checks in its own transaction that its chunks still hold
the texts it embedded (``vector_queue_still_wanted``).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

import filelock

from ..codebase import Codebase
from ..errors import DaemonRunningError, DiskFullError, IndexBusyError, ReadOnlyIndexError, StorageError


@contextlib.contextmanager
def writer_lock(codebase: Codebase, *, wait: bool = True) -> Iterator[None]:
    """Hold the codebase's writer lock for the ``with`` block.

    Raises:
        IndexBusyError: ``wait`` is false and another process held the lock for 1 s.
        StorageError: the lock file cannot be created (a read-only or full index folder).
    """
    with _held(codebase, codebase.lock_path, wait,
               f"{codebase.root} is being indexed by another process; try again when it finishes"):
        yield


@contextlib.contextmanager
def vector_lock(codebase: Codebase, *, wait: bool = True) -> Iterator[None]:
    """Hold the codebase's vector lock (the one process embedding its queued chunks) for the block.

    Raises:
        IndexBusyError: ``wait`` is false and another process holds it.
        StorageError: the lock file cannot be created.
    """
    with _held(codebase, codebase.vector_lock_path, wait,
               f"the chunks of {codebase.root} are being embedded by another process"):
        yield


@contextlib.contextmanager
def daemon_lock(codebase: Codebase) -> Iterator[None]:
    """Hold the lock of the one background build process per codebase (``build --daemon``); never waits.

    Raises:
        DaemonRunningError: another background build holds it.
        StorageError: the lock file cannot be created.
    """
    with _held(codebase, codebase.daemon_lock_path, False,
               f"a background build of {codebase.root} is already running", DaemonRunningError):
        yield


def daemon_running(codebase: Codebase) -> bool:
    """True while a background build process holds the codebase's daemon lock."""
    return _probe(codebase.daemon_lock_path)


def is_locked(codebase: Codebase) -> bool:
    """True while some process holds the codebase's writer lock (a lexical phase is running)."""
    return _probe(codebase.lock_path)


def vectors_running(codebase: Codebase) -> bool:
    """True while some process holds the codebase's vector lock (queued chunks are being embedded)."""
    return _probe(codebase.vector_lock_path)


@contextlib.contextmanager
def _held(codebase: Codebase, path: Path, wait: bool, busy: str,
          busy_error: type[IndexBusyError] = IndexBusyError) -> Iterator[None]:
    codebase.refuse_writes()
    # Not 0 when not waiting: _probe takes the lock for an instant.
    lock = filelock.FileLock(str(path), timeout=-1 if wait else 1.0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise busy_error(busy) from None
    except OSError as err:
        kind = {errno.ENOSPC: DiskFullError, errno.EDQUOT: DiskFullError, errno.EROFS: ReadOnlyIndexError,
                errno.EACCES: ReadOnlyIndexError, errno.EPERM: ReadOnlyIndexError}.get(err.errno, StorageError)
        raise kind(f"cannot write the index beside {codebase.db_path}: {err.strerror}",
                   "check the folder's permissions and free disk space (or copy the .db "
                   "somewhere writable and pass --db)") from None
    try:
        yield
    finally:
        lock.release()


def _probe(path: Path) -> bool:
    """Whether another process holds the lock file at ``path`` (by taking it for an instant)."""
    if not path.exists():
        return False
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return True
    except OSError:  # a read-only index folder: nobody can be writing there
        return False
    lock.release()
    return False
