"""What an index alone holds of a file: the lines its chunks store, and the ranges they leave out."""

from __future__ import annotations

import posixpath

from ..codebase import Codebase
from ..errors import UsageError
from ..text import numbered_lines, unpacked
from .status import open_store, refuse_damaged


def stored_path(path: str) -> str:
    """``path`` as an index alone holds it, relative to its root as a folder's path is read (``./src/a.py``,
    ``src//a.py`` and ``/src/a.py`` are ``src/a.py``; ``.`` is ``""``): a new user's ``./src`` was "no such
    file" there and a file in the live folder."""
    rel = posixpath.normpath(path.strip().replace("\\", "/")).strip("/")
    return "" if rel == "." else rel


def stored_lines(codebase: Codebase, file: str) -> dict[int, str]:
    """``{line: text}`` (1-based) of ``file`` as the chunks of an index alone hold it: every line some
    chunk spans (a notebook cell's lines, which share one file line, are not placed).

    Raises:
        UsageError: the index holds no such file. DamagedIndexError: its pages or rows are damaged.
    """
    with open_store(codebase) as store:
        refuse_damaged(codebase, store)  # an altered export's lines were shown as its own (checked once per change)
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


def stored_text(codebase: Codebase, path: str) -> str | None:
    """The whole text an index alone keeps of ``path`` (grep's copy), None when it keeps none (an index
    from before grep, or a damaged row: its chunks' lines then stand for it). A new user's shard view
    marked every blank line "not stored", and its outline lost a closing line no chunk holds (``}``)."""
    with open_store(codebase) as store:
        refuse_damaged(codebase, store)
        row = store.row("file_text_of_path", {"path": path})
    return None if row is None else unpacked(row["text"])


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
