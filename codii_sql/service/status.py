"""What an index holds and how fresh it is: status, the list of indexes, stats, the snapshot, staleness."""

from __future__ import annotations

import os
from pathlib import Path

from .. import paths
from ..codebase import Codebase
from ..errors import CodiiError, DamagedIndexError, NotIndexedError, Remedy, StorageError, UsageError
from ..ingest import roles, scan_stats
from ..ingest.chunking.version import CHUNKER_VERSION, rechunk_scope
from ..ingest.config import scan_rules as index_scan_rules
from ..ingest.config import vectors_wanted
from ..ingest.exclusions import SECRET_RULE, default_file_reason
from ..storage import health
from ..storage.lock import is_locked, vectors_running
from ..storage.store import Store
from .daemon import daemon_info
from .embedders import recorded_embedder
from .vector_state import vector_progress
from .watchers import watchers


def not_indexed(codebase: Codebase) -> NotIndexedError:
    """The error for a codebase without an index; inside an indexed folder it names that one
    (building the subfolder would make a second, nested index), unless it is a repository of its own."""
    outer = codebase.enclosing()
    # A repository of its own inside an indexed folder (a clone, a submodule) is left out of that index, as
    # Git leaves it out: it is indexed on its own (a new user's agent was told to search the outer folder).
    if outer is not None and not os.path.lexists(codebase.root / ".git"):
        return NotIndexedError(f"{codebase.root} has no index of its own but lies inside the indexed codebase "
                               f"{outer.root}", Remedy("pass_folder", {"root": str(outer.root)}))
    return NotIndexedError(f"{codebase.root} is not indexed", Remedy("build", {"root": str(codebase.root)}))


def open_store(codebase: Codebase) -> Store:
    """The existing index of ``codebase`` opened to read it (an index alone: read only, mapped into
    memory unless this process serves others, see :class:`Store`); the caller closes it.

    Raises:
        StorageError: no such file, or it cannot be opened (see :class:`Store`); its remedy names the codebase.
    """
    try:
        return Store(codebase.db_path, create=False, readonly=codebase.alone)
    except CodiiError as err:
        raise naming(err, codebase) from None


def naming(err: CodiiError, codebase: Codebase) -> CodiiError:
    """``err`` with its remedy naming ``codebase`` (its root, its index file if not the default one): "`codii-sql
    build --force` rebuilds it", run elsewhere, rebuilt another folder (a new user's damaged workspace member)."""
    hint = err.hint
    if isinstance(hint, Remedy) and "root" not in hint.params and not codebase.alone:
        custom = {} if paths.in_indexes_dir(codebase.db_path) else {"db": str(codebase.db_path)}
        err.hint = Remedy(hint.kind, {**hint.params, "root": str(codebase.root), **custom})
    return err


def status(codebase: Codebase, *, check_stale: bool = True) -> dict:
    """The index's state: ``status`` is not_indexed, indexing, indexed, failed or stale.

    ``stale`` means a build would change the index (see :func:`is_stale`; skipped when
    ``check_stale`` is false). ``skipped`` counts the paths the last build skipped by reason, and
    ``skipped_files`` names them (see :func:`skipped_files`). ``failed`` includes a build whose
    process died. ``damaged``: SQLite's quick_check finds broken pages (``damage`` says which; also
    skipped when ``check_stale`` is false, or while a build writes; cheap when the file is
    unchanged, see :mod:`~codii_sql.storage.health`). An index alone (no source here) has ``stale``
    None: unknown, and no build, watcher or lock of it.
    """
    out = {"codebase": codebase.shown, "db": str(codebase.db_path)}
    if not codebase.db_path.is_file():
        background = None if codebase.alone else daemon_info(codebase)
        if background is not None:  # `build --daemon` started and has not made the file yet
            return {**out, "status": "indexing", "phase": "starting", "daemon": background}
        outer = codebase.enclosing()
        return {**out, "status": "not_indexed", **({"inside_indexed": str(outer.root)} if outer else {})}
    try:
        with open_store(codebase) as store:
            counts = store.row("counts")
            state, meta, vectors = _state(codebase, store)
            history = history_state(store)
            problem = health.damage(store) if check_stale and state != "indexing" else None
    except DamagedIndexError as err:  # pages so broken that the snapshot itself cannot be read
        problem = getattr(err, "sqlite", None) or err.what
        damaged = damaged_index(codebase.root, problem, codebase.db_path, alone=codebase.alone)
        return {**out, "status": "damaged", "size_bytes": paths.index_bytes(codebase.db_path), "damage": problem,
                "error": damaged.what, "hint": damaged.hint}
    config_error = None
    if problem:
        state = "damaged"
    elif state == "indexed" and check_stale and not codebase.alone:
        try:
            state = "stale" if is_stale(codebase) else state
        except UsageError as err:  # a malformed .codii.yaml: the index answers as built; a build would fail
            config_error = f"{err.what}: the next build fails until it is fixed"
    out.update(status=state, files=counts["files"], chunks=counts["chunks"],
               size_bytes=paths.index_bytes(codebase.db_path),
               **{k: meta.get(k) for k in ("phase", "files_done", "files_total", "skipped", "failed", "error",
                                              "stopped", "last_indexed_at", "model_id", "merkle_root")},
               # The snapshot's build_seconds times the lexical phase only: named so, not as the build's.
               lexical_seconds=meta.get("build_seconds"), skipped_files=skipped_files(meta),
               embedder=recorded_embedder(meta), vectors=vectors, history=history)
    if state == "stale":  # a helper's upgraded index said `stale` and not why
        built = meta.get("chunker_version")
        scope = rechunk_scope(built or 0, CHUNKER_VERSION)
        again = "every file" if scope is None else f"its {', '.join(scope[0])} and {', '.join(scope[1])} files"
        out["stale_reason"] = (f"built by chunker {built}; this version chunks with {CHUNKER_VERSION}: the next "
                               f"search or build chunks {again} again" if built not in (None, CHUNKER_VERSION)
                               else "files changed since the last build: the next search or build reads them")
    if config_error:
        out["config_error"] = config_error
    filters = _filters(meta)
    if filters["extensions"] or filters["ignore_patterns"]:  # what later builds keep (--reset-filters drops)
        out["filters"] = filters
    if problem:
        damaged = damaged_index(codebase.root, problem, codebase.db_path, alone=codebase.alone)
        out.update(damage=problem, error=damaged.what, hint=damaged.hint)
    if codebase.alone:
        return {**out, "stale": None, "source": None, "manifest": meta.get("manifest")}
    background = daemon_info(codebase)
    if background:
        out["daemon"] = background
        if out["status"] in ("indexed", "stale"):  # a daemon started, its build has not taken the lock yet
            out.update(status="indexing", phase="starting")
    watching = watchers(codebase)
    if watching:
        out["watched_by"] = watching
    return out


def brief_status(codebase: Codebase, store: Store | None = None) -> dict:
    """What :func:`~.builds.freshness_note` needs, without counting chunks or walking the tree:
    ``status`` (as :func:`status` decides it, but a vector phase alone reads as indexed), ``phase``,
    ``files_done``, ``files_total``, ``error``, ``stopped`` (what a build stopped on request left) and
    ``files`` (committed files). Counting 2.9M kernel
    chunks twice made each search and grep of the last committed state wait 0.2 s warm and 18 s cold
    (docs/benchmarks.md, "Grep": Linux 6.12). ``store``: the index already open (else it is opened).

    Raises:
        StorageError: the index cannot be opened.
    """
    if store is None:
        with open_store(codebase) as opened:
            return brief_status(codebase, opened)
    state, meta = _lexical_state(codebase, store)
    files = committed_files(store, meta)
    return {"codebase": codebase.shown, "status": state, "files": files,
            **{k: meta.get(k) for k in ("phase", "files_done", "files_total", "error", "stopped")}}


def committed_files(store: Store, meta: dict) -> int:
    """How many files the index holds: the count its last finished build recorded in the snapshot
    ``meta``, else (a build runs or died) counted now (cheap: files, not chunks)."""
    if meta.get("status") == "indexed" and meta.get("files") is not None:
        return meta["files"]
    return store.value("file_count")


def skipped_files(meta: dict) -> dict:
    """``{"files": [{"path", "reason"}], "more": N}``: the paths the last build skipped, at most
    :data:`~codii_sql.ingest.report.SKIPPED_LISTED` of them (secrets, too large, minified, binary
    first; a folder's path ends in ``/``, an undecodable name shows its bytes as ``\\xNN``), and how
    many more were skipped. An index built before the paths were recorded lists none."""
    recorded = meta.get("skipped_files")
    if recorded is not None:
        return recorded
    return {"files": [], "more": sum((meta.get("skipped") or {}).values())}


def refuse_damaged(codebase: Codebase, store: Store) -> None:
    """Raise when quick_check finds ``store``'s pages broken (:func:`~codii_sql.storage.health.damage`: a
    ``stat`` when the file is as our last commit or clean check left it): a search or grep over broken
    pages answered "no match" as if it were true (a new user's corrupted index, and a workspace member
    counted as searched), and an altered export served its altered text as the export's. Not while a
    build writes, lexical or vector phase (it vouches for its commits when done: a search during a
    background vector phase read every page after each batch it committed).

    Raises:
        DamagedIndexError: the index is damaged; its remedy rebuilds it.
    """
    if not codebase.alone and (is_locked(codebase) or vectors_running(codebase)):
        return
    problem = health.damage(store)
    if problem:
        raise damaged_index(codebase.root, problem, codebase.db_path, alone=codebase.alone)


def damaged_index(root: Path | str, problem: str, db: Path, *, alone: bool = False) -> DamagedIndexError:
    """The error of an index whose pages ``problem`` says are broken, with what replaces or deletes it: for an
    index ``alone`` (an export, a shard), which no build here writes, exporting it again from its source."""
    if alone:
        return DamagedIndexError(f"the index file {db} is damaged ({problem})", Remedy("export_again", {"db": str(db)}))
    return DamagedIndexError(f"the index file of {root} is damaged ({problem})",
                             Remedy("replace_damaged", {"root": str(root), "db": str(db)}))


def _state(codebase: Codebase, store: Store) -> tuple[str, dict, dict]:
    """``(status, meta, vectors)`` from the snapshot and the locks held now (no staleness walk): as
    :func:`_lexical_state`, and ``indexing`` in phase ``vectors`` while a vector phase runs."""
    state, meta = _lexical_state(codebase, store)
    lexical = state == "indexing" and not codebase.alone
    running = not codebase.alone and vectors_running(codebase)  # no lock file is probed (or made) beside a file alone
    vectors = vector_progress(meta, store.row("vector_counts"), running=running, lexical=lexical)
    if state == "indexed" and vectors["state"] == "running":
        state, meta["phase"] = "indexing", "vectors"
    return state, meta, vectors


def _lexical_state(codebase: Codebase, store: Store) -> tuple[str, dict]:
    """``(status, meta)`` from the snapshot and the writer lock: ``indexing`` while a lexical phase
    holds the lock, ``failed`` for a snapshot saying ``indexing`` whose process died (``meta``'s
    ``error`` and ``phase`` then say so), else the snapshot's status.

    A build writes its final status before it lets the writer lock go, so a snapshot saying
    ``indexing`` with the lock free is read again after the probe: the build may have finished
    between the two reads (a small codebase builds in milliseconds). Only a snapshot still saying
    ``indexing`` while the lock stays free is a build whose process died.
    """
    meta = store.meta()
    if codebase.alone:  # no build of it runs here
        return meta.get("status", "not_indexed"), meta
    lexical = is_locked(codebase)
    if not lexical and meta.get("status") == "indexing":
        meta = store.meta()
        lexical = meta.get("status") == "indexing" and is_locked(codebase)  # or a new build took it since
    state = meta.get("status", "not_indexed")
    if lexical:
        state = "indexing"
    elif state == "indexing":
        state = "failed"
        meta["error"] = meta.get("error") or "the indexing process stopped before it finished; run build again"
    return state, meta


def list_codebases() -> list[dict]:
    """Every index under ``$CODII_SQL_HOME/indexes``: root, status, files, chunks, size, last indexed.

    An index that cannot be read has ``status`` ``damaged`` (SQLite reports it corrupt, or its page
    check finds broken pages: ``clear`` deletes it) or ``unreadable`` (permissions, not an
    index...), its real ``size_bytes`` and an ``error``; its root, files and chunks are then absent.
    ``stale`` is not told: that walks each tree (``status`` does).
    """
    out = []
    for db in sorted(paths.indexes_dir().glob("*.db")):
        try:
            with Store(db, create=False) as store:
                counts = store.row("counts")
                state, meta, _ = _state(Codebase(Path(store.meta().get("root") or "."), db), store)
                problem = health.damage(store) if state != "indexing" else None
            if problem:  # broken pages the few rows read here do not touch (status finds them too)
                raise damaged_index(meta.get("root") or "ROOT", problem, db)
        except StorageError as err:  # also broken pages met past the header
            damaged = isinstance(err, DamagedIndexError)
            out.append({"db": str(db), "status": "damaged" if damaged else "unreadable",
                        "size_bytes": paths.index_bytes(db),
                        "error": err.what, **({"hint": err.hint} if err.hint else {})})
            continue
        if meta.get("root") and not Path(meta["root"]).is_dir():
            state = "missing"  # the folder is gone: `clear ROOT --yes` removes the index
        out.append({"root": meta.get("root"), "db": str(db), "status": state, "files": counts["files"],
                    "chunks": counts["chunks"], "size_bytes": paths.index_bytes(db),
                    "last_indexed_at": meta.get("last_indexed_at"), "embedder": meta.get("embedder")})
    return out


def history_state(store: Store) -> dict:
    """``{"state", "commits", "hunks", "vectors": {"done", "total", "off"}, "head", "branch", "note"}`` of
    an index's history (``off``: the index is built with vectors off, so no build embeds them);
    ``state`` ``not_indexed`` when no build has read it (or the file predates it)."""
    if not store.value("history_present"):
        return {"state": "not_indexed", "commits": 0, "hunks": 0, "vectors": {"done": 0, "total": 0, "off": False}}
    snapshot = store.meta()
    meta = snapshot.get("history") or {}
    counts = store.row("history_counts")
    return {"state": meta.get("state") or "not_indexed", "commits": counts["commits"], "hunks": counts["hunks"],
            "vectors": {"done": counts["commits"] - counts["pending"], "total": counts["commits"],
                        "off": snapshot.get("vectors_enabled") is False},
            "head": meta.get("head"), "branch": meta.get("branch"), "note": meta.get("note")}


def stats(codebase: Codebase) -> dict:
    """Counts by language, chunk kind and file role."""
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with open_store(codebase) as store:
        return {"codebase": codebase.shown, **store.row("counts"),
                "languages": store.rows("stats_by_language"), "kinds": store.rows("stats_by_kind"),
                "roles": store.rows("stats_by_role")}


def inspect(codebase: Codebase, file: str | None = None) -> dict:
    """The snapshot (meta table) and, if ``file`` is given, that file's row as ``file`` (path, size
    in bytes, language, role, chunk_count, indexed_at...) and its chunks (id, lines, kind, symbol).

    Raises:
        NotIndexedError: no index file. UsageError: ``file`` is not in the index.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with open_store(codebase) as store:
        out = {"codebase": codebase.shown, "db": str(codebase.db_path), "snapshot": store.meta()}
        if file is not None:
            row = store.row("file_by_path", {"path": file})
            out["chunks"] = store.rows("chunks_of_file", {"path": file})
            if row is not None:
                out["file"] = {k: v for k, v in row.items() if k not in ("id", "mtime_ns")}
            elif not out["chunks"] and default_file_reason(Path(file).name) == "secret":
                raise UsageError(f"{file} is not in the index: it {SECRET_RULE}, and such files are never indexed")
            elif not out["chunks"]:
                raise UsageError(f"{file} is not in the index",
                                 "pass a path relative to the codebase root, as search results show it")
    return out


def recorded_filters(codebase: Codebase) -> dict:
    """``{"extensions": [...], "ignore_patterns": [...]}`` that the last build recorded (a later
    build without options keeps them); empty lists when none or not indexed."""
    meta = {}
    if codebase.db_path.is_file():
        with open_store(codebase) as store:
            meta = store.meta()
    return _filters(meta)


def _filters(meta: dict) -> dict:
    return {"extensions": list(meta.get("scan_extensions") or []),
            "ignore_patterns": list(meta.get("scan_ignore_patterns") or [])}


def scan_rules(codebase: Codebase, meta: dict | None = None) -> dict:
    """The :func:`~codii_sql.ingest.walk.scan` arguments of ``codebase``'s last build (``.codii.yaml`` + its
    recorded options), from its snapshot ``meta`` when the caller has read it; while ``.codii.yaml`` is
    malformed, the rules that build ran with (the files the index holds are read as it read them: a
    typo refused every grep, outline and MCP read; the next update says what is wrong).

    Raises:
        UsageError: ``.codii.yaml`` is malformed and no build recorded its rules.
    """
    if meta is None and codebase.db_path.is_file():
        with open_store(codebase) as store:
            meta = store.meta()
    meta = meta or {}
    try:
        return index_scan_rules(codebase.root, list(meta.get("scan_ignore_patterns") or []),
                                meta.get("scan_extensions") or None)
    except UsageError:
        if not meta.get("scan_rules"):
            raise
        return dict(meta["scan_rules"])


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
    if ignore_patterns is None and extensions is None and unchanged_since_build(codebase, vectors=False):
        return False
    from ..ingest.indexer import Indexer  # the build's stages load only when the cheap check cannot answer

    with open_store(codebase) as store:
        if store.meta().get("chunker_version") not in (None, CHUNKER_VERSION):  # a build re-chunks every file
            return True
        return Indexer(codebase, None, ignore_patterns=ignore_patterns, extensions=extensions).plan(store).changed


def unchanged_since_build(codebase: Codebase, *, vectors: bool) -> bool:
    """True when every stat the last build's scan saw is as it was (:func:`~codii_sql.ingest.scan_stats.unchanged`)
    for the index's committed state, which a build finished: an update would change nothing. With
    ``vectors``, also no chunk of an index that embeds waits for its vector (an update would embed
    it). False on any doubt: the caller walks the tree, as without it.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    with open_store(codebase) as store:
        meta = store.meta()
        if meta.get("status") != "indexed":
            return False
        # Rules newer than the index's (an upgrade): a build re-chunks or re-classifies its files, though no
        # stat changed (a new user's index of redis kept chunker 15 and roles 7 under chunker 16 and roles 8).
        if meta.get("chunker_version") != CHUNKER_VERSION or meta.get("roles_version") != roles.VERSION:
            return False
        if vectors and vectors_wanted(None, meta, codebase.root) and store.value("vector_queue_any"):
            return False
        key = scan_stats.state_key(store, scan_rules(codebase, meta))
    return scan_stats.unchanged(scan_stats.sidecar(codebase.db_path), codebase.root, key)
