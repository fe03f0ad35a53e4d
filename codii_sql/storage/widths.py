"""The vector tables of an index made as wide as its embedder's vectors (``{dims}`` in their statements)."""

from __future__ import annotations

from ..errors import IndexMismatchError, Remedy, StorageError
from . import queries
from .store import Store


def fit_vector_tables(store: Store, dims: int) -> None:
    """Make ``store``'s vector tables ``dims`` wide, which they may only be made while they hold no vector.

    Raises:
        IndexMismatchError: they hold vectors of another width (another model's).
        StorageError: ``dims`` is not a positive multiple of 8 (sign bits are stored in bytes).
    """
    if store.vector_dims() == dims:
        return
    if dims <= 0 or dims % 8:
        raise StorageError(f"the embedder returns {dims}-dim vectors; an index stores a positive multiple of 8 "
                           "dimensions (their sign bits fill whole bytes)", "choose another model or dimensions")
    with store.transaction():
        if store.value("vector_rows"):
            raise IndexMismatchError(f"the embedder returns {dims}-dim vectors but index {store.path.name} holds "
                                     f"{store.vector_dims()}-dim ones", Remedy("force_build"))
        store.run_text("\n".join(map(queries.sql, ("vector_tables_create", "ann_reset"))).replace("{dims}", str(int(dims))))


def create_history_vec(store: Store, dims: int) -> None:
    """Make ``history_vec`` (sql/history.sql) ``dims`` wide; the caller checked it is absent."""
    store.run_text(queries.sql("history_vec_create").replace("{dims}", str(int(dims))))
