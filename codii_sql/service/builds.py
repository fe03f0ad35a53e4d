"""Building indexes: one build with the shared embedding cache, and the update a search runs first."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..codebase import Codebase
from ..errors import (
    BuildFailedError,
    CodiiError,
    DaemonRunningError,
    DiskFullError,
    EmbeddingFailedError,
    IndexBusyError,
    NotIndexedError,
    ReadOnlyIndexError,
    Remedy,
    UsageError,
)
from ..ingest.chunking.version import CHUNKER_VERSION, rechunk_scope
from ..ingest.config import history_bound, load_config, vectors_wanted
from ..ingest.report import BuildReport, Progress
from ..search.answer import Note
from ..storage.lock import vectors_running
from ..storage.store import Store
from .codebases import find_codebase, first_build, indexed_inside, is_index_file
from .daemon import background_allowed, daemon_info, start_daemon
from .embedders import embedder_for_build, recorded_embedder, requested_embedder
from .maintenance import discard_damaged
from .status import brief_status, inspect, status, unchanged_since_build
from .watchers import kept_fresh

if TYPE_CHECKING:
    from ..models.embedder import Embedder

#: A search embeds the chunks its update queued when they take about this many seconds of model
#: time (the first search of a 1,000-chunk repository must answer in seconds, not minutes).
INLINE_SECONDS = 3.0
#: ... and never fewer than this many chunks (a few edited functions), whatever the rate.
INLINE_MIN = 32


def build(codebase: Codebase, *, force: bool = False, wait: bool = True, progress: Progress | None = None,
          ignore_patterns: list[str] | None = None, extensions: list[str] | None = None,
          use_cache: bool = True, warn: Callable[[str], None] | None = None,
          embedder: Embedder | None = None, embedder_name: str | None = None, vectors: bool | None = None,
          max_inline: int | None = None, prefer: Callable[[], Iterable[str]] | None = None,
          cache_path: Path | None = None, workers: int | None = None,
          history: str | int | bool | None = None, with_history: bool = True,
          changed: Collection[str] | None = None) -> BuildReport:
    """Build or update the index of ``codebase``: the lexical phase, then the vector phase (see
    :class:`Indexer` for ``vectors``, ``max_inline``, ``prefer`` and ``workers``, and :meth:`Indexer.build`
    for errors).

    ``force`` on an index SQLite reports damaged deletes it first (see :func:`discard_damaged`).
    ``warn`` receives one-line warnings that do not stop the build (a damaged embedding cache
    replaced by an empty one: without a word, the user would only see every chunk re-embedded).
    ``embedder`` (an instance) or ``embedder_name`` picks the model; by default the one asked for
    by ``.codii.yaml`` or ``$CODII_SQL_EMBEDDER``, else the index's own (see :mod:`.embedders`).
    ``cache_path`` is the embedding cache file (default ``$CODII_SQL_HOME/cache/embeddings.db``).
    ``history`` bounds the commits indexed: a count, a ``YYYY-MM-DD`` date, False for none (see
    :func:`~codii_sql.ingest.config.history_bound`); None: as the last build, else ``.codii.yaml``.
    ``with_history`` false leaves the history as it is (a search's own update). ``changed``: the paths a
    file watcher heard change since the last build (see :class:`Indexer`).

    Raises:
        UsageError: ``history`` is none of those.
        DiskFullError: SQLite could not write the index (every batch commits whole, so the index
            keeps its last committed state).
        ReadOnlyIndexError: the codebase is an index file alone (nothing is written to it).
    """
    # The build's stages (chunker, tree-sitter, numpy, the model) load when a build runs, not for each
    # search's or symbol's update check that finds nothing to do (docs/benchmarks.md, "CLI start-up").
    from ..ingest.indexer import Indexer
    from ..models.cache import EmbeddingCache

    codebase.refuse_writes()
    try:
        bound = history_bound(history) if history is not None else None
    except ValueError as err:
        raise UsageError(str(err)) from None
    if force:
        kept = None
        with contextlib.suppress(CodiiError):
            kept = _readable_embedder(codebase)
        if discard_damaged(codebase) and embedder is None:
            # The damaged file's own embedder, if its meta still read, unless another is asked: a new
            # user's openai: embedder became 'local' without a word when build --force replaced the file.
            embedder_name = requested_embedder(codebase, embedder_name) or kept
            if embedder_name is None and warn is not None:
                warn("the damaged index's embedder could not be read, so the new index uses the default one "
                     "(pass --embedder, or embedder: in .codii.yaml, to choose another)")
    embedder = embedder or embedder_for_build(codebase, embedder_name, force=force)
    cache = EmbeddingCache(cache_path, on_warning=warn) if use_cache else None
    _BUILDS["started"] += 1
    try:
        with reword_disk_full(codebase):
            return Indexer(codebase, embedder, progress=progress, cache=cache,
                           ignore_patterns=ignore_patterns, extensions=extensions, vectors=vectors,
                           max_inline=max_inline, prefer=prefer, workers=workers, history=bound,
                           with_history=with_history, changed=changed).build(force=force, wait=wait)
    finally:
        if cache is not None:
            cache.close()


#: Builds this process started (an interrupted command says what a build left only when one ran).
_BUILDS = {"started": 0}


def building() -> bool:
    """Whether this process has started a build (a command's update, or a build command's)."""
    return _BUILDS["started"] > 0


def build_in_background(codebase: Codebase, options: list[str]) -> dict:
    """``build --daemon``: :func:`start_daemon`, unless no option asks for more and the index is
    current (indexed, not stale, its vectors complete or off, no background build running): then
    ``{"pid": None, "started_at": None, "log": None, "finished": True}`` and nothing is started.
    A process started for nothing used to hold the daemon lock for a second or more, so a second
    ``--daemon`` just after was told one is running (exit 3).

    Raises:
        as :func:`start_daemon`.
    """
    codebase.refuse_writes()
    if not options and codebase.db_path.is_file() and daemon_info(codebase) is None:
        st = status(codebase)
        if st["status"] == "indexed" and (st.get("vectors") or {}).get("state") in ("complete", "off"):
            return {"pid": None, "started_at": None, "log": None, "finished": True}
    return start_daemon(codebase, options)


@contextlib.contextmanager
def reword_disk_full(codebase: Codebase) -> Iterator[None]:
    """A full disk while building names the index file and the command that finishes the job."""
    try:
        yield
    except DiskFullError:
        raise DiskFullError(f"the disk is full writing {codebase.db_path}", Remedy("free_disk")) from None


def _config_error(codebase: Codebase) -> str | None:
    """Why ``codebase``'s ``.codii.yaml`` is malformed (one line), None when it is not."""
    try:
        load_config(codebase.root)
    except ValueError as err:
        return str(err)
    return None


def _readable_embedder(codebase: Codebase) -> str | None:
    """The embedder ``codebase``'s index records, read as far as a damaged file allows (None: none).

    Raises:
        CodiiError: the file cannot be read at all.
    """
    if not codebase.db_path.is_file():
        return None
    with Store(codebase.db_path, create=False) as store:
        return recorded_embedder(store.meta())


def ensure_index(codebase: Codebase, *, update: bool = True, progress: Progress | None = None,
                 embedder: Embedder | None = None, vectors: bool = True) -> Note | None:
    """Make the index usable for search: build it if missing, update it if ``update``; with ``vectors``
    false (grep, symbols: lexical answers) no chunk is embedded now and no background build starts
    (the edited chunks wait in the queue for the next search or build).

    A live watcher that says it has committed every change it was told of (:func:`kept_fresh`) stands
    for the update, unless the root is a subfolder of a Git work tree. Never waits for another process's build: it searches the last committed state then. An
    embedder that does not answer (a provider's server is down) leaves the edited chunks queued
    for their vectors: the lexical update committed, and the search answers.

    Returns:
        a note for the user when the index could not be brought up to date, or the update
        warned (see :func:`build`), else None.
    Raises:
        NotIndexedError: no index yet and ``update`` is false (nothing may be built then).
    """
    root = {"root": str(codebase.root)}
    exists = codebase.db_path.is_file()
    # A live watcher that has committed every change it was told of spares the walk (a kernel-size
    # tree: 1.0 s of a 1.8 s CLI search). Not for a subfolder of a work tree: the watcher hears nothing
    # of Git's index above it (`git rm --cached`, `git add -f` went unseen while it said fresh: a new user).
    if not update or (exists and kept_fresh(codebase) and codebase.work_tree() is None):
        if not exists:
            raise NotIndexedError(f"{codebase.root} is not indexed, and a search without its update builds nothing",
                                  Remedy("build", root))
        return committed_state_note(codebase)
    if error := _config_error(codebase):
        if not exists:
            raise UsageError(error)
        # A typo in .codii.yaml stops the update, not the answer the index already holds.
        return Note("update", f"{error}: the index was not updated, results come from the last committed state")
    if not exists and (inner := indexed_inside(codebase.root)):
        # A new user's `grep x ../..` from inside a repository built a 502 MB index of the folder above
        # every codebase it had indexed, each one indexed again: an explicit build does that, not a search.
        shown = ", ".join(str(p) for p in inner[:3]) + (f" and {len(inner) - 3} more" if len(inner) > 3 else "")
        raise UsageError(f"{codebase.root} is not indexed and holds {len(inner)} indexed codebases ({shown})",
                         f"search one of them, or several as a workspace (`codii-sql workspace add NAME ...`), or "
                         f"index the whole folder with `codii-sql build {codebase.root}`")
    if exists and (note := _rechunked_aside(codebase)) is not None:
        return note
    if exists and unchanged_since_build(codebase, vectors=vectors):
        # Every stat the last build's scan saw is as it was: the walk is spared (the kernel's 86k
        # files: 1.0-1.3 s of a 1.8 s CLI symbol call, docs/benchmarks.md "Kernel").
        return freshness_note(brief_status(codebase))
    left = unfinished(codebase) if exists else None
    try:
        _, warnings = refresh(codebase, progress=progress, embedder=embedder, vectors=vectors)
        if left:  # said in every face's answer (a new user's --json search of a killed build waited 24 s unsaid)
            warnings.insert(0, f"the last build of this codebase had not finished ({left}): this search finished it")
    except IndexBusyError:
        if not exists:
            raise IndexBusyError(f"{codebase.root} is being indexed for the first time", Remedy("retry")) from None
        return Note("indexing", "another process is indexing this codebase: results come from the last committed state")
    except (DiskFullError, ReadOnlyIndexError) as err:
        if not exists:
            raise
        # A search reads: the index it has is still worth answering from.
        why = "the disk is full" if isinstance(err, DiskFullError) else "the index is read-only"
        return Note("update", f"the index could not be updated ({why}): results come from the last committed "
                              "state, so text changed since may be missing (a search marks the changed files among "
                              "its results as stale)",
                    Remedy("free_disk") if isinstance(err, DiskFullError) else Remedy("make_writable"))
    except EmbeddingFailedError as err:
        if not exists:
            raise
        return Note("update", f"the edited chunks wait for their vectors ({err.what}): they rank by BM25 alone")
    return Note("update", "; ".join(warnings)) if warnings else None


#: Files from which an index made by an older chunker is re-chunked by a background build while searches
#: answer from it as it is: the kernel's 86k files take 15 min (docs/benchmarks.md "Thirteenth round"),
#: which a search after an upgrade waited for. Below, the search re-chunks first, silently: redis's 1,611
#: files took 10 s at load ~3 and a helper's `symbol` 29 s at load 6-7.
INLINE_RECHUNK_FILES = 1000


def _rechunked_aside(codebase: Codebase) -> Note | None:
    """When ``codebase``'s index was chunked by older rules and holds more than :data:`INLINE_RECHUNK_FILES`
    files: a note that a background build re-chunks it (started now unless one runs), else None (the caller
    updates the index itself, re-chunking it if it must)."""
    snapshot = inspect(codebase)["snapshot"]
    built, files = snapshot.get("chunker_version"), snapshot.get("files") or 0
    if built in (None, CHUNKER_VERSION):
        return None
    if (scope := rechunk_scope(built, CHUNKER_VERSION)) is not None:  # the files of some languages alone
        with Store(codebase.db_path, create=False) as store:
            files = store.value("files_in_scope", dict(zip(("languages", "suffixes"), map(json.dumps, scope))))
    if files <= INLINE_RECHUNK_FILES or not background_allowed():
        return None
    if daemon_info(codebase) is None:
        try:
            start_daemon(codebase, [])
        except (DaemonRunningError, BuildFailedError):
            return None
    return Note("indexing", f"this index was chunked by an older version of codii-sql: a background build "
                            f"re-chunks its {files:,} files, and results come from it as it is meanwhile")


def pending_build(path: str | None, db: str | None) -> tuple[Path, str | None] | None:
    """What the update of a search of ``path`` (or ``db``) is about to build at length, for a face to say
    before it waits: ``(root, None)`` for a first build (:func:`~.codebases.first_build`), ``(root, how far)``
    for an index whose last build did not finish (it failed or died, or was stopped on request), else None
    (a new user's search after a killed build finished it silently for 37 s)."""
    if (root := first_build(path, db)) is not None:
        return root, None
    if path is not None and is_index_file(path):
        return None
    try:
        codebase, _ = find_codebase(path, db)
        left = None if codebase.alone or not codebase.db_path.is_file() else unfinished(codebase)
    except CodiiError:
        return None
    return (codebase.root, left) if left else None


def embeds_first(root: Path) -> bool:
    """Whether a first build of ``root`` embeds its chunks: its ``.codii.yaml`` may say ``vectors: false``
    (a new user was told "the model embeds the chunks in the background" where none would be)."""
    try:
        return vectors_wanted(None, {}, root)
    except UsageError:  # the build says what is wrong with the file
        return True


def unfinished(codebase: Codebase) -> str | None:
    """How far the last build of ``codebase``'s index got when it did not finish (it failed or died, or was
    stopped on request), else None.

    Raises:
        StorageError: the index cannot be opened.
    """
    st = brief_status(codebase)
    if st["status"] == "indexed" and st.get("stopped"):
        return st["stopped"]
    if st["status"] != "failed":
        return None
    done, total = st.get("files_done") or 0, st.get("files_total") or 0
    return f"it stopped after {done:,} of {total:,} files" if done < total else "it did not finish"


def committed_state_note(codebase: Codebase, store: Store | None = None) -> Note | None:
    """What an answer from the last committed state (no update ran) should say: why no update runs while
    .codii.yaml is malformed (a new user's agent got a confident "0 matching lines" from MCP for a line
    added since, where the CLI said why), else :func:`freshness_note`; ``store``: the index already open
    (a grep that reads it anyway: one open of two, ~0.6 ms of a 4.5 ms MCP grep)."""
    if error := _config_error(codebase):
        return Note("update", f"{error}: no update runs until it is fixed, so the index may be behind the files")
    return freshness_note(brief_status(codebase, store))


def freshness_note(st: dict) -> Note | None:
    """What a search of the last committed state should say about a build that runs or failed
    (``st`` as :func:`~.status.status` without the staleness walk), else None."""
    root = {"root": st["codebase"]}
    if st["status"] == "failed":
        return Note("indexing", f"the last build did not finish ({st.get('error')}): results come from the "
                                f"{st.get('files') or 0} files it committed", Remedy("build", root))
    if st["status"] == "indexed" and st.get("stopped"):
        return Note("indexing", f"the last build stopped before it finished ({st['stopped']}): results come from "
                                f"the {st.get('files') or 0} files it committed", Remedy("build", root))
    if st["status"] == "indexing" and st.get("phase") != "vectors":  # the vectors have a note of their own
        done, total = st.get("files_done") or 0, st.get("files_total") or 0
        progress = f" ({done}/{total} files of this build committed)" if total else ""
        return Note("indexing", f"indexing is running{progress}: results come from the last committed state")
    return None


#: Seconds after a failed vector phase during which a search's update starts no background build for it
#: (a build command always tries): a provider's server that is down is asked again five minutes on.
VECTOR_RETRY_SECONDS = 300.0


def refresh(codebase: Codebase, *, progress: Progress | None = None, embedder: Embedder | None = None,
            vectors: bool = True, changed: Collection[str] | None = None) -> tuple[BuildReport, list[str]]:
    """Update the index now, as a search does before it answers: the lexical phase, the vectors of
    a few edited chunks (:func:`inline_vectors`), and a background build for a longer queue (with
    ``vectors`` false, the lexical phase alone). ``changed``: as for :func:`build`.

    Returns:
        the build's report, and one-line warnings (see :func:`build`; a background build that
        could not start).
    Raises:
        IndexBusyError: another process holds the writer lock.
    """
    snapshot = inspect(codebase)["snapshot"] if codebase.db_path.is_file() else {}
    # A vector phase that failed lately (a provider's server down) is not tried again by every search, inline
    # or in the background: each search spawned a build that failed ~10 s later, and said "still being
    # embedded" meanwhile (a new user); the search's note says why the vectors are missing instead.
    failed_lately = bool(snapshot.get("vectors_error")) and \
        time.time() - (snapshot.get("vectors_started_at") or 0) < VECTOR_RETRY_SECONDS
    vectors = vectors and not failed_lately
    background = background_allowed() and vectors
    warnings: list[str] = []
    # An update keeps the index's own embedder, whatever the environment asks for now.
    recorded = recorded_embedder(snapshot) if snapshot else None
    report = build(codebase, wait=False, progress=progress, warn=warnings.append, embedder=embedder,
                   embedder_name=recorded,
                   max_inline=0 if not vectors else inline_vectors(codebase) if background else None,
                   with_history=False, changed=changed)
    if background and report.vectors_pending and report.vectors_enabled and not vectors_running(codebase):
        try:
            start_daemon(codebase, [])
        except (DaemonRunningError, BuildFailedError) as err:
            warnings.append(str(err))
    return report, warnings


def inline_vectors(codebase: Codebase) -> int:
    """How many queued chunks a search embeds itself: about :data:`INLINE_SECONDS` of model time at
    the rate the index last measured (an edit or two), at least :data:`INLINE_MIN`; a larger
    queue goes to a background build."""
    rate = 0.0
    if codebase.db_path.is_file():
        rate = float(inspect(codebase)["snapshot"].get("vectors_rate") or 0)
    return max(INLINE_MIN, int(rate * INLINE_SECONDS))
