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
from ..errors import UsageError
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

    def files(self) -> list[Path]:
        """The shard files now, by name."""
        with os.scandir(self.folder) as entries:
            return sorted(Path(e.path) for e in entries
                          if e.name.endswith(".db") and not e.name.startswith(".") and e.is_file())

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
