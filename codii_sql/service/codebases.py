"""Which codebase a user means: a path, or an index file (whose snapshot names its root, or which is searched alone)."""

from __future__ import annotations

import os
from pathlib import Path

from ..codebase import Codebase, is_remote
from ..paths import default_db_path
from ..errors import CodiiError, UsageError
from ..storage.store import Store


def index_file(db: str | os.PathLike[str]) -> Codebase:
    """The codebase of an index file: its recorded root when that folder is here, else the index
    alone (a copy, an export, a shard: searched read only from its stored chunks, named by its
    manifest's codebase, else its recorded folder's name, else the file's). The file is only read.

    Raises:
        UsageError: ``db`` is a directory or no index file. StorageError: it is not a codii-sql index.
    """
    db_path = Path(db).expanduser().absolute()
    if db_path.is_dir():
        raise UsageError(f"{db} is a directory", f"pass a file path such as {db_path / 'index.db'}", field="db")
    if not db_path.is_file():
        raise UsageError(f"{db_path}: no such index file", "pass an existing .db, or the codebase folder to build one",
                         field="db")
    with Store(db_path, readonly=True) as store:
        meta = store.meta()
    root = meta.get("root")
    if root and Path(root).is_dir():
        return Codebase.open(root, db_path)
    name = (meta.get("manifest") or {}).get("codebase") or (Path(root).name if root else db_path.stem)
    return Codebase.index_alone(db_path, name)


def is_index_file(path: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` names an index file (``*.db``) rather than a folder: such a path is searched
    as ``--db`` (an agent passes a shard's file as its path)."""
    return path is not None and str(path).endswith(".db") and Path(path).expanduser().is_file()


def open_codebase(path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None) -> Codebase:
    """:meth:`Codebase.open`, where ``path`` None with ``db`` given (or an index file as ``path``)
    means that index file's codebase (:func:`index_file`).

    Raises:
        UsageError: see :meth:`Codebase.open` and :func:`index_file`.
    """
    if db is None and is_index_file(path):
        path, db = None, path
    if path is None and db is not None:
        return index_file(db)
    return _owned(Codebase.open(path, db), db)


def find_codebase(path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None
                  ) -> tuple[Codebase, str]:
    """:meth:`Codebase.find` (the index answering a search from ``path``, and the scope), where
    ``path`` None with ``db`` given (or an index file as ``path``) means that index file's codebase.

    Raises:
        UsageError: see :meth:`Codebase.open` and :func:`index_file`.
    """
    if db is None and is_index_file(path):
        path, db = None, path
    if path is None and db is not None:
        return index_file(db), ""
    codebase, scope = Codebase.find(path, db)
    if scope and db is None:
        nested = _nested_repository(codebase, scope)
        if nested is not None:
            return nested
    return _owned(codebase, db), scope


def _nested_repository(codebase: Codebase, scope: str) -> tuple[Codebase, str] | None:
    """The repository of its own (a submodule, a nested clone) that holds ``scope`` inside ``codebase``
    when ``codebase``'s index leaves it out, as Git does, and the scope within it; else None. A new
    user's `search --path libs/hist` (a submodule) searched the outer index, found nothing, and blamed
    the ignore rules; it is a codebase of its own, indexed on first use like any other."""
    folder = codebase.root / scope
    for inner in (folder, *folder.parents):
        if inner == codebase.root or codebase.root not in inner.parents:
            return None
        if os.path.lexists(inner / ".git"):
            break
    else:
        return None
    under = inner.relative_to(codebase.root).as_posix()
    if codebase.db_path.is_file():
        with Store(codebase.db_path, create=False) as store:
            if store.value("has_files_under", {"under": under}):
                return None  # taken in by a .codiiignore negation: the outer index answers for it
    return Codebase(inner, default_db_path(inner)), "" if folder == inner else folder.relative_to(inner).as_posix()


def _owned(codebase: Codebase, db: str | os.PathLike[str] | None) -> Codebase:
    """``codebase``, unless ``db`` is the index of another codebase that is still here: a build
    (or a search's update) would replace its chunks by this one's. An index whose recorded root
    is gone (a copied or moved .db) is this codebase's, as README's copy to another machine says;
    an export (it holds a manifest) is an index alone, whatever path comes with it.

    Raises:
        UsageError: ``db``'s snapshot names another existing folder.
    """
    if db is None or not codebase.db_path.is_file():
        return codebase
    with Store(codebase.db_path, create=False, readonly=True) as store:
        meta = store.meta()
    root = meta.get("root")
    if meta.get("manifest"):  # an export is only ever read: `build OTHER --db shard.db` overwrote one with OTHER
        return Codebase.index_alone(codebase.db_path, meta["manifest"].get("codebase") or codebase.db_path.stem)
    if root and Path(root) != codebase.root and Path(root).is_dir():
        raise UsageError(f"{db} is the index of {root}, not of {codebase.root}",
                         f"pass the folder {root} to use it, or another index file (or none) for {codebase.root}",
                         field="db")
    return codebase


def first_build(path: str | None, db: str | None) -> Path | None:
    """The root a search of ``path`` (or ``db``) is about to index for the first time, else None
    (a server, an index file, an index that exists, a path the search itself will refuse, or an
    index folder that cannot be written: the search says why instead)."""
    if path is not None and (is_remote(path) or is_index_file(path)):
        return None
    try:
        codebase, _ = find_codebase(path, db)
    except CodiiError:
        return None
    folder = codebase.db_path.parent
    writable = os.access(folder, os.W_OK) if folder.exists() else os.access(_existing(folder), os.W_OK)
    if codebase.alone or codebase.db_path.is_file() or not writable or indexed_inside(codebase.root):
        return None  # (a folder holding indexed codebases is refused by the search: builds.ensure_index)
    return codebase.root


def _existing(folder: Path) -> Path:
    """The nearest folder of ``folder`` or above it that exists."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def indexed_inside(root: Path) -> list[Path]:
    """The roots of the indexes in ``$CODII_SQL_HOME`` that lie inside ``root`` (not ``root`` itself),
    sorted; one that cannot be read is left out."""
    from .. import paths

    found = []
    for db in paths.indexes_dir().glob("*.db"):
        try:
            with Store(db, create=False) as store:
                recorded = store.meta().get("root")
        except CodiiError:
            continue
        if recorded and Path(recorded) != root and Path(recorded).is_relative_to(root):
            found.append(Path(recorded))
    return sorted(found)
