"""Roles of unchanged files re-derived when the role rules (roles.VERSION) or the ``.gitattributes`` change."""

from __future__ import annotations

import concurrent.futures as cf
import json
from pathlib import Path

from ..storage.store import Store
from . import roles
from .attributes import Attributes
from .generated import declares_generated
from .read import read_file
from .scanned import SourceFile
from .write import VECTOR_PRIORITY

#: Threads reading files for their header: the reads wait on the disk, not the CPU.
READ_THREADS = 4


def stale_roles(meta: dict, attributes: Attributes) -> bool:
    """Whether the stored roles were derived by other rules or from other attribute files."""
    return meta.get("roles_version") != roles.VERSION or meta.get("attributes_hash") != attributes.fingerprint


def reclassify(store: Store, root: Path, files: list[SourceFile], attributes: Attributes, max_file_bytes: int,
               copies: frozenset[str] = frozenset()) -> None:
    """Re-derive the role of each indexed file of ``files`` (unchanged since it was written: the
    build writes the others with fresh roles), move its queued chunks to the new role's place,
    and record the rules and attributes used, in one transaction.

    The content flag (:func:`~.generated.declares_generated`) is not stored, so a file whose role
    it may decide is read again (``max_file_bytes`` as in the scan); this happens only when the
    rules or an attribute file change, never on a plain update. ``copies``: the files compiled from a
    TypeScript source of the tree (:func:`~.roles.compiled_copies`), generated.
    """
    indexed = {r["path"] for r in store.rows("files_all")}
    todo = [f for f in files if f.path in indexed]
    marks = [attributes.marks(f.path) for f in todo]
    with cf.ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        found = list(pool.map(lambda f, m: _role(root, f, m, max_file_bytes, f.path in copies), todo, marks))
    with store.transaction():
        store.many("file_set_role", [{"path": f.path, "role": role} for f, role in zip(todo, found, strict=True)])
        store.run("vector_queue_reprioritise", {"priorities": json.dumps(VECTOR_PRIORITY)})
        store.set_meta(roles_version=roles.VERSION, attributes_hash=attributes.fingerprint)


def _role(root: Path, f: SourceFile, marks: dict[str, bool], max_file_bytes: int, copied: bool) -> str:
    """The role of one file (``copied``: compiled from a TypeScript source of the tree, so generated as if it said
    so); its bytes are read only when the content flag would change it."""
    plain = roles.classify(f.path, marks, declared_generated=copied)
    if copied or roles.classify(f.path, marks, declared_generated=True) == plain:
        return plain
    data = read_file(root, f, max_file_bytes=max_file_bytes)
    return roles.classify(f.path, marks, declared_generated=not isinstance(data, str) and declares_generated(data, f.path))
