"""A codebase: its identity (the resolved root) and the index file that belongs to it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ReadOnlyIndexError, Remedy, UsageError
from .paths import default_db_path, home

#: Folders that are no project even as a codebase's root: the system's own (exactly these: a project
#: may live below /usr/src or /opt), and every folder of the kernel's pseudo file systems. A new
#: user's `grep root /etc/passwd` indexed /etc (shadow included), `grep X /dev/null` indexed /dev.
SYSTEM_FOLDERS = frozenset(map(Path, ("/etc", "/var", "/usr", "/tmp", "/boot", "/run", "/opt", "/srv", "/mnt",
                                      "/media", "/bin", "/sbin", "/lib", "/lib64", "/root")))
PSEUDO_FILE_SYSTEMS = tuple(map(Path, ("/proc", "/sys", "/dev")))


#: Files that mark a project's top folder (package managers' and build tools' manifests, and codii-sql's
#: own settings): a search from a folder below one indexes the project once, as inside a git work tree.
PROJECT_FILES = ("package.json", "pyproject.toml", "setup.py", "setup.cfg", "Cargo.toml", "go.mod", "pom.xml",
                 "build.gradle", "build.gradle.kts", "composer.json", "Gemfile", "mix.exs", ".codii.yaml")


def no_project(folder: Path) -> bool:
    """Whether ``folder`` (resolved) is no codebase: ``/``, the home directory, a system folder."""
    return (folder == Path(folder.anchor) or folder == Path.home().resolve() or folder in SYSTEM_FOLDERS
            or any(folder == p or p in folder.parents for p in PSEUDO_FILE_SYSTEMS))


def codii_folder(folder: Path) -> bool:
    """Whether ``folder`` (resolved) is ``$CODII_SQL_HOME`` or one of the folders it keeps (indexes, cache,
    logs, models), which codii-sql writes: no codebase (a home set above one's projects stays usable)."""
    own = home().resolve()
    return folder == own or any(folder == own / name or own / name in folder.parents
                                for name in ("indexes", "cache", "logs", "models"))


def is_remote(target: str) -> bool:
    """Whether a search target names a server (``http://`` or ``https://``) rather than a folder."""
    return target.startswith(("http://", "https://"))


def resolve_root(path: str | os.PathLike[str] | None) -> Path:
    """The codebase root for a user-given path: absolute, symlinks resolved, ``..`` removed.

    The same directory reached through a relative path, a trailing slash, a symlink or
    ``..`` segments resolves to one root and so to one index.

    Raises:
        UsageError: the path is empty, does not exist or is not a directory.
    """
    if path is not None and not os.fspath(path).strip():  # Path("") is ".": a slip, not a choice
        raise UsageError("the path is empty", "pass a folder, or leave the option out for the current directory")
    raw = Path(path if path is not None else ".").expanduser()
    if "\0" in str(raw):
        raise UsageError("the path contains a NUL byte", "pass a directory path")
    try:
        root = raw.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise UsageError(f"{raw}: no such directory", "pass the root folder of a codebase") from None
    except OSError as err:
        raise UsageError(f"{raw}: cannot be read ({err.strerror})", "pass a directory you can read") from None
    if not root.is_dir():  # an index file here: `clear x.db` was told to pass the folder that holds it
        raise UsageError(f"{raw} is a file, not a directory", "pass an index file as --db FILE"
                         if raw.suffix == ".db" else "pass the folder that contains it")
    return root


@dataclass(frozen=True)
class Codebase:
    """A codebase root and the index file that belongs to it.

    Attributes:
        root: the resolved root directory; for an index file alone, the name of the codebase it was
            built from (no folder here).
        db_path: its ``.db`` (``--db`` or the default location).
        alone: the index file is searched without its source (a copy, an export, a shard): it is
            read only, from its stored chunks, and whether files changed since is unknown.
    """

    root: Path
    db_path: Path
    alone: bool = False

    @property
    def shown(self) -> str:
        """What an answer's ``codebase`` names: the root, or for an index alone its file's path (what every
        face takes back as a path; a shard's search said its path and its symbol look-ups its bare name)."""
        return str(self.db_path if self.alone else self.root)

    @classmethod
    def index_alone(cls, db_path: Path, name: str) -> Codebase:
        """The codebase of an index file whose source folder is not here, called ``name``."""
        return cls(Path(name), Path(db_path).absolute(), alone=True)

    def refuse_writes(self) -> None:
        """Refuse to build, update or lock an index file alone: it has no source to read, and a
        shard or an export is only ever read (a build would leave its error and locks in it).

        Raises:
            ReadOnlyIndexError: the index is alone.
        """
        if self.alone:
            raise ReadOnlyIndexError(f"{self.db_path} is an index file alone (the source of {self.root} is not "
                                     "here): it is only read, never built or written", Remedy("export_again",
                                                                                   {"db": str(self.db_path)}))

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None) -> Codebase:
        """Resolve the codebase at ``path`` (None: the current directory) and pick its index file.

        A copied index opened with ``--db`` alone (no path) needs the root its snapshot records:
        :func:`codii_sql.service.codebases.open_codebase` reads it, then calls this.

        Raises:
            UsageError: see :func:`resolve_root`; ``db`` is a directory; the root is ``/`` or the
                home directory (a whole file system is not a codebase).
        """
        db_path = Path(db).expanduser().absolute() if db is not None else None
        if db_path is not None and db_path.is_dir():
            raise UsageError(f"{db} is a directory", f"pass a file path such as {db_path / 'index.db'}", field="db")
        root = resolve_root(path)
        if no_project(root):
            raise UsageError(f"{root} is not a project folder (it would index a whole file system, a home "
                             "directory or the system's files)", "pass the root of one codebase")
        if codii_folder(root):  # its index would list the logs and locks each update writes: `watch` of it looped
            raise UsageError(f"{root} is codii-sql's own folder ($CODII_SQL_HOME: indexes, caches, logs), not a "
                             "codebase", "pass the root of one codebase")
        return cls(root, db_path or default_db_path(root))

    @classmethod
    def find(cls, path: str | os.PathLike[str] | None, db: str | os.PathLike[str] | None = None
             ) -> tuple[Codebase, str]:
        """The codebase whose index answers a search from ``path``, and ``path`` relative to its root.

        As git finds its repository from a subfolder: ``path``'s own index when it has one,
        else that of the nearest enclosing folder that has one (stopping below ``/`` and the
        home directory), with the scope ``path`` relative to that root as a POSIX path
        (``src/pkg``); else, inside a git work tree, its top folder with that scope (a search
        from ``src/`` indexes the repository once, not each subfolder again); else, outside git, the
        nearest project folder above it (:meth:`project`) with that scope; else ``path`` itself with
        scope ``""``. Indexes are built on first use. With ``db`` given this is
        :meth:`open` with scope ``""``.

        Raises:
            UsageError: as :meth:`open`.
        """
        here = cls.open(path, db)
        if db is not None or here.db_path.is_file():
            return here, ""
        outer = here.enclosing() or here.work_tree() or here.project()
        return (outer, here.root.relative_to(outer.root).as_posix()) if outer else (here, "")

    def enclosing(self) -> Codebase | None:
        """The nearest folder above this root that has an index in the default place, or None
        (the walk stops below ``/``, the home directory and system folders); None for an index alone."""
        if self.alone:
            return None
        for parent in self.root.parents:
            if no_project(parent):
                return None
            if default_db_path(parent).is_file():
                return Codebase(parent, default_db_path(parent))
        return None

    def work_tree(self) -> Codebase | None:
        """The git work tree above this root (nearest folder with a ``.git`` entry: a repository,
        or a linked worktree's ``.git`` file), or None when this root is its top or there is none
        (the walk stops below ``/`` and the home directory); None for an index alone."""
        if self.alone:
            return None
        for folder in (self.root, *self.root.parents):
            if no_project(folder):
                return None
            if (folder / ".git").exists():
                return None if folder == self.root else Codebase(folder, default_db_path(folder))
        return None

    def project(self) -> Codebase | None:
        """Outside git, the nearest folder above this root that holds a project's manifest
        (:data:`PROJECT_FILES`), unless this root holds one itself; else None (the walk stops below ``/``
        and the home directory). A new user's first `grep x lib/commands` in npm's folder made
        `lib/commands` the codebase, and every wider grep was then refused."""
        if self.alone or any((self.root / name).is_file() for name in PROJECT_FILES):
            return None
        for folder in self.root.parents:
            if no_project(folder):
                return None
            if any((folder / name).is_file() for name in PROJECT_FILES):
                return Codebase(folder, default_db_path(folder))
        return None

    @property
    def lock_path(self) -> Path:
        """The writer lock beside the index (an OS file lock: released when its process dies)."""
        return self.db_path.with_name(self.db_path.name + ".lock")

    @property
    def daemon_lock_path(self) -> Path:
        """The lock of the background build process (``build --daemon``) beside the index."""
        return self.db_path.with_name(self.db_path.name + ".daemon.lock")

    @property
    def daemon_info_path(self) -> Path:
        """What that process writes about itself (JSON: pid, start time, log file)."""
        return self.db_path.with_name(self.db_path.name + ".daemon.json")

    @property
    def vector_lock_path(self) -> Path:
        """The vector worker's lock beside the index (see :mod:`codii_sql.storage.lock`)."""
        return self.db_path.with_name(self.db_path.name + ".vectors.lock")
