"""One codebase's index file: an apsw connection with sqlite-vec loaded, running the named SQL of ``sql/``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import apsw

from ..errors import (
    DamagedIndexError,
    DiskFullError,
    ReadOnlyIndexError,
    Remedy,
    StorageError,
    UsageError,
)
from ..paths import in_indexes_dir
from ..text import shown_bytes
from . import queries
from .failures import disk_full, translate
from .schema import CREATE, MIGRATES, READABLE_AS_IS, SCHEMA_VERSION

#: sqlite-vec's extension (its ``loadable_path()``), found without importing the package, which imports numpy.
VEC0 = os.path.join(os.path.dirname(importlib.util.find_spec("sqlite_vec").origin), "vec0")

#: Milliseconds a connection waits on a lock held by another process before it gives up.
BUSY_TIMEOUT_MS = 10_000
#: A file without tables modified this recently (seconds) may be getting its schema right now.
FRESH_SECONDS = 10
#: Seconds a reader waits for such a file's schema: its creator commits it milliseconds after
#: creating the file, and an empty file of someone else's is refused after this pause.
SCHEMA_WAIT_SECONDS = 2.0


#: Whether index files alone are mapped into memory (faster vector scans: sql/connection.sql's
#: pragma_mmap). A server clears it (:func:`serve_unmapped`): a file alone is dropped in by whoever
#: publishes it, maybe by `cp` over the one served, and a mapped read of its cut pages is SIGBUS,
#: which ends the process (a new user's team server died so on /grep, /symbol and /file).
_MAP_ALONE = {"on": True}


def serve_unmapped() -> None:
    """From now on, this process (a long-lived server) reads index files alone without mapping them:
    an overwritten one fails its own requests instead of killing the process."""
    _MAP_ALONE["on"] = False


class Store:
    """An open index ``.db``: schema, snapshot (``meta``) and every named statement.

    Args:
        path: the ``.db`` file. Created (with its schema) unless ``create`` is false.
        create: create a missing file; when false a missing file raises ``StorageError``.
        readonly: open for reading only and never write to the file or beside it (an index file
            searched alone, a portable shard): immutable when no write-ahead log holds commits
            (nothing is created beside it, and a replacement by rename leaves this reader on the
            old file), else SQLite's read-only mode; no schema upgrade (an older schema that
            reads as it is is searched so, another is refused).
        mmap: map a ``readonly`` file (faster vector scans); off where a copy may overwrite it in place (SIGBUS);
            None: as this process reads files alone (:func:`serve_unmapped`).
    Raises:
        DamagedIndexError: SQLite reports the file corrupt or not a database.
        StorageError: the file cannot be opened or created, is not a codii-sql index (with
            ``create`` false), or holds tables that are not ours (someone else's database);
            nothing is written to it then.

    Once open, every apsw error of a statement reaches the caller as an :mod:`codii_sql.errors`
    type (:func:`translate`): no layer above storage sees apsw.
    """

    def __init__(self, path: Path, *, create: bool = True, readonly: bool = False, mmap: bool | None = None):
        self.path, self.mmap = Path(path), _MAP_ALONE["on"] if mmap is None else mmap
        self._translate = False  # opening words its own errors, below
        self._sibling: Store | None = None
        if (not create or readonly) and not self.path.is_file():
            raise StorageError(f"no index at {self.path}", Remedy("build"))
        self.immutable = False  # opened as an immutable file (a full disk, a read-only folder): reads only
        self.readonly = readonly
        try:
            if readonly:
                self._open_for_reading()
                self._stand_ins()
                self._translate = True
                return
            try:
                shape = self._open(create)
            except (apsw.IOError, apsw.FullError, apsw.CantOpenError, apsw.ReadOnlyError, OSError):
                if create or not self._quiescent():
                    raise
                shape = self._open_immutable()
            if shape["tables"] == 0 and not create:
                shape = self._await_schema(shape)
            create = create or in_indexes_dir(self.path)  # an empty one there: a first build's, stopped (a full disk)
            self._refuse_foreign(shape, create)
            if self.immutable:
                self._stand_ins()
                self._translate = True
                return
            self._retry_busy("pragmas_write")
            for name in ("pragma_synchronous", "pragma_mmap"):
                self.run(name)
            if shape["tables"] == 0:  # another process may be creating it: decide again under the write lock
                with self.transaction():
                    shape = self.row("index_shape")
                    self._refuse_foreign(shape, create)
                    self.create_schema()
            self._migrate()
            self._translate = True
        except (apsw.CorruptError, apsw.NotADBError) as err:
            self._close_quietly()
            # build --force and clear act on damaged files only in $CODII_SQL_HOME/indexes (the service):
            # a damaged file elsewhere may not be ours.
            ours = in_indexes_dir(self.path)
            damaged = DamagedIndexError(f"{self.path} is damaged or not a SQLite database ({err})",
                                        Remedy("force_build") if ours else
                                        "if it is an export or a shard, export it again (a copy cut short: "
                                        "copy it again); else pass an index file codii-sql wrote")
            damaged.sqlite = str(err)  # SQLite's own words, for status and doctor's reports
            raise damaged from None
        except (apsw.Error, OSError) as err:
            self._close_quietly()
            folder = next((p for p in self.path.parents if p.is_dir()), None)  # the home may not exist yet
            if folder is not None and not os.access(folder, os.W_OK):
                # SQLite's WAL mode writes -wal/-shm files beside the .db even to read it.
                raise ReadOnlyIndexError(f"cannot open index {self.path}: its folder is read-only and SQLite needs to "
                                         "write beside it", "set CODII_SQL_HOME to a writable folder, or copy the .db "
                                         "somewhere writable and pass --db") from None
            if isinstance(err, apsw.FullError) or disk_full(self.path.parent):
                raise DiskFullError(f"the disk is full opening {self.path} (SQLite could not write beside it)",
                                    Remedy("free_disk")) from None
            blocker = next((p for p in reversed(self.path.parents) if p.exists() and not p.is_dir()), None)
            if blocker is not None:  # CODII_SQL_HOME, or a folder of --db's path, is a file
                raise StorageError(f"cannot open index {self.path}: {blocker} is a file, not a folder",
                                   "move that file, or set CODII_SQL_HOME (or --db) to a path under a folder") from None
            raise StorageError(f"cannot open index {self.path}: {err}", "check the path and free disk space") from None

    def _stand_ins(self) -> None:
        """Empty temp IVF tables (:mod:`.ann`) for an older index read as it is: search then scans exactly."""
        if not self.value("ann_has_tables"):
            self.run_text(queries.sql("ann_stand_ins").replace("{dims}", str(int(self.vector_dims() or 384))))

    def _close_quietly(self) -> None:
        """Close what a failed open left: it held the file and its WAL until the garbage collector ran."""
        with contextlib.suppress(apsw.Error, AttributeError):
            self.conn.close()

    def _connect(self, name: str, flags: int) -> dict[str, int]:
        """Connect to ``name`` with sqlite-vec loaded; the file's ``index_shape`` row."""
        self.conn = apsw.Connection(name, flags=flags)
        self.conn.enable_load_extension(True)
        self.conn.load_extension(VEC0)
        self.conn.enable_load_extension(False)
        self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        # One plan whatever the bound values: else a `path GLOB :glob` (search_hybrid) re-prepares its whole
        # statement at every bind, 5-6 ms of each search (docs/benchmarks.md, seventeenth round).
        self.conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        return self.row("index_shape")

    def _open(self, create: bool) -> dict[str, int]:
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        return self._connect(str(self.path), flags)

    def _open_for_reading(self) -> None:
        """Open ``readonly`` (see the class): immutable when quiescent, else SQLite's read-only mode.

        Raises:
            StorageError: not a codii-sql index, or of a schema this version cannot read as it is.
        """
        if self._quiescent():
            shape = self._open_immutable()
        else:
            shape = self._connect(str(self.path), apsw.SQLITE_OPEN_READONLY)
        self._refuse_foreign(shape, False)
        if self.mmap:
            self.run("pragma_mmap")
        version = self.value("meta_get", {"key": "schema_version"})
        if version is not None and str(version) != str(SCHEMA_VERSION) and str(version) not in READABLE_AS_IS:
            self.conn.close()
            raise StorageError(f"{self.path} was made by an older codii-sql (schema {version}) and is read here as it "
                               "is, without an upgrade", "export it again with this version, or rebuild it")

    def _await_schema(self, shape: dict[str, int]) -> dict[str, int]:
        """The shape of a file without tables once its creator has committed the schema (a reader
        opening it between the file and its tables called it someone else's database, with concurrent
        MCP index_codebase calls). Waits only for a file modified in the last :data:`FRESH_SECONDS`,
        at most :data:`SCHEMA_WAIT_SECONDS`."""
        deadline = time.monotonic() + SCHEMA_WAIT_SECONDS
        while (shape["tables"] == 0 and time.monotonic() < deadline
               and time.time() - os.stat(self.path).st_mtime < FRESH_SECONDS):
            time.sleep(0.02)
            shape = self.row("index_shape")
        return shape

    def _quiescent(self) -> bool:
        """True when no write-ahead log holds commits the main file lacks (no ``-wal`` file, or an
        empty one): the ``.db`` alone is then the whole index, and reading it immutable is exact."""
        try:
            return os.stat(f"{self.path}-wal").st_size == 0
        except FileNotFoundError:
            return True
        except OSError:
            return False

    def _open_immutable(self) -> dict[str, int]:
        """Open read-only with SQLite's ``immutable=1`` (https://sqlite.org/uri.html#uriimmutable):
        no lock, no ``-wal`` or ``-shm`` file, so nothing is created beside the ``.db``. Reading in
        WAL mode otherwise creates the ``-shm`` index, which fails on a full disk (SQLITE_IOERR)
        or in a read-only folder, and an intact index could not even be searched."""
        self._close_quietly()
        self.immutable = True
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + "?immutable=1"
        return self._connect(uri, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)

    def _refuse_foreign(self, shape: dict[str, int], create: bool) -> None:
        """Raise ``StorageError`` unless the file is our index of this or an older schema, or empty and
        ``create`` is set. A newer codii-sql's tables are foreign to this one: it says to upgrade."""
        # Our schema comes in one transaction: tables but not all three of ours (a `meta` is common): another's.
        version = str(self.value("meta_get", {"key": "schema_version"})) if shape["ours"] == 3 else ""
        newer = version.isdigit() and int(version) > SCHEMA_VERSION
        if not newer and (shape["ours"] == 3 or (create and shape["tables"] == 0)) and shape["foreign_tables"] == 0:
            return
        self.conn.close()
        if newer:
            raise StorageError(f"{self.path} was made by a newer codii-sql (schema {version}; this one reads up to "
                               f"{SCHEMA_VERSION})", "upgrade codii-sql (pip install -U codii-sql) to use it")
        raise StorageError(f"{self.path} is not a codii-sql index", "pass the .db that a codii-sql build made "
                           "(or a new file name)")

    def _retry_busy(self, name: str) -> None:
        """Run statement ``name``, retrying SQLITE_BUSY for up to ``BUSY_TIMEOUT_MS``.

        Switching a fresh file to WAL returns SQLITE_BUSY at once, without calling the busy
        handler, while another connection is switching it too (seen with three processes opening
        one new file: about 1 open in 20 failed).
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return self.run(name)
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self) -> None:
        """Bring an older index to :data:`SCHEMA_VERSION` in one transaction (a kill leaves it as it
        was, retried next open): the tables a newer schema brought, for 1 and 2 the partitioned
        chunks_bits, a stemmed chunks_fts (0.42 s for 27,785 chunks, load 5). Decided again under the
        write lock (another process may have migrated it); an index of this version is not written.
        Raises ``StorageError`` when the file is read-only, unless its version reads as it is."""
        version = self.value("meta_get", {"key": "schema_version"})
        if version not in MIGRATES:
            return
        try:
            with self.transaction():
                version = self.value("meta_get", {"key": "schema_version"})
                if version in MIGRATES:
                    for name in (*CREATE, *MIGRATES[version]):
                        self.run(name)
                    self.set_meta(schema_version=SCHEMA_VERSION)
        except apsw.ReadOnlyError:
            if version in READABLE_AS_IS:
                return self._stand_ins()  # searched as it is (exact KNN over empty temp lists)
            self.conn.close()
            raise StorageError(f"{self.path} was built by an older codii-sql and is read-only, so it cannot be "
                               "upgraded in place", "copy it somewhere writable and pass --db, or rebuild it") from None

    def create_schema(self) -> None:
        """Make every missing table (:data:`CREATE`); the caller owns the transaction."""
        for name in CREATE:
            self.run(name)

    def sibling(self) -> Store:
        """A second connection to this file, opened as this one was (never immutable beside a writable one, whose
        file may change) and closed with it: search/knn.py reads a search's KNN list on it while this one reads BM25's."""
        if self._sibling is None:
            self._sibling = Store(self.path, create=False, readonly=self.readonly, mmap=self.mmap)
        return self._sibling

    def close(self) -> None:
        """Close the connection, and :meth:`sibling`'s (idempotent)."""
        if self._sibling is not None:
            self._sibling.close()
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _sqlite(self) -> Iterator[None]:
        """apsw errors inside the block become :func:`translate`'s errors (once the file is open); a value
        that is no UTF-8 text (a lone surrogate: a file name's undecodable byte, as Python passes it on)
        a UsageError, as no index holds such text."""
        try:
            yield
        except apsw.Error as err:
            if not self._translate:
                raise
            raise translate(err, self.path) from None
        except UnicodeEncodeError as err:
            raise UsageError(f"'{shown_bytes(err.object)}' is not UTF-8 text (a name's byte that no encoding decodes): "
                             "the index leaves out files whose names are not UTF-8 (undecodable-name)",
                             "rg reads such a file; `codii-sql status --skipped` lists those left out") from None

    def run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        """Execute statement ``name`` (all of it, if it is a script) and discard rows."""
        with self._sqlite():
            for _ in self.conn.execute(queries.sql(name), params):
                pass

    def rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every row of statement ``name`` as dicts keyed by column name."""
        out = []
        with self._sqlite():
            cur = self.conn.execute(queries.runnable(name), params)
            names: list[str] | None = None
            for row in cur:
                if names is None:
                    names = [d[0] for d in cur.get_description()]
                out.append(dict(zip(names, row)))
        return out

    def row(self, name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The first row of statement ``name``, or None."""
        found = self.rows(name, params)
        return found[0] if found else None

    def value(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row of statement ``name``, or None."""
        with self._sqlite():
            for row in self.conn.execute(queries.runnable(name), params):
                return row[0]
        return None

    def many(self, name: str, seq: Any) -> None:
        """Execute statement ``name`` once per parameter mapping in ``seq``.

        The cursor is read to the end: apsw runs the next parameter set only when the rows of
        the previous one have been read (a ``RETURNING`` statement would stop after one).
        """
        with self._sqlite():
            for _ in self.conn.executemany(queries.runnable(name), seq):
                pass

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception.

        IMMEDIATE takes the write lock up front, so two writers wait on the busy timeout
        instead of failing halfway through with SQLITE_BUSY on lock upgrade.
        """
        self.run("begin_immediate")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:  # SQLite itself rolls back on SQLITE_FULL, IOERR, NOMEM...
                self.run("rollback")
            raise
        self.run("commit")

    def vector_dims(self) -> int:
        """The width of the stored vectors (``float[N]`` of chunks_vec)."""
        found = re.search(r"float\[(\d+)\]", self.value("vector_table_sql") or "")
        return int(found.group(1)) if found else 0

    def run_text(self, sql: str) -> None:
        """Execute ``sql``, a named statement made concrete by its caller (a table's width: storage/widths.py)."""
        with self._sqlite():
            for _ in self.conn.execute(sql):
                pass

    def meta(self) -> dict[str, Any]:
        """The snapshot as ``{key: value}``; values were stored as JSON."""
        return {r["key"]: json.loads(r["value"]) for r in self.rows("meta_all")}

    def set_meta(self, **values: Any) -> None:
        """Store snapshot values (JSON-encoded); the caller owns the transaction."""
        for key, value in values.items():
            self.run("meta_set", {"key": key, "value": json.dumps(value)})
