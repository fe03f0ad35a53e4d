"""Page-level damage of an index file: SQLite's quick_check, skipped while the file is as a clean check
or our own last commit left it.

A plain build or status used to read only the pages its few statements touch, so a broken page in
the chunks, FTS5 or vector tables went unnoticed until a search met it. ``PRAGMA quick_check``
reads every page (b-tree structure, cell bounds, free list; not the index-to-table cross-checks of
integrity_check): 0.30 s on Django's 225 MB index (55k pages) with a warm page cache. Its result is
remembered as the *stamp* (size and mtime of the ``.db`` and its ``-wal``) in a file beside the
index, so an unchanged file is not read again: a no-change rebuild costs a ``stat``. A build's own
commit is vouched for with the size the file will have once its log is folded in: a checkpoint of
that log by a later connection (the last one to close folds it) changes the stamp, not the index.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ..errors import CodiiError, DamagedIndexError
from .store import Store

#: Problems quoted from quick_check's report (the first one locates the damage; the rest repeat).
SHOWN_PROBLEMS = 2


def checked_path(db: Path) -> Path:
    """The file beside ``db`` that holds the stamp of its last clean check."""
    return db.with_name(db.name + ".checked")


def stamp(db: Path) -> list[int]:
    """``[db size, db mtime_ns, wal size, wal mtime_ns]`` in bytes and nanoseconds; 0 for a missing
    file or an empty ``-wal`` (each reader's connection creates one, and the last one to close removes it)."""
    out: list[int] = []
    for p in (db, Path(f"{db}-wal")):
        try:
            st = os.stat(p)
            out += [st.st_size, st.st_mtime_ns] if st.st_size else [0, 0]
        except OSError:
            out += [0, 0]
    return out


def damage(store: Store) -> str | None:
    """What quick_check finds wrong with ``store``'s file (one line), or None when it is sound or
    unchanged since its last clean check or :func:`vouch`. A clean check is remembered (not for a
    store opened ``readonly``, beside which nothing is written); on a read-only or full disk it is
    simply run again next time."""
    before = stamp(store.path)
    remembered = _remembered(store.path)
    if remembered is not None and (remembered["stamp"] == before or _folded(remembered, before)):
        if remembered["stamp"] != before and not store.readonly:
            _remember(store.path, before)
        return None
    try:
        report = [next(iter(r.values())) for r in store.rows("pragma_quick_check")]
    except DamagedIndexError as err:  # a page so broken that the check itself stops
        return f"quick_check stopped: {getattr(err, 'sqlite', err)}"
    except CodiiError:  # busy, I/O, interrupted: no verdict, so none is remembered either
        return None
    if report == ["ok"]:
        if not store.readonly:
            _remember(store.path, before)
        return None
    # Each row may hold several lines, the first naming the schema ("*** in database main ***").
    problems = [line for row in report for line in row.splitlines() if line and not line.startswith("***")]
    more = len(problems) - SHOWN_PROBLEMS
    return "; ".join(problems[:SHOWN_PROBLEMS]) + (f" (+{more} more)" if more > 0 else "")


def vouch(db: Path, folded_bytes: int | None = None) -> None:
    """Record ``db`` as sound as it is now: called after our own commits, so the next build or
    status does not read every page of a file only this process changed. ``folded_bytes``: the
    index's size (sql/connection.sql ``index_bytes``), which the file takes when a checkpoint folds a
    log left behind into it. Without it a kernel watcher's update read all 4.5 GB again (13-15 s)
    after each commit whose log readers kept from being emptied."""
    _remember(db, stamp(db), folded_bytes)


def _folded(remembered: dict, now: list[int]) -> bool:
    """Whether ``now`` is the remembered state with its log folded into the file: the log had pages
    then and is empty or gone now, and the file has the index's size."""
    return bool(remembered["stamp"][2]) and now[2] == 0 and now[0] == remembered.get("folded")


def _remembered(db: Path) -> dict | None:
    try:
        value = json.loads(checked_path(db).read_text())
    except (OSError, ValueError):
        return None
    return {"stamp": value} if isinstance(value, list) else value if isinstance(value, dict) else None


def _remember(db: Path, value: list[int], folded_bytes: int | None = None) -> None:
    tmp = checked_path(db).with_suffix(".checked.tmp")
    try:
        tmp.write_text(json.dumps({"stamp": value, "folded": folded_bytes}))
        os.replace(tmp, checked_path(db))
    except OSError:  # a full disk: the file is checked again next time; no empty .tmp left beside it
        with contextlib.suppress(OSError):
            tmp.unlink()
