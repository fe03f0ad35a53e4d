"""Optional re-rank pass: re-score the top fused chunks with a cross-encoder on onnxruntime.

A cross-encoder reads the query and one chunk together (``[CLS] query [SEP] passage [SEP]``)
and outputs a relevance logit: slower than the bi-encoder (one forward pass per chunk, per
query) but it sees word-to-word interactions the fused BM25 + KNN score cannot.

No PyPI package ships cross-encoder weights, so the user gives a model path (``--rerank-model``
or ``$CODII_SQL_RERANK_MODEL``) in one of these forms:

* an ONNX graph: a folder holding ``model.onnx`` (or ``onnx/model.onnx``), or a ``.onnx`` file,
  with ``tokenizer.json`` or ``vocab.txt`` beside it (or one folder up);
* a Hugging Face BERT cross-encoder folder (``BertForSequenceClassification``: ``config.json``
  + ``model.safetensors`` + ``tokenizer.json``/``vocab.txt``), converted once to an ONNX graph
  built with ``onnx.helper`` (no PyTorch) and cached under ``$CODII_SQL_HOME/models/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .paths import models_dir
from .embed import MAX_BATCH_TOKENS, default_threads, file_sha256, save_graph, session_options, token_batches
from .errors import UsageError
from .search import Result

#: Environment variable naming the model when ``model_path`` is not given.
ENV_MODEL = "CODII_SQL_RERANK_MODEL"
#: BERT's position table has 512 rows (Devlin et al. 2019); a config may lower it.
MAX_LENGTH = 512
#: Candidates re-scored by default: the MCP server fetches up to 3x the requested results.
DEFAULT_TOP_N = 50
#: Most pairs per onnxruntime call; pairs are sorted by length and batches also hold at most
#: ``embed.MAX_BATCH_TOKENS`` padded word pieces, as the embedder's do (peak memory bounded).
BATCH_SIZE = 16
#: Bump when :func:`build_bert_graph` changes, so cached graphs from an older recipe are rebuilt.
_RECIPE = "bert-seqcls-1"
#: Additive attention bias on padded keys, as in the original BERT code (Devlin et al. 2019).
_MASK_BIAS = -10000.0

NO_MODEL = f"no re-rank model: pass --rerank-model PATH or set {ENV_MODEL} (see README)"


def passage_text(result: Result) -> str:
    """The passage the cross-encoder reads for one chunk: ``"{path} {symbol}\\n{content}"``.

    The path and symbol name are often what a query names ("retry in http client"), and
    they cost ~5-15 word pieces; ``symbol`` is left out when the chunk has none.
    """
    head = f"{result.path} {result.symbol}" if result.symbol else result.path
    return f"{head}\n{result.content}"


def rerank(query: str, results: list[Result], *, model_path: str | os.PathLike[str] | None = None,
           top_n: int = DEFAULT_TOP_N) -> list[Result]:
    """Re-order the first ``top_n`` results by cross-encoder logit, highest first.

    Returns new :class:`Result` objects (inputs are not modified): the re-scored ones with
    ``score`` set to the logit (float; see :meth:`CrossEncoder.score`), ties kept in input
    order, then the results beyond ``top_n`` in their original order and with their scores.

    Raises:
        UsageError: no model (neither ``model_path`` nor ``$CODII_SQL_RERANK_MODEL``), a model
            path that cannot be loaded (see :class:`CrossEncoder`), or ``top_n`` < 1.
    """
    if top_n < 1:
        raise UsageError(f"re-rank top_n must be >= 1, not {top_n}")
    path = model_path or os.environ.get(ENV_MODEL, "").strip()
    if not path:
        raise UsageError(NO_MODEL)
    encoder = CrossEncoder.load(path)
    if not results:
        return []
    head, tail = results[:top_n], results[top_n:]
    logits = encoder.score(query, [passage_text(r) for r in head])
    order = sorted(range(len(head)), key=lambda i: -logits[i])
    return [dataclasses.replace(head[i], score=float(logits[i])) for i in order] + list(tail)


class CrossEncoder:
    """A cross-encoder on onnxruntime (CPU): ``score(query, texts)`` -> one logit per text.

    Use :meth:`load` to share one instance per model path per process. Thread-safe: the
    session and tokenizers are created in ``__init__`` and only read afterwards
    (``InferenceSession.run`` and ``Tokenizer.encode_batch`` are reentrant).

    Attributes:
        path: the model path given, resolved.
        graph_path: the ``.onnx`` file loaded (the cached conversion for a Hugging Face folder).
        max_length: word pieces per pair including ``[CLS]``/``[SEP]`` (<= 512).
        threads: onnxruntime intra-op threads.

    Raises (from the constructor):
        UsageError: the path is missing or holds no supported model form, a tokenizer is
            missing, the weights are not a BERT sequence classifier, ``safetensors`` is not
            installed, or onnxruntime rejects the graph. Messages are one line.
    """

    _instances: dict[Path, CrossEncoder] = {}
    _instances_lock = threading.Lock()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CrossEncoder:
        """The process-wide instance for ``path`` (resolved), created on first use."""
        key = Path(path).expanduser().resolve()
        with cls._instances_lock:
            if key not in cls._instances:
                cls._instances[key] = cls(key)
            return cls._instances[key]

    def __init__(self, path: str | os.PathLike[str], *, threads: int | None = None) -> None:
        self.path = Path(path).expanduser().resolve()
        self.threads = threads or default_threads()
        self.graph_path, tokenizer_dir, config = _locate(self.path)
        self.max_length = min(MAX_LENGTH, int(config.get("max_position_embeddings", MAX_LENGTH)))
        self._pairs = _load_tokenizer(tokenizer_dir)
        # Truncating only the passage needs a query shorter than max_length: the query is cut
        # first with this untruncated copy (half the budget, room for a long issue-like query).
        self._plain = type(self._pairs).from_str(self._pairs.to_str())
        self._pairs.no_padding()
        self._pairs.enable_truncation(self.max_length, strategy="only_second")
        self._plain.no_padding()
        self._plain.no_truncation()
        self._session = _make_session(self.graph_path, self.threads)
        self._inputs = _input_types(self._session, self.graph_path)
        self._output = _logits_output(self._session)

    def score(self, query: str, texts: Sequence[str], *, batch_size: int = BATCH_SIZE,
              max_batch_tokens: int = MAX_BATCH_TOKENS) -> np.ndarray:
        """Relevance logits of ``(query, text)`` pairs: float32[len(texts)], higher = more relevant.

        Pairs are ``[CLS] query [SEP] text [SEP]`` (token types 0 then 1); the query is cut at
        ``max_length // 2`` word pieces and the text fills the rest (``only_second``). The graph's
        output must be ``[batch, 1]`` (the logit) or ``[batch, 2]`` (two-label classifier: we
        return ``logit[1] - logit[0]``, the log-odds of label 1, which orders pairs exactly as
        softmax P(label 1) does; the raw last column alone would not).

        Raises:
            ValueError: ``batch_size`` < 1.
            UsageError: the graph's output has another shape.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        out = np.zeros(len(texts), np.float32)
        if not texts:
            return out
        query = self._cut_query(query)
        encodings = self._pairs.encode_batch([(query, t) for t in texts])
        for rows in token_batches([len(e.ids) for e in encodings], batch_size, max_batch_tokens):
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def _cut_query(self, query: str) -> str:
        budget = self.max_length // 2
        encoding = self._plain.encode(query, add_special_tokens=False)
        if len(encoding.ids) <= budget:
            return query
        return query[:encoding.offsets[budget - 1][1]]

    def _run(self, encodings) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        arrays = {name: np.zeros((len(encodings), width), np.int64)
                  for name in ("input_ids", "attention_mask", "token_type_ids")}
        for row, e in enumerate(encodings):
            arrays["input_ids"][row, :len(e.ids)] = e.ids
            arrays["attention_mask"][row, :len(e.ids)] = 1
            arrays["token_type_ids"][row, :len(e.ids)] = e.type_ids
        feed = {name: arrays[name].astype(dtype) for name, dtype in self._inputs.items()}
        (logits,) = self._session.run([self._output], feed)
        return _relevance(np.asarray(logits, np.float32), self.graph_path)


def _locate(path: Path) -> tuple[Path, Path, dict]:
    """``(graph file, tokenizer folder, BERT config or {})`` for a user-given model path."""
    if not path.exists():
        raise UsageError(f"re-rank model {path} does not exist: pass an ONNX file or a model folder")
    if path.is_file():
        if path.suffix != ".onnx":
            raise UsageError(f"re-rank model {path} is not a .onnx file: pass an ONNX file or a model folder")
        tokenizer_dir = _tokenizer_dir(path.parent)
        return path, tokenizer_dir, _read_config(tokenizer_dir)
    if (path / "model.onnx").is_file():
        return path / "model.onnx", _tokenizer_dir(path), _read_config(path)
    if (path / "config.json").is_file() and (path / "model.safetensors").is_file():
        tokenizer_dir = _tokenizer_dir(path)
        return bert_onnx_path(path), tokenizer_dir, _read_config(path)
    if (path / "onnx" / "model.onnx").is_file():
        return path / "onnx" / "model.onnx", _tokenizer_dir(path), _read_config(path)
    if (path / "pytorch_model.bin").is_file() or (path / "model.safetensors.index.json").is_file():
        raise UsageError(f"{path} has PyTorch .bin or sharded weights, which need torch: save it as one "
                         "model.safetensors or export model.onnx")
    raise UsageError(f"{path} holds no model.onnx and no config.json + model.safetensors: "
                     "see the README section on re-ranking")


def _tokenizer_dir(folder: Path) -> Path:
    """The first of ``folder`` and its parent with ``tokenizer.json`` or ``vocab.txt``."""
    for candidate in (folder, folder.parent):
        if (candidate / "tokenizer.json").is_file() or (candidate / "vocab.txt").is_file():
            return candidate
    raise UsageError(f"no tokenizer.json or vocab.txt next to the re-rank model in {folder}")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read {path}: {err}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a JSON object")
    return data


def _read_config(folder: Path) -> dict:
    return _read_json(folder / "config.json") if (folder / "config.json").is_file() else {}


def _load_tokenizer(folder: Path):
    """A ``tokenizers.Tokenizer`` with a ``[CLS] a [SEP] b [SEP]`` pair template.

    ``tokenizer.json`` when present (it carries its own normaliser and template); otherwise a
    WordPiece tokenizer over ``vocab.txt``, lower-casing per ``tokenizer_config.json``'s
    ``do_lower_case`` (default true, as in BERT's tokenizer).
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    try:
        if (folder / "tokenizer.json").is_file():
            return Tokenizer.from_file(str(folder / "tokenizer.json"))
        settings = folder / "tokenizer_config.json"
        lowercase = _read_json(settings).get("do_lower_case", True) if settings.is_file() else True
        tok = Tokenizer(models.WordPiece.from_file(str(folder / "vocab.txt"), unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=bool(lowercase))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                       ("[CLS]", tok.token_to_id("[CLS]")))
        return tok
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - tokenizers raises plain Exception on bad files
        raise UsageError(f"cannot load the re-rank tokenizer in {folder}: {_first_line(err)}") from None


def _make_session(path: Path, threads: int):
    import onnxruntime as ort

    try:
        return ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - onnxruntime raises several unrelated types
        raise UsageError(f"onnxruntime cannot load {path}: {_first_line(err)}") from None


def _input_types(session, path: Path) -> dict[str, type]:
    """``{input name: numpy int dtype}``; ``token_type_ids`` is optional (e.g. DistilBERT)."""
    known = {"input_ids", "attention_mask", "token_type_ids"}
    inputs = {i.name: (np.int32 if i.type == "tensor(int32)" else np.int64) for i in session.get_inputs()}
    unknown = sorted(set(inputs) - known)
    if unknown or "input_ids" not in inputs:
        raise UsageError(f"{path} has inputs {sorted(inputs)}; a cross-encoder needs input_ids "
                         "(+ attention_mask, token_type_ids)")
    return inputs


def _logits_output(session) -> str:
    names = [o.name for o in session.get_outputs()]
    return "logits" if "logits" in names else names[0]


def _relevance(logits: np.ndarray, path: Path) -> np.ndarray:
    """One logit per row from a ``[batch]``, ``[batch, 1]`` or ``[batch, 2]`` output."""
    if logits.ndim == 1:
        return logits
    if logits.ndim == 2 and logits.shape[1] == 1:
        return logits[:, 0]
    if logits.ndim == 2 and logits.shape[1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise UsageError(f"{path} outputs shape {list(logits.shape)}: a cross-encoder outputs [batch, 1] or [batch, 2]")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# --- Hugging Face BERT folder -> ONNX --------------------------------------------------------

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
        raise UsageError(f"cannot read {folder / 'model.safetensors'}: {_first_line(err)}") from None
    return save_graph(build_bert_graph(_read_json(folder / "config.json"), weights), target)


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
