"""Code like a given file or line range: the mean of its stored chunk vectors, as a KNN query."""

from __future__ import annotations

import numpy as np

from ..search.results import Result, SearchOptions
from ..search.searcher import Searcher


def similar_code(searcher: Searcher, file: str, start_line: int | None, end_line: int | None,
                 limit: int) -> tuple[int, list[Result]]:
    """Code most like ``file`` (lines ``start_line..end_line``, 1-based inclusive; None: the file's
    start/end): the mean of its stored chunk vectors (nothing is re-embedded), one result per file: of a
    range, other files and the rest of ``file`` but the definitions the range lies in (an agent's stand-in
    never saw click's ``Parameter.resolve_envvar_value`` for ``Option.resolve_envvar_value``, in the same file;
    a new user's got the rest of the function asked about), of a whole file, other files. Returns (chunks of
    ``file`` used, results); (0, []) when it has no indexed chunk.
    """
    rows = searcher.store.rows("file_vectors", {"path": file, "start_line": start_line, "end_line": end_line})
    if not rows:
        return 0, []
    vectors = np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])
    ranged = start_line is not None or end_line is not None
    opts = SearchOptions(limit=limit, mode="vector", exclude_path=None if ranged else file, group_by_file=True)
    first, last = min(r["start_line"] for r in rows), max(r["end_line"] for r in rows)
    symbols = {r["symbol"] for r in rows if r["symbol"]}

    def asked(r: Result) -> bool:  # a chunk of the range asked about, or of a definition it lies in
        return r.path == file and (r.start_line <= last and r.end_line >= first or r.symbol in symbols)

    return len(rows), searcher.similar(vectors, opts, skip=asked if ranged else None)
