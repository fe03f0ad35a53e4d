"""Building indexes: one build with the shared embedding cache, and the update a search runs first."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..codebase import Codebase
from ..errors import DiskFullError, IndexBusyError, NotIndexedError
from ..ingest.indexer import Indexer
from ..ingest.report import BuildReport, Progress
from ..models.cache import EmbeddingCache
from ..models.embedder import Embedder
from ..models.registry import get_embedder
from .maintenance import discard_damaged
from .status import status


def build(codebase: Codebase, *, force: bool = False, wait: bool = True, progress: Progress | None = None,
          ignore_patterns: list[str] | None = None, extensions: list[str] | None = None,
          use_cache: bool = True, warn: Callable[[str], None] | None = None,
          embedder: Embedder | None = None) -> BuildReport:
    """Build or update the index of ``codebase`` (see :meth:`Indexer.build` for errors).

    ``force`` on an index SQLite reports damaged deletes it first (see :func:`discard_damaged`).
    ``warn`` receives one-line warnings that do not stop the build (a damaged embedding cache
    replaced by an empty one: without a word, the user would only see every chunk re-embedded).
    ``embedder`` defaults to the registry's default (the bundled model).

    Raises:
        DiskFullError: SQLite could not write the index (every batch commits whole, so the index
            keeps its last committed state).
    """
    if force:
        discard_damaged(codebase)
    cache = EmbeddingCache(on_warning=warn) if use_cache else None
    try:
        with reword_disk_full(codebase):
            return Indexer(codebase, embedder or get_embedder(), progress=progress, cache=cache,
                           ignore_patterns=ignore_patterns, extensions=extensions).build(force=force, wait=wait)
    finally:
        if cache is not None:
            cache.close()


@contextlib.contextmanager
def reword_disk_full(codebase: Codebase) -> Iterator[None]:
    """A full disk while building names the index file and the command that finishes the job."""
    try:
        yield
    except DiskFullError:
        raise DiskFullError(f"the disk is full writing {codebase.db_path}: free some space, then run "
                            "`codii-sql build` again (the index keeps its last committed state)") from None


def ensure_index(codebase: Codebase, *, update: bool = True, progress: Progress | None = None,
                 embedder: Embedder | None = None) -> str | None:
    """Make the index usable for search: build it if missing, update it if ``update``.

    Never waits for another process's build: it searches the last committed state then.

    Returns:
        a note for the user when the index could not be brought up to date, or the update
        warned (see :func:`build`), else None.
    Raises:
        NotIndexedError: no index yet and ``update`` is false (nothing may be built then).
    """
    exists = codebase.db_path.is_file()
    warnings: list[str] = []
    if not update:
        if not exists:
            raise NotIndexedError(f"{codebase.root} is not indexed and --no-update builds nothing: "
                                  f"run `codii-sql build {codebase.root}` first")
        st = status(codebase, check_stale=False)
        if st["status"] == "failed":
            return (f"the last build did not finish ({st.get('error')}): results come from the "
                    f"{st['files']} files it committed; run `codii-sql build {codebase.root}` to complete it")
        if st["status"] == "indexing":
            return "another process is indexing this codebase: results come from the last committed state"
        return None
    try:
        build(codebase, wait=False, progress=progress, warn=warnings.append, embedder=embedder)
    except IndexBusyError:
        if not exists:
            raise IndexBusyError(f"{codebase.root} is being indexed for the first time; try again shortly") from None
        return "another process is indexing this codebase: results come from the last committed state"
    return "; ".join(warnings) or None
