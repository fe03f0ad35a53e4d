"""The Merkle tree of a codebase: file hashes roll up into directory hashes; a change rehashes only the folders above it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Node:
    """One file or directory. ``path`` is relative POSIX, the root is ``""``; ``parent`` is None for the root."""

    path: str
    parent: str | None
    is_dir: bool
    hash: str


def parent_of(path: str) -> str:
    """``"a/b/c.py"`` -> ``"a/b"``; ``"c.py"`` -> ``""`` (the root)."""
    return path.rpartition("/")[0]


def dir_hash(children: list[tuple[str, bool, str]]) -> str:
    """sha256 hex over the sorted ``(name, is_dir, hash)`` of a directory's children.

    Names are part of the hash, so a rename changes every hash up to the root even when
    the content is the same (as in git's tree objects).
    """
    h = hashlib.sha256()
    for name, is_dir, child in sorted(children):
        h.update(f"{name}\0{'d' if is_dir else 'f'}\0{child}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


class Tree:
    """A mutable Merkle tree: set or remove file hashes, then :meth:`flush` rehashes only dirty directories.

    Args:
        nodes: an existing tree (``{path: Node}``, e.g. the rows of ``merkle_nodes``), or None
            for an empty codebase.
    """

    def __init__(self, nodes: dict[str, Node] | None = None):
        self.nodes: dict[str, Node] = dict(nodes or {})
        self.kids: dict[str, set[str]] = {}
        for node in self.nodes.values():
            if node.parent is not None:
                self.kids.setdefault(node.parent, set()).add(node.path)
        self._dirty: set[str] = set() if "" in self.nodes else {""}

    def set_file(self, path: str, digest: str | None) -> None:
        """Record file ``path`` with content sha256 ``digest``, or remove it when ``digest`` is None."""
        parent = parent_of(path)
        if digest is None:
            # A folder that took the file's name (written before the file's removal) stays.
            node = self.nodes.get(path)
            if node is not None and not node.is_dir:
                del self.nodes[path]
                self.kids.get(parent, set()).discard(path)
        else:
            self.nodes[path] = Node(path, parent, False, digest)
            self.kids.setdefault(parent, set()).add(path)
        self._dirty.add(parent)

    def flush(self) -> tuple[list[Node], list[str]]:
        """Rehash every dirty directory bottom-up; empty directories (not the root) disappear.

        Returns:
            (directory nodes to upsert, directory paths to delete) since the last flush, for
            ``merkle_upsert`` / ``merkle_delete``; file nodes are written by the caller with
            their file row.
        """
        dirty: set[str] = set()
        for d in self._dirty:
            while True:
                dirty.add(d)
                if not d:
                    break
                d = parent_of(d)
        upserts: list[Node] = []
        deletes: list[str] = []
        for d in sorted(dirty, key=lambda p: p.count("/") + (p != ""), reverse=True):
            kids = self.kids.get(d, set())
            parent = parent_of(d) if d else None
            if d and not kids:
                self.kids.pop(d, None)
                if d in self.nodes and not self.nodes[d].is_dir:
                    continue  # a file took the emptied folder's name: it is its own node
                self.nodes.pop(d, None)
                self.kids.get(parent, set()).discard(d)
                deletes.append(d)
                continue
            digest = dir_hash([(k.rpartition("/")[2], self.nodes[k].is_dir, self.nodes[k].hash) for k in kids])
            self.nodes[d] = Node(d, parent, True, digest)
            if parent is not None:
                self.kids.setdefault(parent, set()).add(d)
            upserts.append(self.nodes[d])
        self._dirty.clear()
        return upserts, deletes

    @property
    def root_hash(self) -> str:
        """The root directory's hash (call :meth:`flush` first)."""
        return self.nodes[""].hash


def build(file_hashes: dict[str, str]) -> Tree:
    """The whole tree for ``{relative path: content sha256}``; an empty codebase still has a root."""
    tree = Tree()
    for path, digest in file_hashes.items():
        tree.set_file(path, digest)
    tree.flush()
    return tree
