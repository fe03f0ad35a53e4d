"""The one-writer-per-codebase lock: an OS file lock beside the index that dies with its process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import filelock

from ..codebase import Codebase
from ..errors import IndexBusyError, StorageError


@contextlib.contextmanager
def writer_lock(codebase: Codebase, *, wait: bool = True) -> Iterator[None]:
    """Hold the codebase's writer lock (an OS file lock beside the .db) for the ``with`` block.

    Raises:
        IndexBusyError: ``wait`` is false and another process held the lock for 1 s.
        StorageError: the lock file cannot be created (a read-only or full index folder).
    """
    # Not 0 when not waiting: is_locked probes by taking the lock for an instant.
    lock = filelock.FileLock(str(codebase.lock_path), timeout=-1 if wait else 1.0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise IndexBusyError(f"{codebase.root} is being indexed by another process; "
                             "try again when it finishes") from None
    except OSError as err:
        raise StorageError(f"cannot write the index beside {codebase.db_path}: {err.strerror}; "
                           "check the folder's permissions and free disk space (or copy the .db "
                           "somewhere writable and pass --db)") from None
    try:
        yield
    finally:
        lock.release()


def is_locked(codebase: Codebase) -> bool:
    """True while some process holds the codebase's writer lock (an indexer is running)."""
    if not codebase.lock_path.exists():
        return False
    lock = filelock.FileLock(str(codebase.lock_path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return True
    except OSError:  # a read-only index folder: nobody can be writing there
        return False
    lock.release()
    return False
