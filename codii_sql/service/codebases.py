"""Which codebase a user means: a path, or a copied index whose snapshot names its root."""

from __future__ import annotations

import os
from pathlib import Path

from ..codebase import Codebase
from ..errors import Remedy, UsageError
from ..storage.store import Store


def recorded_root(db: str | os.PathLike[str]) -> str:
    """The codebase root stored in an index's snapshot, for ``--db`` without a path.

    Raises:
        UsageError: ``db`` is a directory or no index file, or the root it records is not here.
    """
    db_path = Path(db).expanduser().absolute()
    if db_path.is_dir():
        raise UsageError(f"{db} is a directory", f"pass a file path such as {db_path / 'index.db'}", field="db")
    if not db_path.is_file():
        raise UsageError(f"{db_path}: no such index file", "pass an existing .db, or the codebase folder to build one", field="db")
    with Store(db_path, create=False) as store:
        root = store.meta().get("root")
    if not root or not Path(root).is_dir():
        raise UsageError(f"the index {db_path.name} was built for {root or 'an unknown folder'}, which is not here",
                         Remedy("pass_folder"))
    return root


def open_codebase(path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None) -> Codebase:
    """:meth:`Codebase.open`, where ``path`` None with ``db`` given means the root ``db`` records.

    Raises:
        UsageError: see :meth:`Codebase.open` and :func:`recorded_root`.
    """
    if path is None and db is not None:
        path = recorded_root(db)
    return _owned(Codebase.open(path, db), db)


def find_codebase(path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None
                  ) -> tuple[Codebase, str]:
    """:meth:`Codebase.find` (the index answering a search from ``path``, and the scope), where
    ``path`` None with ``db`` given means the root ``db`` records.

    Raises:
        UsageError: see :meth:`Codebase.open` and :func:`recorded_root`.
    """
    if path is None and db is not None:
        path = recorded_root(db)
    codebase, scope = Codebase.find(path, db)
    return _owned(codebase, db), scope


def _owned(codebase: Codebase, db: str | os.PathLike[str] | None) -> Codebase:
    """``codebase``, unless ``db`` is the index of another codebase that is still here: a build
    (or a search's update) would replace its chunks by this one's. An index whose recorded root
    is gone (a copied or moved .db) is this codebase's, as README's copy to another machine says.

    Raises:
        UsageError: ``db``'s snapshot names another existing folder.
    """
    if db is None or not codebase.db_path.is_file():
        return codebase
    with Store(codebase.db_path, create=False) as store:
        root = store.meta().get("root")
    if root and Path(root) != codebase.root and Path(root).is_dir():
        raise UsageError(f"{db} is the index of {root}, not of {codebase.root}",
                         f"pass the folder {root} to use it, or another index file (or none) for {codebase.root}",
                         field="db")
    return codebase
