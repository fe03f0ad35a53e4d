"""What a build's scan saw, kept beside the index: a later check that finds every stat as it was knows a
build would change nothing, without walking the tree again.

A scan's answer depends on the folders' listings (a file added, removed or renamed changes its
folder's mtime), the listed files' sizes and change times (:func:`~codii_sql.paths.changed_ns`),
the files it stat'ed but left out for their size or a failed stat, the rule files it read or looked
for (ignore and attribute files at every level, ``.codii.yaml``, Git's exclude, config and index
files), and the rules it was given. :class:`ScanStats` records all of them as a scan runs; the file
:func:`save` writes holds them, and the scan's whole answer, with the index state they were read for
(``key``). :func:`unchanged` stats them all again (the kernel: ~92k stats, against a walk that matches
every entry against the ignore rules, docs/benchmarks.md "Kernel"). Any doubt answers False, and the
caller walks. :func:`load` gives the answer back, for a watcher that knows which paths changed since
(:func:`~.walk.rescan`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import marshal
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import changed_ns
from ..storage.store import Store
from .attributes import Attributes
from .scanned import ScanResult, ScanStats, SourceFile, signature

if TYPE_CHECKING:  # a build's plan: the check that reads the record loads no build stage
    from .plan import Plan

#: Bumped when the file's layout changes: an older one is not read (the next build rewrites it). 2 added
#: the scan's walked folders, skips and attribute files.
FORMAT = 2
#: Nanoseconds before the scan's start within which a recorded time proves nothing: a file written
#: again within the same timestamp tick as it was stat'ed keeps its mtime (Git's "racily clean"
#: entries). Linux stamps files from a clock that ticks every 1-10 ms; FAT keeps 2 s. Such an entry
#: sends the check to the walk until a build's later scan records it again.
RACY_NS = 2_000_000_000
#: Reasons a listed file was not indexed that a later read may not repeat.
TRANSIENT_SKIPS = ("vanished", "unreadable", "not-regular-file")


def keep(store: Store, plan: Plan, failed: int) -> None:
    """Keep what ``plan``'s scan saw beside the index, for the state just committed: a search's update
    check then stats it instead of walking. Not after ``failed`` files or one that could not be read
    for a passing reason (vanished, unreadable): the next build tries them again."""
    path = sidecar(store.path)
    if failed or any(plan.skipped_after_read.get(r) for r in TRANSIENT_SKIPS):
        path.unlink(missing_ok=True)
        return
    save(path, plan.scanned, state_key(store, plan.rules))


def sidecar(db_path: Path) -> Path:
    """Where the stats of the index at ``db_path`` are kept: beside it (``clear`` removes it)."""
    return db_path.with_name(db_path.name + ".scan")


def state_key(store: Store, rules: dict) -> str:
    """What a saved scan stands for: the index's committed state (its Merkle root and when its last
    build finished; a build of another process changes them) and the scan rules (:func:`~.config.scan_rules`)."""
    meta = store.meta()
    state = {k: meta.get(k) for k in ("status", "finished_at", "merkle_root", "chunker_version", "files")}
    return json.dumps({"index": state, "rules": rules}, sort_keys=True, default=str)


def save(path: Path, result: ScanResult, key: str) -> None:
    """Write what a scan saw, and answered, to ``path`` (replaced whole, so a reader never sees half of
    it), for the index state and scan rules ``key`` names. A file that cannot be written is left out:
    the check then walks, as without it."""
    stats = result.stats
    by_folder: dict[str, list[tuple[str, int, int]]] = {rel: [] for rel in stats.folders}
    for f in result.files:
        folder, _, name = f.path.rpartition("/")
        by_folder.setdefault(folder + "/" if folder else "", []).append((name, f.size, f.mtime_ns))
    data = marshal.dumps({"format": FORMAT, "key": key, "taken_ns": stats.taken_ns, "folders": stats.folders,
                          "files": by_folder, "others": stats.others, "rules": stats.rules, "dirs": sorted(result.dirs),
                          "skipped": result.skipped_paths, "attributes": result.attributes.files})
    part = path.with_name(path.name + ".part")
    try:
        part.write_bytes(data)
        os.replace(part, path)
    except OSError:
        with contextlib.suppress(OSError):
            part.unlink()


def saved_scan(store: Store, rules: dict) -> ScanResult | None:
    """The scan kept beside ``store``'s index for its committed state and ``rules`` (:func:`load`), or None."""
    return load(sidecar(store.path), state_key(store, rules))


def load(path: Path, key: str | None) -> ScanResult | None:
    """The scan :func:`save` kept at ``path`` for ``key`` (for any key when None), as :func:`~.walk.scan`
    answered it, but for the rules that hid every file (``ignored_by``: none is kept); None when there is no
    such file or it cannot be read. Loading the kernel's (86k files) takes ~0.1 s, against ~1 s to walk."""
    try:
        saved = marshal.loads(path.read_bytes())
        if saved.get("format") != FORMAT or key is not None and saved.get("key") != key:
            return None
        files = [SourceFile(folder + name, size, changed) for folder, listed in saved["files"].items()
                 for name, size, changed in listed]
        files.sort(key=lambda f: f.path)
        skipped = [tuple(entry) for entry in saved["skipped"]]
        return ScanResult(files, collections.Counter(reason for _, reason in skipped), skipped, set(saved["dirs"]),
                          Attributes([tuple(entry) for entry in saved["attributes"]]), collections.Counter(),
                          ScanStats(saved["taken_ns"], saved["folders"], saved["others"], saved["rules"]))
    except (OSError, ValueError, EOFError, TypeError, KeyError, IndexError, AttributeError):
        return None


def unchanged(path: Path, root: Path, key: str) -> bool:
    """Whether every stat the scan saved at ``path`` (:func:`save`) for ``key`` is as it was under
    ``root``: then a scan would list the same files with the same stats, and a build would change
    nothing. False when there is no such file, it was saved for another key, or any entry differs or
    was recorded within :data:`RACY_NS` of its scan. Each folder is opened once (never through a
    link) and its files stat'ed by name from it: a whole path per stat cost 3.2 us a file on the
    kernel, 86k of them."""
    try:
        saved = marshal.loads(path.read_bytes())
        if saved.get("format") != FORMAT or saved.get("key") != key:
            return False
        racy = saved["taken_ns"] - RACY_NS
        for p, sig in (*saved["others"].items(), *saved["rules"].items()):  # rules' paths are absolute
            if (sig is not None and max(sig[1], sig[2]) >= racy) or signature(os.path.join(root, p)) != sig:
                return False
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            folders, files = saved["folders"], saved["files"]
            return all(_folder_unchanged(root_fd, rel, folders.get(rel), files.get(rel, ()), racy)
                       for rel in folders.keys() | files.keys())  # a file's folder unrecorded: no proof
        finally:
            os.close(root_fd)
    except (OSError, ValueError, EOFError, TypeError, KeyError, IndexError, AttributeError):
        return False


def _folder_unchanged(root_fd: int, rel: str, sig: tuple | None, files, racy: int) -> bool:
    """Whether the folder ``rel`` has its signature ``sig`` and its ``files`` ``(name, size, changed_ns)``
    theirs, none of them recorded after ``racy``."""
    if sig is None or max(sig[1], sig[2]) >= racy:
        return False  # unreadable then (it may be now), or changed as the scan ran
    try:
        fd = os.open(rel or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != tuple(sig):
            return False
        for name, size, changed in files:
            if changed >= racy:
                return False
            st = os.stat(name, dir_fd=fd)
            if st.st_size != size or changed_ns(st) != changed:
                return False
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
