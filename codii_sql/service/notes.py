"""The notes a search answer carries, as data: why results may be missing that the user expects."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ..errors import Remedy
from ..search.answer import Note, named_first
from ..search.query import MAX_QUERY_TERMS, Analysis
from ..search.results import sqlite_glob
from ..storage.store import Store
from .vector_state import vector_progress


def filter_note(store: Store, root: str, *, indexing: bool | Callable[[], bool] = False) -> Note | None:
    """Why results may be missing that the user expects: the index holds only some extensions
    (an earlier build's filter, perhaps an agent's, silently narrows every later search), or no
    file at all; else None.

    An index without files is blamed on filters only after a build finished: while its first
    build runs (``indexing``: a bool, or a callable asked only for an empty index), or after
    none finished, it is empty because nothing has been committed yet.
    """
    meta = store.meta()
    exts = meta.get("scan_extensions")
    reset = Remedy("reset_filters", {"root": root})
    if not store.value("has_files"):
        first = "" if meta.get("last_indexed_at") else " for the first time"
        if indexing if isinstance(indexing, bool) else indexing():
            return Note("filters", f"this codebase is being indexed{first} and no file is committed yet",
                        Remedy("poll_status", {"root": root}))
        if first:
            return Note("filters", "this index holds no files yet: no build of it has finished",
                        Remedy("build", {"root": root}))
        if exts or meta.get("scan_ignore_patterns"):
            return Note("filters", "this index holds no files: its filters or ignore rules exclude everything", reset)
        skipped = ", ".join(f"{n} {why}" for why, n in sorted((meta.get("skipped") or {}).items()))
        return Note("filters", "this index holds no files: the folder has no text files to index"
                    + (f" (skipped: {skipped})" if skipped else ""))
    if exts:
        # a build's filter, which every later build keeps (an agent's own call was told it was "an earlier build's")
        return Note("filters", f"this index holds only {' '.join(exts)} files (a build's extension filter, which later "
                               "builds keep)", reset)
    return None


def empty_filter_note(store: Store, exts: list[str], glob: str | None) -> Note | None:
    """Why a filtered search found nothing: no indexed file passes its extension or path filter
    (a typo, or a file type this codebase has none of); else None."""
    if not (exts or glob):
        return None
    endings = [e if e.startswith(".") else "." + e for e in exts]
    if store.value("any_allowed", {"exts": json.dumps(endings) if endings else None, "glob": sqlite_glob(glob)}):
        return None
    asked = " and ".join(filter(None, (f"ends in {' or '.join(endings)}" if endings else None,
                                       f"matches the path glob {glob!r}" if glob else None)))
    held = ", ".join(f"{r['ext']} ({r['files']})" for r in store.rows("index_extensions"))
    return Note("filters", f"no indexed file {asked}", f"the index holds files ending in {held}" if held else None)


def scope_note(store: Store, under: str | None) -> Note | None:
    """Why a search kept to the subfolder ``under`` can find nothing there: none of its files
    is indexed (ignored, filtered out, or no text files); else None."""
    if not under or store.value("has_files_under", {"under": under}):
        return None
    return Note("scope", f"no file under {under}/ is indexed: it is ignored (.gitignore, .codiiignore), left out by "
                         "the index's filters, or holds no text files")


def vectors_note(store: Store, root: str, *, running: bool, mode: str, alone_db: str | None = None) -> Note | None:
    """How the missing vectors shape the answer, when some chunks have none yet (a vector phase is
    running or stopped, or vectors are off); None when every chunk has one, or in ``bm25`` mode.
    ``alone_db`` is the index file when it is searched alone: it is never built, so the remedy is
    to build its source and export it again."""
    if mode == "bm25" or not store.value("vectors_pending"):  # counting the chunks is 3 ms a search on the kernel
        return None
    counts = store.row("vector_counts")
    progress = vector_progress(store.meta(), counts, running=running)
    done, total = progress["done"], progress["total"]
    # With no vector at all the searcher answers vector mode by BM25 (nothing to compare an embedding with).
    blind = "" if mode != "vector" else "; vector mode cannot find them" if done else \
        "; with no vector in the index, vector mode answered by BM25"
    if store.value("vectors_pending_many"):  # Searcher._nothing_close then never says no_good_match (a helper)
        blind += "; while so many lack one, no_good_match cannot tell a poor answer from a good one"
    if progress["state"] == "running":
        eta = progress.get("eta_seconds")
        left = f", about {eta // 60} min {eta % 60} s to go" if eta else ""
        return Note("vectors", f"vectors are still being embedded ({done} of {total} chunks searchable by vector{left}): chunks without one "
                               f"rank by BM25 alone{blind}")
    if progress["state"] == "off":
        # A build with vectors off still takes the vectors of unchanged chunk texts from the cache or an earlier build.
        held = f"{done} of {total} chunks have a vector, reused (built with vectors off): the others" if done else \
            f"this index holds no vector for its {total} chunks (built with vectors off): they"
        return Note("vectors", f"{held} rank by BM25 alone{blind}",
                    Remedy("export_again", {"db": alone_db}) if alone_db else Remedy("embed_vectors", {"root": root}))
    why = f" ({progress['error']})" if progress.get("error") else ""
    return Note("vectors", f"{total - done} of {total} chunks have no vector yet, the vector phase stopped{why}: they "
                           f"rank by BM25 alone{blind}",
                Remedy("export_again", {"db": alone_db}) if alone_db else Remedy("build", {"root": root}))


def no_match_note(best_cosine: float | None, found: bool = True, many: bool = False, filtered: bool = False) -> Note:
    """What to tell when nothing matched the query well (see ``Hits.no_good_match``): with results ``found``,
    that they are only the least unlike; with none, that nothing holds the query's words (an empty answer
    said nothing, a new user), or nothing the request's filters keep (``filtered``: a --grep or --glob that
    matched nothing was blamed on the query); ``many``: over several codebases."""
    close = f"the nearest chunk's cosine is {best_cosine:.2f}, " if best_cosine is not None else ""
    where = "these codebases" if many else "this codebase"
    if not found and filtered:
        return Note("no_good_match", f"no match: {close}no chunk the filters keep (extension, path, language, role, "
                                     "grep) holds a word of the query", "search without them, or with others")
    if not found:
        return Note("no_good_match", f"no match: {close}no chunk holds a word of the query and no symbol or file is "
                                     f"named by it; what it asks for may not be in {where}")
    return Note("no_good_match", f"no good match: {close}no chunk holds every word of the query and no symbol or "
                                 f"file is named by it; what it asks for may not be in {where} (these results "
                                 "are only the least unlike)")


def query_notes(analysis: Analysis | None) -> list[Note]:
    """What BM25 could not read of the query: the words past its bound, text in a script written
    without spaces that it cannot split into words, a lone Han or kana character."""
    if analysis is None:
        return []
    notes = []
    if analysis.words > MAX_QUERY_TERMS:
        used = f"used the {len(analysis.terms)} that say most" if analysis.terms else "none of those is in the index"
        notes.append(Note("query", f"the query has {analysis.words:,} distinct words: BM25 weighed its title, code "
                                   f"spans and first {MAX_QUERY_TERMS:,}, and {used}"))
    # Only where every word is of one character: a query of words no chunk holds was told it held none that long.
    if not analysis.terms and analysis.text.strip() and not analysis.unmatched \
            and not re.search(r"\w\w", analysis.text):
        # A new user's `search x` answered nothing, silently: words of one character are no BM25 term.
        notes.append(Note("query", "the query has no word BM25 can match (it matches no word of one character): "
                                   "any result comes from the vectors", "grep finds a short name: "
                                   "`codii-sql grep -w NAME`, or MCP grep_code with word=true"))
    if analysis.unmatched:
        notes.append(Note("script", f"BM25 cannot match the query's {analysis.unmatched} word by word (no spaces or "
                                    "pairs of characters to match); these results come from the rest of the query and "
                                    "the vectors", "add a few more words, or two characters of a Chinese or Japanese word"))
    return notes


def embedder_note(name: str, why: str, codebase: str | None = None, members: list[str] | None = None) -> Note:
    """The query could not be embedded: the results are BM25 only (those of ``members`` alone, when given:
    the others' embedder answered)."""
    if members is None:
        return Note("embedder", f"the embedder {name} did not answer ({why}): these are BM25 results only",
                    codebase=codebase)
    return Note("embedder", f"the embedder {name} did not answer ({why}): the results of {named_first(members)} "
                            "are BM25 results only", codebase=codebase)
