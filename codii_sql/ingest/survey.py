"""What a build would index, without writing: files and chunks by language and role, skips, folders, texts to embed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..models.cache import EmbeddingCache, text_key
from ..models.wordpiece import count_tokens
from ..storage.store import Store
from . import roles
from .config import load_config
from .prepare import prepared_files
from .vectors import known_vectors
from .walk import scan

#: Texts of the survey kept for timing the model on (spread over the length distribution).
SAMPLE_TEXTS = 48
#: Texts tokenized at a time to count word pieces.
COUNT_SLICE = 1024
#: Folders listed, by chunk count.
TOP_FOLDERS = 12


@dataclass
class Survey:
    """The outcome of :func:`survey`. Counters of ``(files, chunks)`` pairs are dicts of two-item lists.

    Attributes:
        by_language, by_role: ``{name: [files, chunks]}``.
        folders: ``{folder: [files, chunks]}`` for the first two levels of the tree ("" for the root's files).
        skipped: reason -> files (scan and read reasons; ``failed`` for a file the chunker could not read).
        new_texts: distinct chunk texts neither the index nor the shared cache holds a vector for.
        new_tokens: their word pieces, each cut at the model's limit.
        sample: up to :data:`SAMPLE_TEXTS` of them, evenly spread from the shortest to the longest.
    """

    files: int = 0
    chunks: int = 0
    by_language: dict[str, list[int]] = field(default_factory=dict)
    by_role: dict[str, list[int]] = field(default_factory=dict)
    folders: dict[str, list[int]] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    new_texts: int = 0
    new_tokens: int = 0
    sample: list[str] = field(default_factory=list)

    def largest_folders(self) -> list[dict]:
        """The :data:`TOP_FOLDERS` folders holding the most chunks: ``[{"path", "files", "chunks"}]``."""
        top = sorted(self.folders.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_FOLDERS]
        return [{"path": path or ".", "files": f, "chunks": c} for path, (f, c) in top]


def survey(root: Path, rules: dict, *, store: Store | None, cache: EmbeddingCache | None, model_id: str,
           max_tokens: int) -> Survey:
    """Scan, read and chunk every file under ``root`` as a build would (``rules``: scan arguments),
    count what it finds, and find the chunk texts the model would embed. Writes nothing.

    ``store`` (an existing index) and ``cache`` supply known vectors; ``max_tokens`` caps each text's
    word pieces as the model does. Chunk sizes and workers come from ``.codii.yaml``, as a build's do.

    Raises:
        ValueError: ``.codii.yaml`` is malformed.
    """
    out = Survey()
    config = load_config(root)
    result = scan(root, **rules)
    out.skipped.update(result.skipped)
    keys: dict[str, str] = {}
    for p in prepared_files(root, result.files, rules["max_file_bytes"], window=1024, sizes=config.chunk_sizes,
                            workers=config.workers or 0):
        if p.skip or p.error:
            out.skipped[p.skip or "failed"] += 1
            continue
        out.files += 1
        out.chunks += len(p.chunks)
        parts = p.path.split("/")[:-1]
        role = roles.classify(p.path, result.attributes.marks(p.path), p.generated)
        for counter, name in ((out.by_language, p.language or "(none)"), (out.by_role, role),
                              *((out.folders, "/".join(parts[:depth])) for depth in {min(1, len(parts)), min(2, len(parts))})):
            counts = counter.setdefault(name, [0, 0])
            counts[0] += 1
            counts[1] += len(p.chunks)
        for c in p.chunks:
            keys.setdefault(text_key(model_id, c.content), c.content)
    known = known_vectors(store, cache, list(keys)) if store is not None else (
        cache.get(list(keys)) if cache is not None else {})
    new = [text for key, text in keys.items() if key not in known]
    # In slices: the tokenizer's encodings of 76k texts at once held 1.2 GB (Django 5.1.4).
    lengths = [min(n, max_tokens) for start in range(0, len(new), COUNT_SLICE)
               for n in count_tokens(new[start:start + COUNT_SLICE])]
    out.new_texts, out.new_tokens = len(new), sum(lengths)
    by_length = sorted(range(len(new)), key=lengths.__getitem__)
    step = max(1, len(by_length) // SAMPLE_TEXTS)
    out.sample = [new[i] for i in by_length[::step][:SAMPLE_TEXTS]]
    return out
