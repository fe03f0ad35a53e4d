"""A portable shard: an index file searched alone, without the source it was built from (a copy,
an export from CI, a file in a served folder of shards). Never written to, never updated."""

from __future__ import annotations

from ..codebase import Codebase
from ..errors import UsageError
from ..search.answer import Note
from ..text import numbered_lines
from .indexes import OpenIndexes
from .shards import LocalShard
from .status import open_store

#: What every answer from an index alone says.
SOURCE_NOTE = ("the source of this index is not here: results come from its stored chunks, and whether the files "
               "changed since it was built is unknown (stale: null)")


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



def stored_lines(codebase: Codebase, file: str) -> dict[int, str]:
    """``{line: text}`` (1-based) of ``file`` as the chunks of an index alone hold it: every line some
    chunk spans (a notebook cell's lines, which share one file line, are not placed).

    Raises:
        UsageError: the index holds no such file.
    """
    with open_store(codebase) as store:
        chunks = store.rows("chunks_of_file_text", {"path": file})
    if not chunks:
        raise UsageError(f"{file} is not in the index", "pass a path relative to the codebase root, as search results "
                                                        "show it")
    lines: dict[int, str] = {}
    for c in chunks:
        numbered = numbered_lines(c["content"], c["start_line"], c["end_line"])
        if numbered and numbered[-1][0] == c["end_line"]:
            for n, text in numbered:
                lines.setdefault(n, text)
    return lines


def not_stored(lines: dict[int, str], start: int, end: int) -> list[list[int]]:
    """The ranges ``[first, last]`` of lines ``start..end`` that ``lines`` lacks."""
    gaps: list[list[int]] = []
    for n in range(start, end + 1):
        if n in lines:
            continue
        if gaps and gaps[-1][1] == n - 1:
            gaps[-1][1] = n
        else:
            gaps.append([n, n])
    return gaps
