"""The errors a user can cause: each carries a one-line message that says what to do."""


class CodiiError(Exception):
    """Base class: ``str(err)`` is one line a user can act on; the CLI prints it without a traceback."""

    exit_code = 1


class UsageError(CodiiError):
    """Bad input from the user: a path, a query, an option."""

    exit_code = 2


class NotIndexedError(CodiiError):
    """The codebase has no index yet."""


class IndexMismatchError(CodiiError):
    """The index was built by another model, chunker or schema; ``build --force`` rebuilds it."""


class BuildFailedError(CodiiError):
    """A background build stopped at once (a bad ``.codii.yaml``, an index of another model...)."""


class EmbeddingFailedError(CodiiError):
    """The model failed during a build's vector phase; the chunks embedded so far are kept."""


class IndexBusyError(CodiiError):
    """Another process is writing this codebase's index."""


class DaemonRunningError(IndexBusyError):
    """A background build of this codebase is already running (the exit status says so: 3)."""

    exit_code = 3


class StorageError(CodiiError):
    """The index file cannot be opened or written (disk full, read-only, not a codii-sql index)."""


class DiskFullError(StorageError):
    """SQLite could not write the index: the disk is full (SQLITE_FULL)."""


class ReadOnlyIndexError(StorageError):
    """SQLite could not write the index: the file or its folder is read-only."""


class DamagedIndexError(StorageError):
    """The index file is corrupt (SQLite cannot read it); ``build --force`` replaces it."""


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message, or its type name when the message is empty."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
