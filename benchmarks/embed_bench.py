"""Embedding throughput: the shipped ONNX graph vs the default (fused-attention) graph.

Prints chunks/s and tokens/s (real word pieces, padding excluded) for two workloads:
``256``: texts of exactly 256 word pieces (the model's maximum, the worst case);
``code``: real source, the ``rich`` package's .py files cut into 40-line chunks (what the
indexer embeds). Each cell is the best of ``--repeats`` runs over the same texts, because
wall time on a shared machine is noisy and the best run is the least disturbed one.

Usage (from the repository root, or with the package installed):
PYTHONPATH=. python3 benchmarks/embed_bench.py [--chunks 64] [--batch-sizes 8,16,32,64] [--repeats 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from codii_sql.models.minilm import GRAPH_FUSED, GRAPH_SHIPPED
from codii_sql.models.minilm import MiniLM as Embedder
from codii_sql.models.runtime import default_threads
from codii_sql.models.wordpiece import MAX_TOKENS, count_tokens

CHUNK_LINES = 40


def code_chunks(n: int) -> list[str]:
    """The first ``n`` non-blank 40-line pieces of the installed ``rich`` package's sources."""
    root = Path(importlib.util.find_spec("rich").origin).parent
    chunks = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for start in range(0, len(lines), CHUNK_LINES):
            piece = "\n".join(lines[start:start + CHUNK_LINES])
            if piece.strip():
                chunks.append(piece)
            if len(chunks) == n:
                return chunks
    return chunks


def full_length(n: int) -> list[str]:
    """``n`` distinct texts of at least 256 word pieces (the embedder truncates at 256)."""
    return [" ".join(f"token{i}_{j}" for j in range(MAX_TOKENS)) for i in range(n)]


def measure(embedder: Embedder, texts: list[str], batch_size: int, repeats: int) -> float:
    """Best wall time in seconds to embed ``texts``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed(texts, batch_size=batch_size)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=64, help="texts per workload")
    parser.add_argument("--batch-sizes", default="8,16,32,64")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    embedders = {graph: Embedder(graph=graph) for graph in (GRAPH_SHIPPED, GRAPH_FUSED)}
    for e in embedders.values():
        e.embed(["warm up"])
    print(f"threads={default_threads()}  graphs: " + ", ".join(f"{g}={e.graph_path.name}" for g, e in embedders.items()))
    for name, texts in (("256", full_length(args.chunks)), ("code", code_chunks(args.chunks))):
        tokens = sum(min(c, MAX_TOKENS - 2) + 2 for c in count_tokens(texts))
        print(f"\nworkload {name}: {len(texts)} chunks, mean {tokens / len(texts):.0f} word pieces")
        print(f"{'batch':>5} " + " ".join(f"{g + ' chunks/s':>18} {g + ' tok/s':>16}" for g in embedders))
        for bs in batch_sizes:
            cells = []
            for embedder in embedders.values():
                seconds = measure(embedder, texts, bs, args.repeats)
                cells.append(f"{len(texts) / seconds:>18.1f} {tokens / seconds:>16.0f}")
            print(f"{bs:>5} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
