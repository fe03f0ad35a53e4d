"""A folder of shards: every index file in it, searched alone, served as one set (zoekt's shard directory).

A file added to the folder is searched from the next request on, one removed no longer; one
replaced by rename (an export, a CI artifact put in place) is read whole, old or new: a search
that began on the old file ends on it (an immutable reader keeps the old inode), the next opens
the new one. Nothing is opened until a search asks: a folder of 1,000 shards starts at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..codebase import Codebase
from ..errors import CodiiError, UsageError
from ..storage.store import Store
from .indexes import OpenIndexes
from .portable import FileShard


class ShardFolder:
    """The index files (``*.db``) of ``folder``; files whose name starts with ``.`` are not shards
    (an export writes ``.NAME.part-PID`` beside its target before renaming it in).

    Raises:
        UsageError: ``folder`` is not a folder.
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = Path(folder).expanduser().absolute()
        if not self.folder.is_dir():
            raise UsageError(f"{self.folder} is not a folder of index files",
                             "pass the folder that holds the .db files to serve")
        self.name = self.folder.name
        self._verdicts: dict[tuple[str, int, int], str | None] = {}  # (name, size, mtime_ns) -> why unreadable

    def files(self) -> list[Path]:
        """The shard files now, by name."""
        with os.scandir(self.folder) as entries:
            return sorted(Path(e.path) for e in entries
                          if e.name.endswith(".db") and not e.name.startswith(".") and e.is_file())

    def unreadable(self, indexes: OpenIndexes | None = None) -> dict[str, str]:
        """The shard files now in the folder that cannot be read as an index, by name, each with why (one line):
        not SQLite, cut short, of another program, or found damaged by a search over ``indexes`` (its pages,
        or an export's rows altered: :func:`~codii_sql.storage.health.damage`, too slow to run here on each
        file). Each file is opened once per size and mtime (a server's /healthz said "ok" while 3 of its 7
        shards failed every search)."""
        out = {}
        for path in self.files():
            if indexes is not None and (why := indexes.damaged(Codebase.index_alone(path, path.stem))):
                out[path.name] = why
                continue
            try:
                st = path.stat()
            except OSError:
                continue  # gone since the listing
            key = (path.name, st.st_size, st.st_mtime_ns)
            if key not in self._verdicts:
                self._verdicts[key] = _unreadable(path)
            if self._verdicts[key] is not None:
                out[path.name] = self._verdicts[key]
        return out

    def shards(self, indexes: OpenIndexes | None = None) -> list[FileShard]:
        """A shard per file now in the folder (over ``indexes``, a long-lived face's open ones)."""
        return [FileShard(Codebase.index_alone(path, path.stem), indexes=indexes) for path in self.files()]

    def shard(self, name: str, indexes: OpenIndexes | None = None) -> FileShard:
        """The shard called ``name``: its file's name or stem, or its path.

        Raises:
            UsageError: no such shard in the folder.
        """
        for path in self.files():
            if name in (path.name, path.stem, str(path)):
                return FileShard(Codebase.index_alone(path, path.stem), indexes=indexes)
        raise UsageError(f"no shard {name!r} in {self.folder}", "GET /healthz lists the shards served")


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as an index (its snapshot, and a page of each table a search reads), or None."""
    try:
        with Store(path, create=False, readonly=True) as store:
            if store.meta().get("schema_version") is None:
                return "not an index of codii-sql (it has no schema version)"
            store.value("first_rows")
    except CodiiError as err:
        return err.what.split("\n", 1)[0]
    return None
