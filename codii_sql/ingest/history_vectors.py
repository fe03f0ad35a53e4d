"""The history's vector phase: one embedding per commit (its message, touched paths and the start of its diff).

One vector per commit, not per hunk: the model embeds ~10-30 texts/s on 2 cores (NOTES.md), and
the 5,000 commits of the default bound hold about ten times as many hunks (measured on Django:
README "History search"), so per-hunk vectors would take hours; the hunks are searched by BM25.
Runs after the chunks' vector phase under the same vector lock, committing every
:data:`COMMIT_BATCH` commits; a kill resumes from ``history_queue``.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ..errors import EmbeddingFailedError, IndexMismatchError, Remedy
from ..models.cache import EmbeddingCache, text_key
from ..models.embedder import Embedder
from ..storage import widths
from ..storage.store import Store
from .report import Progress

#: Commits embedded per transaction (and per embedder call).
COMMIT_BATCH = 64
#: Hunks whose changed lines join the embedded text, and its length in characters: the model reads
#: at most 256 word pieces (about 1,000 characters of code), so more would only be cut by it.
EMBED_HUNKS = 4
EMBED_CHARS = 1500


def commit_text(subject: str, body: str, files: list[str], diff: str) -> str:
    """The text embedded for a commit: subject, body, touched paths, then the ``+``/``-`` lines of
    its first hunks (context lines say less about the change), cut to :data:`EMBED_CHARS`."""
    changed = [line for line in diff.split("\n") if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    parts = [subject, body, " ".join(files[:20]), "\n".join(changed)]
    return "\n".join(p for p in parts if p.strip())[:EMBED_CHARS]


def embed_history(store: Store, embedder: Embedder, cache: EmbeddingCache | None, progress: Progress) -> int:
    """Embed every queued commit of ``store`` (the caller holds the vector lock); returns how many
    were embedded (not found in the cache). ``progress("history vectors", done, total)``.

    Raises:
        EmbeddingFailedError: the model failed; every batch before it is committed.
        IndexMismatchError: the index holds history vectors of another width.
    """
    counts = store.row("history_counts")
    total, embedded = counts["commits"], 0
    while True:
        rows = store.rows("history_queue_next", {"n": COMMIT_BATCH, "hunks": EMBED_HUNKS})
        if not rows:
            return embedded
        texts = {r["id"]: commit_text(r["subject"], r["body"], json.loads(r["files"]), r["diff"] or "") for r in rows}
        keys = {cid: text_key(embedder.model_id, t) for cid, t in texts.items()}
        found = cache.get(list(set(keys.values()))) if cache is not None else {}
        todo = [cid for cid in texts if keys[cid] not in found]
        if todo:
            found.update(_embedded(embedder, [texts[c] for c in todo], [keys[c] for c in todo], cache))
            embedded += len(todo)
        pending = _commit(store, embedder, rows, {cid: found[keys[cid]] for cid in texts})
        progress("history vectors", total - pending, total)


def _embedded(embedder: Embedder, texts: list[str], keys: list[str], cache: EmbeddingCache | None) -> dict[str, bytes]:
    """``{text key: float32 blob}`` of ``texts``, cached at once.

    Raises:
        EmbeddingFailedError: the model failed.
    """
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    try:
        vecs = embedder.embed([texts[i] for i in order])
    except Exception as err:  # noqa: BLE001 - any model failure stops the phase with what is committed
        ours = isinstance(err, EmbeddingFailedError)
        what = err.what if ours else f"embedding failed: {type(err).__name__}: {err}"
        raise EmbeddingFailedError(f"{what}; the commits embedded so far are kept and the next build resumes "
                                   "the rest", err.hint if ours else None) from err
    fresh = {keys[i]: np.asarray(v, dtype=np.float32).tobytes() for i, v in zip(order, vecs, strict=True)}
    if cache is not None:
        cache.put({k: np.frombuffer(b, dtype=np.float32) for k, b in fresh.items()})
    return fresh


def _commit(store: Store, embedder: Embedder, rows: list[dict], vectors: dict[int, bytes]) -> int:
    """Write the vectors of the commits still queued under the same sha; returns how many wait still."""
    dims = len(next(iter(vectors.values()))) // 4
    with store.transaction():
        fit_history_vec(store, dims, embedder.name)
        wanted = [r["id"] for r in store.rows("history_queue_still_wanted", {"commits": json.dumps(
            [{"id": r["id"], "sha": r["sha"]} for r in rows])})]
        store.many("history_vec_insert", [{"id": cid, "embedding": vectors[cid]} for cid in wanted])
        store.many("history_queue_done", [{"id": cid} for cid in wanted])
        return store.row("history_counts")["pending"]


def history_dims(store: Store) -> int:
    """The width of the stored commit vectors (0 while there is no history_vec table)."""
    found = re.search(r"float\[(\d+)\]", store.value("history_vec_sql") or "")
    return int(found.group(1)) if found else 0


def fit_history_vec(store: Store, dims: int, embedder_name: str) -> None:
    """Make ``history_vec`` ``dims`` wide (inside the caller's transaction): created when absent,
    made again while it holds no vector (a new index's embedder fixed the width since).

    Raises:
        IndexMismatchError: it holds vectors of another width (another model's: a forced build
            with the new model empties it).
    """
    have = history_dims(store)
    if have == dims:
        return
    if have and store.value("history_has_vectors"):
        raise IndexMismatchError(f"the embedder {embedder_name} returns {dims}-dim vectors but the history of "
                                 f"index {store.path.name} holds {have}-dim ones", Remedy("force_build"))
    widths.create_history_vec(store, dims)
