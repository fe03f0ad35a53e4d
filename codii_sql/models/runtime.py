"""onnxruntime plumbing shared by the embedder and the cross-encoder: threads, sessions, batches, graph files."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from ..processes import cpus


def default_threads() -> int:
    """Threads for onnxruntime's intra-op pool: ``$CODII_SQL_THREADS``, else physical cores we may use.

    Physical, not logical: SMT siblings share the FMA units the MatMul kernels saturate.
    """
    env = os.environ.get("CODII_SQL_THREADS", "").strip()
    if env:
        return max(1, int(env))
    cores = set()
    for cpu in cpus():
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(siblings.read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return max(1, len(cores))


def file_sha256(path: Path) -> str:
    """sha256 hex of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def session_options(threads: int):
    """The ``onnxruntime.SessionOptions`` of every session (``threads`` intra-op threads).

    The memory pattern (one block pre-planned per input shape) is off: batches of sorted texts
    almost never repeat a shape, so it only holds memory; off lowered peak RSS by 35-50 MiB at
    the same throughput (see :data:`codii_sql.models.minilm.MAX_BATCH_TOKENS`). The arena stays
    on: without it peak RSS rose (656 -> 750 MiB), as freed activations stay in the C heap.

    The intra-op threads do not spin once a run ends (onnxruntime's ``allow_spinning``): spinning,
    they kept a core busy after each query embedding, which the SQLite threads of a workspace
    search needed (3 Sphinx members, 48 titles, p50 28.9 -> 19.6 ms) and an agent's other work
    would too. It costs a query 0.7-0.9 ms (embedding p50 2.2 -> 3.0 ms); chunks/s of a build
    stay the same (52-56 either way, 133 requests chunks, 2 threads).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_mem_pattern = False
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


def make_session(path: Path, threads: int):
    """A CPU ``onnxruntime.InferenceSession`` over the graph at ``path`` with :func:`session_options`."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])


def token_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indexes of texts of ``lengths`` word pieces, sorted by length and cut into batches.

    A batch holds at most ``batch_size`` texts and at most ``max_tokens`` padded word pieces
    (texts x its longest text), except that a text longer than ``max_tokens`` is a batch alone.
    Ties keep input order, so the batches are deterministic.
    """
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batch and (len(batch) == batch_size or (len(batch) + 1) * lengths[i] > max_tokens):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


def save_graph(model, target: Path) -> Path:
    """Write an ``onnx.ModelProto`` to ``target`` atomically (temp file + ``os.replace``).

    Two processes building the same derived graph never see a half-written file.
    Returns ``target``.
    """
    import onnx

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        onnx.save(model, str(tmp))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
