"""Exporting an index: a compact, self-contained copy to search alone (a CI artifact, a shard to
serve, a file to share), with a manifest that says what it holds."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import time
import urllib.parse
from pathlib import Path

from .. import paths
from ..codebase import Codebase
from ..errors import CodiiError, UsageError
from ..storage import copies
from ..storage.store import Store
from .embedders import recorded_embedder
from .status import not_indexed, open_store

#: Snapshot keys that belong to the machine and the processes that built the index: an export
#: carries no absolute path of that machine, and no process id that means nothing elsewhere.
MACHINE_KEYS = ("root", "pid", "vectors_pid")
#: Seconds the git commands of the manifest may take (a huge repository's status is the slow one).
GIT_SECONDS = 20


def export(codebase: Codebase, target: str | os.PathLike[str]) -> dict:
    """Write the index of ``codebase`` to ``target`` as one file to search alone (see
    :func:`codii_sql.storage.copies.export`): the state of its last commit, written aside and
    renamed into place, its snapshot without :data:`MACHINE_KEYS`, with a ``manifest``.

    Returns:
        ``{"codebase", "file", "bytes", "source_bytes", "seconds", "manifest"}``; ``source_bytes``: the index as
        its last commit left it, in its file and its log (a vector phase's commits sit in the log: the file
        alone measured 0.0 MB).
    Raises:
        NotIndexedError: no index. UsageError: see :func:`export_target`. StorageError: it cannot be written.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    out = export_target(codebase, target)
    started = time.perf_counter()
    manifest = _manifest(codebase)
    with open_store(codebase) as store:
        source_bytes = store.value("index_bytes")
    copies.export(codebase.db_path, out, {"manifest": manifest}, MACHINE_KEYS)
    return {"codebase": str(codebase.root), "file": str(out), "bytes": out.stat().st_size,
            "source_bytes": source_bytes, "seconds": round(time.perf_counter() - started, 3),
            "manifest": manifest}


def export_target(codebase: Codebase, target: str | os.PathLike[str]) -> Path:
    """The absolute file an export of ``codebase`` to ``target`` writes, checked before any work (``build
    --export`` asks first, then builds).

    Raises:
        UsageError: ``target`` is a folder, the index itself, in codii-sql's folder of indexes, in a folder that
            does not exist, a link, or an existing file that is not a codii-sql index (an export replaces only
            an earlier export).
    """
    out = Path(target).expanduser().absolute()
    if str(target).endswith(("/", os.sep)) and not out.is_dir():  # Path drops the slash that says "a folder"
        raise UsageError(f"{target} names a folder, which does not exist",
                         f"create it first, or name the file to write, such as {out / (codebase.root.name + '.db')}")
    if out.is_dir():
        raise UsageError(f"{out} is a folder", f"name the file to write, such as {out / (codebase.root.name + '.db')}")
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} does not exist", "create the folder first, or name a file in one that exists")
    if out.exists() and out.samefile(codebase.db_path):
        raise UsageError(f"{out} is the index itself", "name another file")
    if paths.in_indexes_dir(out):  # a new user's export replaced another codebase's live index, and nothing noticed
        raise UsageError(f"{out} is in codii-sql's own folder of indexes, where each file is a codebase's live index",
                         "export to a file outside it; a codebase's own index is refreshed by building its source "
                         "(codii-sql build SOURCE)")
    earlier = _earlier_export(out) if out.exists() else None
    if out.is_symlink() or earlier is False:  # a new user's `--to /etc/passwd` replaced it
        raise UsageError(f"{out} exists and is not a codii-sql index: export replaces only an earlier export",
                         "name a new file, or delete that one first")
    if earlier and not _same_source(earlier, codebase):  # a helper's export replaced another codebase's, silently
        raise UsageError(f"{out} is an export of another codebase ({earlier.get('codebase')}): export replaces only an "
                         "earlier export of the same one", "name a new file, or delete that one first")
    return out


def _earlier_export(path: Path) -> dict | bool:
    """The manifest of the codii-sql index at ``path`` ({} for an index never exported), or False when ``path``
    is no codii-sql index."""
    try:
        with Store(path, create=False, readonly=True) as store:
            return store.meta().get("manifest") or {}
    except CodiiError:
        return False


def _same_source(earlier: dict, codebase: Codebase) -> bool:
    """Whether an export's manifest is of ``codebase``: the same folder name, and the same git remote when both
    have one."""
    name = codebase.root.name if not codebase.alone else str(codebase.root)
    remote = (earlier.get("git") or {}).get("remote")
    ours = None if codebase.alone else (_git(codebase.root) or {}).get("remote")
    return earlier.get("codebase") in (None, name) and (remote is None or ours is None or remote == ours)


def manifest(codebase: Codebase) -> dict | None:
    """The manifest an export wrote into the index of ``codebase``; None for an index never exported.

    Raises:
        NotIndexedError: no index.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    with open_store(codebase) as store:
        return store.meta().get("manifest")


def _manifest(codebase: Codebase) -> dict:
    """What an exported file holds: the codebase's name, its git remote and commit (when it is a
    git work tree here), embedder, widths, schema and chunker versions, counts, and when."""
    with open_store(codebase) as store:
        meta, counts = store.meta(), store.row("vector_counts")
    return {"codebase": codebase.root.name if not codebase.alone else str(codebase.root),
            "git": None if codebase.alone else _git(codebase.root),
            "embedder": recorded_embedder(meta), "model_id": meta.get("model_id"), "dims": meta.get("dims"),
            "schema_version": meta.get("schema_version"), "chunker_version": meta.get("chunker_version"),
            "files": meta.get("files"), "chunks": counts["chunks"],
            "vectors": {"done": counts["chunks"] - counts["pending"], "total": counts["chunks"]},
            "indexed_at": meta.get("last_indexed_at"), "created_at": time.time(),
            "codii_sql": importlib.metadata.version("codii-sql")}


def _git(root: Path) -> dict | None:
    """``{"remote", "commit", "dirty"}`` of the git work tree at ``root`` (the remote without any
    user or token in it), or None when it is none or git is missing."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=GIT_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    remote = git("remote", "get-url", "origin") or None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"remote": _without_credentials(remote) if remote else None, "commit": commit,
            "dirty": bool(dirty) if dirty is not None else None}


def _without_credentials(url: str) -> str:
    """``url`` without a user or token (``https://user:token@host/x`` -> ``https://host/x``); an scp-like
    address (``git@host:org/repo``) keeps its user, which is no secret."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme and parts.netloc and "@" in parts.netloc:
        return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url
