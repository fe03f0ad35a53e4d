"""Cross-encoder re-rank plumbing with tiny randomly initialised BERT cross-encoders.

Random weights say nothing about ranking quality: these tests check that the ONNX graph built
from Hugging Face weights computes what BERT computes (against a numpy forward pass), that
pairs are tokenised, batched and padded correctly, and that loading, caching and errors behave.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from tokenizers import BertWordPieceTokenizer

safetensors_numpy = pytest.importorskip("safetensors.numpy")

from codii_sql.cli.models import models  # noqa: E402
from codii_sql.errors import UsageError  # noqa: E402
from codii_sql.models import bert_graph  # noqa: E402
from codii_sql.models import cross_encoder as ce  # noqa: E402
from codii_sql.models.wordpiece import vocab_path  # noqa: E402
from codii_sql.search import rerank as rr  # noqa: E402
from codii_sql.search.results import Result  # noqa: E402

TINY = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
        "max_position_embeddings": 128, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_act": "gelu", "vocab_size": 30522}

QUERY = "retry a request with exponential backoff"
TEXTS = [
    "app/http.py retry_with_backoff\ndef retry_with_backoff(fn, attempts=5):\n    time.sleep(base * 2 ** attempt)",
    "web/util.js debounce\nexport function debounce(fn, ms) { clearTimeout(timer); }",
    "docs/guide.md\nThe client retries failed requests with exponential backoff.",
    "x",
    "app/parse.py parse_header\ndef parse_header(line):\n    name, _, value = line.partition(':')\n" * 3,
]


def random_bert(config: dict, labels: int = 1, seed: int = 0, prefix: str = "bert.") -> dict[str, np.ndarray]:
    """HF ``BertForSequenceClassification`` tensors, N(0, 0.2) so logits differ between pairs."""
    rng = np.random.default_rng(seed)
    h, inter = config["hidden_size"], config["intermediate_size"]

    def normal(*shape):
        return rng.normal(0.0, 0.2, shape).astype(np.float32)

    def linear(name, n_out, n_in):
        return {f"{name}.weight": normal(n_out, n_in), f"{name}.bias": normal(n_out)}

    def norm(name):
        return {f"{name}.weight": (1 + normal(h) / 2).astype(np.float32), f"{name}.bias": normal(h)}

    t = {"embeddings.word_embeddings.weight": normal(config["vocab_size"], h),
         "embeddings.position_embeddings.weight": normal(config["max_position_embeddings"], h),
         "embeddings.token_type_embeddings.weight": normal(config["type_vocab_size"], h),
         **norm("embeddings.LayerNorm"), **linear("pooler.dense", h, h)}
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for part in ("query", "key", "value"):
            t.update(linear(f"{p}.attention.self.{part}", h, h))
        t.update(linear(f"{p}.attention.output.dense", h, h), **norm(f"{p}.attention.output.LayerNorm"),
                 **linear(f"{p}.intermediate.dense", inter, h), **linear(f"{p}.output.dense", h, inter),
                 **norm(f"{p}.output.LayerNorm"))
    tensors = {prefix + k: v for k, v in t.items()}
    tensors.update(linear("classifier", labels, h))
    return tensors


def write_model(folder: Path, config: dict, tensors: dict[str, np.ndarray]) -> Path:
    """A Hugging Face cross-encoder folder: config.json, model.safetensors, vocab.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    shutil.copy(vocab_path(), folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    return folder


def reference_logits(config: dict, t: dict[str, np.ndarray], ids, type_ids) -> np.ndarray:
    """BERT sequence classification of one unpadded sequence in float64: float64[num_labels].

    Written from Hugging Face ``modeling_bert`` (post-LayerNorm, erf GELU, tanh pooler on [CLS]).
    """
    t = {k.removeprefix("bert."): v.astype(np.float64) for k, v in t.items()}
    h, heads, eps = config["hidden_size"], config["num_attention_heads"], config["layer_norm_eps"]
    d = h // heads
    erf = np.vectorize(math.erf)

    def lin(x, name):
        return x @ t[f"{name}.weight"].T + t[f"{name}.bias"]

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * t[f"{name}.weight"] + t[f"{name}.bias"]

    ids, type_ids = np.asarray(ids), np.asarray(type_ids)
    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:len(ids)]
         + t["embeddings.token_type_embeddings.weight"][type_ids])
    x = ln(x, "embeddings.LayerNorm")
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (lin(x, f"{p}.attention.self.{n}").reshape(len(ids), heads, d).transpose(1, 0, 2)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(len(ids), h)
        x = ln(lin(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inner = lin(x, f"{p}.intermediate.dense")
        inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
        x = ln(lin(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    pooled = np.tanh(lin(x[0], "pooler.dense"))
    return lin(pooled, "classifier")


@pytest.fixture(autouse=True)
def fresh_instances(monkeypatch):
    """Each test loads its own CrossEncoder instances (the process-wide cache is per test)."""
    monkeypatch.setattr(ce.CrossEncoder, "_instances", {})
    monkeypatch.delenv(ce.ENV_MODEL, raising=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    tensors = random_bert(TINY)
    return write_model(tmp_path_factory.mktemp("tiny") / "tiny-cross-encoder", TINY, tensors), tensors


def pair_tokens(query: str, text: str, max_length: int) -> tuple[list[int], list[int]]:
    """Ids and token types of ``[CLS] query [SEP] text [SEP]`` from an independent tokenizer."""
    tok = BertWordPieceTokenizer(vocab_path(), lowercase=True)
    tok.enable_truncation(max_length, strategy="only_second")
    e = tok.encode(query, text)
    return e.ids, e.type_ids


def test_converted_graph_matches_numpy_with_padding(tiny):
    folder, tensors = tiny
    encoder = ce.CrossEncoder.load(folder)
    session = ort.InferenceSession(str(encoder.graph_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    lengths = [3, 17, 9, 40]
    width = max(lengths)
    ids = np.zeros((len(lengths), width), np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(0, TINY["vocab_size"], n)
        types[row, n // 2:n] = 1
        mask[row, :n] = 1
    (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    assert logits.shape == (len(lengths), 1) and logits.dtype == np.float32
    expected = [reference_logits(TINY, tensors, ids[r, :n], types[r, :n]) for r, n in enumerate(lengths)]
    np.testing.assert_allclose(logits, np.array(expected), atol=1e-4)
    assert np.ptp(logits) > 0.1  # distinct pairs get distinct logits, or ordering tests prove nothing


def test_score_tokenizes_pairs_and_batches(tiny):
    folder, tensors = tiny
    encoder = ce.CrossEncoder.load(folder)
    assert encoder.max_length == TINY["max_position_embeddings"]
    logits = encoder.score(QUERY, TEXTS, batch_size=2)
    assert logits.shape == (len(TEXTS),) and logits.dtype == np.float32
    expected = [reference_logits(TINY, tensors, *pair_tokens(QUERY, text, encoder.max_length))[0] for text in TEXTS]
    np.testing.assert_allclose(logits, expected, atol=1e-4)
    np.testing.assert_allclose(encoder.score(QUERY, TEXTS, batch_size=16), logits, atol=1e-5)
    # A token budget below one pair's length runs each pair alone: same logits, in input order.
    np.testing.assert_allclose(encoder.score(QUERY, TEXTS, max_batch_tokens=1), logits, atol=1e-5)
    assert encoder.score(QUERY, []).shape == (0,)


def test_long_inputs_are_truncated(tiny):
    encoder = ce.CrossEncoder.load(tiny[0])
    long_query = " ".join(["backoff"] * 300)
    long_text = " ".join(f"word{i}" for i in range(400))
    a, b = encoder.score(long_query, [long_text, long_text + " and more words past the cut"])
    assert np.isfinite(a) and a == pytest.approx(b, abs=1e-6)


def results_for(texts: list[str]) -> list[Result]:
    return [Result(path=f"src/f{i}.py", start_line=1, end_line=3, score=1.0 / (i + 1), language="python",
                   kind="function", symbol=None, content=text, stale=False, id=i, role="source")
            for i, text in enumerate(texts)]


def test_rerank_orders_by_logit_and_keeps_the_tail(tiny):
    folder, _ = tiny
    results = results_for(TEXTS)
    before = [replace(r) for r in results]
    out = rr.rerank(QUERY, results, model_path=folder, top_n=4)
    logits = ce.CrossEncoder.load(folder).score(QUERY, [rr.passage_text(r) for r in results[:4]])
    assert [r.id for r in out[:4]] == [results[i].id for i in np.argsort(-logits, kind="stable")]
    assert [r.score for r in out[:4]] == pytest.approx(sorted(logits.tolist(), reverse=True), abs=1e-6)
    assert all(isinstance(r.score, float) for r in out)
    assert out[4:] == results[4:]
    assert results == before  # inputs untouched
    assert rr.rerank(QUERY, [], model_path=folder) == []


def test_rerank_reads_the_environment_variable(tiny, monkeypatch):
    monkeypatch.setenv(ce.ENV_MODEL, str(tiny[0]))
    assert len(rr.rerank(QUERY, results_for(TEXTS[:2]))) == 2


def test_passage_text_prefixes_path_and_symbol():
    r = results_for(["body"])[0]
    assert rr.passage_text(r) == "src/f0.py\nbody"
    assert rr.passage_text(replace(r, symbol="Session.send")) == "src/f0.py Session.send\nbody"


def assert_one_line_usage_error(excinfo, *fragments: str) -> None:
    message = str(excinfo.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_missing_model_says_what_to_do():
    with pytest.raises(UsageError) as excinfo:
        rr.rerank(QUERY, results_for(TEXTS))
    assert str(excinfo.value).startswith(ce.NO_MODEL)
    from codii_sql.cli import words as cli_words
    from codii_sql.mcp import words as mcp_words

    assert all(s in cli_words.message(excinfo.value) for s in ("--rerank-model", ce.ENV_MODEL))
    # an agent is told in its own words: it has no --rerank-model (a new user's agent was told to pass one)
    said = mcp_words.message(excinfo.value)
    assert "--rerank-model" not in said and "without rerank" in said and ce.ENV_MODEL in said, said


def test_bad_model_paths_are_one_line_usage_errors(tmp_path, tiny):
    cases = {}
    cases["missing"] = (tmp_path / "nope", "does not exist")
    (tmp_path / "empty").mkdir()
    cases["empty"] = (tmp_path / "empty", "no model.onnx")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "pytorch_model.bin").write_bytes(b"\0")
    cases["torch"] = (tmp_path / "torch", "need torch")
    (tmp_path / "notes.txt").write_text("x")
    cases["not onnx"] = (tmp_path / "notes.txt", "not a .onnx file")
    no_tok = tmp_path / "no-tokenizer"
    shutil.copytree(tiny[0], no_tok)
    (no_tok / "vocab.txt").unlink()
    cases["no tokenizer"] = (no_tok, "no tokenizer.json or vocab.txt")
    roberta = write_model(tmp_path / "roberta", TINY, {k.replace("bert.", "roberta."): v
                                                       for k, v in random_bert(TINY).items()})
    cases["not bert"] = (roberta, "BertForSequenceClassification")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "model.onnx").write_bytes(b"not a protobuf")
    shutil.copy(vocab_path(), garbage / "vocab.txt")
    cases["bad onnx"] = (garbage, "onnxruntime cannot load")
    for name, (path, fragment) in cases.items():
        with pytest.raises(UsageError) as excinfo:
            rr.rerank(QUERY, results_for(TEXTS), model_path=path)
        assert_one_line_usage_error(excinfo, fragment)


def test_onnx_folder_and_file_forms_score_like_the_hf_folder(tiny, tmp_path):
    hf = ce.CrossEncoder.load(tiny[0])
    folder = tmp_path / "onnx-model"
    folder.mkdir()
    shutil.copy(hf.graph_path, folder / "model.onnx")
    shutil.copy(vocab_path(), folder / "vocab.txt")
    (folder / "config.json").write_text(json.dumps(TINY), encoding="utf-8")  # max_length 128, as the HF form
    expected = hf.score(QUERY, TEXTS)
    for path in (folder, folder / "model.onnx"):
        encoder = ce.CrossEncoder.load(path)
        assert encoder.graph_path == folder / "model.onnx"
        np.testing.assert_allclose(encoder.score(QUERY, TEXTS), expected, atol=1e-6)


def test_two_label_output_scores_the_log_odds_of_label_1(tmp_path):
    tensors = random_bert(TINY, labels=2, seed=3, prefix="")  # also the variant without the bert. prefix
    folder = write_model(tmp_path / "two-labels", TINY, tensors)
    encoder = ce.CrossEncoder.load(folder)
    got = encoder.score(QUERY, TEXTS[:3])
    for text, value in zip(TEXTS[:3], got):
        logits = reference_logits(TINY, tensors, *pair_tokens(QUERY, text, encoder.max_length))
        assert value == pytest.approx(logits[1] - logits[0], abs=1e-4)


def test_conversion_is_cached_and_instances_are_shared(tiny, monkeypatch, codii_home):
    folder = tiny[0]
    loaded = []
    threads = [threading.Thread(target=lambda: loaded.append(ce.CrossEncoder.load(folder))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in loaded}) == 1
    graph = loaded[0].graph_path
    assert graph.parent == codii_home / "models" and graph.name.startswith("rerank-")
    assert [p.name for p in graph.parent.iterdir()] == [graph.name]  # no temporary file left behind
    mtime = graph.stat().st_mtime_ns

    def no_rebuild(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(bert_graph, "build_bert_graph", no_rebuild)
    monkeypatch.setattr(ce.CrossEncoder, "_instances", {})
    again = ce.CrossEncoder.load(folder)
    assert again is not loaded[0] and again.graph_path == graph and graph.stat().st_mtime_ns == mtime


def test_models_pull_without_huggingface_hub(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    result = CliRunner().invoke(models, ["pull", "cross-encoder/ms-marco-MiniLM-L-6-v2"])
    assert isinstance(result.exception, UsageError)
    assert str(result.exception).startswith("huggingface_hub is not installed: install it and ensure network access")
    bad = CliRunner().invoke(models, ["pull", "../etc"])
    assert isinstance(bad.exception, UsageError)


def test_models_list_shows_pulled_folders_and_graphs(tiny, codii_home):
    ce.CrossEncoder.load(tiny[0])
    pulled = codii_home / "models" / "hf" / "cross-encoder" / "tiny"
    shutil.copytree(tiny[0], pulled)
    result = CliRunner().invoke(models, ["list", "--json"])
    assert result.exit_code == 0, result.output
    kinds = {e["kind"]: e["path"] for e in json.loads(result.output)["models"]}
    assert kinds["pulled"] == str(pulled) and Path(kinds["onnx"]).name.startswith("rerank-")


def test_tokenizer_json_is_used_with_our_truncation_and_padding(tiny, tmp_path):
    folder = tmp_path / "with-tokenizer-json"
    shutil.copytree(tiny[0], folder)
    (folder / "vocab.txt").unlink()
    tok = BertWordPieceTokenizer(vocab_path(), lowercase=True)
    tok.enable_padding(length=512)  # settings a saved tokenizer.json may carry; score() must override them
    tok.enable_truncation(8)
    tok.save(str(folder / "tokenizer.json"))
    expected = ce.CrossEncoder.load(tiny[0]).score(QUERY, TEXTS)
    np.testing.assert_allclose(ce.CrossEncoder.load(folder).score(QUERY, TEXTS), expected, atol=1e-6)


def test_cli_search_reranks_the_fused_chunks_by_logit(tiny, sample_repo):
    """--rerank-model goes through the same search path: the final order is the cross-encoder's."""
    from codii_sql.cli import cli

    folder, _ = tiny
    args = ["search", "follow redirects", "--path", str(sample_repo), "--json", "--limit", "5"]
    plain = json.loads(CliRunner().invoke(cli, args, catch_exceptions=False).output)["results"]
    res = CliRunner().invoke(cli, [*args, "--rerank-model", str(folder)], catch_exceptions=False)
    reranked = json.loads(res.output)["results"]
    scores = [r["score"] for r in reranked]
    assert scores == sorted(scores, reverse=True) and len(reranked) == 5
    expected = ce.CrossEncoder.load(folder).score("follow redirects", [rr.passage_text(Result(**r)) for r in reranked])
    assert scores == pytest.approx([float(x) for x in expected], abs=1e-4)
    assert [r["id"] for r in plain] != [r["id"] for r in reranked]
