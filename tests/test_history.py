"""History search on real git repositories made here: the index, its updates and rewrites, the rules, why."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.history_repo import SESSION_V2, commit, day_date, git, make_history

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.cli.words import words
from codii_sql.codebase import Codebase
from codii_sql.errors import NotIndexedError, UsageError
from codii_sql.ingest import history as history_phase
from codii_sql.ingest.gitdiff import parse_record
from codii_sql.search.budget import json_tokens
from codii_sql.search.history import CommitHit, HunkHit, fit_commits
from codii_sql.storage.store import SCHEMA_VERSION, Store


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    return root, make_history(root)


def build(root: Path, embedder, **kw):
    return service.build(Codebase.open(root), embedder=embedder, **kw)


def ask(root: Path, query: str, **kw) -> service.HistoryAnswer:
    return service.search_history(service.HistoryRequest(query, str(root), **kw))


def all_hunks(root: Path) -> list[dict]:
    with Store(Codebase.open(root).db_path, create=False) as store:
        return [{"path": p, "content": c} for p, c in store.conn.execute("SELECT path, content FROM history_hunks")]


def test_commits_and_hunks_are_indexed_with_vectors_and_found_by_meaning_and_words(repo, embedder):
    root, shas = repo
    report = build(root, embedder)
    assert report.history["state"] == "indexed" and report.history["added"] == 4 and report.commits_embedded == 4
    st = service.status(Codebase.open(root))["history"]
    assert st["commits"] == 4 and st["vectors"] == {"done": 4, "total": 4, "off": False} and st["head"] == shas["rename"]

    found = ask(root, "Retry-After header")
    top = found.results[0]
    assert top.sha == shas["retry"] and top.subject == "Honour Retry-After on 503 responses"
    assert "servers say how long" in top.body and top.knn_rank is not None
    hunk = top.hunks[0]
    assert hunk.path == "src/session.py" and hunk.matched and "+def retry_after_seconds(headers):" in hunk.content
    assert hunk.content.startswith("@@ -") and hunk.new_start >= 1 and hunk.new_lines > hunk.old_lines

    # Only commits with a hunk under the glob; none authored after a date past the history.
    assert {r.sha for r in ask(root, "timeout retries", glob="*.yml").results} == {shas["init"], shas["secrets"]}
    assert ask(root, "Retry-After", since="2030-01-01").results == []
    # The rename: its hunk carries the old path.
    moved = next(r for r in ask(root, "which protocol it speaks").results if r.sha == shas["rename"])
    assert moved.hunks and moved.hunks[0].path == "src/http_session.py" and moved.hunks[0].old_path == "src/session.py"


def test_ignored_files_and_secrets_never_reach_the_history(repo, embedder):
    root, shas = repo
    build(root, embedder)
    hunks = all_hunks(root)
    assert hunks and {h["path"] for h in hunks} == {"src/session.py", "src/http_session.py", "config.yml",
                                                    ".codiiignore"}
    text = "\n".join(h["content"] for h in hunks)
    assert "supersecretvalue" not in text and "PRIVATE KEY" not in text and "quokka" not in text
    secrets = next(r for r in ask(root, "deployment settings vendored").results if r.sha == shas["secrets"])
    assert ".env" not in secrets.files and "vendor/lib.py" not in secrets.files and "config.yml" in secrets.files


def test_a_file_ignored_later_leaves_the_history_too_and_comes_back_with_it(repo, embedder):
    """A rule written after the first build (config.yml into .codiiignore) removes that file's hunks
    from the history as it removes its chunks: a new user found a password's hunk still searchable.
    Relaxed again, the rule brings them back (another new user's history stayed empty of them)."""
    root, _ = repo
    build(root, embedder)
    assert "config.yml" in {h["path"] for h in all_hunks(root)}
    (root / ".codiiignore").write_text("vendor/\nconfig.yml\n")
    report = build(root, embedder)
    assert report.removed == 1 and report.history["state"] == "indexed", report.history
    hunks = all_hunks(root)
    assert "config.yml" not in {h["path"] for h in hunks} and "retries: 3" not in "\n".join(h["content"] for h in hunks)
    assert all("config.yml" not in r.files for r in ask(root, "timeout retries").results)
    # The commits themselves stay, with the hunks the rules keep, and their vectors come back.
    assert service.status(Codebase.open(root))["history"]["commits"] == 4
    assert {h["path"] for h in hunks} >= {"src/session.py", "src/http_session.py"}
    # The rule relaxed again: the file's history comes back (it stayed out even after build --force).
    (root / ".codiiignore").write_text("vendor/\n")
    report = build(root, embedder)
    assert report.added == 1 and report.history["state"] == "indexed", report.history
    back = all_hunks(root)
    assert "config.yml" in {h["path"] for h in back} and "retries: 3" in "\n".join(h["content"] for h in back)
    assert service.status(Codebase.open(root))["history"]["commits"] == 4
    # A file new to the index with no history reads nothing again.
    (root / "fresh.py").write_text("x = 1\n")
    assert build(root, embedder).history["state"] == "unchanged"


def test_the_history_leaves_the_code_index_as_it_was(repo, tmp_path, embedder):
    root, _ = repo
    build(root, embedder, history=False)
    without = service.status(Codebase.open(root))
    assert without["history"]["commits"] == 0 and without["history"]["state"] == "off"
    build(root, embedder, history=True)
    with_history = service.status(Codebase.open(root))
    for key in ("files", "chunks", "vectors"):
        assert with_history[key] == without[key]
    assert with_history["history"]["commits"] == 4
    code = service.search(service.SearchRequest("retry_after_seconds", paths=[str(root)])).results
    assert code and code[0].path == "src/http_session.py"


def test_new_amended_and_reset_commits_are_read_by_the_next_search(repo, embedder):
    root, shas = repo
    build(root, embedder)
    new = commit(root, {"src/http_session.py": SESSION_V2 + "\n\ndef backoff_jitter():\n    return 0.1\n"},
                 "Add jitter to the backoff", 4)
    found = ask(root, "backoff jitter")
    assert found.results[0].sha == new and found.history["commits"] == 5
    assert found.history["vectors"] == {"done": 5, "total": 5, "off": False}  # a few new commits are embedded at once

    git(root, "commit", "-q", "--amend", "-m", "Add random jitter to the backoff delay", day=5)
    amended = git(root, "rev-parse", "HEAD")
    shas_now = {r.sha for r in ask(root, "jitter backoff", limit=10).results}
    assert amended in shas_now and new not in shas_now

    git(root, "reset", "-q", "--hard", shas["rename"])
    after = ask(root, "jitter backoff")
    assert after.history["commits"] == 4 and amended not in {r.sha for r in after.results}
    assert after.history["head"] == shas["rename"]


def test_the_bound_is_kept_by_later_builds_and_history_false_turns_it_off(repo, embedder):
    root, shas = repo
    assert build(root, embedder, history=2).history["commits"] == 2
    assert build(root, embedder).history["state"] == "unchanged"
    with Store(Codebase.open(root).db_path, create=False) as store:
        assert {r["sha"] for r in store.rows("history_shas")} == {shas["rename"], shas["secrets"]}
    assert build(root, embedder, history=day_date(2)).history["commits"] == 2  # the commits of days 2 and 3
    with pytest.raises(UsageError, match="number of commits"):
        build(root, embedder, history="lots")
    (root / ".codii.yaml").write_text("history: false\n")
    fresh = tmp_copy(root)
    report = build(fresh, embedder)
    assert report.history["state"] == "off" and report.history["commits"] == 0
    assert [n.kind for n in ask(fresh, "retry").notes] == ["history"]


def tmp_copy(root: Path) -> Path:
    """A clone of ``root`` with its uncommitted .codii.yaml (a codebase of its own, never built)."""
    copy = root.parent / "copy"
    subprocess.run(["git", "clone", "-q", str(root), str(copy)], check=True)
    (copy / ".codii.yaml").write_text((root / ".codii.yaml").read_text())
    return copy


def test_no_git_and_a_shallow_clone_get_one_line_and_the_code_is_still_indexed(tmp_path, repo, embedder):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "app.py").write_text("def main():\n    return 0\n")
    report = build(plain, embedder)
    assert report.files == 1 and report.history["state"] == "no_git" and "not in a git work tree" in report.history["note"]
    answer = ask(plain, "main")
    assert answer.results == [] and "not in a git work tree" in answer.note(words)

    root, _ = repo
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(shallow)], check=True)
    report = build(shallow, embedder)
    assert report.chunks > 0 and report.history["state"] == "shallow" and "--unshallow" in report.history["note"]

    with pytest.raises(NotIndexedError):
        ask(tmp_path / "repo", "retry")


def test_a_kill_mid_history_keeps_the_last_commit_and_the_next_build_finishes(repo, embedder, monkeypatch):
    root, shas = repo
    build(root, embedder, history=False)
    monkeypatch.setattr(history_phase, "HISTORY_BATCH", 1)
    real, calls = history_phase._write, []

    def dying(store, commits, rules, keep):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(store, commits, rules, keep)

    monkeypatch.setattr(history_phase, "_write", dying)
    with pytest.raises(KeyboardInterrupt):
        build(root, embedder, history=True)
    answer = ask(root, "session", update=False, limit=10)
    assert answer.history["commits"] == 2 and {r.sha for r in answer.results} == {shas["init"], shas["retry"]}
    assert service.search(service.SearchRequest("retry_after_seconds", paths=[str(root)], update=False)).results
    monkeypatch.setattr(history_phase, "_write", real)
    report = build(root, embedder)
    assert report.history["commits"] == 4 and report.history["added"] == 2


def test_an_index_of_schema_5_is_upgraded_in_place(repo, embedder):
    root, _ = repo
    build(root, embedder, history=False)
    db = Codebase.open(root).db_path
    with Store(db) as store:
        for stmt in ("DROP TABLE history_hunks_fts", "DROP TABLE history_commits_fts", "DROP TABLE history_hunks",
                     "DROP TABLE history_commits", "DROP TABLE history_queue",
                     "UPDATE meta SET value = '5' WHERE key = 'schema_version'"):
            store.conn.execute(stmt)
    with Store(db, readonly=True) as old:  # read as it is: the code searches, the history is absent
        assert not old.value("history_present") and old.row("counts")["chunks"] > 0
    with Store(db) as store:
        assert store.meta()["schema_version"] == SCHEMA_VERSION and store.value("history_present")
    assert build(root, embedder, history=True).history["commits"] == 4


def test_why_tells_the_commits_of_a_line_newest_first_with_body_and_hunk(repo):
    root, shas = repo
    text = (root / "src/http_session.py").read_text().split("\n")
    line = text.index("        if response.status == 503:") + 1
    answer = service.explain_line("src/http_session.py", line, root=str(root))
    # git's line history pairs the new line with the one it replaced, which the first commit added.
    assert [r.sha for r in answer.results] == [shas["retry"], shas["init"]]
    assert "servers say how long" in answer.results[0].body
    assert "+        if response.status == 503:" in answer.results[0].hunks[0].content
    doc = text.index('    """Keeps cookies and retries across requests."""') + 1
    told = service.explain_line(str(root / "src/http_session.py"), doc, limit=5)
    assert [r.sha for r in told.results] == [shas["rename"], shas["init"]]  # followed across the rename
    assert [r.sha for r in service.explain_line("src/http_session.py", doc, root=str(root), limit=1).results] == [
        shas["rename"]]
    assert told.to_dict(words)["results"][0].keys() == {"sha", "date", "author", "email", "subject", "body", "files",
                                                      "hunks"}

    # A reformatting sweep listed in .git-blame-ignore-revs is looked through, as GitHub's blame does.
    (root / ".git-blame-ignore-revs").write_text(f"# formatting\n{shas['rename']}\n")
    assert [r.sha for r in service.explain_line("src/http_session.py", doc, root=str(root)).results] == [
        shas["init"]]

    (root / "src/http_session.py").write_text("# edited\n" + "\n".join(text))
    pending = service.explain_line("src/http_session.py", 1, root=str(root))
    assert pending.results == [] and "not committed yet" in pending.note(words)


def test_a_repository_git_refuses_as_another_users_says_so_and_keeps_what_was_read(repo, embedder, monkeypatch):
    # Git's own switch for its ownership check (a new user's clone on a mounted volume of another uid
    # was called "not in a git work tree", and `eval git` "not a git repository").
    root, shas = repo
    build(root, embedder)
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    report = build(root, embedder)
    assert report.files > 0 and report.history["state"] == "refused"
    assert "safe.directory" in report.history["note"] and "not in a git work tree" not in report.history["note"]
    answer = ask(root, "Retry-After", update=False)
    assert answer.results[0].sha == shas["retry"]  # the commits read before it was refused stay searchable
    assert "safe.directory" in answer.note(words)
    with pytest.raises(UsageError, match="belongs to another user") as refused:
        service.explain_line("src/http_session.py", 1, root=str(root))
    assert f"safe.directory {root}" in str(refused.value)
    done = subprocess.run(["codii-sql", "eval", "git", str(root)], capture_output=True, text=True,
                          env={**os.environ, "GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "belongs to another user" in done.stderr
    monkeypatch.delenv("GIT_TEST_ASSUME_DIFFERENT_OWNER")
    assert build(root, embedder).history["state"] in ("indexed", "unchanged")


def test_why_refuses_bad_input_in_one_line(repo, tmp_path):
    root, _ = repo
    for file, line, said in [("nope.py", 1, "no such file"), ("src/http_session.py", 999, "has only"),
                             (".env", 1, "usually holds credentials"), ("src/http_session.py", 0, "1-based")]:
        with pytest.raises(UsageError, match=said):
            service.explain_line(file, line, root=str(root))
    (tmp_path / "loose.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="not in a git work tree"):
        service.explain_line("loose.py", 1, root=str(tmp_path))
    # A binary file (a new user's committed PNG printed a kilobyte of its bytes as its "line 1").
    (root / "src" / "blob.dat").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)) * 4)
    git(root, "add", "src/blob.dat")
    git(root, "commit", "-q", "-m", "Add a blob", day=9)
    with pytest.raises(UsageError, match="binary file"):
        service.explain_line("src/blob.dat", 1, root=str(root))


def test_the_cli_prints_history_and_why_as_text_and_json(repo, embedder):
    root, shas = repo
    build(root, embedder)
    runner = CliRunner()
    out = runner.invoke(cli, ["history", "Retry-After", str(root), "--json", "--limit", "2"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["results"][0]["sha"] == shas["retry"] and data["history"]["commits"] == 4
    assert data["results"][0]["hunks"][0]["path"] == "src/session.py"
    fitted = runner.invoke(cli, ["history", "Retry-After", str(root), "--json", "--max-tokens", "300"]).output
    assert fitted.count("\n") == 1 and json.loads(fitted)["budget"]["max_tokens"] == 300  # as the budget counts it
    text = runner.invoke(cli, ["history", "Retry-After", str(root), "--path", "src/*"])
    assert text.exit_code == 0 and shas["retry"][:12] in text.output and "+def retry_after_seconds" in text.output
    why = runner.invoke(cli, ["why", f"{root}/src/http_session.py:1", "--json"])
    assert why.exit_code == 0 and json.loads(why.output)["results"][0]["sha"] == shas["retry"]
    as_history = runner.invoke(cli, ["why", "src/http_session.py:1", str(root), "--json"])  # PATH as history takes it
    assert as_history.exit_code == 0 and json.loads(as_history.output)["results"][0]["sha"] == shas["retry"]
    bad = runner.invoke(cli, ["why", "src/http_session.py"])
    assert bad.exit_code == 2 and "is not FILE:LINE" in bad.output and "Traceback" not in bad.output
    spaced = runner.invoke(cli, ["why", "src/http_session.py", "1", "--path", str(root)])  # a new user's habit
    assert spaced.exit_code == 2 and f"codii-sql why src/http_session.py:1 --path {root}" in spaced.output, spaced.output
    habit = runner.invoke(cli, ["history", "retry", "--path", str(root)])
    assert habit.exit_code == 2 and f"codii-sql history 'retry' {root}" in habit.output
    empty = runner.invoke(cli, ["history", " ", str(root)])
    assert empty.exit_code == 2 and "QUERY must hold a word" in empty.output
    late = runner.invoke(cli, ["history", "x", str(root), "--since", "yesterday"])
    assert late.exit_code == 2 and "--since takes a date" in late.output


def test_the_budget_cuts_hunks_then_drops_commits():
    hunk = HunkHit("a.py", None, 1, 40, 1, 40, "@@ -1,40 +1,40 @@\n" + "\n".join(f"+line {i}" for i in range(40)), True)
    hits = [CommitHit(f"{i:040d}", 0, "Ada", "a@x", f"Subject {i}", "body " * 50, ["a.py"], 1.0, 1, 1, 1, 0.5, 1,
                      [hunk]) for i in range(5)]
    fitted, report = fit_commits(hits, 400)
    assert report["trimmed"] >= 1 and report["dropped"] >= 1 and report["used_tokens"] <= 400
    assert sum(json_tokens(h.to_dict()) for h in fitted) <= 400  # counted as the JSON answer holds them
    # What JSON escapes costs twice: counted as plain text, such hunks overran the budget.
    quoted = HunkHit("q.py", None, 1, 60, 1, 60, "@@ -1,60 +1,60 @@\n" + "\n".join('+s = "\\\"\\\\"' for _ in range(60)), True)
    hits = [CommitHit(f"{i:040d}", 0, "Ada", "a@x", "Quote", "", ["q.py"], 1.0, 1, 1, 1, 0.5, 1, [quoted])
            for i in range(3)]
    fitted, report = fit_commits(hits, 500)
    assert sum(json_tokens(h.to_dict()) for h in fitted) <= 500, report
    assert "more lines]" in fitted[0].hunks[0].content and len(fitted) < 5


def test_the_best_commit_stays_with_its_file_list_cut_to_the_budget():
    """An "initial import" of 70 files was the only match; at max_tokens 500 it was dropped and the answer said
    "0 commits" (a new user)."""
    files = [f"src/requests/module_{i}.py" for i in range(70)]
    hits = [CommitHit("f" * 40, 0, "Ada", "a@x", "initial import", "", files, 1.0, 1, 1, 1, 0.5, 70, []),
            CommitHit("e" * 40, 0, "Ada", "a@x", "other", "", files, 0.5, 2, 2, 2, 0.4, 70, [])]
    fitted, report = fit_commits(hits, 500)
    assert [h.subject for h in fitted] == ["initial import"] and report["dropped"] == 1
    # The answer's other fields are reserved first, and counted in what was used.
    both, _ = fit_commits([CommitHit(s, 0, "Ada", "a@x", s, "", ["a.py"], 1.0, 1, 1, 1, 0.5, 1, []) for s in "ab"], 400)
    one, spent = fit_commits([CommitHit(s, 0, "Ada", "a@x", s, "", ["a.py"], 1.0, 1, 1, 1, 0.5, 1, []) for s in "ab"],
                             400, reserved=300)
    assert len(both) == 2 and len(one) == 1 and spent["used_tokens"] > 300
    assert json_tokens(fitted[0].to_dict()) <= 500 and fitted[0].files[0] == files[0]
    shown = len(fitted[0].files) - 1
    assert fitted[0].files[-1] == f"… and {70 - shown} more files" and 0 < shown < 70


def test_the_patch_parser_reads_renames_quoted_paths_and_binary_files():
    record = (b"abc\0Ada\0a@x\0" + b"1700000000\0Subject\0Body\0\n"
              b"diff --git a/old name.py b/new name.py\nsimilarity index 90%\nrename from old name.py\n"
              b"rename to new name.py\n--- a/old name.py\t\n+++ b/new name.py\t\n@@ -3 +3,2 @@ def f():\n-x\n+y\n+z\n"
              b"diff --git \"a/t\\303\\251st.py\" \"b/t\\303\\251st.py\"\n--- \"a/t\\303\\251st.py\"\n"
              b"+++ \"b/t\\303\\251st.py\"\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n@@ -10 +10 @@\n-d\n+e\n"
              b"diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n"
              b"diff --git \"a/bad\\377.py\" \"b/bad\\377.py\"\n--- \"a/bad\\377.py\"\n+++ \"b/bad\\377.py\"\n"
              b"@@ -1 +1 @@\n-a\n+b\n")
    c = parse_record(record)
    assert (c.sha, c.date, c.subject, c.body) == ("abc", 1_700_000_000, "Subject", "Body")
    # A name that is not UTF-8 keeps its bytes as \\xNN, as the walk stores it (SQLite TEXT cannot hold it raw).
    assert c.files == ["new name.py", "tést.py", "img.png", "bad\\xff.py"]
    first, *others = c.hunks
    assert (first.path, first.old_path, first.old_start, first.old_lines, first.new_start, first.new_lines) == (
        "new name.py", "old name.py", 3, 1, 3, 2)
    assert [(h.path, h.old_start, h.new_start) for h in others] == [("tést.py", 1, 1), ("tést.py", 10, 10),
                                                                    ("bad\\xff.py", 1, 1)]
    assert others[1].content == "@@ -10 +10 @@\n-d\n+e"


def test_a_query_of_stop_words_or_punctuation_is_an_answer_or_one_line(repo, embedder):
    """'the' holds no BM25 term (a new user's history search failed with an FTS5 syntax error and
    advice to check a damaged index); '!!!' holds no word at all."""
    root, _ = repo
    build(root, embedder)
    assert ask(root, "the").results  # the vectors answer
    with pytest.raises(UsageError, match="must hold a word"):
        ask(root, "!!!")


def test_a_commit_without_hunks_ranks_by_its_message_where_the_hunks_would(tmp_path):
    """A new user's "renamed retry module" ranked the pure rename (no hunk) 4th, under commits that matched
    weakly in both the message and the hunk lists: lexical only, it now takes its message's rank in the
    hunks' place, as a commit waiting for its vector takes its lexical rank in the KNN's."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    code = "import time\n\ndef retry(fn, tries=3):\n    for i in range(tries):\n        return fn()\n"
    commit(repo, {"src/retry.py": code}, "Add retry helper for flaky network calls", day=1)
    commit(repo, {"src/retry.py": code.replace("return fn()", "time.sleep(2 ** i)  # backoff")},
           "Use exponential backoff between retries", day=2)
    git(repo, "mv", "src/retry.py", "src/backoff.py")
    git(repo, "commit", "-q", "-m", "Rename retry module to backoff", day=3)
    commit(repo, {"src/backoff.py": (repo / "src" / "backoff.py").read_text() + "\n# the retry module's helper\n"},
           "Honour Retry-After header on 429 responses", day=4)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "100"]).exit_code == 0
    res = CliRunner().invoke(cli, ["history", "renamed retry module", str(repo), "--json"])
    results = json.loads(res.output)["results"]
    assert results[0]["subject"] == "Rename retry module to backoff" and results[0]["hunk_count"] == 0, results


def test_a_commit_of_a_new_file_is_read_with_its_hunks_by_the_next_history_search(tmp_path):
    """A new user committed a new file and asked history at once: the commit came back with no file and no
    hunk (a file not yet indexed is left out of the history, as an ignored one is) until a build. The
    search now brings the files up to date before it reads the new commits."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, {"src/app.py": "def app():\n    return 1\n"}, "Start the app", day=1)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "100"]).exit_code == 0
    commit(repo, {"src/yak.py": "def yak_shaver():\n    return 'shaved'\n"}, "Add yak shaver utility", day=2)
    res = CliRunner().invoke(cli, ["history", "yak shaver", str(repo), "--json"])
    first = json.loads(res.output)["results"][0]
    assert (first["subject"], first["files"], first["hunk_count"]) == ("Add yak shaver utility", ["src/yak.py"], 1)


def test_a_dormant_repository_s_last_two_years_are_its_history_and_older_commits_are_said(tmp_path):
    """A new user's dormant repository (every commit over 2 years old) answered "No commits found.": the
    default's 2 years counted back from today. They now count back from HEAD's commit (a new user's redis
    snapshot, last commit 2024-10-18, had no history); a bound that leaves all out still says so."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, {"src/old.py": "def old_backoff(n):\n    return n\n"}, "Add the first backoff", day=-2200)
    commit(repo, {"src/backoff.py": "def backoff(n):\n    return 2 ** n\n"}, "Add backoff", day=-1200)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    got = json.loads(CliRunner().invoke(cli, ["history", "backoff", str(repo), "--json"]).output)
    assert [r["subject"] for r in got["results"]] == ["Add backoff"], got  # HEAD's last 2 years: not the first
    assert "1 older commit lies outside" in got["note"] and "before HEAD's commit" in got["note"], got
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "2025-06-01"]).exit_code == 0
    got = json.loads(CliRunner().invoke(cli, ["history", "backoff", str(repo), "--json"]).output)
    assert got["results"] == [] and "no commit lies within" in got["note"] and "--history N" in got["note"], got
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "10"]).exit_code == 0
    got = json.loads(CliRunner().invoke(cli, ["history", "backoff", str(repo), "--json"]).output)
    assert {r["subject"] for r in got["results"]} == {"Add backoff", "Add the first backoff"}
    assert "bound" not in (got.get("note") or ""), got
    # Some commits within it, some older: the answer says how many it does not search (a new user's right
    # commit was the older one, and nothing said so).
    commit(repo, {"src/app.py": "def app():\n    return 1\n"}, "Start the app", day=0)
    built = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "1"])
    assert built.exit_code == 0 and "2 older commits lie outside the history's bound" in built.output, built.output
    # the bound given, not the default's words (a new user's --history 1500 was told "by default ... 5,000")
    assert "(the newest 1 commit)" in built.output and "by default" not in built.output, built.output
    timed = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--history", "1", "--json"])
    report = json.loads(timed.output.strip().splitlines()[-1])
    # the history's time is counted in the build's (a 1.5 s build said 0.03 s)
    assert 0 < report["phase_seconds"]["history"] <= report["seconds"], report
    assert "history: 1 commit, 1 hunk (" in built.output, built.output  # the note adds to the counts, not in their place
    got = json.loads(CliRunner().invoke(cli, ["history", "backoff", str(repo), "--json"]).output)
    assert "2 older commits lie outside" in got["note"] and "--history N" in got["note"], got
    # That note is part of the answer a budget fits (answers were up to 28% over when only commits counted).
    for budget in (250, 400):
        fitted = CliRunner().invoke(cli, ["history", "backoff", str(repo), "--json", "--max-tokens", str(budget)])
        assert len(fitted.output) / 4 <= budget and "older commits lie outside" in fitted.output, fitted.output


def test_history_searches_an_index_file_given_with_db(repo, tmp_path, embedder):
    """README: `--db FILE` on every command; history had none, though a shard holds its history."""
    root, _ = repo
    build(root, embedder)
    shard = tmp_path / "shelf" / "repo.db"
    shard.parent.mkdir()
    assert CliRunner().invoke(cli, ["export", str(root), "--to", str(shard)]).exit_code == 0
    res = CliRunner().invoke(cli, ["history", "session cookies", "--db", str(shard), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["results"], res.output
    assert json.loads(res.output)["codebase"] == str(shard)  # as every other answer names a shard


def test_commits_waiting_while_a_vector_phase_runs_are_said_so_not_sent_to_build(repo, embedder):
    """A new user, told to run `codii-sql build` while the background vector phase was embedding the commits."""
    from codii_sql.storage.lock import vector_lock

    root, _ = repo
    build(root, embedder)
    commit(root, {"src/app.py": "def start_app():\n    return 1\n"}, "Start the app", day=0)
    cb = Codebase.open(root)
    with vector_lock(cb, wait=False):  # the vector phase of another process, as the search sees it
        notes = ask(root, "start the app").notes
    said = [n for n in notes if n.kind == "vectors"]
    assert said and "still being embedded" in said[0].what and said[0].hint is None, notes
    notes = ask(root, "start the app").notes  # the lock free: the search embeds the new commit itself
    assert not [n for n in notes if n.kind == "vectors"], notes


def test_a_pasted_subject_finds_its_commit_first_when_its_diff_holds_none_of_its_words(tmp_path):
    """A new user pasted "docs: update emeritus triagers (#6345)": the commit ranked 9th, its diff a list of
    names, under commits whose messages and diffs both matched a word or two."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, {"docs/guide.md": "# Guide\n\nTriagers label issues.\n"}, "docs: add a triager guide", day=-30)
    commit(repo, {"docs/guide.md": "# Guide\n\nTriagers label issues and update the docs.\n"},
           "docs: update the guide for triagers", day=-20)
    commit(repo, {"docs/index.md": "Update the docs index.\n"}, "docs: update the index", day=-15)
    wanted = commit(repo, {"README.md": "## Former members\n\n- Ada Lovelace\n- Grace Hopper\n"},
                    "docs: update emeritus triagers (#6345)", day=-10)
    # its sibling, whose subject differs by the number alone and whose diff holds one word far down
    sibling = commit(repo, {"README.md": "## Former members\n\n- Ada Lovelace\n- Grace Hopper\n- Alan Kay\n",
                            "docs/old.md": "".join(f"note {i}: the guide\n" for i in range(40)) + "triagers\n"},
                     "docs: update emeritus triagers (#6890)", day=-5)
    commit(repo, {"src/app.py": "def app():\n    return 1\n"}, "Start the app", day=0)
    assert CliRunner().invoke(cli, ["build", str(repo), "--no-vectors"]).exit_code == 0
    got = ask(repo, "docs: update emeritus triagers (#6345)")
    assert got.results[0].sha == wanted and got.results[0].hunk_rank is None, [(r.subject, r.score) for r in got.results]
    # the sibling: its subject holds every word, which no other does (its message does not stand out)
    got = ask(repo, "docs: update emeritus triagers (#6890)")
    assert got.results[0].sha == sibling, [(r.subject, r.score) for r in got.results]
    assert {r.sha for r in ask(repo, "emeritus triagers").results[:2]} == {wanted, sibling}
    # A message that does not stand out keeps plain fusion: both lists' matches lead.
    assert ask(repo, "update docs").results[0].sha != wanted
