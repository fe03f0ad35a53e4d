"""What a build would do: scan, hash the files whose stat changed, compare with the indexed hashes. Writes nothing."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from ..storage.store import Store
from . import merkle
from .attributes import Attributes
from .read import read_file
from .reclassify import stale_roles
from .walk import ScanResult, SourceFile, rescan, scan

#: ``files.size`` of a file marked for re-chunking (``build --force``, a chunker change): it
#: never equals a real size, so the file is read, and the plan re-indexes it even if unchanged.
REINDEX_SIZE = -1


@dataclass
class Plan:
    """What a build would do, from a scan and the hashes of changed files (see :func:`make_plan`)."""

    files: dict[str, SourceFile]
    skipped: Counter
    max_file_bytes: int
    skipped_after_read: Counter = field(default_factory=Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) of both counters
    touched: list[SourceFile] = field(default_factory=list)
    old: merkle.Tree | None = None
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reindexed: list[str] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)
    attributes: Attributes = field(default_factory=Attributes)
    reclassify: bool = False  # the stored roles came from other rules or attribute files
    hidden_by: list[dict] = field(default_factory=list)  # ScanResult.hiding_rules: why nothing is left
    scanned: ScanResult = field(default_factory=lambda: ScanResult([]))  # the scan's answer (scan_stats.py keeps it)
    rules: dict = field(default_factory=dict)  # the scan rules it ran with

    @property
    def changed(self) -> bool:
        """True when a build would write anything."""
        return bool(self.added or self.modified or self.removed or self.reindexed or self.reclassify)


def make_plan(store: Store, root: Path, rules: dict, progress: Callable[[str, int, int], None], *,
              saved: ScanResult | None = None, changed: Collection[str] | None = None) -> Plan:
    """Scan ``root`` with ``rules`` (:func:`~codii_sql.ingest.config.scan_rules`) and hash without writing:
    what a build would add, modify, remove and re-index.

    Reads only files whose size or mtime differ from their indexed row. Also the basis of
    ``status`` = stale. ``progress(phase, done, total)`` hears the ``scan`` and ``hash`` phases.
    With ``saved`` (the last scan's answer, for the indexed state) and ``changed`` (every path changed
    since), the scan looks at those paths alone when it can (:func:`~.walk.rescan`).
    """
    t = time.perf_counter()
    result = rescan(root, saved, changed, **rules) if saved is not None and changed is not None else None
    result = result or scan(root, **rules, on_progress=lambda found: progress("scan", found, None))
    progress("scan", len(result.files), len(result.files))
    plan = Plan(files={f.path: f for f in result.files}, skipped=Counter(result.skipped),
                max_file_bytes=rules["max_file_bytes"], skipped_paths=list(result.skipped_paths),
                attributes=result.attributes, hidden_by=result.hiding_rules(), scanned=result, rules=rules,
                reclassify=stale_roles(store.meta(), result.attributes))
    plan.seconds["scan"] = time.perf_counter() - t
    t = time.perf_counter()
    stored = {r["path"]: r for r in store.rows("files_all")}
    hashes = _hashes(root, result.files, stored, plan, progress)
    root_hash = store.value("merkle_root")
    if root_hash is not None and not plan.touched and _unchanged(hashes, stored):
        # The files and their hashes are the indexed ones: so is the Merkle tree, and only its root is
        # read (building and diffing its ~100k nodes cost a no-change kernel update ~1 s).
        plan.old = merkle.Tree({"": merkle.Node("", None, True, root_hash)})
        plan.seconds["hash"] = time.perf_counter() - t
        return plan
    plan.added = sorted(p for p in hashes if p not in stored)
    plan.removed = sorted(p for p in stored if p not in hashes)
    plan.modified = sorted(p for p, digest in hashes.items() if p in stored and stored[p]["hash"] != digest)
    changed = {*plan.added, *plan.modified}
    plan.reindexed = sorted(p for p, r in stored.items()
                            if r["size"] == REINDEX_SIZE and p in hashes and p not in changed)
    plan.old = _tree_near(store, [*plan.added, *plan.modified, *plan.removed, *plan.reindexed])
    plan.seconds["hash"] = time.perf_counter() - t
    return plan


def _tree_near(store: Store, paths: list[str]) -> merkle.Tree:
    """The part of the stored Merkle tree that writing or removing the files at ``paths`` rehashes: the
    folders above them and those folders' children (:meth:`merkle.Tree.flush` hashes a folder from all
    its children). The files' own leaves are their ``files`` rows' hashes, so the changed files are
    found by comparing those (above), and the tree is rehashed along their paths alone: reading and
    rebuilding the whole tree to diff it cost a kernel update (86k files) 0.4-0.7 s of its 2.2 s."""
    folders = {""}
    for path in paths:
        while path:
            path = merkle.parent_of(path)
            if path in folders:
                break
            folders.add(path)
    return merkle.Tree({r["path"]: merkle.Node(r["path"], r["parent"], bool(r["is_dir"]), r["hash"])
                        for r in store.rows("merkle_near", {"folders": json.dumps(sorted(folders))})})


def _unchanged(hashes: dict[str, str], stored: dict) -> bool:
    """True when ``hashes`` (path -> content sha256 of a scan) are exactly the ``stored`` rows' and none
    of those is marked for re-indexing (:data:`REINDEX_SIZE`)."""
    if len(hashes) != len(stored):
        return False
    for path, digest in hashes.items():
        row = stored.get(path)
        if row is None or row["hash"] != digest or row["size"] == REINDEX_SIZE:
            return False
    return True


def _hashes(root: Path, files: list[SourceFile], stored: dict, plan: Plan,
            progress: Callable[[str, int, int], None]) -> dict[str, str]:
    """Content hashes for the Merkle tree; size+mtime equal to the stored row means unchanged (a hint).

    A file whose content is unchanged but whose stat differs goes to ``plan.touched`` (its row
    gets the new stat without re-indexing); one that cannot be read goes to ``skipped_after_read``.
    """
    hashes: dict[str, str] = {}
    need = []
    for f in files:
        row = stored.get(f.path)
        if row is not None and row["size"] == f.size and row["mtime_ns"] == f.mtime_ns:
            hashes[f.path] = row["hash"]
        else:
            need.append(f)
    cap = plan.max_file_bytes
    with cf.ThreadPoolExecutor(max_workers=4) as pool:
        for i, (f, digest) in enumerate(zip(need, pool.map(lambda f: _hash_file(root, f, cap), need))):
            if not digest.startswith("sha256:"):
                plan.skipped_after_read[digest] += 1
                plan.skipped_paths.append((f.path, digest))
                continue
            hashes[f.path] = digest[len("sha256:"):]
            row = stored.get(f.path)
            if row is not None and row["hash"] == hashes[f.path] and row["size"] != REINDEX_SIZE:
                plan.touched.append(f)
            if i % 256 == 0:
                progress("hash", i, len(need))
    if need:  # the phase's last event, as README promises for each (a new user's --json stream had none)
        progress("hash", len(need), len(need))
    return hashes


def _hash_file(root: Path, f: SourceFile, max_file_bytes: int) -> str:
    """``"sha256:<hex>"`` of the file's content, or the reason it cannot be read (:func:`read_file`)."""
    data = read_file(root, f, max_file_bytes=max_file_bytes)
    return data if isinstance(data, str) else "sha256:" + hashlib.sha256(data).hexdigest()


def same_settings(meta: dict, recorded: dict) -> bool:
    """Whether the snapshot ``meta`` holds every value of ``recorded`` (compared as JSON stores them)."""
    return all(json.dumps(meta.get(k)) == json.dumps(v) for k, v in recorded.items())


def nothing_to_do(plan: Plan, meta: dict, options: tuple[list[str], list[str] | None]) -> bool:
    """Whether a build with ``plan`` would change nothing: no file to write, touch, remove or re-derive,
    the same scan options, and the snapshot's counts to report (an update per search or per watched
    event then writes nothing; the watcher needs no read-only scan of its own first)."""
    ignore, exts = options
    return (not plan.changed and not plan.touched and meta.get("files") is not None and meta.get("chunks") is not None
            and list(meta.get("scan_ignore_patterns") or []) == ignore and meta.get("scan_extensions") == exts)
