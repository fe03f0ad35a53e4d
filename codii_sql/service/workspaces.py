"""Workspaces: named sets of codebases, from ``WORKSPACE_<NAME>`` variables or the registry in ``$CODII_SQL_HOME``.

As directory-indexer reads them: ``WORKSPACE_<NAME>`` holds a JSON array of paths or, failing
that, comma-separated paths; the name is case-insensitive (kept lower-case). The registry
(``$CODII_SQL_HOME/workspaces.json``, edited by ``codii-sql workspace add|remove``) holds the
same; a workspace defined in the environment wins over one of the same name in the registry.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import filelock

from ..codebase import Codebase, is_remote
from ..errors import CodiiError, Remedy, StorageError, UsageError, hint_text
from ..paths import home
from ..search.answer import Note
from .codebases import index_file, is_index_file
from .status import status

ENV_PREFIX = "WORKSPACE_"
#: A workspace name: letters, digits, ``_`` and ``-`` (what fits in an environment variable's name).
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class Workspace:
    """``name`` (lower case), member ``paths`` (absolute, as given: a member may be missing) and ``source``
    (``env`` or ``registry``)."""

    name: str
    paths: tuple[str, ...]
    source: str
    error: str = ""  # why an environment value could not be read (then ``paths`` is empty)


def parse_paths(value: str) -> list[str]:
    """A ``WORKSPACE_*`` value as paths: a JSON array of strings, else comma-separated (blanks dropped).

    Raises:
        ValueError: the value starts with ``[`` or ``{`` but is not a JSON array of strings (split
            on commas, it would name folders such as ``["/src/a"``).
    """
    if not value.lstrip().startswith(("[", "{")):
        return [p.strip() for p in value.split(",") if p.strip()]
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise ValueError(f"not valid JSON ({err})") from None
    if not (isinstance(parsed, list) and all(isinstance(p, str) for p in parsed)):
        raise ValueError("not a JSON array of path strings")
    return [p.strip() for p in parsed if p.strip()]


def _normalised(path: str) -> str:
    return path.rstrip("/") if is_remote(path) else os.path.abspath(os.path.expanduser(path))


def registry_path() -> Path:
    """``$CODII_SQL_HOME/workspaces.json``: ``{name: [path, ...]}``."""
    return home() / "workspaces.json"


def _read_registry() -> dict[str, list[str]]:
    try:
        data = json.loads(registry_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise UsageError(f"{registry_path()} cannot be read ({err})", "fix or delete it") from None
    if not isinstance(data, dict):
        raise UsageError(f"{registry_path()} is not a JSON object of workspaces", "fix or delete it")
    return {str(k).lower(): [str(p) for p in v] for k, v in data.items() if isinstance(v, list)}


def workspaces() -> dict[str, Workspace]:
    """Every workspace by name: the registry's, then the environment's over them."""
    out = {name: Workspace(name, tuple(paths), "registry") for name, paths in _read_registry().items()}
    for key, value in os.environ.items():
        if key.upper().startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX) and value.strip():
            name = key[len(ENV_PREFIX):].lower()
            try:
                out[name] = Workspace(name, tuple(_normalised(p) for p in parse_paths(value)), "env")
            except ValueError as err:
                out[name] = Workspace(name, (), "env", f"{key} is {err}: set it to PATH,PATH or a JSON array "
                                                        'such as ["/src/a", "/src/b"]')
    return dict(sorted(out.items()))


def get_workspace(name: str) -> Workspace:
    """The workspace called ``name`` (case-insensitive).

    Raises:
        UsageError: none of that name (the message lists the known ones), or it has no members.
    """
    found = workspaces().get(name.strip().lower())
    if found is None:
        known = ", ".join(workspaces()) or "none yet"
        raise UsageError(f"no workspace {name!r} (known: {known})", f"define it with `codii-sql workspace add {name} "
                         f"PATH...` or WORKSPACE_{name.upper()}=PATH,PATH")
    if found.error:
        raise UsageError(found.error)
    if not found.paths:
        fix = (f"set WORKSPACE_{found.name.upper()} to PATH,PATH or a JSON array of paths" if found.source == "env"
               else f"`codii-sql workspace add {found.name} PATH...`")
        raise UsageError(f"workspace {found.name!r} has no members", fix)
    return found


def add_paths(name: str, paths: list[str]) -> Workspace:
    """Add ``paths`` (made absolute) to the registry's workspace ``name``, creating it: codebase folders, or
    index files (``.db``: an export, a shard; a search reads them as a workspace given by variable did).

    A folder that does not exist (yet) is added: a search notes it as missing.

    Raises:
        UsageError: a bad name, no path given, or a path that is a file but no index file.
        StorageError: a ``.db`` that is not a codii-sql index.
    """
    key = _checked_name(name)
    if not paths:
        raise UsageError("no folder to add", "codii-sql workspace add NAME PATH...")
    files = [p for p in paths if os.path.exists(p) and not os.path.isdir(p) and not is_index_file(p)]
    if files:
        raise UsageError(f"{files[0]} is a file", "a workspace member is a codebase's root folder or an index file "
                                                  "(.db)")
    for p in filter(is_index_file, paths):
        index_file(p)  # a .db that is no index (a new user's was added, and only `workspace list` said so) raises
    with _registry_lock():
        data = _read_registry()
        members = data.setdefault(key, [])
        members.extend(p for p in (_normalised(p) for p in paths) if p not in members)
        _write_registry(data)
    return Workspace(key, tuple(members), "registry")


def remove(name: str, paths: list[str] | None = None) -> Workspace | None:
    """Remove ``paths`` from the registry's workspace ``name``, or the whole workspace when none are
    given; returns what is left (None when it is gone).

    Raises:
        UsageError: the registry has no such workspace (one from the environment is not removed here),
            or a path is not one of its members (nothing is removed then).
    """
    key = _checked_name(name)
    with _registry_lock():
        data = _read_registry()
        if key not in data:
            where = " (it comes from the environment: unset WORKSPACE_" + key.upper() + ")" \
                if key in workspaces() else ""
            raise UsageError(f"the registry has no workspace {key!r}{where}")
        if paths:
            gone = {_normalised(p) for p in paths}
            strangers = sorted(gone - set(data[key]))
            if strangers:
                raise UsageError(f"{strangers[0]} is not a member of workspace {key!r}",
                                 "`codii-sql workspace list` shows them")
            data[key] = [p for p in data[key] if p not in gone]
        else:
            del data[key]
        _write_registry(data)
    return Workspace(key, tuple(data[key]), "registry") if key in data else None


def _checked_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise UsageError(f"workspace names hold letters, digits, '_' and '-' only, not {name!r}")
    return name.lower()


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Hold the registry's lock for a read-modify-write.

    Raises:
        StorageError: the registry's folder cannot be written (read-only, full).
    """
    try:
        registry_path().parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(registry_path()) + ".lock", timeout=10):
            yield
    except OSError as err:
        raise StorageError(f"cannot write the workspace registry in {registry_path().parent} ({err.strerror or err})",
                           "set CODII_SQL_HOME to a writable folder, or name the workspace in a WORKSPACE_<NAME> "
                           "variable instead") from None


def _write_registry(data: dict[str, list[str]]) -> None:
    """Write the registry through a temporary file: a kill never leaves half a JSON file."""
    path = registry_path()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def missing_member(path: str, err: CodiiError, workspace: str | None = None) -> Note:
    """Why the member ``path`` (of ``workspace``) is not searched, :meth:`Codebase.open` having
    refused it with ``err``: a folder that is gone says how to drop it, not to "pass the root
    folder of a codebase"."""
    if not os.path.exists(path):
        # `workspace remove` refuses a workspace of a variable: that variable is what drops it
        variable = f"{ENV_PREFIX}{workspace.upper()}" if workspace and f"{ENV_PREFIX}{workspace.upper()}" in os.environ \
            else None
        return Note("member", "the folder is gone", Remedy("drop_member", {
            "root": path, "workspace": workspace or "NAME", "variable": variable,
            "where": variable or f"the workspace {workspace or 'NAME'}"}), path)
    return Note.of("member", err, path)


def describe(ws: Workspace, *, check_stale: bool = True) -> dict:
    """``{"name", "source", "members": [{"codebase", "status", "files", "chunks", "size_bytes", ...}]}``;
    a member's status is that of :func:`status` (indexed, stale, indexing, failed, not_indexed;
    damaged with a ``note`` saying what replaces it), ``failed`` with a ``note`` for an index that
    cannot be read, or ``missing`` for a folder that is not there. Each folder is listed once."""
    members, seen = [], set()
    for path in ws.paths:
        if is_remote(path):  # another server's: its own status is its /healthz
            members.append({"codebase": path, "status": "remote"})
            continue
        try:
            cb = index_file(path) if is_index_file(path) else Codebase.open(path)
        except CodiiError as err:
            note = missing_member(path, err, ws.name)
            members.append({"codebase": path, "status": "missing", "note": note.worded(hint_text)})
            continue
        if cb.shown in seen:  # two spellings of one folder
            continue
        seen.add(cb.shown)
        try:
            st = status(cb, check_stale=check_stale)
        except CodiiError as err:  # a damaged index: this member fails, the others still report
            members.append({"codebase": cb.shown, "status": "failed", "note": str(err)})
            continue
        members.append({"codebase": cb.shown, "status": st["status"],
                        **{k: st[k] for k in ("files", "chunks", "size_bytes", "vectors") if k in st},
                        **({"note": f"{st['error']}: {hint_text(st['hint'])}"} if st["status"] == "damaged" else {})})
    return {"name": ws.name, "source": ws.source, "members": members, **({"note": ws.error} if ws.error else {})}
