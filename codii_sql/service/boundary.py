"""The file boundary: which files an agent (or any face) may have read back, and reading them safely.

A file is readable only when all of these hold:

1. the path has no NUL byte, no ``..`` component, and (if absolute) lies under the root;
2. its real path (every symlink resolved) is inside the root's real path;
3. it is a regular file (never a device, FIFO or socket: opening one could block or read
   hardware), checked again on the open descriptor, which must be the very inode checked;
4. a scan of the codebase with its ignore rules and file filters (``.gitignore``,
   ``.codiiignore``, ``.codii.yaml``, the options of the last build) lists it;
5. its content is not one the indexer skips as binary or as a private key.

Refusals raise :class:`PathRefusedError`, whose one-line message the server hands to the agent.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import Remedy, UsageError
from ..ingest.config import DEFAULT_MAX_FILE_BYTES
from ..ingest.exclusions import SECRET_RULE, default_file_reason
from ..ingest.read import SNIFF_BYTES, holds_private_key, is_binary, is_private_key
from ..ingest.walk import unlisted
from ..text import shown_bytes

#: Seconds a path's verdict (listed or not) is reused: a file newly added to an ignore file stays
#: readable for at most this long.
FILE_SET_TTL_SECONDS = 10.0
#: Paths a :class:`FileSet` remembers at most before it starts again.
MAX_REMEMBERED_PATHS = 100_000


class PathRefusedError(UsageError):
    """A file path outside the boundary (escape, symlink out, device file, ignored file)."""


@dataclass(frozen=True)
class SafeFile:
    """A file that passed the path checks.

    Attributes:
        rel: POSIX path relative to the root, as the index stores it (``"src/a.py"``).
        real: the resolved real path, inside the root's real path.
        dev, ino: the checked inode; the descriptor opened later must be the same one.
        size: bytes, from ``stat``.
    """

    rel: str
    real: Path
    dev: int
    ino: int
    size: int


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _relative(root: Path, file: str) -> str:
    """The lexical path of ``file`` relative to ``root`` (POSIX separators), or refuse."""
    if "\0" in file:
        raise PathRefusedError("the file path contains a NUL byte", "pass a plain relative path")
    if not file.strip():
        raise PathRefusedError("the file path is empty", "pass a path relative to the codebase root")
    if ".." in PurePosixPath(file.replace(os.sep, "/")).parts:
        raise PathRefusedError(f"{file!r}: '..' is not allowed",
                               "pass the path relative to the codebase root, as search results give it")
    raw = Path(file)
    if raw.is_absolute():
        for base in (str(root), os.path.realpath(root)):
            if _inside(os.path.normpath(raw), base):
                rel = os.path.relpath(os.path.normpath(raw), base)
                break
        else:
            raise PathRefusedError(f"{file!r} is outside the codebase root {root}")
    else:
        rel = os.path.normpath(file)
    if rel == ".":
        raise PathRefusedError(f"{file!r} is the codebase root, not a file")
    return rel.replace(os.sep, "/")


def resolve_file(root: Path, file: str) -> SafeFile:
    """Checks 1-3 of the module docstring for ``file`` (relative to ``root``, or absolute under it).

    Raises:
        PathRefusedError: the path escapes the root, is a symlink leading outside it, is
            not a regular file, or does not exist.
    """
    rel = _relative(root, file)
    root_real = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    if not _inside(real, root_real):
        raise PathRefusedError(f"{file!r} resolves outside the codebase root (a symlink to {real}?): refused")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise PathRefusedError(f"{file!r}: no such file in {root}") from None
    except OSError as err:
        raise PathRefusedError(f"{file!r}: cannot be read ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise PathRefusedError(f"{file!r} is a directory", "pass a file path")
    if not stat.S_ISREG(st.st_mode):
        raise PathRefusedError(f"{file!r} is not a regular file (device, FIFO or socket): refused")
    return SafeFile(rel, Path(real), st.st_dev, st.st_ino, st.st_size)


def read_bytes(f: SafeFile, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The content of a checked file, read through a descriptor verified to be the checked inode.

    ``O_NOFOLLOW | O_NONBLOCK``: a symlink or FIFO swapped in after the check neither gets
    followed nor blocks the read.

    Raises:
        PathRefusedError: the file changed into something else since the check, is larger
            than ``max_bytes``, is binary, or holds a private key.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(f.real, flags)
    except OSError as err:
        raise PathRefusedError(f"{f.rel!r}: cannot be opened ({err.strerror})") from None
    try:
        # Checked before wrapping: open() of a folder's descriptor raises IsADirectoryError.
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (f.dev, f.ino):
            raise PathRefusedError(f"{f.rel!r} changed while it was being opened", Remedy("retry"))
        if st.st_size > max_bytes:
            raise PathRefusedError(f"{f.rel!r} is larger than {max_bytes} bytes: not served")
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)[:max_bytes]
    except OSError as err:
        raise PathRefusedError(f"{f.rel!r}: cannot be read ({err.strerror})") from None
    finally:
        os.close(fd)
    head = data[:SNIFF_BYTES]
    if is_binary(head):
        # The indexer skips it (scan.read_file): decoded, it would reach the agent as U+FFFD
        # noise, and the index does not hold it either.
        raise PathRefusedError(f"{f.rel!r} is binary (a NUL byte in its first {SNIFF_BYTES} bytes), so it "
                               "was not indexed: not served")
    if holds_private_key(data):
        raise PathRefusedError(f"{f.rel!r} holds a private key: not served")
    return data


#: How :class:`IndexedReader` opens a folder on a path and the file at its end: never through a link,
#: never blocking on a FIFO swapped in for the file.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
#: A relative path with an empty, ``.`` or ``..`` part: never an indexed file's (one could climb out).
_NOT_PLAIN = re.compile(r"(?:^|/)\.{0,2}(?:/|$)")


class IndexedReader:
    """Reads the indexed files of one root for grep (thousands a call) under checks 2, 3 and 5; check
    4 held when the index took the file. Each folder on a path is opened from its parent with
    ``O_NOFOLLOW``, and the file from its folder, so a link swapped in anywhere after the build
    (`main.py -> .env`, a folder -> elsewhere) fails the open itself: no real path to compare after.
    The folders of the last path read stay open, and candidates come in path order, so most reads are
    one ``open``: the kernel's 14,311 `return -EINVAL` files took 148 ms of CPU so, 225 ms with a
    ``/proc/self/fd`` link read per file (docs/benchmarks.md "Grep", fourth round).

    Use as a context manager (it holds descriptors: the root's and one per folder of the last path).
    """

    def __init__(self, root_real: str) -> None:
        try:
            self._root: int | None = os.open(root_real, _FOLDER_FLAGS)
        except OSError:  # the root is gone or no folder now: every file reads as gone
            self._root = None
        self._chain: list[tuple[str, int]] = []  # (folder name, descriptor) from the root down
        self._folder = ""  # the chain's path

    def __enter__(self) -> "IndexedReader":
        return self

    def __exit__(self, *exc) -> None:
        while self._chain:
            os.close(self._chain.pop()[1])
        if self._root is not None:
            os.close(self._root)

    def read(self, rel: str, max_bytes: int) -> bytes | None:
        """The content of the indexed file ``rel`` (``/``-separated, relative to the root), or None when
        it is gone, is reached through a link now (the index holds none), is no regular file, is
        larger than ``max_bytes``, binary or a private key."""
        if self._root is None or _NOT_PLAIN.search(rel):
            return None
        folder, _, name = rel.rpartition("/")
        if folder != self._folder and not self._enter(folder):
            return None
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=self._chain[-1][1] if self._chain else self._root)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                return None
            data = _read_all(fd, st.st_size, max_bytes)
        except OSError:
            return None
        finally:
            os.close(fd)
        head = data[:SNIFF_BYTES]
        return None if len(data) > max_bytes or is_binary(head) or is_private_key(head) else data

    def _enter(self, folder: str) -> bool:
        """Hold the descriptors of ``folder`` ('' for the root) and the folders above it, keeping those
        of the last path it shares; False when one cannot be opened (gone, a link, no folder)."""
        parts = folder.split("/") if folder else []
        kept = 0
        while kept < min(len(parts), len(self._chain)) and self._chain[kept][0] == parts[kept]:
            kept += 1
        while len(self._chain) > kept:
            os.close(self._chain.pop()[1])
        try:
            for part in parts[kept:]:
                self._chain.append((part, os.open(part, _FOLDER_FLAGS, dir_fd=self._chain[-1][1] if self._chain
                                                  else self._root)))
        except OSError:
            self._folder = "/".join(p for p, _ in self._chain)
            return False
        self._folder = folder
        return True



def _read_all(fd: int, size: int, max_bytes: int) -> bytes:
    """The open file's bytes, at most ``max_bytes + 1`` (more means too large), in one ``os.read`` of
    its ``size`` when it has not grown: a buffered file object per file cost half of reading the
    kernel's 15,736 candidates of `return -EINVAL` (770 -> 397 ms, docs/benchmarks.md "Grep")."""
    parts, total, want = [], 0, min(size, max_bytes) + 1
    while True:
        part = os.read(fd, want)
        parts.append(part)
        total += len(part)
        if len(part) < want or total > max_bytes:  # a short read of a regular file is its end
            return parts[0] if len(parts) == 1 else b"".join(parts)
        want = max_bytes + 1 - total


class FileSet:
    """Whether a scan of one root lists a path (check 4), decided along that path alone
    (:func:`~codii_sql.ingest.walk.unlisted`) and remembered for :data:`FILE_SET_TTL_SECONDS`.

    Args:
        root: the codebase root.
        rules: keyword arguments for :func:`~codii_sql.ingest.walk.scan` (``ignore_patterns``, ``extensions``,
            ``max_file_bytes``), normally from :func:`codii_sql.service.status.scan_rules`.
    """

    def __init__(self, root: Path, rules: dict):
        self.root = root
        self.rules = rules
        self._seen: dict[str, tuple[bool, float]] = {}
        self._lock = threading.Lock()

    def unlisted(self, rel: str) -> str | None:
        """None when a build would index the relative POSIX path ``rel`` now, else why not (see
        :func:`~codii_sql.ingest.walk.unlisted`). A few directory listings; a whole walk of the kernel
        took 1.5-2 s (a CLI symbol look-up paid it each call)."""
        now = time.monotonic()
        with self._lock:
            known = self._seen.get(rel)
            if known is not None and now - known[1] <= FILE_SET_TTL_SECONDS:
                return known[0]
        reason = unlisted(self.root, rel, **self.rules)
        with self._lock:
            if len(self._seen) > MAX_REMEMBERED_PATHS:
                self._seen.clear()
            self._seen[rel] = (reason, now)
        return reason

    def check(self, file: str) -> SafeFile:
        """All four checks.

        Raises:
            PathRefusedError: see :func:`resolve_file`, or the ignore rules exclude the file.
        """
        f = resolve_file(self.root, file)
        # The file a link leads to is the one read: it must be one the rules list (a link to `.env` or
        # to an ignored file is refused; one to an indexed file reads it).
        self.require_listed(Path(os.path.relpath(f.real, os.path.realpath(self.root))).as_posix(), file)
        return f

    def require_listed(self, rel: str, shown: str | None = None) -> None:
        """Check 4 alone, for paths taken from the index (``get_chunk``).

        Raises:
            PathRefusedError: the scan does not list ``rel``.
        """
        reason = self.unlisted(rel)
        name = f"'{shown_bytes(shown or rel)}'"  # a byte no encoding decodes as \xff, as the shell gave it
        if reason is None:
            return
        if reason == "secret" or default_file_reason(PurePosixPath(rel).name) == "secret":
            raise PathRefusedError(f"{name} {SECRET_RULE}: never indexed or served")
        if reason == "too-large":
            raise PathRefusedError(f"{name} is larger than the codebase's size limit ({self.rules['max_file_bytes']:,} "
                                   "bytes): refused", "raise max_file_bytes in .codii.yaml to index and read it")
        if reason == "extension-filter":
            raise PathRefusedError(f"{name} is left out by the codebase's extension filter: refused")
        if reason == "ignored":
            raise PathRefusedError(f"{name} is excluded by the codebase's ignore rules (.gitignore, .ignore, "
                                   ".rgignore): refused")
        if reason == "codii-ignored":
            raise PathRefusedError(f"{name} is excluded by the codebase's own ignore rules (.codiiignore, .codii.yaml "
                                   "ignore_patterns): refused")
        raise PathRefusedError(f"{name} is not indexed ({reason.replace('-', ' ')}): refused")

