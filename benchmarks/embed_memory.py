"""Peak RSS and throughput of the embedder under onnxruntime memory settings (run by hand).

Each setting runs in a fresh child process (``ru_maxrss`` is a per-process high-water mark),
one at a time, over the same sample of real chunk texts of a corpus: every ``--stride``-th
chunk in token-count order (the corpus's length distribution) plus the ``--longest`` longest
(so the widest batches, which set the peak, are full). A child reports its RSS after imports,
after the model load and at the end, chunks/s and tokens/s (real word pieces, padding
excluded), and the load average; its vectors are compared with the first setting's by cosine.

Usage (from the repository root):
PYTHONPATH=. python3 benchmarks/embed_memory.py [--corpus ~/.cache/codii-bench/corpora/medium]
    [--settings fixed32,default,no_arena,budget4096] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

MiB = 1 << 20
#: name -> (enable_cpu_mem_arena, enable_mem_pattern, batch_size, max_batch_tokens);
#: ``fixed32`` is onnxruntime's defaults with 32 texts per batch (no token budget).
SETTINGS = {
    "fixed32": (True, True, 32, 8192),
    "no_arena": (False, True, 32, 8192),
    "no_mem_pattern": (True, False, 32, 8192),
    "no_arena_no_pattern": (False, False, 32, 8192),
    "budget4096": (True, True, 32, 4096),
    "budget2048": (True, True, 32, 2048),
    "budget4096_no_pattern": (True, False, 32, 4096),
    "budget3072_no_pattern": (True, False, 32, 3072),
    "budget2048_no_pattern": (True, False, 32, 2048),
    "no_arena_budget4096": (False, True, 32, 4096),
    "default": None,  # whatever codii_sql.models.minilm ships
}


def rss_mib() -> float:
    """Current resident MiB of this process (/proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MiB


def child(setting: str, texts_path: str, vectors_path: str) -> dict:
    """Embed the texts at ``texts_path`` under ``setting``; save the vectors; return measurements."""
    from codii_sql.models import minilm, runtime
    from codii_sql.models.wordpiece import MAX_TOKENS, get_tokenizer

    import onnxruntime  # noqa: F401 - counted in the import baseline, not in the model's share

    texts = json.loads(Path(texts_path).read_text(encoding="utf-8"))
    out = {"setting": setting, "rss_imports_mib": rss_mib()}
    kwargs = {}
    if SETTINGS[setting] is not None:
        arena, pattern, batch_size, budget = SETTINGS[setting]
        kwargs = {"batch_size": batch_size, "max_batch_tokens": budget}
        base = runtime.session_options

        def options(threads: int):
            opts = base(threads)
            opts.enable_cpu_mem_arena = arena
            opts.enable_mem_pattern = pattern
            return opts
        runtime.session_options = options
    emb = minilm.MiniLM()
    emb.embed(["warm up"])
    out["rss_loaded_mib"] = rss_mib()
    tokens = sum(min(len(e.ids), MAX_TOKENS) for e in get_tokenizer().encode_batch(texts))
    load0 = os.getloadavg()[0]
    t, cpu = time.perf_counter(), time.process_time()
    vectors = emb.embed(texts, **kwargs)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    np.save(vectors_path, vectors)
    out.update(chunks=len(texts), tokens=tokens, seconds=seconds, cpu_seconds=cpu, chunks_per_s=len(texts) / seconds,
               tokens_per_s=tokens / seconds, load_before=load0, load_after=os.getloadavg()[0],
               rss_end_mib=rss_mib(), peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               threads=emb.threads, graph=emb.graph_path.name)
    return out


def sample(corpus: Path, stride: int, longest: int) -> list[str]:
    """Every ``stride``-th distinct chunk text of ``corpus`` by token count, plus the ``longest``."""
    from child import corpus_chunks
    from codii_sql.models.wordpiece import count_tokens

    texts, _ = corpus_chunks(corpus)
    order = sorted(range(len(texts)), key=count_tokens(texts).__getitem__)
    picked = sorted(set(order[::stride]) | set(order[-longest:]))
    return [texts[i] for i in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("~/.cache/codii-bench/corpora/medium").expanduser())
    parser.add_argument("--stride", type=int, default=14)
    parser.add_argument("--longest", type=int, default=64)
    parser.add_argument("--settings", default="fixed32,default,no_arena,no_mem_pattern,budget4096")
    parser.add_argument("--repeats", type=int, default=1, help="runs per setting, interleaved")
    parser.add_argument("--child", nargs=3, metavar=("SETTING", "TEXTS", "VECTORS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    names = args.settings.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = Path(tmp) / "texts.json"
        texts_path.write_text(json.dumps(sample(args.corpus, args.stride, args.longest)), encoding="utf-8")
        reference = None
        print(f"{'setting':<22} {'imports':>8} {'loaded':>7} {'peak':>7} {'chunks/s':>9} {'tok/s':>7} "
              f"{'cpu s':>6} {'load':>10} {'cosine':>9}", flush=True)
        for _ in range(args.repeats):
            for name in names:
                vectors_path = Path(tmp) / f"{name}.npy"
                done = subprocess.run([sys.executable, __file__, "--child", name, str(texts_path), str(vectors_path)],
                                      check=True, capture_output=True, text=True)
                r = json.loads(done.stdout)
                vectors = np.load(vectors_path)
                reference = vectors if reference is None else reference
                cosine = float(np.min(np.sum(vectors * reference, axis=1)))
                print(f"{name:<22} {r['rss_imports_mib']:>8.0f} {r['rss_loaded_mib']:>7.0f} {r['peak_rss_mib']:>7.0f} "
                      f"{r['chunks_per_s']:>9.1f} {r['tokens_per_s']:>7.0f} {r['cpu_seconds']:>6.1f} "
                      f"{r['load_before']:>4.2f}-{r['load_after']:<4.2f} {cosine:>9.6f}", flush=True)
        print(f"{r['chunks']} chunks, {r['tokens']} word pieces, threads={r['threads']}, graph={r['graph']}")


if __name__ == "__main__":
    main()
