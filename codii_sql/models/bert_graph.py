"""Hugging Face BERT cross-encoder folders (config.json + safetensors) converted to ONNX with onnx.helper, no PyTorch."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from ..errors import UsageError, first_line
from ..paths import models_dir
from .runtime import file_sha256, save_graph

#: Bump when :func:`build_bert_graph` changes, so cached graphs from an older recipe are rebuilt.
_RECIPE = "bert-seqcls-1"
#: Additive attention bias on padded keys, as in the original BERT code (Devlin et al. 2019).
_MASK_BIAS = -10000.0


def read_json(path: Path) -> dict:
    """The JSON object in ``path``.

    Raises:
        UsageError: the file cannot be read or holds no JSON object.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read {path}: {err}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a JSON object")
    return data


def bert_onnx_path(folder: Path) -> Path:
    """The cached ONNX graph for a Hugging Face BERT cross-encoder folder, built if missing.

    Cached as ``$CODII_SQL_HOME/models/rerank-<sha256(recipe, config.json, model.safetensors)[:16]>.onnx``,
    written to a temporary file then renamed, so concurrent builders never expose a partial file.

    Raises:
        UsageError: ``safetensors`` is not installed, or the folder is not a BERT sequence
            classifier this converter supports (see :func:`build_bert_graph`).
    """
    config_bytes = (folder / "config.json").read_bytes()
    h = hashlib.sha256(_RECIPE.encode())
    h.update(hashlib.sha256(config_bytes).digest())
    h.update(bytes.fromhex(file_sha256(folder / "model.safetensors")))
    target = models_dir() / f"rerank-{h.hexdigest()[:16]}.onnx"
    if target.exists():
        return target
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise UsageError("reading model.safetensors needs the safetensors package: "
                         "pip install 'codii-sql[rerank]'") from None
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
        raise UsageError(f"cannot read {folder / 'model.safetensors'}: {first_line(err)}") from None
    return save_graph(build_bert_graph(read_json(folder / "config.json"), weights), target)


class _BertWeights:
    """Look-up of Hugging Face BERT tensors as float32, with or without the ``bert.`` prefix."""

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        self.tensors = tensors
        self.prefix = "bert." if any(k.startswith("bert.") for k in tensors) else ""

    def __getitem__(self, name: str) -> np.ndarray:
        # Checkpoints converted from TensorFlow name LayerNorm parameters gamma/beta.
        aliases = {".weight": ".gamma", ".bias": ".beta"} if "LayerNorm" in name else {}
        full = name if name.startswith("classifier.") else self.prefix + name
        for candidate in [full] + [full.removesuffix(a) + b for a, b in aliases.items() if full.endswith(a)]:
            if candidate in self.tensors:
                return np.asarray(self.tensors[candidate], np.float32)
        raise UsageError(f"weight {full} not found: the re-rank model must be a BERT sequence classifier "
                         "(BertForSequenceClassification)")


def _check_config(config: dict) -> None:
    if config.get("hidden_act", "gelu") != "gelu":
        raise UsageError(f"hidden_act {config['hidden_act']!r} is not supported: the converter builds erf GELU")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UsageError("only absolute position embeddings are supported by the re-rank converter")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads") if k not in config]
    if missing:
        raise UsageError(f"config.json lacks {', '.join(missing)}: not a BERT config")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise UsageError("config.json: hidden_size is not a multiple of num_attention_heads")


def build_bert_graph(config: dict, tensors: dict[str, np.ndarray]):
    """An ONNX model (opset 17) of ``BertForSequenceClassification`` for these weights.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``: int64[batch, seq]; output
    ``logits``: float32[batch, num_labels]. The graph follows Hugging Face's ``modeling_bert``:
    embeddings (word + position + token type) -> LayerNorm; per layer, self-attention with an
    additive ``-10000`` bias on padded keys -> dense -> residual + LayerNorm -> dense + erf GELU
    -> dense -> residual + LayerNorm; pooler ``tanh(dense([CLS]))``; classifier dense. The query
    projection is pre-multiplied by ``1/sqrt(head_size)`` (same product, one op fewer per layer).

    Raises:
        UsageError: the config is not a supported BERT config or a weight is missing.
    """
    from onnx import TensorProto, helper, numpy_helper

    _check_config(config)
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_size = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    w = _BertWeights(tensors)
    nodes, initializers = [], []

    def const(name: str, array) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(kind: str, *inputs: str, **attrs) -> str:
        out = f"{kind}_{len(nodes)}"
        nodes.append(helper.make_node(kind, list(inputs), [out], name=out, **attrs))
        return out

    def linear(x: str, name: str, scale: float = 1.0) -> str:
        weight = const(f"{name}.weight", np.ascontiguousarray(w[f"{name}.weight"].T) * np.float32(scale))
        return op("Add", op("MatMul", x, weight), const(f"{name}.bias", w[f"{name}.bias"] * np.float32(scale)))

    def layer_norm(x: str, name: str) -> str:
        return op("LayerNormalization", x, const(f"{name}.weight", w[f"{name}.weight"]),
                  const(f"{name}.bias", w[f"{name}.bias"]), axis=-1, epsilon=eps)

    split_heads = const("split_heads", np.array([0, 0, heads, head_size], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))

    def attention(x: str, bias: str, name: str) -> str:
        q = op("Transpose", op("Reshape", linear(x, f"{name}.query", head_size ** -0.5), split_heads),
               perm=[0, 2, 1, 3])
        k = op("Transpose", op("Reshape", linear(x, f"{name}.key"), split_heads), perm=[0, 2, 3, 1])
        v = op("Transpose", op("Reshape", linear(x, f"{name}.value"), split_heads), perm=[0, 2, 1, 3])
        probs = op("Softmax", op("Add", op("MatMul", q, k), bias), axis=-1)
        return op("Reshape", op("Transpose", op("MatMul", probs, v), perm=[0, 2, 1, 3]), merge_heads)

    one, half = const("one", np.float32(1.0)), const("half", np.float32(0.5))
    sqrt2 = const("sqrt2", np.float32(math.sqrt(2.0)))

    def gelu(x: str) -> str:
        # x * (1 + erf(x / sqrt 2)) * 0.5: the order PyTorch exports, which ORT fuses into Gelu.
        return op("Mul", op("Mul", x, op("Add", op("Erf", op("Div", x, sqrt2)), one)), half)

    seq_len = op("Shape", "input_ids", start=1, end=2)
    positions = op("Slice", const("position_table", w["embeddings.position_embeddings.weight"]),
                   const("zero_1d", np.array([0], np.int64)), seq_len)
    x = op("Add", op("Add", op("Gather", const("word_table", w["embeddings.word_embeddings.weight"]), "input_ids"),
                     positions),
           op("Gather", const("type_table", w["embeddings.token_type_embeddings.weight"]), "token_type_ids"))
    x = layer_norm(x, "embeddings.LayerNorm")
    keep = op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = op("Unsqueeze", op("Mul", op("Sub", one, keep),
                              const("mask_bias", np.float32(_MASK_BIAS))),
              const("head_query_axes", np.array([1, 2], np.int64)))
    for i in range(config["num_hidden_layers"]):
        name = f"encoder.layer.{i}"
        context = attention(x, bias, f"{name}.attention.self")
        x = layer_norm(op("Add", linear(context, f"{name}.attention.output.dense"), x),
                       f"{name}.attention.output.LayerNorm")
        ffn = linear(gelu(linear(x, f"{name}.intermediate.dense")), f"{name}.output.dense")
        x = layer_norm(op("Add", ffn, x), f"{name}.output.LayerNorm")
    cls = op("Gather", x, const("cls_index", np.array(0, np.int64)), axis=1)
    pooled = op("Tanh", linear(cls, "pooler.dense"))
    nodes.append(helper.make_node("Identity", [linear(pooled, "classifier")], ["logits"], name="logits"))

    labels = w["classifier.weight"].shape[0]
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(nodes, "bert_cross_encoder", ints,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", labels])],
                              initializers)
    # IR 8 is the oldest that carries opset 17 (LayerNormalization), readable by older onnxruntime.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                             producer_name="codii-sql")
