"""Writing a batch of prepared files (chunk, FTS5, file, text and trigram, definition, Merkle rows; known vectors or queue rows) in one transaction."""

from __future__ import annotations

import json
import time

from ..storage.store import Store
from ..text import unpack_text
from . import merkle, roles
from .attributes import Attributes
from .prepare import Prepared

#: Embedding order of queued chunks by file role (lower first): the code people search for
#: before its tests and docs, generated and vendored files after, data (``.po``, ``.csv``) last.
VECTOR_PRIORITY = {"source": 0, "test": 1, "docs": 2, "config": 3, "changelog": 4, "generated": 4, "vendored": 4,
                   "data": 5}


def write_files(store: Store, tree: merkle.Tree, files: list[Prepared], keys: list[list[str]],
                known: dict[str, bytes], attributes: Attributes, copies: frozenset[str] = frozenset()) -> int:
    """Replace the rows of ``files`` (chunks, FTS5, file, text and trigram, definition and Merkle rows, and the
    vectors ``known`` holds) in the caller's transaction; queue the chunks whose vector is not known. Roles come
    from the path, the linguist marks of ``attributes``, the file's own content flag and ``copies`` (compiled
    from a TypeScript source of the tree: :func:`~.roles.compiled_copies`).

    ``keys[i][j]`` is the text key (:func:`~codii_sql.models.cache.text_key`) of chunk ``j`` of
    ``files[i]``; ``known`` maps keys to float32 vector blobs. Each table gets one bulk statement
    per batch (``executemany``, FTS5 by id range) instead of one statement per chunk, which made
    the write phase the slowest stage of a build (issue 4). Returns the number of chunks queued.
    """
    delete_old_rows(store, [p.path for p in files])
    # Ids chosen here as SQLite would (max + 1: chunks.id is not AUTOINCREMENT), so the chunk,
    # FTS5 and vector rows of the whole batch go in as a few bulk statements.
    first = next_id = store.value("chunk_next_id")
    chunks, vec_rows, queued, nodes, texts, defined = [], [], [], [], [], []
    for p, file_keys in zip(files, keys, strict=True):
        role = roles.classify(p.path, attributes.marks(p.path), p.generated or p.path in copies)
        file_id = store.value("file_upsert", {
            "path": p.path, "size": p.size, "mtime_ns": p.mtime_ns, "hash": p.hash, "language": p.language,
            "role": role, "chunk_count": len(p.chunks), "indexed_at": time.time()})
        texts.append({"id": file_id, "blob": p.text, "text": unpack_text(p.text)})
        defined += [{"file_id": file_id, **d} for d in p.definitions]
        for c, subtokens, key in zip(p.chunks, p.subtokens, file_keys, strict=True):
            chunks.append({"id": next_id, "file_id": file_id, "path": p.path, "start_line": c.start_line,
                           "end_line": c.end_line, "start_byte": c.start_byte, "end_byte": c.end_byte,
                           "kind": c.kind, "symbol": c.symbol, "language": p.language, "content": c.content,
                           "subtokens": subtokens, "text_hash": key})
            if key in known:
                vec_rows.append({"id": next_id, "embedding": known[key]})
            else:
                queued.append({"id": next_id, "priority": VECTOR_PRIORITY.get(role, 0)})
            next_id += 1
        nodes.append({"path": p.path, "parent": merkle.parent_of(p.path), "is_dir": 0, "hash": p.hash})
        tree.set_file(p.path, p.hash)
    store.many("chunk_insert_with_id", chunks)
    store.run("chunks_insert_fts_range", {"first": first, "last": next_id - 1})
    store.many("chunk_insert_vec", vec_rows)
    store.many("vector_queue_add", queued)
    store.many("merkle_upsert", nodes)
    store.many("file_text_insert", texts)
    store.many("definition_insert", defined)
    return len(queued)


def delete_old_rows(store: Store, paths: list[str]) -> None:
    """Delete the chunk rows of those ``paths`` that are indexed already.

    New files skip the delete statements (a cold build has nothing to delete).
    """
    present = store.rows("files_present", {"paths": json.dumps(paths)})
    for path in sorted(r["path"] for r in present):
        delete_file_rows(store, path)


def delete_file_rows(store: Store, path: str) -> None:
    """Delete the chunk, FTS5, vector, queue, text, trigram and definition rows of one file (not its file row)."""
    old = store.row("file_text_of_path", {"path": path})
    if old is not None:
        store.run("file_text_delete", {"id": old["id"], "text": unpack_text(old["text"])})
    ids = [{"id": r["id"]} for r in store.rows("chunk_ids_of_file", {"path": path})]
    store.run("chunks_delete_fts", {"path": path})
    store.many("vectors_delete", ids)
    store.run("chunks_delete", {"path": path})
    store.run("definitions_delete", {"path": path})


def remove_files(store: Store, tree: merkle.Tree, paths: list[str]) -> None:
    """Delete every row of the files at ``paths`` and their Merkle nodes, in the caller's transaction."""
    for path in paths:
        delete_file_rows(store, path)
        store.run("file_delete", {"path": path})
        node = tree.nodes.get(path)
        if node is not None and not node.is_dir:  # else a folder of that name was written already
            store.run("merkle_delete", {"path": path})
        tree.set_file(path, None)
    flush_tree(store, tree)


def flush_tree(store: Store, tree: merkle.Tree) -> None:
    """Write the directory nodes :meth:`merkle.Tree.flush` rehashed (and delete emptied ones)."""
    upserts, deletes = tree.flush()
    for path in deletes:
        store.run("merkle_delete", {"path": path})
    store.many("merkle_upsert", [_node_params(n) for n in upserts])


def _node_params(n: merkle.Node) -> dict:
    return {"path": n.path, "parent": n.parent, "is_dir": int(n.is_dir), "hash": n.hash}
