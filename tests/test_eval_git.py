"""``codii-sql eval git`` on a real git repository made here: queries, gold files, skip reasons, metrics by hand.

The history (oldest first; ``*`` marks the commits that become queries, newest first in the run):

1. ``Initial import``: too short (2 words).
2. * ``fix(core): make parse_header strip tabs (#12)``: core.py and its test -> gold core.py (rank 1 in BM25).
3. ``Document the configuration options``: docs only -> no-source.
4. ``Bump lodash from 1.0.0 to 1.0.1``: generic.
5. * ``Add FormatDuration rounding to milliseconds`` on a branch (with go.mod: not code), then a merge
   commit (not walked) -> gold fmt.go (1).
6. ``Add a scratch module for experiments``: its only file is deleted by 7 -> gone-at-head.
7. ``Drop the scratch module again``: a deletion only -> no-source.
8. * ``[core] Rename parse_header argument everywhere.``: core.py and fmt.go -> core.py at 1, fmt.go
   shares no term with the query and is not returned: hit, but not all gold.
9. * ``Speed up cold starts noticeably``: core.py, but no file holds any of its words: a miss.
10. * ``refactor!: move the slugify helper into helpers``: a rename with an edit -> gold its new path (1).
11. ``Revert "Speed up cold starts noticeably"``: revert.
12. ``feat: touch six modules at once``: six source files -> too-many-files.

So in BM25 mode over 5 queries: hit@1 = hit@5 = hit@10 = 4/5, all-gold@5 = 3/5, MRR@10 = 4/5.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from codii_sql.cli import cli
from codii_sql.eval.gitlog import clean_subject, subject_skip

CORE = '''def parse_header(line, sep=":"):
    """Split one header line into its name and value."""
    name, _, value = line.partition(sep)
    return name.strip(), value.strip(" \\t")
'''
FMT = '''package lib

import "time"

// FormatDuration renders d rounded to milliseconds.
func FormatDuration(d time.Duration) string {
\treturn d.Round(time.Millisecond).String()
}
'''
UTIL = '''def slugify(title):
    """Lower-case words joined by dashes."""
    return "-".join(title.lower().split())
'''


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def commit(repo: Path, subject: str, files: dict[str, str | None]) -> None:
    """Write (or, for None, delete) ``files`` and commit them all with ``subject``."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            git(repo, "rm", "-q", rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", subject)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("history") / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "Initial import", {"src/core.py": CORE, "lib/fmt.go": FMT.replace("Round(time.Millisecond)", "Round(1)"),
                                    "src/util.py": UTIL, "README.md": "# proj\n",
                                    "tests/test_core.py": "from src.core import parse_header\n"})
    commit(repo, "fix(core): make parse_header strip tabs (#12)",
           {"src/core.py": CORE + "\n# tabs too\n", "tests/test_core.py": "import src.core\n"})
    commit(repo, "Document the configuration options", {"docs/config.md": "# Options\n"})
    commit(repo, "Bump lodash from 1.0.0 to 1.0.1", {"package.json": '{"lodash": "1.0.1"}\n'})
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "Add FormatDuration rounding to milliseconds", {"lib/fmt.go": FMT, "go.mod": "module proj\n"})
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature' into main", "feature")
    commit(repo, "Add a scratch module for experiments", {"src/scratch.py": "X = 1\n"})
    commit(repo, "Drop the scratch module again", {"src/scratch.py": None})
    commit(repo, "[core] Rename parse_header argument everywhere.",
           {"src/core.py": CORE.replace("sep", "delimiter"), "lib/fmt.go": FMT + "\n// d: a time.Duration\n"})
    commit(repo, "Speed up cold starts noticeably", {"src/core.py": CORE.replace("sep", "delimiter") + "\n"})
    git(repo, "mv", "src/util.py", "src/helpers.py")
    commit(repo, "refactor!: move the slugify helper into helpers", {"src/helpers.py": UTIL + "\n"})
    commit(repo, 'Revert "Speed up cold starts noticeably"', {"src/core.py": CORE.replace("sep", "delimiter")})
    commit(repo, "feat: touch six modules at once", {f"src/m{i}.py": f"V{i} = {i}\n" for i in range(6)})
    return repo


def run_json(*args) -> tuple[int, dict | str]:
    res = CliRunner().invoke(cli, ["eval", "git", *map(str, args), "--json"], catch_exceptions=False)
    return res.exit_code, (json.loads(res.stdout) if res.exit_code == 0 else res.output)


def test_subjects_are_cleaned_and_generic_ones_skipped():
    assert clean_subject("fix(core): handle empty header values (#12).") == "handle empty header values"
    assert clean_subject("feat(http)!: add retry budget, closes #44") == "add retry budget"
    assert clean_subject("[ci] chore!: speed up the test matrix #7") == "speed up the test matrix"
    assert clean_subject("sessions: fix hooks type (#7425)") == "sessions: fix hooks type"  # a component, kept
    assert clean_subject("Touch up PR 1306") == "Touch up"
    reasons = {s: subject_skip(s, clean_subject(s)) for s in [
        "Merge pull request #3 from a/b", "Bump actions/checkout from 4 to 5", "Release v1.2", "v2.34.2",
        "Update README.md", "chore(deps): bump zod to 3.1", 'Revert "Add x"', "Fix typo", "Release the GIL in encode"]}
    assert list(reasons.values()) == ["generic"] * 6 + ["revert", "short", None]


def test_history_gives_queries_gold_files_and_hand_computed_metrics(history, tmp_path):
    code, out = run_json(history, "--mode", "bm25", "--work-dir", tmp_path)
    assert code == 0, out
    assert out["commits"] == {"scanned": 12, "used": 5, "history_end": True,
                              "skipped": {"revert": 1, "generic": 1, "short": 1, "no-source": 2,
                                          "too-many-files": 1, "gone-at-head": 1}}
    assert out["repository"]["root"] == str(history.resolve()) and "proxy" in out["proxy"]
    assert out["repository"]["dirty"] is False and "uncommitted" not in out["proxy"]
    (saved,) = out["saved"]
    run = json.loads(Path(saved).read_text())
    assert Path(saved).parent == tmp_path / "runs" and run["kind"] == "git"
    assert [(q["query"], q["ranks"]) for q in run["per_query"]] == [
        ("move the slugify helper into helpers", {"src/helpers.py": 1}),
        ("Speed up cold starts noticeably", {"src/core.py": None}),
        ("Rename parse_header argument everywhere", {"src/core.py": 1, "lib/fmt.go": None}),
        ("Add FormatDuration rounding to milliseconds", {"lib/fmt.go": 1}),
        ("make parse_header strip tabs", {"src/core.py": 1}),
    ]
    assert out["runs"]["bm25"]["metrics"] == pytest.approx(
        {"hit@1": 0.8, "hit@5": 0.8, "hit@10": 0.8, "all-gold@5": 0.6, "MRR@10": 0.8})


def test_text_table_has_a_row_per_mode_and_runs_compare(history, tmp_path):
    res = CliRunner().invoke(cli, ["eval", "git", str(history), "--commits", "2", "--mode", "bm25", "--mode",
                                   "vector", "--work-dir", str(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "2 used" in lines[1] and "history ended" not in lines[1] and lines[3].startswith("proxy:")
    (history / "src" / "core.py").write_text("def edited():\n    return 0\n")  # a fresh user's run said HEAD
    res = CliRunner().invoke(cli, ["eval", "git", str(history), "--commits", "2", "--mode", "bm25",
                                   "--work-dir", str(tmp_path / "dirty")], catch_exceptions=False)
    assert "uncommitted changes, and the index holds them" in res.stdout.splitlines()[3]
    subprocess.run(["git", "checkout", "--", "src/core.py"], cwd=history, check=True)
    assert [line.split()[:2] for line in lines[-2:]] == [["bm25", "2"], ["vector", "2"]]
    a, b = sorted((tmp_path / "runs").glob("git-proj-*.json"))
    cmp = CliRunner().invoke(cli, ["eval", "--compare", str(a), str(b)], catch_exceptions=False)
    assert cmp.exit_code == 0 and "over 2 common queries" in cmp.stdout


def test_not_a_repository_no_usable_commit_benchmark_options_and_shallow_clone_fail_in_one_line(history, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    code, msg = run_json(plain)
    assert code == 2 and "is not a git repository" in msg and "Traceback" not in msg
    young = tmp_path / "young"
    young.mkdir()
    git(young, "init", "-q")
    commit(young, "Initial import", {"a.py": "A = 1\n"})
    code, msg = run_json(young, "--mode", "bm25")
    assert code == 2 and "none of 1 commits gives a query (1 short)" in msg
    code, msg = run_json(history, "--top", "5")
    assert code == 2 and "eval git takes --commits" in msg
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", history.as_uri(), str(shallow))
    code, msg = run_json(shallow, "--mode", "bm25")
    assert code == 2 and "shallow clone with 1 commits" in msg and "git fetch --unshallow" in msg
