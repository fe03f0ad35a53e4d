"""Deleting indexes: ``clear``, and the damaged file that ``build --force`` replaces."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .. import paths
from ..codebase import Codebase
from ..errors import DamagedIndexError, IndexBusyError, ReadOnlyIndexError, StorageError, UsageError
from ..storage.lock import daemon_running, vector_lock, writer_lock
from ..storage.store import Store
from .codebases import index_file
from .daemon import daemon_info
from .status import list_codebases
from .watchers import watchers


def clear_target(path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None) -> Codebase:
    """The codebase whose index to clear. Only its index file matters, so an index whose folder is
    gone is found by ``db`` alone, or by the root that ``list_codebases`` records.

    Raises:
        UsageError: no such folder and no index recorded for it (see :meth:`Codebase.open`).
    """
    if db is not None and path is None:
        try:  # as build and search read it: a shard or an export is an index alone
            return index_file(db)
        except (UsageError, StorageError):  # missing, damaged or no index: clear says what it does with it
            return Codebase(Path("."), Path(db).expanduser().absolute())
    try:  # not open_codebase: a --db recording another root is still the file to delete
        return Codebase.open(path, db)
    except UsageError:
        wanted = str(Path(path or ".").expanduser().absolute())
        for r in list_codebases():
            if r.get("root") == wanted:
                return Codebase(Path(wanted), Path(r["db"]))
        raise


def clear(codebase: Codebase) -> bool:
    """Delete the index file (and its WAL, SHM and lock files). Returns False if there was none.

    A damaged file is deleted only where it is provably an index: under ``$CODII_SQL_HOME/indexes``.

    Raises:
        IndexBusyError: an indexer is running on it.
        StorageError: the file is not a codii-sql index (it is left alone).
        DamagedIndexError: a damaged file elsewhere (``--db``): it may not be ours, so it stays.
        ReadOnlyIndexError: an index file alone (a shard, an export whose source is not here): it is only
            ever read, and may be the one copy (a new user's ``clear --db shard.db --yes`` deleted it).
    """
    if codebase.alone:
        raise ReadOnlyIndexError(f"{codebase.db_path} is an index file alone (the source of {codebase.root} is not "
                                 "here), which codii-sql only reads: clear deletes the indexes it builds, so this "
                                 "file stays", "delete it yourself if you mean to (rm)")
    if codebase.db_path.is_file():
        try:
            Store(codebase.db_path, create=False).close()
        except DamagedIndexError:
            _check_in_home(codebase.db_path)
    return _remove_index_files(codebase)


#: How a cleared index's note names each kind of watcher (service/watchers.py's ``by``).
_WATCHED_BY = {"cli": "codii-sql watch", "mcp": "an MCP server", "http": "an HTTP server"}


def followed_note(codebase: Codebase) -> str | None:
    """What a cleared index's live watchers will do: ``codii-sql watch`` builds it again at the next file
    change; a server (MCP, HTTP) builds nothing by itself (its ``index_codebase`` or a ``build`` does), and
    follows the new index (a new user was told an HTTP server was an MCP server that would rebuild it). None
    when nothing watches it."""
    found = watchers(codebase)
    if not found:
        return None
    who = ", ".join(f"pid {w['pid']} ({_WATCHED_BY.get(w.get('by'), 'a server')})" for w in found)
    if any(w.get("by") == "cli" for w in found):
        return f"{codebase.root} is watched by {who}: it builds the index again at the next file change; stop it to keep it gone"
    return f"{codebase.root} is followed by {who}: it builds no index by itself, and serves the next one built"


def _check_in_home(db_path: Path) -> None:
    """Raise unless a damaged ``db_path`` is provably an index: one in ``$CODII_SQL_HOME/indexes``."""
    if not paths.in_indexes_dir(db_path):
        raise DamagedIndexError(f"{db_path} is damaged or not a SQLite database, so it cannot be recognised as a "
                                "codii-sql index", "if it is one, delete it by hand") from None


def discard_damaged(codebase: Codebase) -> bool:
    """``build --force`` on an index that SQLite reports corrupt: delete it so the build starts a new
    file (rewriting rows in place cannot mend broken pages); whether it did. A healthy index is kept.

    Raises:
        DamagedIndexError: the damaged file is outside ``$CODII_SQL_HOME/indexes`` (see :func:`clear`).
        IndexBusyError: an indexer is running on it.
    """
    if not codebase.db_path.is_file():
        return False
    try:
        with Store(codebase.db_path, create=False) as store:
            # quick_check reads every page without the index cross-checks: ~1 s for a 200 MB index.
            if [next(iter(r.values())) for r in store.rows("pragma_quick_check")] == ["ok"]:
                return False
    except DamagedIndexError:
        _check_in_home(codebase.db_path)
    _remove_index_files(codebase)
    return True


def _remove_index_files(codebase: Codebase) -> bool:
    """Delete the index and the files beside it, holding its writer and vector locks, so no build
    of another process is writing to a file that is gone (it would go on embedding into it).

    Raises:
        IndexBusyError: a build (lexical or vector phase, foreground or background) is running.
    """
    busy = _busy_message(codebase)
    if busy is None and codebase.db_path.exists():
        try:
            with writer_lock(codebase, wait=False), vector_lock(codebase, wait=False):
                return _delete(codebase)
        except IndexBusyError:
            busy = _busy_message(codebase) or f"{codebase.root} is being indexed"
    if busy is not None:
        raise IndexBusyError(f"{busy}: nothing was deleted", "try again when it finishes")
    return _delete(codebase)


def _busy_message(codebase: Codebase) -> str | None:
    """Who is building ``codebase`` (a background build names its pid and how to stop it), or None."""
    if not daemon_running(codebase):
        return None
    pid = (daemon_info(codebase) or {}).get("pid")
    stop = f" (pid {pid}: `kill {pid}` stops it)" if pid else ""
    return f"{codebase.root} is being indexed by a background build{stop}"


def _delete(codebase: Codebase) -> bool:
    found = False
    for suffix in ("", "-wal", "-shm", ".checked", ".scan", ".lock", ".vectors.lock", ".daemon.lock", ".daemon.json"):
        p = Path(f"{codebase.db_path}{suffix}")
        if p.exists():
            os.remove(p)
            found = found or suffix == ""
    shutil.rmtree(f"{codebase.db_path}.watch", ignore_errors=True)  # watchers' notes (service/watchers.py)
    return found
