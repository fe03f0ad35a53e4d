"""Which embedder a build and a search use: asked for by name, recorded by the index, never mixed."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from support.answers import last_json

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.models.minilm import FAST_MODEL_ID, MODEL_ID
from codii_sql.models.registry import get_embedder
from codii_sql.storage.store import Store


def run(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def as_json(res) -> dict:
    assert res.exit_code == 0, res.output
    return last_json(res.stdout)


def snapshot(repo) -> dict:
    return as_json(run("inspect", repo, "--json"))["snapshot"]


def test_the_fast_model_is_recorded_searched_with_and_close_to_the_default(sample_repo):
    as_json(run("build", sample_repo, "--embedder", "local:fast", "--json"))
    snap = snapshot(sample_repo)
    assert (snap["embedder"], snap["model_id"]) == ("local:fast", FAST_MODEL_ID) and FAST_MODEL_ID != MODEL_ID
    found = as_json(run("search", "follow http redirects", "--path", sample_repo, "--mode", "vector", "--json"))
    assert found["results"][0]["path"] == "app/http.py" and found["results"][0]["symbol"].startswith("Session")
    text = "def retry(fn):\n    return fn()\n"
    fast, exact = get_embedder("local:fast").embed([text])[0], get_embedder("local").embed([text])[0]
    assert fast.dtype == np.float32 and abs(float(np.linalg.norm(fast)) - 1) < 1e-5
    assert 0.95 < float(fast @ exact) < 0.99999  # another model: close, not the same vectors


def test_another_embedder_than_the_index_s_is_refused_unless_forced(sample_repo):
    as_json(run("build", sample_repo, "--json"))
    res = run("build", sample_repo, "--embedder", "local:fast")
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert "holds vectors of the embedder 'local'" in res.output and "--force --embedder local:fast" in res.output
    as_json(run("build", sample_repo, "--force", "--embedder", "local:fast", "--json"))
    assert snapshot(sample_repo)["embedder"] == "local:fast"
    assert as_json(run("build", sample_repo, "--json"))["chunks_embedded"] == 0  # a plain build keeps it
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        assert store.row("vector_counts")["pending"] == 0


def test_a_search_embeds_with_the_index_s_embedder_whatever_the_environment_says(sample_repo):
    as_json(run("build", sample_repo, "--embedder", "local:fast", "--json"))
    res = run("search", "parse a header line", "--path", sample_repo, "--json", env={"CODII_SQL_EMBEDDER": "local"})
    assert as_json(res)["results"][0]["symbol"] == "parse_header"
    refused = run("build", sample_repo, env={"CODII_SQL_EMBEDDER": "local"})  # a build asked for another one
    assert refused.exit_code == 1 and "--force" in refused.output


def test_codii_yaml_and_the_environment_choose_a_new_index_s_embedder(sample_repo, tmp_path):
    as_json(run("build", sample_repo, "--json", env={"CODII_SQL_EMBEDDER": "local:fast"}))
    assert snapshot(sample_repo)["embedder"] == "local:fast"
    other = sample_repo.parent / "other"
    other.mkdir()
    (other / "a.py").write_text("def alpha():\n    return 1\n")
    (other / ".codii.yaml").write_text("embedder: local:fast\n")
    as_json(run("build", other, "--json", env={"CODII_SQL_EMBEDDER": "local"}))  # the file wins
    assert snapshot(other)["embedder"] == "local:fast"


def test_unknown_embedder_names_are_one_line_errors(sample_repo):
    for name, words in (("nope", "unknown embedder 'nope'"), ("local:huge", "'local:huge'")):
        res = run("build", sample_repo, "--embedder", name)
        assert res.exit_code == 2 and words in res.output and res.output.count("\n") == 1, res.output
    assert not Codebase.open(sample_repo).db_path.exists()
    (sample_repo / ".codii.yaml").write_text("embedder: banana\n")  # named as its other keys' errors are
    res = run("build", sample_repo)
    assert res.exit_code == 2 and f"{sample_repo / '.codii.yaml'}: unknown embedder 'banana'" in res.output, res.output


def test_names_are_canonical_and_checked_before_any_advice_about_them(sample_repo):
    as_json(run("build", sample_repo, "--embedder", " local: ", "--json"))
    assert snapshot(sample_repo)["embedder"] == "local"
    assert run("build", sample_repo, "--embedder", "local").exit_code == 0
    res = run("build", sample_repo, "--embedder", "nope")  # an index exists: still "unknown", not "--force"
    assert res.exit_code == 2 and "unknown embedder 'nope'" in res.output and "--force" not in res.output


def test_a_long_lived_server_embeds_with_the_model_an_index_was_rebuilt_with(sample_repo):
    """A new user's HTTP and MCP servers kept embedding queries with an index's old model after
    `build --force --embedder local:fast` rebuilt it in place, scoring them against the new vectors. The
    connections they keep (OpenIndexes) reopen when the index records another model."""
    from codii_sql import service

    as_json(run("build", sample_repo, "--json"))
    indexes = service.OpenIndexes()
    cb = service.open_codebase(sample_repo)
    with indexes.searcher(cb) as searcher:
        assert searcher.embedder.model_id == MODEL_ID
    as_json(run("build", sample_repo, "--force", "--embedder", "local:fast", "--json"))
    with indexes.searcher(cb) as searcher:
        assert searcher.embedder.model_id == FAST_MODEL_ID
        assert searcher.store.meta()["model_id"] == FAST_MODEL_ID
    answer = service.search(service.SearchRequest("follow http redirects", paths=[str(sample_repo)], update=False),
                            indexes=indexes)
    assert answer.results[0].path == "app/http.py" and answer.members[0].model_id == FAST_MODEL_ID
