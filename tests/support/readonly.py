"""A writable index that acts read-only for one statement: how tests reach the read-only upgrade paths as root."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw
import pytest

from codii_sql.storage.store import Store


@contextlib.contextmanager
def refusing(statement: str) -> Iterator[None]:
    """Inside the block, :meth:`Store.run` of the named ``statement`` fails as SQLite does writing a read-only
    file (root ignores chmod, so a real read-only file cannot be made here); after it, it runs again."""
    run = Store.run

    def read_only(self, name, params=None):
        if name == statement:
            raise apsw.ReadOnlyError("attempt to write a readonly database")
        return run(self, name, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Store, "run", read_only)
        yield
