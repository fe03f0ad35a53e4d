"""The notes a search answer carries: why results may be missing that the user expects."""

from __future__ import annotations

from collections.abc import Callable

from ..storage.store import Store
from .status import vector_progress


def filter_note(store: Store, *, indexing: bool | Callable[[], bool] = False) -> str | None:
    """Why results may be missing that the user expects: the index holds only some extensions
    (an earlier build's filter, perhaps an agent's, silently narrows every later search), or no
    file at all; else None.

    An index without files is blamed on filters only after a build finished: while its first
    build runs (``indexing``: a bool, or a callable asked only for an empty index), or after
    none finished, it is empty because nothing has been committed yet.
    """
    meta = store.meta()
    exts = meta.get("scan_extensions")
    reset = "`codii-sql build --reset-filters` (MCP: index_codebase resetFilters=true) indexes every file"
    if not store.value("has_files"):
        first = "" if meta.get("last_indexed_at") else " for the first time"
        if indexing if isinstance(indexing, bool) else indexing():
            return (f"this codebase is being indexed{first} and no file is committed yet: poll get_indexing_status "
                    "(CLI: `codii-sql status`) and search again when it reports files indexed")
        if first:
            return ("this index holds no files yet: no build of it has finished; call index_codebase "
                    "(CLI: `codii-sql build`) to index the codebase")
        if exts or meta.get("scan_ignore_patterns"):
            return f"this index holds no files: its filters or ignore rules exclude everything; {reset}"
        skipped = ", ".join(f"{n} {why}" for why, n in sorted((meta.get("skipped") or {}).items()))
        return ("this index holds no files: the folder has no text files to index"
                + (f" (skipped: {skipped})" if skipped else "") + "; `codii-sql status` shows what was skipped")
    if exts:
        return f"this index holds only {' '.join(exts)} files (an earlier build's filter); {reset}"
    return None


def scope_note(store: Store, under: str | None) -> str | None:
    """Why a search kept to the subfolder ``under`` can find nothing there: none of its files
    is indexed (ignored, filtered out, or no text files); else None."""
    if not under or store.value("has_files_under", {"under": under}):
        return None
    return (f"no file under {under}/ is indexed: it is ignored (.gitignore, .codiiignore), left out by the "
            "index's filters, or holds no text files")


def vectors_note(store: Store, *, running: bool, mode: str) -> str | None:
    """How the missing vectors shape the answer, when some chunks have none yet (a vector phase is
    running or stopped, or vectors are off); None when every chunk has one, or in ``bm25`` mode."""
    counts = store.row("vector_counts")
    if not counts["pending"] or mode == "bm25":
        return None
    progress = vector_progress(store.meta(), counts, running=running)
    done, total = progress["done"], progress["total"]
    if progress["state"] == "running":
        eta = progress.get("eta_seconds")
        left = f", about {eta // 60} min {eta % 60} s to go" if eta else ""
        note = f"vectors are still being embedded ({done} of {total} chunks{left}): chunks without one rank by BM25 alone"
    elif progress["state"] == "off":
        note = (f"this index holds vectors for {done} of {total} chunks (built with --no-vectors): the others rank "
                "by BM25 alone; `codii-sql build --vectors` embeds them (over MCP, index_codebase keeps that choice: "
                "ask the user)")
    else:
        why = f" ({progress['error']})" if progress.get("error") else ""
        note = (f"{total - done} of {total} chunks have no vector yet, the vector phase stopped{why}: they rank by "
                "BM25 alone; `codii-sql build` (MCP: index_codebase) embeds them")
    return note + ("; vector mode cannot find them" if mode == "vector" else "")


def no_match_note(searcher) -> str | None:
    """What to tell when nothing matched the query well (see ``Searcher.no_good_match``)."""
    if not searcher.no_good_match:
        return None
    close = f"the nearest chunk's cosine is {searcher.best_cosine:.2f}, " if searcher.best_cosine is not None else ""
    return (f"no good match: {close}no chunk holds every word of the query and no symbol or file is named by it; "
            "what it asks for may not be in this codebase (these results are only the least unlike)")
