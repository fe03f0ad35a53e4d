"""Code like a given file or line range: the mean of its stored chunk vectors, as a KNN query."""

from __future__ import annotations

import numpy as np

from ..search.results import Result, SearchOptions
from ..search.searcher import Searcher


def similar_code(searcher: Searcher, file: str, start_line: int | None, end_line: int | None,
                 limit: int) -> tuple[int, list[Result]]:
    """Code most like ``file`` (lines ``start_line..end_line``, 1-based inclusive; None: the file's
    start/end): the mean of its stored chunk vectors (nothing is re-embedded), one result per other
    file. Returns (chunks of ``file`` used, results); (0, []) when it has no indexed chunk.
    """
    rows = searcher.store.rows("file_vectors", {"path": file, "start_line": start_line, "end_line": end_line})
    if not rows:
        return 0, []
    vectors = np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])
    opts = SearchOptions(limit=limit, mode="vector", exclude_path=file, group_by_file=True)
    return len(rows), searcher.similar(vectors, opts)
