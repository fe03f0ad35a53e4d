"""The cross-encoder of the optional re-rank pass, on onnxruntime: (query, passage) pairs -> relevance logits.

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

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import Remedy, UsageError, first_line
from .bert_graph import bert_onnx_path, read_json
from .minilm import MAX_BATCH_TOKENS
from .runtime import default_threads, make_session, token_batches

#: Environment variable naming the model when ``model_path`` is not given.
ENV_MODEL = "CODII_SQL_RERANK_MODEL"
#: BERT's position table has 512 rows (Devlin et al. 2019); a config may lower it.
MAX_LENGTH = 512
#: Most pairs per onnxruntime call; pairs are sorted by length and batches also hold at most
#: ``minilm.MAX_BATCH_TOKENS`` padded word pieces, as the embedder's do (peak memory bounded).
BATCH_SIZE = 16

NO_MODEL = "no re-rank model is named"


def model_path(given: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    """The re-rank model to use: ``given``, else ``$CODII_SQL_RERANK_MODEL``.

    Raises:
        UsageError: neither names one.
    """
    path = given or os.environ.get(ENV_MODEL, "").strip()
    if not path:
        raise UsageError(NO_MODEL, Remedy("rerank_model"))
    return path


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


def _read_config(folder: Path) -> dict:
    return read_json(folder / "config.json") if (folder / "config.json").is_file() else {}


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
        lowercase = read_json(settings).get("do_lower_case", True) if settings.is_file() else True
        tok = Tokenizer(models.WordPiece.from_file(str(folder / "vocab.txt"), unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=bool(lowercase))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                       ("[CLS]", tok.token_to_id("[CLS]")))
        return tok
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - tokenizers raises plain Exception on bad files
        raise UsageError(f"cannot load the re-rank tokenizer in {folder}: {first_line(err)}") from None


def _make_session(path: Path, threads: int):
    try:
        return make_session(path, threads)
    except Exception as err:  # noqa: BLE001 - onnxruntime raises several unrelated types
        raise UsageError(f"onnxruntime cannot load {path}: {first_line(err)}") from None


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
