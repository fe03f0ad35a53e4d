"""File roles for evaluation: what the index says a file is, and the path rules for files it does not hold."""

from __future__ import annotations

from ..codebase import Codebase
from ..ingest.roles import classify
from ..storage.store import Store
from .status import not_indexed


def indexed_roles(codebase: Codebase) -> dict[str, str]:
    """``{path: role}`` of every file the index of ``codebase`` holds (relative POSIX paths).

    The stored role is the build's (``.gitattributes`` marks and generated-file headers
    included), so an evaluation judges a file exactly as the search's role prior does.

    Raises:
        NotIndexedError: no index file.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with Store(codebase.db_path, create=False) as store:
        return {r["path"]: r["role"] for r in store.rows("file_roles")}


def path_role(path: str) -> str:
    """The role the path rules alone give ``path`` (for a file no longer in the tree: no attributes, no header)."""
    return classify(path)
