"""Embedding providers through real HTTP servers on 127.0.0.1 (tests/support/embedding_server.py),
speaking Ollama's and OpenAI's embedding APIs and backed by the bundled model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from support.answers import last_json
from support.providers import KEY, Server
from support.trees import write_tree

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.storage.store import Store

@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch):
    """A well-behaved server, the providers pointed at it, fast retries, for every test."""
    server.control(fail=[], delay=0.0, dims=384, exit_after=None)
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CODII_SQL_HTTP_RETRIES", "3")
    monkeypatch.setattr("codii_sql.models.providers.BACKOFF_BASE", 0.05)


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def as_json(res) -> dict:
    assert res.exit_code == 0, res.output
    return last_json(res.stdout)


def one_line_error(res, *words):
    assert res.exit_code == 1 and res.output.startswith("Error: ") and res.output.count("\n") == 1, res.output
    for word in words:
        assert word in res.output, res.output


@pytest.mark.parametrize("embedder", ["ollama:nomic-embed-text", "openai:text-embedding-test"])
def test_a_build_and_a_search_through_each_provider(sample_repo, server, codii_home, embedder):
    report = as_json(run("build", sample_repo, "--embedder", embedder, "--json"))
    assert report["vectors_pending"] == 0 and report["chunks_embedded"] == report["chunks"] > 0
    snap = as_json(run("inspect", sample_repo, "--json"))["snapshot"]
    assert (snap["embedder"], snap["model_id"], snap["dims"]) == (embedder, embedder, 384)
    found = as_json(run("search", "follow http redirects", "--path", sample_repo, "--mode", "vector", "--json"))
    assert found["results"][0]["path"] == "app/http.py" and "note" not in found
    seen = server.stats()["authorization"]
    assert (f"Bearer {KEY}" in seen) == embedder.startswith("openai")
    files = [p for p in codii_home.rglob("*") if p.is_file()]
    assert files and not [p for p in files if KEY.encode() in p.read_bytes()]  # the key is never on disk


def test_a_768_dim_model_gets_vector_tables_of_its_width(sample_repo, server):
    server.control(dims=768)
    as_json(run("build", sample_repo, "--embedder", "ollama:wide-model", "--json"))
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        assert store.vector_dims() == 768 and store.meta()["dims"] == 768
    found = as_json(run("search", "parse a header line", "--path", sample_repo, "--json"))
    assert found["results"][0]["symbol"] == "parse_header"
    as_json(run("build", sample_repo, "--embedder", "openai:sized@768", "--force", "--json"))  # `dimensions`
    assert as_json(run("inspect", sample_repo, "--json"))["snapshot"]["model_id"] == "openai:sized@768"


def test_rate_limits_are_waited_out_as_retry_after_says(sample_repo, server):
    server.control(fail=[{"status": 429, "retry_after": 1}, {"status": 429, "retry_after": 1}])
    started = time.monotonic()
    report = as_json(run("build", sample_repo, "--embedder", "ollama:nomic-embed-text", "--json"))
    assert report["vectors_pending"] == 0 and time.monotonic() - started >= 2.0
    assert server.stats()["requests"] >= 3


def test_failing_batches_end_the_build_keep_what_is_committed_and_the_next_build_resumes(tmp_path, server):
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(70)})
    server.control(fail=[{"status": 500}] * 12)  # more than the attempts of every request in flight
    res = run("build", repo, "--embedder", "openai:text-embedding-test")
    one_line_error(res, "did not take a batch", "after 3 attempts", "HTTP 500")
    st = as_json(run("status", repo, "--json"))
    assert st["files"] == 70 and st["vectors"]["state"] == "pending"  # every file committed, searchable
    bm25 = as_json(run("search", "handler_42", "--path", repo, "--mode", "bm25", "--no-update", "--json"))
    assert bm25["results"][0]["path"] == "m42.py"
    server.control(fail=[])
    before = server.stats()["texts"]
    again = as_json(run("build", repo, "--json"))  # the index's embedder, recorded
    assert again["vectors_pending"] == 0 and again["chunks_embedded"] == st["vectors"]["total"] - st["vectors"]["done"]
    sent = server.stats()["texts"] - before  # plus the width probe of a process new to the server
    assert sent - again["chunks_embedded"] in (0, 1)


def test_a_server_that_stalls_times_out_with_one_line(sample_repo, server, monkeypatch):
    monkeypatch.setenv("CODII_SQL_HTTP_TIMEOUT", "0.5")
    monkeypatch.setenv("CODII_SQL_HTTP_RETRIES", "2")
    server.control(delay=2.0)
    one_line_error(run("build", sample_repo, "--embedder", "ollama:slow-model"), "no answer within 0.5 s")


def test_vectors_of_another_width_mid_build_stop_it(tmp_path, server, monkeypatch):
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(200)})
    monkeypatch.setattr("codii_sql.ingest.embedding.EMBED_STEP", 64)
    real_post = httpx.Client.post
    calls = []

    def post(self, url, **kw):  # the server swaps its model after the first batch of vectors
        calls.append(url)
        if len(calls) == 3:
            server.control(dims=768)
        return real_post(self, url, **kw)

    monkeypatch.setattr(httpx.Client, "post", post)
    res = run("build", repo, "--embedder", "ollama:shifty")
    one_line_error(res, "returned 768-dim vectors where it returned 384-dim ones before", "--force")
    assert as_json(run("doctor", repo, "--check-only", "--json"))["consistent"]


def test_a_server_killed_mid_build_loses_nothing_and_the_next_build_embeds_only_what_is_missing(tmp_path, monkeypatch):
    repo = write_tree(tmp_path / "r", {f"m{i}.py": "".join(f"def h_{i}_{j}(x):\n    return x + {j}\n\n\n"
                                                           for j in range(4)) for i in range(60)})
    monkeypatch.setattr("codii_sql.ingest.embedding.VECTOR_BATCH", 64)
    monkeypatch.setattr("codii_sql.ingest.embedding.EMBED_STEP", 64)
    first = Server()
    try:
        for key, value in first.env.items():
            monkeypatch.setenv(key, value)
        first.control(exit_after=3)  # the probe and two batches of 64, then the process is gone
        one_line_error(run("build", repo, "--embedder", "ollama:nomic-embed-text"), "refused the connection",
                       '"ollama serve"')
    finally:
        first.stop()
    st = as_json(run("status", repo, "--json"))
    assert st["vectors"]["done"] == 128 and st["files"] == 60
    checked = run("doctor", repo, "--check-only", "--json")  # the index is whole; its embedder does not answer
    report = last_json(checked.stdout)
    assert checked.exit_code == 1 and report["consistent"] and not report["embedder"]["answers"], checked.output
    second = Server()
    try:
        for key, value in second.env.items():
            monkeypatch.setenv(key, value)
        again = as_json(run("build", repo, "--json"))
        assert again["vectors_pending"] == 0 and again["chunks_embedded"] == st["vectors"]["total"] - 128
        assert second.stats()["texts"] - again["chunks_embedded"] in (0, 1)
    finally:
        second.stop()


def test_a_search_answers_from_bm25_when_the_provider_is_down(sample_repo, monkeypatch):
    down = Server()
    for key, value in down.env.items():
        monkeypatch.setenv(key, value)
    as_json(run("build", sample_repo, "--embedder", "ollama:nomic-embed-text", "--json"))
    down.stop()
    found = as_json(run("search", "parse_header", "--path", sample_repo, "--json"))
    assert found["results"][0]["symbol"] == "parse_header"
    assert "the embedder ollama:nomic-embed-text did not answer" in found["note"] and "BM25" in found["note"]


@pytest.mark.parametrize("embedder, env, words", [
    ("ollama:nomic-embed-text", {"OLLAMA_HOST": "http://127.0.0.1:9"}, ["Ollama at http://127.0.0.1:9 refused the "
                                                                        'connection: is "ollama serve" running?']),
    ("openai:text-embedding-test", {"OPENAI_API_KEY": ""}, ["answered 401: check OPENAI_API_KEY"]),
    ("ollama:missing-model", {}, ["answered 404", "run `ollama pull missing-model`"]),
])
def test_errors_say_what_to_do(sample_repo, server, monkeypatch, embedder, env, words):
    if embedder.startswith("openai"):
        server.control(fail=[{"status": 401, "message": "Incorrect API key provided"}])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CODII_SQL_HTTP_RETRIES", "1")
    one_line_error(run("build", sample_repo, "--embedder", embedder), *words)
    assert KEY not in run("build", sample_repo, "--embedder", embedder).output


def test_a_first_build_with_the_server_down_indexes_every_file_and_the_next_embeds_them(sample_repo, server,
                                                                                         monkeypatch):
    """A new user's first build with Ollama down committed nothing: status said not_indexed without the error,
    and an MCP server's watcher then built the index with the default model instead."""
    down = Server()
    for key, value in down.env.items():
        monkeypatch.setenv(key, value)
    down.stop()
    one_line_error(run("build", sample_repo, "--embedder", "ollama:late-model"), "refused the connection",
                   "every file is indexed for BM25")
    st = as_json(run("status", sample_repo, "--json"))
    assert st["status"] == "indexed" and st["vectors"]["state"] == "pending" and "refused" in st["vectors"]["error"]
    assert as_json(run("inspect", sample_repo, "--json"))["snapshot"]["model_id"] == "ollama:late-model"
    found = as_json(run("search", "parse_header", "--path", sample_repo, "--mode", "bm25", "--no-update", "--json"))
    assert found["results"][0]["symbol"] == "parse_header"
    for key, value in server.env.items():  # the server is up now, with wider vectors than the default model's
        monkeypatch.setenv(key, value)
    server.control(dims=768)
    assert as_json(run("build", sample_repo, "--json"))["vectors_pending"] == 0
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        assert store.vector_dims() == 768 and store.meta()["dims"] == 768


def test_a_search_after_a_failed_vector_phase_asks_the_server_nothing_and_says_why(tmp_path, server, monkeypatch):
    """A new user's searches after the vector phase failed (the server down) each started a build that failed
    again ~10 s later, and said "vectors are still being embedded" meanwhile."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(70)})
    server.control(fail=[{"status": 500}] * 12)
    one_line_error(run("build", repo, "--embedder", "openai:text-embedding-test"), "HTTP 500")
    server.control(fail=[{"status": 500}] * 100)  # still failing
    monkeypatch.setenv("CODII_SQL_BACKGROUND", "1")
    started = []
    monkeypatch.setattr("codii_sql.service.builds.start_daemon", lambda cb, options: started.append(cb))
    asked = server.stats()["requests"]
    found = as_json(run("search", "handler_42", "--path", repo, "--mode", "bm25", "--json"))
    assert found["results"][0]["path"] == "m42.py" and started == [] and server.stats()["requests"] == asked
    hybrid = as_json(run("search", "handler 42", "--path", repo, "--json"))
    assert "vector phase stopped" in hybrid["note"] and "HTTP 500" in hybrid["note"], hybrid["note"]
    assert started == []


def test_an_index_built_by_a_provider_is_refused_another_model(sample_repo):
    as_json(run("build", sample_repo, "--embedder", "ollama:nomic-embed-text", "--json"))
    res = run("build", sample_repo, "--embedder", "openai:text-embedding-test")
    one_line_error(res, "'ollama:nomic-embed-text'", "--force --embedder openai:text-embedding-test")
    assert Path(Codebase.open(sample_repo).db_path).is_file()


def test_an_index_without_vectors_is_searched_without_asking_the_provider(sample_repo, server):
    """Built with vectors off, an index has nothing to compare a query embedding with: a hybrid
    search answers from BM25 and does not ask the embedding server at all."""
    as_json(run("build", sample_repo, "--embedder", "ollama:nomic-embed-text", "--no-vectors", "--json"))
    asked = server.stats()["texts"]
    found = as_json(run("search", "parse_header", "--path", sample_repo, "--mode", "hybrid", "--json"))
    assert found["results"][0]["symbol"] == "parse_header"
    assert server.stats()["texts"] == asked and "did not answer" not in found.get("note", "")


def test_a_search_embedding_an_edit_gives_up_on_a_hung_server_as_soon_as_its_query_does(tmp_path, server,
                                                                                       monkeypatch):
    """A new user's search after an edit waited 6.5 minutes on a server that accepted and never answered: the
    edit's vectors had a build's budget (6 attempts of 60 s) where the query's has 2 of 10 s."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(x):\n    return x + {i}\n" for i in range(20)})
    assert run("build", repo, "--embedder", "openai:text-embedding-test").exit_code == 0
    (repo / "new.py").write_text("def refund_twice():\n    return 'refund'\n")
    monkeypatch.setenv("CODII_SQL_HTTP_TIMEOUT", "0.3")
    monkeypatch.setenv("CODII_SQL_HTTP_RETRIES", "6")
    monkeypatch.setenv("CODII_SQL_BACKGROUND", "1")
    monkeypatch.setattr("codii_sql.service.builds.start_daemon", lambda cb, options: None)
    server.control(delay=2.0)
    asked = server.stats()["requests"]
    found = as_json(run("search", "refund_twice", "--path", repo, "--json"))
    assert found["results"][0]["path"] == "new.py" and "refund_twice" in found["results"][0]["content"]
    assert server.stats()["requests"] - asked <= 4, server.stats()  # 2 for the edit, 2 for the query: not 6 + 2


def test_a_query_the_server_did_not_answer_is_not_asked_again_for_a_minute(server, monkeypatch):
    """A new user's server searched a workspace of two members behind a provider that hung: 40 s a search, every
    search. The failure is kept a minute; the answer comes from BM25 at once meanwhile."""
    from codii_sql.errors import EmbeddingFailedError
    from codii_sql.models.providers import QUERY_RETRY_SECONDS, openai_factory

    monkeypatch.setenv("CODII_SQL_HTTP_TIMEOUT", "0.3")
    embedder = openai_factory("text-embedding-test")
    server.control(delay=2.0)
    asked = server.stats()["requests"]
    with pytest.raises(EmbeddingFailedError, match="no answer within 0.3 s"):
        embedder.embed_query("refund")
    assert server.stats()["requests"] - asked == 2
    with pytest.raises(EmbeddingFailedError, match=f"not asked again for {QUERY_RETRY_SECONDS:g} s"):
        embedder.embed_query("refund")
    assert server.stats()["requests"] - asked == 2
    # Each CLI search is a fresh process: it learns of the failure from the index home, not by 21 s of waiting.
    fresh = subprocess.run([sys.executable, "-c", "from codii_sql.models.providers import openai_factory\n"
                            "openai_factory('text-embedding-test').embed_query('refund')"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert fresh.returncode != 0 and "not asked again" in fresh.stderr, fresh.stderr[-500:]
    assert server.stats()["requests"] - asked == 2
    server.control(delay=0.0)
    monkeypatch.setattr("codii_sql.models.providers.QUERY_RETRY_SECONDS", 0.0)
    assert embedder.embed_query("refund").shape == (384,)
    assert not list((Path(os.environ["CODII_SQL_HOME"]) / "providers").glob("*.json"))  # an answer forgets it


def test_an_html_error_page_is_told_by_its_words_on_one_short_line():
    """A new user's note held a plain web server's whole 501 page, tags and all, once per member."""
    import httpx

    from codii_sql.models.providers import _error_text

    page = ("<!DOCTYPE HTML>\n<html><head><meta charset='utf-8'><title>Error response</title><style>p {}</style>"
            "</head><body><h1>Error response</h1><p>Error code: 501</p><p>Message: Unsupported method ('POST')."
            "</p>" + "<p>filler words</p>" * 40 + "</body></html>")
    told = _error_text(httpx.Response(501, text=page, headers={"content-type": "text/html"}))
    assert told.startswith("Error response Error code: 501 Message: Unsupported method ('POST').") and "<" not in told
    assert len(told) <= 200 and "\n" not in told
    assert _error_text(httpx.Response(500, json={"error": {"message": "model overloaded"}})) == "model overloaded"


def test_the_openai_api_without_a_key_says_the_key_is_missing(monkeypatch):
    """A new user without OPENAI_API_KEY (and offline) read 'refused the connection: is it running?' of
    OpenAI's own API. A server of one's own (OPENAI_BASE_URL) may need no key: its hint is as before."""
    from codii_sql.models.providers import openai_factory

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert "OPENAI_API_KEY is not set" in openai_factory("text-embedding-3-small").endpoint.refused_hint
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert openai_factory("text-embedding-3-small").endpoint.refused_hint.startswith("is it running?")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert openai_factory("text-embedding-3-small").endpoint.refused_hint.startswith("is it running?")


def test_nan_or_ragged_vectors_are_refused_and_never_stored_and_another_width_searches_by_bm25(
        tmp_path, server, monkeypatch):
    """A helper's server answered NaN vectors: they were stored, cached, matched every query (score ~1, no note)
    and came back from the cache after `build --force`; ragged ones leaked numpy's error; a model of another
    width made every search fail where every other fault of the provider answers by BM25."""
    import numpy as np

    repo = write_tree(tmp_path / "r", {"a.py": "def parse_header(line):\n    return line.split(':', 1)\n"})
    as_json(run("build", repo, "--embedder", "ollama:nomic-embed-text", "--json"))
    real_post = httpx.Client.post
    shape = {}

    def post(self, url, **kw):  # the server's model breaks: NaN, or vectors of two widths
        answer = real_post(self, url, **kw)
        body = answer.json()
        if "embeddings" in body and shape:
            body["embeddings"] = [[float("nan")] * 384 if shape["nan"] else [0.1] * (384 + i % 2)
                                  for i, _ in enumerate(body["embeddings"])]
        return httpx.Response(answer.status_code, content=json.dumps(body).encode(),  # NaN as Python writes it
                              headers={"content-type": "application/json"})

    monkeypatch.setattr(httpx.Client, "post", post)
    (repo / "b.py").write_text("def retry_later(fn):\n    return fn()\n\n\ndef other():\n    return 2\n")
    for nan, words in ((True, "NaN or infinity"), (False, "different widths")):
        shape["nan"] = nan
        one_line_error(run("build", repo, "--embedder", "ollama:nomic-embed-text"), words)
    db = Codebase.open(repo).db_path
    with Store(db, create=False) as store:
        blobs = [r[0] for r in store.conn.execute("SELECT embedding FROM chunks_vec")]
    assert blobs and all(np.isfinite(np.frombuffer(b, dtype=np.float32)).all() for b in blobs)
    shape["nan"] = True  # a query's NaN vector: BM25 answers, and says why
    found = as_json(run("search", "parse_header", "--path", repo, "--json"))
    assert found["results"][0]["symbol"] == "parse_header" and "NaN or infinity" in found["note"], found
    shape.clear()
    monkeypatch.setattr(httpx.Client, "post", real_post)
    monkeypatch.setattr("codii_sql.models.providers.QUERY_RETRY_SECONDS", 0.0)  # the failure is not waited out
    server.control(dims=768)
    wider = as_json(run("search", "where are headers split", "--path", repo, "--json"))
    assert wider["results"] and "768-dim vectors where" in wider["note"] and "BM25" in wider["note"], wider
    from codii_sql.paths import home

    for remembered in (home() / "providers").glob("*.failed.json"):  # the failure other processes wait out
        remembered.unlink()
    fresh = subprocess.run([sys.executable, "-m", "codii_sql.cli", "search", "where are headers split", "--path",
                            str(repo), "--json"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           check=False)
    answer = last_json(fresh.stdout)  # a fresh process knows no width but the index's
    assert fresh.returncode == 0 and answer["results"], fresh
    assert "768-dim vectors where this index holds 384-dim ones" in answer["note"], answer["note"]
