"""What a build would index, without writing: files and chunks by language and role, skips, folders, texts to embed.

A tree of more than :data:`SAMPLE_FILES` files is walked whole (files, sizes, skips) and only a
random sample of its files is chunked: the chunk counts are then estimates (``estimate``); the
Linux kernel's 86,000 files took 23 minutes and 1.9 GB to chunk whole.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..languages import detect_language
from ..models.cache import EmbeddingCache, text_key
from ..models.wordpiece import count_tokens
from ..storage.store import Store
from . import roles
from .config import load_config
from .prepare import prepared_files
from .vectors import known_vectors
from .walk import SourceFile, scan

#: Texts of the survey kept for timing the model on (spread over the length distribution).
SAMPLE_TEXTS = 48
#: Texts tokenized at a time to count word pieces.
COUNT_SLICE = 1024
#: Folders listed, by chunk count.
TOP_FOLDERS = 12
#: Files chunked at most; a larger tree is estimated from a random sample of this many. At ~15 ms
#: a file on 2 cores (the kernel's whole chunking: 23 min) the sample costs ~8-15 s, which with the
#: walk and the model's timing keeps a dry run of the kernel within 30 s.
SAMPLE_FILES = 600
#: The sample's seed: the same tree gives the same sample, so the same estimate.
SAMPLE_SEED = 25


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
        estimate: None when every file was chunked; else ``{"sample_files", "files"}``: chunks,
            texts and word pieces are estimates from that many of the tree's files (see :func:`survey`).
        hidden_by: the ignore rules that left every path out when no file is left (ScanResult.hiding_rules).
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
    estimate: dict | None = None
    hidden_by: list[dict] = field(default_factory=list)

    def largest_folders(self) -> list[dict]:
        """The :data:`TOP_FOLDERS` folders holding the most chunks: ``[{"path", "files", "chunks"}]``."""
        top = sorted(self.folders.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_FOLDERS]
        return [{"path": path or ".", "files": f, "chunks": c} for path, (f, c) in top]


def survey(root: Path, rules: dict, *, store: Store | None, cache: EmbeddingCache | None, model_id: str,
           max_tokens: int) -> Survey:
    """Scan ``root`` and read and chunk its files as a build would (``rules``: scan arguments), count
    what it finds, and find the chunk texts the model would embed. Writes nothing.

    Above :data:`SAMPLE_FILES` files only a random sample is chunked, and each file's chunks are
    estimated from its size and language: ``1 + size * k`` chunks, ``k`` the sample's extra chunks
    per byte in that language (over all languages where the sample has none of it); the texts to
    embed and their word pieces scale by the sample's share of new texts and their mean length.
    ``store`` (an existing index) and ``cache`` supply known vectors; ``max_tokens`` caps each text's
    word pieces as the model does. Chunk sizes and workers come from ``.codii.yaml``, as a build's do.

    Raises:
        ValueError: ``.codii.yaml`` is malformed.
    """
    out = Survey()
    config = load_config(root)
    result = scan(root, **rules)
    out.skipped.update(result.skipped)
    out.hidden_by = result.hiding_rules()
    files = result.files
    sampled = files if len(files) <= SAMPLE_FILES else random.Random(SAMPLE_SEED).sample(files, SAMPLE_FILES)
    keys: dict[str, str] = {}
    counted: list[tuple[SourceFile, str | None, bool, int]] = []  # (file, language, generated, chunks)
    dropped: dict[str, str] = {}  # a sampled file's path -> why it is not indexed
    with prepared_files(root, sampled, rules["max_file_bytes"], window=1024, sizes=config.chunk_sizes,
                        workers=config.workers or 0) as prepared:
        for p in prepared:
            if p.skip or p.error:
                out.skipped[p.skip or "failed"] += 1
                dropped[p.path] = p.skip or "failed"
                continue
            counted.append((SourceFile(p.path, p.size, p.mtime_ns), p.language, p.generated, len(p.chunks)))
            for c in p.chunks:
                keys.setdefault(text_key(model_id, c.content), c.content)
    read = sum(row[3] for row in counted)
    if sampled is not files:
        out.estimate = {"sample_files": len(sampled), "files": len(files)}
        kept, skips = _read_skips([f for f in files if f.path not in dropped], sampled, dropped)
        out.skipped.update(skips)
        counted = _estimated(kept, counted)
    copies = roles.compiled_copies(f.path for f in files)
    for f, language, generated, chunks in counted:
        _count(out, f.path, language, roles.classify(f.path, result.attributes.marks(f.path),
                                                     generated or f.path in copies), chunks)
    _new_texts(out, keys, out.chunks / read if out.estimate and read else 1.0, store, cache, max_tokens)
    return out


def _read_skips(files: list[SourceFile], sampled: list[SourceFile], dropped: dict[str, str]) \
        -> tuple[list[SourceFile], Counter]:
    """``files`` less those reading would skip as the ``sampled`` files of their extension were skipped
    (``dropped``: path -> reason), the same share of each extension's unsampled files, first by path,
    each with its extension's most common reason; and those skips counted by reason. Django's 1,192
    binary ``.mo`` catalogues were counted as files to index (+22% files and chunks) where only the
    110 sampled ones were said binary."""
    def extension(path: str) -> str:
        return os.path.splitext(path)[1].lower() or os.path.basename(path)

    sampled_by = Counter(extension(f.path) for f in sampled)
    reasons: dict[str, Counter] = {}
    for path, reason in dropped.items():
        reasons.setdefault(extension(path), Counter())[reason] += 1
    seen = {f.path for f in sampled}
    kept, skips, owed = [], Counter(), Counter()
    for f in sorted(files, key=lambda f: f.path):
        ext = extension(f.path)
        if f.path not in seen and ext in reasons:
            owed[ext] += sum(reasons[ext].values()) / sampled_by[ext]
            if owed[ext] >= 0.5:
                owed[ext] -= 1
                skips[reasons[ext].most_common(1)[0][0]] += 1
                continue
        kept.append(f)
    return kept, skips


def _estimated(files: list[SourceFile], sample: list[tuple[SourceFile, str | None, bool, int]]) \
        -> list[tuple[SourceFile, str | None, bool, int]]:
    """Every file of the tree with its chunks estimated from the ``sample``'s (see :func:`survey`);
    the sample's own files keep their counts. Rounded per file: the sums stay whole chunks."""
    extra, size = Counter(), Counter()
    for f, _, _, chunks in sample:
        language = detect_language(f.path)
        extra[language] += max(0, chunks - 1)
        size[language] += f.size
    overall = sum(extra.values()) / max(1, sum(size.values()))
    per_byte = {language: extra[language] / size[language] for language in size if size[language]}
    own = {row[0].path: row for row in sample}
    estimated = []
    for f in files:
        language = detect_language(f.path)
        chunks = (1 + round(f.size * per_byte.get(language, overall))) if f.size else 0
        estimated.append(own.get(f.path, (f, language, False, chunks)))
    return estimated


def _count(out: Survey, path: str, language: str | None, role: str, chunks: int) -> None:
    out.files += 1
    out.chunks += chunks
    parts = path.split("/")[:-1]
    for counter, name in ((out.by_language, language or "(none)"), (out.by_role, role),
                          *((out.folders, "/".join(parts[:depth])) for depth in {min(1, len(parts)), min(2, len(parts))})):
        counts = counter.setdefault(name, [0, 0])
        counts[0] += 1
        counts[1] += chunks


def _new_texts(out: Survey, keys: dict[str, str], scale: float, store: Store | None, cache: EmbeddingCache | None,
               max_tokens: int) -> None:
    """The chunk texts (``keys``: text key -> text) no vector is known for, their word pieces and a
    timing sample; counts times ``scale`` (the tree's chunks per chunk read, for an estimate)."""
    known = known_vectors(store, cache, list(keys)) if store is not None else (
        cache.get(list(keys)) if cache is not None else {})
    new = [text for key, text in keys.items() if key not in known]
    # In slices: the tokenizer's encodings of 76k texts at once held 1.2 GB (Django 5.1.4).
    lengths = [min(n, max_tokens) for start in range(0, len(new), COUNT_SLICE)
               for n in count_tokens(new[start:start + COUNT_SLICE])]
    out.new_texts, out.new_tokens = round(len(new) * scale), round(sum(lengths) * scale)
    by_length = sorted(range(len(new)), key=lengths.__getitem__)
    step = max(1, len(by_length) // SAMPLE_TEXTS)
    out.sample = [new[i] for i in by_length[::step][:SAMPLE_TEXTS]]
