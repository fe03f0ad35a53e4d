"""The library face used by the CLI and the MCP server: build, search, status, list, stats, clear."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw

from . import paths
from .models.cache import EmbeddingCache
from .codebase import Codebase
from .ingest.doctor import examine
from .models.embedder import get_embedder
from .errors import DamagedIndexError, DiskFullError, IndexBusyError, NotIndexedError, StorageError, UsageError
from .ingest.config import scan_rules as index_scan_rules
from .ingest.indexer import Indexer, index_settings
from .ingest.report import BuildReport, Progress
from .search.results import Result, SearchOptions
from .search.searcher import Searcher
from .storage.lock import is_locked, writer_lock
from .storage.store import Store


def build(codebase: Codebase, *, force: bool = False, wait: bool = True, progress: Progress | None = None,
          ignore_patterns: list[str] | None = None, extensions: list[str] | None = None,
          use_cache: bool = True, warn: Callable[[str], None] | None = None) -> BuildReport:
    """Build or update the index of ``codebase`` (see :meth:`Indexer.build` for errors).

    ``force`` on an index SQLite reports damaged deletes it first (see :func:`_discard_damaged`).
    ``warn`` receives one-line warnings that do not stop the build (a damaged embedding cache
    replaced by an empty one: without a word, the user would only see every chunk re-embedded).
    """
    if force:
        _discard_damaged(codebase)
    cache = EmbeddingCache(on_warning=warn) if use_cache else None
    try:
        with _disk_full(codebase):
            return Indexer(codebase, get_embedder(), progress=progress, cache=cache,
                           ignore_patterns=ignore_patterns, extensions=extensions).build(force=force, wait=wait)
    finally:
        if cache is not None:
            cache.close()


@contextlib.contextmanager
def _disk_full(codebase: Codebase) -> Iterator[None]:
    """Turn SQLITE_FULL while writing ``codebase``'s index into :class:`DiskFullError`.

    Without it the error reached the CLI's catch-all for read failures, which blamed a damaged
    index; every batch commits whole, so the index is intact at its last commit.
    """
    try:
        yield
    except apsw.Error as err:
        if not disk_was_full(err):
            raise
        raise DiskFullError(f"the disk is full writing {codebase.db_path}: free some space, then run "
                            "`codii-sql build` again (the index keeps its last committed state)") from None


def disk_was_full(err: BaseException) -> bool:
    """True when ``err`` is SQLITE_FULL, or was raised while handling one.

    SQLite rolls a transaction back by itself on SQLITE_FULL, so the ROLLBACK that follows
    fails with "no transaction is active" and that error, not the FullError, propagates.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, apsw.FullError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass
class SearchResponse:
    """What a search returns: results plus how fresh the index was (``note`` says why if not).

    ``scope`` is the folder (relative to ``codebase``) the results were kept to, when the
    search came from a subfolder of an indexed codebase (:meth:`Codebase.find`).
    """

    query: str
    codebase: str
    results: list[Result]
    seconds: float
    note: str | None = None
    scope: str | None = None

    def to_dict(self) -> dict:
        """The documented JSON shape: ``{"query", "codebase", "results": [...]}`` plus ``seconds``,
        and ``note``/``scope`` when set."""
        out = {"query": self.query, "codebase": self.codebase, "results": [r.to_dict() for r in self.results],
               "seconds": round(self.seconds, 4)}
        if self.scope:
            out["scope"] = self.scope
        if self.note:
            out["note"] = self.note
        return out


def not_indexed(codebase: Codebase) -> NotIndexedError:
    """The error for a codebase without an index; inside an indexed folder it names that one
    (building the subfolder would make a second, nested index)."""
    outer = codebase.enclosing()
    if outer is not None:
        return NotIndexedError(f"{codebase.root} has no index of its own but lies inside the indexed codebase "
                               f"{outer.root}: pass that folder (search accepts the subfolder as it is)")
    return NotIndexedError(f"{codebase.root} is not indexed: run `codii-sql build {codebase.root}`")


def ensure_index(codebase: Codebase, *, update: bool = True, progress: Progress | None = None) -> str | None:
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
        build(codebase, wait=False, progress=progress, warn=warnings.append)
    except IndexBusyError:
        if not exists:
            raise IndexBusyError(f"{codebase.root} is being indexed for the first time; try again shortly") from None
        return "another process is indexing this codebase: results come from the last committed state"
    return "; ".join(warnings) or None


def open_searcher(codebase: Codebase) -> Searcher:
    """A :class:`Searcher` over the existing index.

    Raises:
        NotIndexedError: no index file yet.
        IndexMismatchError: built by another model (older chunking rules are fine: the next build re-chunks).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    store = Store(codebase.db_path, create=False)
    try:
        # Chunks of older chunking rules are still valid search results; the next build re-chunks.
        store.check_compatible({k: v for k, v in index_settings(get_embedder()).items() if k != "chunker_version"})
    except Exception:
        store.close()
        raise
    return Searcher(store, codebase.root, get_embedder())


def search(codebase: Codebase, query: str, opts: SearchOptions, *, update: bool = True,
           progress: Progress | None = None) -> SearchResponse:
    """Update the index if needed (see :func:`ensure_index`), then run one search."""
    if update and opts.mode != "bm25" and not get_embedder().loaded:
        # The model's start-up (~0.4 s) runs on the second core while the update check walks
        # the tree (0.1 s on Sphinx's 1.4k files, ~0.5 s on Django's): it overlaps, not adds.
        threading.Thread(target=_load_quietly, name="codii-model-load").start()
    note = ensure_index(codebase, update=update, progress=progress)
    searcher = open_searcher(codebase)
    try:
        t = time.perf_counter()
        results = searcher.search(query, opts)
        seconds = time.perf_counter() - t
        note = "; ".join(filter(None, (note, filter_note(searcher.store, indexing=lambda: is_locked(codebase)),
                                       None if results else scope_note(searcher.store, opts.under)))) or None
        return SearchResponse(query, str(codebase.root), results, seconds, note, opts.under or None)
    finally:
        searcher.store.close()


def _load_quietly() -> None:
    try:
        get_embedder().load()
    except Exception:  # noqa: BLE001 - the search's own embed call raises it with its message
        pass


def status(codebase: Codebase, *, check_stale: bool = True) -> dict:
    """The index's state: ``status`` is not_indexed, indexing, indexed, failed or stale.

    ``stale`` means a build would change the index (see :func:`is_stale`; skipped when
    ``check_stale`` is false). ``failed`` includes a build whose process died.
    """
    out = {"codebase": str(codebase.root), "db": str(codebase.db_path)}
    if not codebase.db_path.is_file():
        outer = codebase.enclosing()
        return {**out, "status": "not_indexed", **({"inside_indexed": str(outer.root)} if outer else {})}
    with Store(codebase.db_path, create=False) as store:
        meta = store.meta()
        counts = store.row("counts")
    state = meta.get("status", "not_indexed")
    if is_locked(codebase):
        state = "indexing"
    elif state == "indexing":
        state = "failed"
        meta["error"] = meta.get("error") or "the indexing process stopped before it finished; run build again"
    elif state == "indexed" and check_stale and is_stale(codebase):
        state = "stale"
    out.update(status=state, files=counts["files"], chunks=counts["chunks"], size_bytes=_db_size(codebase.db_path),
               **{k: meta.get(k) for k in ("phase", "files_done", "files_total", "skipped", "failed", "error",
                                              "last_indexed_at", "build_seconds", "model_id", "merkle_root")})
    return out


def _db_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def list_codebases() -> list[dict]:
    """Every index under ``$CODII_SQL_HOME/indexes``: root, status, files, chunks, size, last indexed.

    An index that cannot be read has ``status`` ``damaged`` (SQLite reports it corrupt: ``clear``
    deletes it) or ``unreadable`` (permissions, not an index...), its real ``size_bytes`` and
    an ``error``; its root, files and chunks are unknown, so absent.
    """
    out = []
    for db in sorted(paths.indexes_dir().glob("*.db")):
        try:
            with Store(db, create=False) as store:
                meta = store.meta()
                counts = store.row("counts")
        except (StorageError, apsw.Error) as err:  # apsw: broken pages met past the header
            damaged = isinstance(err, (DamagedIndexError, apsw.CorruptError, apsw.NotADBError))
            out.append({"db": str(db), "status": "damaged" if damaged else "unreadable", "size_bytes": _db_size(db),
                        "error": str(err)})
            continue
        state = meta.get("status")
        if state == "indexing" and not is_locked(Codebase(Path(meta.get("root") or "."), db)):
            state = "failed"
        if meta.get("root") and not Path(meta["root"]).is_dir():
            state = "missing"  # the folder is gone: `clear ROOT --yes` removes the index
        out.append({"root": meta.get("root"), "db": str(db), "status": state, "files": counts["files"],
                    "chunks": counts["chunks"], "size_bytes": _db_size(db),
                    "last_indexed_at": meta.get("last_indexed_at")})
    return out


def stats(codebase: Codebase) -> dict:
    """Counts by language, chunk kind and file role."""
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with Store(codebase.db_path, create=False) as store:
        return {"codebase": str(codebase.root), **store.row("counts"),
                "languages": store.rows("stats_by_language"), "kinds": store.rows("stats_by_kind"),
                "roles": store.rows("stats_by_role")}


def inspect(codebase: Codebase, file: str | None = None) -> dict:
    """The snapshot (meta table) and, if ``file`` is given, that file's chunks (id, lines, kind, symbol).

    Raises:
        NotIndexedError: no index file. UsageError: ``file`` is not in the index.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with Store(codebase.db_path, create=False) as store:
        out = {"codebase": str(codebase.root), "db": str(codebase.db_path), "snapshot": store.meta()}
        if file is not None:
            out["chunks"] = store.rows("chunks_of_file", {"path": file})
            if not out["chunks"] and store.row("file_by_path", {"path": file}) is None:
                raise UsageError(f"{file} is not in the index: pass a path relative to the codebase root, "
                                 "as search results show it")
    return out


def doctor(codebase: Codebase, *, repair: bool = True, rebuild: bool = True) -> dict:
    """Check (and with ``repair``, fix) the index's consistency; see :func:`doctor.examine`.

    With ``rebuild``, files whose rows were incomplete are re-indexed right away.

    Raises:
        NotIndexedError: no index file.
        StorageError: the index folder is read-only (the writer lock cannot be taken).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with _disk_full(codebase), writer_lock(codebase), Store(codebase.db_path, create=False) as store:
        report = examine(store, repair=repair)
    out = {"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict()}
    if repair and rebuild and report.forgotten:
        out["rebuild"] = build(codebase).to_dict()
    return out


def clear(codebase: Codebase) -> bool:
    """Delete the index file (and its WAL, SHM and lock files). Returns False if there was none.

    A damaged file is deleted only where it is provably an index: under ``$CODII_SQL_HOME/indexes``.

    Raises:
        IndexBusyError: an indexer is running on it.
        StorageError: the file is not a codii-sql index (it is left alone).
        DamagedIndexError: a damaged file elsewhere (``--db``): it may not be ours, so it stays.
    """
    if codebase.db_path.is_file():
        try:
            Store(codebase.db_path, create=False).close()
        except DamagedIndexError:
            _check_in_home(codebase.db_path)
    return _remove_index_files(codebase)


def _check_in_home(db_path: Path) -> None:
    """Raise unless a damaged ``db_path`` is provably an index: one in ``$CODII_SQL_HOME/indexes``."""
    if not paths.in_indexes_dir(db_path):
        raise DamagedIndexError(f"{db_path} is damaged or not a SQLite database, so it cannot be recognised as a "
                                "codii-sql index: if it is one, delete it by hand") from None


def _discard_damaged(codebase: Codebase) -> None:
    """``build --force`` on an index that SQLite reports corrupt: delete it so the build starts a new
    file (rewriting rows in place cannot mend broken pages). A healthy index is kept.

    Raises:
        DamagedIndexError: the damaged file is outside ``$CODII_SQL_HOME/indexes`` (see :func:`clear`).
        IndexBusyError: an indexer is running on it.
    """
    if not codebase.db_path.is_file():
        return
    try:
        with Store(codebase.db_path, create=False) as store:
            # quick_check reads every page without the index cross-checks: ~1 s for a 200 MB index.
            if [next(iter(r.values())) for r in store.rows("pragma_quick_check")] == ["ok"]:
                return
    except DamagedIndexError:
        _check_in_home(codebase.db_path)
    _remove_index_files(codebase)


def _remove_index_files(codebase: Codebase) -> bool:
    if is_locked(codebase):
        raise IndexBusyError(f"{codebase.root} is being indexed; try again when it finishes")
    found = False
    for suffix in ("", "-wal", "-shm", ".lock"):
        p = Path(f"{codebase.db_path}{suffix}")
        if p.exists():
            os.remove(p)
            found = found or suffix == ""
    return found


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
        return f"this index holds no files: its filters or ignore rules exclude everything; {reset}"
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


def recorded_filters(codebase: Codebase) -> dict:
    """``{"extensions": [...], "ignore_patterns": [...]}`` that the last build recorded (a later
    build without options keeps them); empty lists when none or not indexed."""
    meta = {}
    if codebase.db_path.is_file():
        with Store(codebase.db_path, create=False) as store:
            meta = store.meta()
    return {"extensions": list(meta.get("scan_extensions") or []),
            "ignore_patterns": list(meta.get("scan_ignore_patterns") or [])}


def scan_rules(codebase: Codebase) -> dict:
    """The ``scan.scan`` arguments of ``codebase``'s last build (``.codii.yaml`` + its recorded options).

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    meta = {}
    if codebase.db_path.is_file():
        with Store(codebase.db_path, create=False) as store:
            meta = store.meta()
    return index_scan_rules(codebase.root, list(meta.get("scan_ignore_patterns") or []),
                            meta.get("scan_extensions") or None)


def is_stale(codebase: Codebase, ignore_patterns: list[str] | None = None,
             extensions: list[str] | None = None) -> bool:
    """True when a build (with these options; None: the last build's) would change the index.

    The same scan, stat hints and Merkle diff as a build, without writing: an unchanged tree
    costs one directory walk.

    Raises:
        NotIndexedError: no index file. UsageError: ``.codii.yaml`` is malformed.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with Store(codebase.db_path, create=False) as store:
        return Indexer(codebase, None, ignore_patterns=ignore_patterns, extensions=extensions).plan(store).changed
