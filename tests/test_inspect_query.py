"""``inspect QUERY [PATH] [--raw] [--limit N]``: the chunks a search matches with their BM25 and KNN ranks."""

from __future__ import annotations

import json

from click.testing import CliRunner

from codii_sql.cli import cli


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_inspect_lists_matching_chunks_with_both_ranks_and_the_old_forms_stay(sample_repo, monkeypatch):
    assert run("build", sample_repo).exit_code == 0
    res = run("inspect", "retry with backoff", sample_repo, "--json", "--limit", "3")
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["fts_terms"] and len(info["chunks"]) == 3
    (found,) = [c for c in info["chunks"] if c["symbol"] == "retry_with_backoff"]
    assert found["bm25_rank"] >= 1 and found["knn_rank"] >= 1 and found["cosine"] > 0
    assert found["has_vector"] and "content" not in found
    raw = json.loads(run("inspect", "retry with backoff", sample_repo, "--json", "--raw").output)["chunks"]
    (whole,) = [c for c in raw if c["id"] == found["id"]]
    assert whole["content"].startswith(found["first_line"]) and "def retry_with_backoff(fn" in whole["content"]
    text = run("inspect", "parse_header", sample_repo).output
    assert "app/parse.py:1-4" in text and "bm25 #1" in text and "knn #" in text
    # The snapshot forms are as before: PATH alone, PATH --file, and nothing (the current folder).
    assert "model_id: " in run("inspect", sample_repo).output
    assert "parse_header" in run("inspect", sample_repo, "--file", "app/parse.py").output
    monkeypatch.chdir(sample_repo)
    assert "parse_header" in run("inspect", "parse_header").output  # not a folder here: a query
    assert "model_id: " in run("inspect", ".").output  # a folder: the PATH, as before
    bad = run("inspect", "a", "b", "c")
    assert bad.exit_code == 2 and bad.output.startswith("Error: inspect takes") and "Traceback" not in bad.output


def test_a_missing_folder_is_said_missing_not_taken_for_a_query(tmp_path, monkeypatch):
    """`inspect /nonexistent` searched for the words '/nonexistent' in the current folder, and said that folder
    was not indexed (a new user)."""
    monkeypatch.chdir(tmp_path)
    gone = str(tmp_path / "nonexistent")
    res = CliRunner().invoke(cli, ["inspect", gone])
    assert res.exit_code == 2 and f"{gone}: no such folder" in res.output, res.output
