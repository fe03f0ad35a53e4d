"""Where things live: a codebase's identity (its resolved root) and the path of its index file."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError


def home() -> Path:
    """``$CODII_SQL_HOME``, default ``~/.codii-sql``: indexes, the embedding cache and derived models."""
    return Path(os.environ.get("CODII_SQL_HOME") or Path.home() / ".codii-sql").expanduser()


def indexes_dir() -> Path:
    """The folder holding one ``.db`` per codebase."""
    return home() / "indexes"


def resolve_root(path: str | os.PathLike[str] | None) -> Path:
    """The codebase root for a user-given path: absolute, symlinks resolved, ``..`` removed.

    The same directory reached through a relative path, a trailing slash, a symlink or
    ``..`` segments resolves to one root and so to one index.

    Raises:
        UsageError: the path does not exist or is not a directory.
    """
    raw = Path(path if path is not None else ".").expanduser()
    if "\0" in str(raw):
        raise UsageError("the path contains a NUL byte: pass a directory path")
    try:
        root = raw.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise UsageError(f"{raw}: no such directory; pass the root folder of a codebase") from None
    except OSError as err:
        raise UsageError(f"{raw}: cannot be read ({err.strerror}); pass a directory you can read") from None
    if not root.is_dir():
        raise UsageError(f"{raw} is a file, not a directory: pass the folder that contains it")
    return root


def in_indexes_dir(db_path: Path) -> bool:
    """True when ``db_path`` lies directly in :func:`indexes_dir`: provably a codii-sql index, so
    a damaged one may be deleted or replaced (a ``--db`` file elsewhere may be someone else's)."""
    return db_path.resolve().parent == indexes_dir().resolve()


def default_db_path(root: Path) -> Path:
    """``$CODII_SQL_HOME/indexes/<dirname>-<first 12 hex of sha256(resolved root)>.db``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", root.name or "root").strip("._") or "root"
    digest = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:12]
    return indexes_dir() / f"{name[:40]}-{digest}.db"


def _recorded_root(db_path: Path) -> str:
    """The codebase root stored in an index's snapshot, for ``--db`` without a path."""
    from .store import Store  # storage sits below this module only for this look-up

    if not db_path.is_file():
        raise UsageError(f"--db {db_path}: no such index file; pass an existing .db, or --path to build one")
    with Store(db_path, create=False) as store:
        root = store.meta().get("root")
    if not root or not Path(root).is_dir():
        raise UsageError(f"the index {db_path.name} was built for {root or 'an unknown folder'}, which is not here: "
                         "pass the codebase folder too (--path or PATH)")
    return root


@dataclass(frozen=True)
class Codebase:
    """A codebase root and the index file that belongs to it.

    Attributes:
        root: the resolved root directory.
        db_path: its ``.db`` (``--db`` or the default location).
    """

    root: Path
    db_path: Path

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None) -> Codebase:
        """Resolve the codebase and pick its index file.

        ``path`` None means: the root recorded in ``db`` when ``db`` is given (a copied
        index opened with ``--db`` alone), else the current directory.

        Raises:
            UsageError: see :func:`resolve_root`; ``db`` is a directory, or ``db`` alone names
                a missing index or one whose root is not on this machine; the root is ``/``
                or the home directory (a whole file system is not a codebase).
        """
        db_path = Path(db).expanduser().absolute() if db is not None else None
        if db_path is not None and db_path.is_dir():
            raise UsageError(f"--db {db} is a directory: pass a file path such as {db_path / 'index.db'}")
        if path is None and db_path is not None:
            root = resolve_root(_recorded_root(db_path))
        else:
            root = resolve_root(path)
        if root == Path(root.anchor) or root == Path.home().resolve():
            raise UsageError(f"{root} is not a project folder (it would index a whole file system or home "
                             "directory): pass the root of one codebase")
        return cls(root, db_path or default_db_path(root))

    @classmethod
    def find(cls, path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None
             ) -> tuple[Codebase, str]:
        """The codebase whose index answers a search from ``path``, and ``path`` relative to its root.

        As git finds its repository from a subfolder: ``path``'s own index when it has one,
        else that of the nearest enclosing folder that has one (stopping below ``/`` and the
        home directory), with the scope ``path`` relative to that root as a POSIX path
        (``src/pkg``); else, inside a git work tree, its top folder with that scope (a search
        from ``src/`` indexes the repository once, not each subfolder again); else ``path``
        itself with scope ``""``. Indexes are built on first use. With ``db`` given this is
        :meth:`open` with scope ``""``.

        Raises:
            UsageError: as :meth:`open`.
        """
        here = cls.open(path, db)
        if db is not None or here.db_path.is_file():
            return here, ""
        outer = here.enclosing() or here.work_tree()
        return (outer, here.root.relative_to(outer.root).as_posix()) if outer else (here, "")

    def enclosing(self) -> Codebase | None:
        """The nearest folder above this root that has an index in the default place, or None
        (the walk stops below ``/`` and the home directory)."""
        for parent in self.root.parents:
            if parent == Path(parent.anchor) or parent == Path.home().resolve():
                return None
            if default_db_path(parent).is_file():
                return Codebase(parent, default_db_path(parent))
        return None

    def work_tree(self) -> Codebase | None:
        """The git work tree above this root (nearest folder with a ``.git`` entry: a repository,
        or a linked worktree's ``.git`` file), or None when this root is its top or there is none
        (the walk stops below ``/`` and the home directory)."""
        for folder in (self.root, *self.root.parents):
            if folder == Path(folder.anchor) or folder == Path.home().resolve():
                return None
            if (folder / ".git").exists():
                return None if folder == self.root else Codebase(folder, default_db_path(folder))
        return None

    @property
    def lock_path(self) -> Path:
        """The writer lock beside the index (an OS file lock: released when its process dies)."""
        return self.db_path.with_name(self.db_path.name + ".lock")
