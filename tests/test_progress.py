"""Build progress: JSON lines on stdout for scripts (build --json), files/s and the time left for people."""

from __future__ import annotations

import io
import json
import time

from click.testing import CliRunner
from rich.console import Console
from support.trees import write_tree

from codii_sql.cli import bar as bar_module
from codii_sql.cli import cli, progress


def test_build_json_streams_one_progress_line_per_event_and_the_report_last(tmp_path, codii_home):
    repo = write_tree(tmp_path / "repo", {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(40)})
    res = CliRunner().invoke(cli, ["build", str(repo), "--no-vectors", "--json"])
    assert res.exit_code == 0, res.output

    lines = [json.loads(line) for line in res.stdout.splitlines()]  # every line one JSON object

    *events, report = lines
    assert report["files"] == 40 and "event" not in report
    assert {e["event"] for e in events} == {"progress"} and {"scan", "chunk"} <= {e["phase"] for e in events}
    for e in events:
        assert set(e) == {"event", "phase", "unit", "done", "total", "per_second", "eta_seconds", "elapsed_seconds"}
    last_chunk = [e for e in events if e["phase"] == "chunk"][-1]
    assert last_chunk["done"] == last_chunk["total"] == 40 and last_chunk["unit"] == "files"
    assert last_chunk["eta_seconds"] in (0, None)
    hashed = [e for e in events if e["phase"] == "hash"]  # its first event and its last (a new user saw no last)
    assert hashed[0]["done"] == 0 and hashed[-1]["done"] == hashed[-1]["total"] == 40


def test_json_lines_give_the_rate_and_eta_and_are_throttled():
    now = [100.0]
    written = []
    report = progress.json_lines(written.append, clock=lambda: now[0])
    for done in range(0, 1001, 50):  # 50 files every 0.25 s: 200 files/s
        report("chunk", done, 1000)
        now[0] += 0.25
    report("vectors", 10, 110)
    now[0] += 2
    report("vectors", 50, 110)  # resumed at 10: 40 chunks in 2 s

    chunk = [e for e in written if e["phase"] == "chunk"]
    assert [e["done"] for e in chunk] == [0, 200, 400, 600, 800, 1000]  # first, one a second, last
    assert chunk[1]["per_second"] == 200.0 and chunk[1]["eta_seconds"] == 4.0
    assert chunk[0]["per_second"] is None and chunk[0]["eta_seconds"] is None
    vectors = [e for e in written if e["phase"] == "vectors"]
    assert vectors[-1]["per_second"] == 20.0 and vectors[-1]["eta_seconds"] == 3.0 and vectors[-1]["unit"] == "chunks"


def test_the_progress_bar_shows_files_a_second_and_the_time_left(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(bar_module, "err_console", Console(file=screen, force_terminal=True, width=120))
    with progress.progress_bar(True) as bar:
        for done in range(0, 300, 60):
            bar("chunk", done, 600)
            time.sleep(0.15)
    shown = screen.getvalue()
    assert "files/s" in shown and "ETA" in shown and "/600" in shown
