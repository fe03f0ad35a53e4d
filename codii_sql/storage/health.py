"""Damage of an index file: SQLite's quick_check (integrity_check for a file read only), and an export's
content digest, skipped while the file is as a clean check or our own last commit left it.

A plain build or status used to read only the pages its few statements touch, so a broken page in
the chunks, FTS5 or vector tables went unnoticed until a search met it. ``PRAGMA quick_check``
reads every page (b-tree structure, cell bounds, free list; not the index-to-table cross-checks of
integrity_check): 0.30 s on Django's 225 MB index (55k pages) with a warm page cache. Bytes changed
inside a row (an export's text altered, a bit flipped on a disk) pass it; an export carries the
digest of what its answers are made of, checked with it, and a file read only (an export, a shard) gets
integrity_check, whose index-to-table checks quick_check leaves out. Its result is remembered as the *stamp*
(size and mtime of the ``.db`` and its ``-wal``) in a file beside the index, or for a file read only
(an export, a shard) in ``$CODII_SQL_HOME/checked`` with its inode and ctime, so an unchanged file
is not read again: a no-change rebuild costs a ``stat``. A build's own commit is vouched for with
the size the file will have once its log is folded in: a checkpoint of that log by a later
connection (the last one to close folds it) changes the stamp, not the index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import apsw

from .. import paths
from ..errors import CodiiError, DamagedIndexError
from . import queries
from .failures import translate
from .store import Store

#: Problems quoted from quick_check's report (the first one locates the damage; the rest repeat).
SHOWN_PROBLEMS = 2
#: The snapshot key of an export's content digest, and the scheme its value starts with (what it covers
#: and how rows are encoded: another scheme is not compared, so an older codii-sql's export still opens).
DIGEST_KEY = "content_digest"
DIGEST_SCHEME = "sha256-v1"
_TYPE_TAGS = {str: b"s", int: b"i", float: b"f", bytes: b"b"}


def checked_path(db: Path, readonly: bool = False) -> Path:
    """The file that holds the stamp of ``db``'s last clean check: beside it, or for a file read only (nothing
    is written beside an export or a shard) in :func:`codii_sql.paths.checks_dir`, named by its absolute path."""
    if not readonly:
        return db.with_name(db.name + ".checked")
    return paths.checks_dir() / (hashlib.sha256(os.fsencode(db.absolute())).hexdigest()[:32] + ".json")


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
    """What quick_check (integrity_check for a file read only) or an export's content digest finds wrong with
    ``store``'s file (one line), or None when it is sound or unchanged since its last clean check or
    :func:`vouch`. A clean check is remembered (see :func:`checked_path`); on a read-only or full disk it is
    simply run again next time."""
    before = stamp(store.path)
    remembered = _remembered(store.path, store.readonly)
    if remembered is not None and (remembered["stamp"] == before or _folded(remembered, before)):
        if remembered["stamp"] != before:
            _remember(store.path, before, readonly=store.readonly)
        return None
    try:
        # A file read only (an export, a shard) is checked whole, its indexes against their tables too: an index
        # entry altered in place answered `symbol` with "no definition" while quick_check passed it (a helper's
        # edited export). 2.3 s against quick_check's 1.6 s on a 473 MB export, once per change of the file.
        check = "integrity_check" if store.readonly else "quick_check"
        report = [next(iter(r.values())) for r in store.rows(f"pragma_{check}")]
    except DamagedIndexError as err:  # a page so broken that the check itself stops
        return f"{check} stopped: {getattr(err, 'sqlite', err)}"
    except CodiiError:  # busy, I/O, interrupted: no verdict, so none is remembered either
        return None
    if report == ["ok"]:
        try:
            altered = _altered(store)
        except DamagedIndexError as err:
            return f"its rows cannot be read: {getattr(err, 'sqlite', err)}"
        except CodiiError:
            return None
        if altered:
            return altered
        _remember(store.path, before, readonly=store.readonly)
        return None
    # Each row may hold several lines, the first naming the schema ("*** in database main ***").
    problems = [line for row in report for line in row.splitlines() if line and not line.startswith("***")]
    more = len(problems) - SHOWN_PROBLEMS
    return "; ".join(problems[:SHOWN_PROBLEMS]) + (f" (+{more} more)" if more > 0 else "")


def content_digest(conn: apsw.Connection, db: Path) -> str:
    """``sha256-v1:<64 hex>`` of what an index's answers are made of (sql/meta.sql content_digest_rows:
    files, chunks, definitions, stored texts, each in key order), every value typed and length-prefixed
    so no two row sets hash alike. About the cost of reading those tables once.

    Raises:
        DamagedIndexError, StorageError: a row of ``conn``'s file ``db`` cannot be read.
    """
    digest = hashlib.sha256()
    try:
        for row in conn.execute(queries.runnable("content_digest_rows")):
            for value in row:
                data = value if isinstance(value, bytes) else b"" if value is None else str(value).encode("utf-8", "surrogatepass")
                digest.update(_TYPE_TAGS.get(type(value), b"n") + b"%d:" % len(data) + data)
            digest.update(b";")
    except apsw.Error as err:
        raise translate(err, db) from None
    return f"{DIGEST_SCHEME}:{digest.hexdigest()}"


def _altered(store: Store) -> str | None:
    """Why an export's rows are not what it was made with (its digest differs), or None: no digest (not an
    export, or one of another scheme) or the same."""
    expected = store.meta().get(DIGEST_KEY)
    if not isinstance(expected, str) or not expected.startswith(DIGEST_SCHEME + ":"):
        return None
    if content_digest(store.conn, store.path) != expected:
        return "its rows differ from what the export wrote: the file was altered or damaged after it was exported"
    return None


def vouch(db: Path, folded_bytes: int | None = None, *, readonly: bool = False) -> None:
    """Record ``db`` as sound as it is now: called after our own commits, so the next build or
    status does not read every page of a file only this process changed. ``folded_bytes``: the
    index's size (sql/connection.sql ``index_bytes``), which the file takes when a checkpoint folds a
    log left behind into it. Without it a kernel watcher's update read all 4.5 GB again (13-15 s)
    after each commit whose log readers kept from being emptied. ``readonly``: ``db`` is a file read only
    here (an export just written), remembered as :func:`checked_path` says."""
    _remember(db, stamp(db), folded_bytes, readonly=readonly)


def _folded(remembered: dict, now: list[int]) -> bool:
    """Whether ``now`` is the remembered state with its log folded into the file: the log had pages
    then and is empty or gone now, and the file has the index's size."""
    return bool(remembered["stamp"][2]) and now[2] == 0 and now[0] == remembered.get("folded")


def _identity(db: Path) -> list[int] | None:
    """``[inode, ctime_ns]`` of ``db``: a copy over it with the same size and mtime (``cp -p``) is another file."""
    try:
        st = os.stat(db)
    except OSError:
        return None
    return [st.st_ino, st.st_ctime_ns]


def _remembered(db: Path, readonly: bool = False) -> dict | None:
    try:
        value = json.loads(checked_path(db, readonly).read_text())
    except (OSError, ValueError):
        return None
    value = {"stamp": value} if isinstance(value, list) else value if isinstance(value, dict) else None
    if readonly and value is not None and value.get("identity") != _identity(db):
        return None
    return value


def _remember(db: Path, value: list[int], folded_bytes: int | None = None, *, readonly: bool = False) -> None:
    where = checked_path(db, readonly)
    tmp = where.with_name(where.name + ".tmp")
    try:
        record = {"stamp": value, "folded": folded_bytes}
        if readonly:
            where.parent.mkdir(parents=True, exist_ok=True)
            record.update(identity=_identity(db), path=os.fsdecode(db.absolute()))
        tmp.write_text(json.dumps(record))
        os.replace(tmp, where)
    except OSError:  # a full disk: the file is checked again next time; no empty .tmp left beside it
        with contextlib.suppress(OSError):
            tmp.unlink()
