"""A portable shard: an index file searched alone, without the source it was built from (a copy,
an export from CI, a file in a served folder of shards). Never written to, never updated."""

from __future__ import annotations

from ..codebase import Codebase
from ..search.answer import Note
from .indexes import OpenIndexes
from .shards import LocalShard

#: What every answer from an index alone says.
SOURCE_NOTE = ("this index is read alone: results come from the chunks it stores, not from files on disk, and whether "
               "the files changed since it was built is unknown (stale: null)")


class FileShard(LocalShard):
    """The index file of ``codebase`` (``codebase.alone``), read only: its name is the file's path,
    so a result's ``codebase`` names the file to ask again (``--db``, an MCP ``path``)."""

    def __init__(self, codebase: Codebase, *, indexes: OpenIndexes | None = None):
        super().__init__(codebase, update=False, indexes=indexes, building=_never)
        self.name = str(codebase.db_path)

    def prepare(self) -> Note:
        """Nothing to update; the note that the source is not here."""
        return Note("source", SOURCE_NOTE)

    def embedding_now(self) -> bool:
        """Never: nothing builds an index alone (and no lock file is probed, or made, beside it)."""
        return False


def _never(codebase: Codebase) -> bool:
    return False
