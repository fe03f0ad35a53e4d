"""Builds done aside and published in place (service.build_aside): what a Ray task runs, without Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.trees import write_tree

from codii_sql import service
from codii_sql.codebase import Codebase
from codii_sql.errors import EmbeddingFailedError
from codii_sql.processes import alive
from codii_sql.search.results import SearchOptions
from codii_sql.service.aside import SCRATCH_PREFIX
from codii_sql.storage.store import Store


def _in_batches(calls: list[int], size: int = 5):
    """An ``embed_elsewhere`` that embeds with the real model, ``size`` texts a call, as Ray tasks would."""
    def embed_elsewhere(name: str, texts: dict[str, str]):
        keys = list(texts)
        for i in range(0, len(keys), size):
            part = keys[i:i + size]
            calls.append(len(part))
            yield dict(zip(part, service.embed_texts(name, [texts[k] for k in part]), strict=True))
    return embed_elsewhere


def _counts(db: Path) -> dict:
    with Store(db, create=False) as store:
        return store.row("vector_counts")


def test_a_build_aside_is_published_and_the_next_one_is_incremental(sample_repo):
    cb = Codebase.open(sample_repo)
    calls: list[int] = []
    first = service.build_aside(cb, embed_elsewhere=_in_batches(calls))
    counts = _counts(cb.db_path)
    assert counts["pending"] == 0 and counts["chunks"] == first.report.chunks > 0
    assert first.embedded_elsewhere == sum(calls) == first.report.chunks_embedded > 0
    resp = service.search(service.SearchRequest("retry with exponential backoff", SearchOptions(limit=3),
                                                [str(cb.root)], update=False))
    assert resp.results[0].symbol == "retry_with_backoff"

    (sample_repo / "app" / "cache.py").write_text('def evict_oldest(entries):\n    """Drop the least recently used entry."""\n    return entries[1:]\n')
    calls.clear()
    second = service.build_aside(cb, embed_elsewhere=_in_batches(calls))
    assert second.report.added == 1 and second.report.unchanged == first.report.files
    assert 0 < second.embedded_elsewhere == sum(calls) <= 2  # only the new file's chunks
    assert _counts(cb.db_path)["pending"] == 0
    assert not list(cb.db_path.parent.glob("*.part-*"))
    stamp = os.stat(cb.db_path).st_mtime_ns
    idle = service.build_aside(cb, embed_elsewhere=_in_batches(calls))
    assert not idle.published and os.stat(cb.db_path).st_mtime_ns == stamp  # nothing changed: not rewritten
    calls.clear()
    forced = service.build_aside(cb, embed_elsewhere=_in_batches(calls), force=True)  # from an empty file
    assert forced.published
    assert calls == [] and forced.report.chunks_embedded == 0
    assert forced.report.vectors_reused == forced.report.chunks == _counts(cb.db_path)["chunks"]


def test_a_reader_open_during_the_publish_sees_the_new_index_whole(sample_repo):
    cb = Codebase.open(sample_repo)
    service.build(cb)
    with Store(cb.db_path, create=False) as reader:
        before = reader.row("vector_counts")["chunks"]
        write_tree(sample_repo, {"lib/extra.py": "def parse_header(line):\n    return line.split(':', 1)\n"})
        service.build_aside(cb, embed_elsewhere=_in_batches([]))
        assert reader.row("vector_counts")["chunks"] > before
        assert [next(iter(r.values())) for r in reader.rows("pragma_quick_check")] == ["ok"]
        assert reader.row("vector_counts")["pending"] == 0


def test_a_failed_build_aside_leaves_the_index_in_place_untouched(sample_repo):
    cb = Codebase.open(sample_repo)
    service.build(cb)
    stamp = (os.stat(cb.db_path).st_mtime_ns, _counts(cb.db_path))
    (sample_repo / "app" / "new.py").write_text("def fresh():\n    return 1\n")

    def failing(name, texts):
        raise EmbeddingFailedError("the embedding server went away")
        yield  # pragma: no cover

    with pytest.raises(EmbeddingFailedError):
        service.build_aside(cb, embed_elsewhere=failing)
    assert (os.stat(cb.db_path).st_mtime_ns, _counts(cb.db_path)) == stamp
    assert not list(cb.db_path.parent.glob("*.part-*"))


def test_without_the_cache_vectors_pass_through_the_scratch_folder(sample_repo, codii_home):
    cb = Codebase.open(sample_repo)
    report = service.build_aside(cb, embed_elsewhere=_in_batches([]), use_cache=False)
    assert report.embedded_elsewhere > 0 and _counts(cb.db_path)["pending"] == 0
    assert not (codii_home / "cache" / "embeddings.db").exists()


def test_no_vectors_builds_aside_without_embedding_anything(sample_repo):
    cb = Codebase.open(sample_repo)
    calls: list[int] = []
    report = service.build_aside(cb, embed_elsewhere=_in_batches(calls), vectors=False)
    assert calls == [] and report.report.vectors_pending == report.report.chunks > 0


def test_scratch_folders_of_dead_builds_are_swept_and_live_ones_kept(sample_repo, tmp_path):
    """A killed process not yet reaped (a zombie: a Ray worker before the raylet reads its status) is dead too:
    a Ray test's retried task found it "alive" under load and kept its folder."""
    scratch = tmp_path / "scratch"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while _state(zombie.pid) != "Z" and time.monotonic() < deadline:  # exited, not waited for
        time.sleep(0.05)
    assert _state(zombie.pid) == "Z" and not alive(zombie.pid) and alive(os.getpid())
    left, unreaped = scratch / f"{SCRATCH_PREFIX}{dead.pid}-abc", scratch / f"{SCRATCH_PREFIX}{zombie.pid}-ghi"
    live = scratch / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    for folder in (left, unreaped, live):
        folder.mkdir(parents=True)
        (folder / "index.db").write_bytes(b"x" * 1000)
    service.build_aside(Codebase.open(sample_repo), scratch_dir=str(scratch), vectors=False)
    zombie.wait()
    assert not left.exists() and not unreaped.exists() and live.exists()
    assert sorted(p.name for p in scratch.iterdir()) == [live.name]  # its own folder went too


def _state(pid: int) -> str:
    """The state letter /proc gives process ``pid`` (``R``, ``S``, ``Z``...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]
