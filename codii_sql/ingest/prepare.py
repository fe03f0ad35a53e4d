"""One file read, hashed and chunked, in worker processes while the model works on earlier files."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..processes import cpus
from ..text import cjk_bigrams, decode_source, identifier_subtokens, pack_text
from .chunking.layout import Chunk, ChunkSizes
from .chunking.regions import FileDefinition, index_source, read_source
from .chunking.signatures import last_name, signature
from .generated import declares_generated
from .read import read_file
from .scanned import SourceFile

#: Below this many files to chunk, worker processes cost more to start than they save.
POOL_MIN_FILES = 64
#: Worker processes by default: one per core, at most this many (the writer and the model need the others).
MAX_AUTO_WORKERS = 4
#: How often (seconds) a worker checks that the process it works for is still alive.
ORPHAN_CHECK_SECONDS = 1.0


@dataclass
class Prepared:
    """One file read, hashed and chunked (in a worker process). ``error`` set means: not indexed this run.

    ``subtokens[i]`` is the FTS5 ``subtokens`` text of ``chunks[i]`` (see :func:`chunk_subtokens`),
    computed in the worker so the writer only inserts; ``text`` is the whole decoded file as
    :func:`~codii_sql.text.pack_text` stores it (grep's trigram row), packed here for the same reason;
    ``definitions`` are the rows of the file's definitions (:func:`definition_rows`), from the chunker's parse.
    """

    path: str
    size: int
    mtime_ns: int
    hash: str = ""
    language: str | None = None
    chunks: list[Chunk] = field(default_factory=list)
    subtokens: list[str] = field(default_factory=list)
    definitions: list[dict] = field(default_factory=list)
    skip: str | None = None
    error: str | None = None
    generated: bool = False  # the bytes declare it generated (generated.declares_generated)
    text: bytes = b""


def prepare_file(root: str, f: SourceFile, max_file_bytes: int, sizes: ChunkSizes = ChunkSizes()) -> Prepared:
    """Read, hash, decode and chunk one file (``sizes``: the chunk sizes in characters of
    ``.codii.yaml``). Never raises: failures land in ``skip``/``error``.

    ``max_file_bytes`` caps the text that gets indexed: the file, or a notebook's cells (its
    file may be larger, see :func:`~.config.size_cap`); over it the file is skipped as ``too-large``.
    """
    out = Prepared(f.path, f.size, f.mtime_ns)
    try:
        data = read_file(Path(root), f, max_file_bytes=max_file_bytes)
        if isinstance(data, str):
            out.skip = data
            return out
        out.hash = hashlib.sha256(data).hexdigest()
        out.generated = declares_generated(data, f.path)
        text = decode_source(data)
        source = read_source(f.path, text)
        if source.size > max_file_bytes:
            out.skip = "too-large"
            return out
        out.text = pack_text(text)
        out.language = source.language
        out.chunks, found = index_source(source, sizes=sizes)
        out.definitions = definition_rows(found)
        out.subtokens = chunk_subtokens(f.path, out.chunks)
    except Exception as err:  # one bad file must not stop the build; it is retried next run
        out.error = f"{type(err).__name__}: {err}"
    return out


def definition_rows(found: list[FileDefinition]) -> list[dict]:
    """``[{"seq", "nested", "name", "symbol", "kind", "start_line", "end_line", "signature"}]``: each of
    ``found`` and its nested definitions, in pre-order (``seq`` from 0; ``nested`` definitions inside
    it follow it), as sql/schema.sql's definitions table holds them (``name`` by
    :func:`~.chunking.signatures.last_name`, lines 1-based inclusive)."""
    rows: list[dict] = []

    def add(d: FileDefinition) -> None:
        name = last_name(d.symbol)
        row = {"seq": len(rows), "name": name, "symbol": d.symbol, "kind": d.kind, "start_line": d.start_line,
               "end_line": d.end_line, "signature": signature(d.source, d.language, name)}
        rows.append(row)
        for child in d.children:
            add(child)
        row["nested"] = len(rows) - row["seq"] - 1

    for d in found:
        add(d)
    return rows


def chunk_subtokens(path: str, chunks: list[Chunk]) -> list[str]:
    """Per chunk, its FTS5 ``subtokens`` text: the identifier sub-tokens of its symbol, of the
    file's ``path`` and of its content (:func:`text.identifier_subtokens`), and the character pairs
    of its Chinese and Japanese text (:func:`text.cjk_bigrams`), space-separated.

    The path's parts are included so a query word found only in a file name (``sessions.py``)
    still matches that file's chunks.
    """
    path_tokens = identifier_subtokens(path.replace("/", " ").replace(".", " "))
    return [" ".join(filter(None, (identifier_subtokens(c.symbol or ""), path_tokens, identifier_subtokens(c.content),
                                   " ".join(cjk_bigrams(c.content)))))
            for c in chunks]


@contextlib.contextmanager
def prepared_files(root: Path, todo: list[SourceFile], max_file_bytes: int, *, window: int,
                   sizes: ChunkSizes = ChunkSizes(), workers: int = 0) -> Iterator[Iterator[Prepared]]:
    """A context giving :func:`prepare_file` of each of ``todo``, in order; in ``workers`` processes (0: one
    per core, at most :data:`MAX_AUTO_WORKERS`) from :data:`POOL_MIN_FILES` files on, at most ``window``
    files ahead of the consumer (never the whole repository in memory at once). Leaving the context stops
    the processes before it returns, however it is left."""
    if len(todo) < POOL_MIN_FILES:
        yield (prepare_file(str(root), f, max_file_bytes, sizes) for f in todo)
        return
    workers = workers or max(1, min(MAX_AUTO_WORKERS, len(cpus())))
    # forkserver/spawn, not fork: a forked worker would inherit the writer lock's file
    # descriptor and keep the codebase locked after this process is killed.
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_start,
                                  initargs=(os.getpid(),))
    try:
        yield _in_order(pool, root, todo, max_file_bytes, window, sizes)
    finally:
        _shut_down(pool)


def _in_order(pool: cf.ProcessPoolExecutor, root: Path, todo: list[SourceFile], max_file_bytes: int, window: int,
              sizes: ChunkSizes) -> Iterator[Prepared]:
    futures = [pool.submit(prepare_file, str(root), f, max_file_bytes, sizes) for f in todo[:window]]
    nxt = len(futures)
    for i in range(len(todo)):
        yield futures[i].result()
        futures[i] = None
        if nxt < len(todo):
            futures.append(pool.submit(prepare_file, str(root), todo[nxt], max_file_bytes, sizes))
            nxt += 1


def _shut_down(pool: cf.ProcessPoolExecutor) -> None:
    """Drop the files queued ahead (a build stopped early does not prepare them first) and wait for the
    pool's manager thread and processes, a Ctrl-C or SIGTERM meanwhile (< 1 s: the files in flight) held
    and raised after. A pool left running at interpreter exit (a build interrupted in its writes, or in
    this wait) raced Python 3.11's exit handler, which printed "Exception ignored ... Bad file descriptor"
    (1 in 80 Ctrl-Cs) and once left the build waiting for its workers for good."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        pool.shutdown(wait=True, cancel_futures=True)
        return
    held: list[int] = []
    # Python-level handlers, not a blocked mask: the kernel hands a process's signal to any thread that does not
    # block it (the pool's manager thread), and Python then raises it in the main thread all the same.
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = {s: h for s, h in previous.items() if h is not None}  # None: a handler not set from Python
    for s in kept:
        signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        for s, h in kept.items():
            signal.signal(s, h)
    if held:
        signal.raise_signal(held[0])


def _worker_start(owner: int) -> None:
    """Worker initializer: leave Ctrl-C and SIGTERM to process ``owner``, and exit when it is gone.

    A terminal's Ctrl-C reaches every process of the build's group: each worker printed its own
    KeyboardInterrupt traceback (~38 lines, a new user) above the build's one-line "Interrupted";
    the build stops its pool itself. A SIGTERM to the group (`kill -TERM -PGID`, a service manager
    stopping a control group, the mcp SDK ending a server) killed a worker in the middle of sending
    a result: the pool's manager thread then waited for the rest of that message for good, and the
    build with it (3 of 38 group SIGTERMs, a new user). A killed build (``kill -9``) cannot shut its
    pool down, and its workers, blocked on a queue whose write end they hold themselves, would
    otherwise live on (~170 MB) as orphans."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_CHECK_SECONDS)
            if _gone(owner):
                os._exit(1)

    threading.Thread(target=watch, name="codii-orphan-check", daemon=True).start()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited: no such process, another user's (the pid was reused), or a zombie
    its parent has not reaped yet. A caller reading the build's output to its end before it waits for the build
    (`$(codii-sql build ...)`, Python's ``subprocess.run``) reaps it only once every holder of that pipe has
    exited, these workers included: taken for alive, they waited on it for good."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:  # no /proc (macOS): as alive as kill says
        return False
