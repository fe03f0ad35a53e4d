"""Which processes watch a codebase: one small JSON file per watching process beside the index.

``<index>.db.watch/<pid>.json`` holds ``{"pid", "started_at", "by"}``, and ``"fresh"`` (with ``"at"``,
epoch seconds) once its watcher has committed every change it was told of; a file whose process is
gone is ignored and removed when read, so a killed watcher leaves nothing that misleads.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..processes import alive
from ..codebase import Codebase


#: Seconds between a waiting watcher's notes that it is still fresh; its word is trusted for
#: :data:`TRUST_SECONDS` after the last one. A watcher stopped (Ctrl-Z, SIGSTOP) or hung said "fresh" for
#: ever, and every CLI search, grep and symbol answered from the index it left (a new user).
HEARTBEAT_SECONDS = 2.0
TRUST_SECONDS = 5 * HEARTBEAT_SECONDS


def _dir(codebase: Codebase) -> Path:
    return codebase.db_path.with_name(codebase.db_path.name + ".watch")


#: This process's notes (path -> what it says): written again when a ``clear`` of the index removed them.
_NOTES: dict[Path, dict] = {}


@contextlib.contextmanager
def registered(codebase: Codebase, by: str) -> Iterator[None]:
    """Say, for the ``with`` block, that this process watches ``codebase`` (``by``: ``"cli"``, ``"mcp"``
    or ``"http"``). Failing to write the note (a read-only index folder) only leaves status silent."""
    path = _dir(codebase) / f"{os.getpid()}.json"
    _NOTES[path] = {"pid": os.getpid(), "started_at": time.time(), "by": by}
    _write(path)
    try:
        yield
    finally:
        _NOTES.pop(path, None)
        with contextlib.suppress(OSError):
            path.unlink()


def mark(codebase: Codebase, fresh: bool) -> None:
    """Say in this process's note whether its watcher has committed every change of ``codebase`` it
    was told of (``fresh``): a search may then skip its own walk of the tree (:func:`kept_fresh`).
    A process that did not register (a watcher used alone) or cannot write says nothing."""
    path = _dir(codebase) / f"{os.getpid()}.json"
    if path in _NOTES:
        _NOTES[path] |= {"fresh": fresh, "at": time.time()}
        _write(path)


def renote(codebase: Codebase) -> None:
    """Write this process's note of ``codebase`` again if it is gone: a ``clear`` of the index removes the
    notes, and its watcher, still running, went unseen (status said nobody watched) until it stopped."""
    path = _dir(codebase) / f"{os.getpid()}.json"
    if path in _NOTES and not path.exists():
        _write(path)


def _write(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(".part")  # not *.json: a reader never sees half a note
        part.write_text(json.dumps(_NOTES[path]))
        os.replace(part, path)


def kept_fresh(codebase: Codebase) -> dict | None:
    """A live watcher of ``codebase`` that says it has committed every change it was told of, and said so
    within :data:`TRUST_SECONDS` (:func:`watchers` tells which), else None.

    Its word holds from the change to the event that tells it, which watchfiles groups for 50 ms after
    the last change (service/watching.py STEP_MS): a search that trusts it may miss an edit made
    that recently, as a search running just before the edit would."""
    return next((w for w in watchers(codebase) if w.get("fresh") is True), None)


def watchers(codebase: Codebase) -> list[dict]:
    """The live watchers of ``codebase``: ``[{"pid", "started_at" (epoch s), "by", ["fresh", "at"]}]``, by pid;
    ``fresh`` is false for a watcher silent past :data:`TRUST_SECONDS` (stopped or hung: its word is stale)."""
    found, now = [], time.time()
    folder = _dir(codebase)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            info = json.loads(path.read_text())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive(pid):
            if info.get("fresh") is True and not 0 <= now - float(info.get("at") or 0) <= TRUST_SECONDS:
                info["fresh"] = False
            found.append(info)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found

