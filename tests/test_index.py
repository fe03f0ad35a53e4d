"""The indexer on real files, the real chunker and the real model: full, incremental, renames, removals."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from support.trees import write_tree

from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.errors import IndexMismatchError
from codii_sql.ingest.indexer import Indexer
from codii_sql.models.embedder import Embedder
from codii_sql.storage.store import Store


def build(repo, embedder, **kw):
    return Indexer(Codebase.open(repo), embedder, **kw).build()


def rows(repo, name, params=None):
    with Store(Codebase.open(repo).db_path, create=False) as store:
        return store.rows(name, params)


def test_full_build_stores_every_table(sample_repo, embedder):
    report = build(sample_repo, embedder)
    assert report.added == 4 and report.files == 4 and report.chunks > 4
    db = Codebase.open(sample_repo).db_path
    with Store(db, create=False) as store:
        counts = store.row("counts")
        n_fts = store.conn.execute("SELECT count(*) FROM chunks_fts").fetchall()[0][0]
        n_vec = store.conn.execute("SELECT count(*) FROM chunks_vec").fetchall()[0][0]
        meta = store.meta()
        store.run("fts_integrity_check")
    assert counts["chunks"] == n_fts == n_vec
    assert meta["status"] == "indexed" and meta["dims"] == 384 and meta["merkle_root"] == report.merkle_root


def test_a_build_that_rewrote_many_files_compacts_the_text_indexes_and_an_edit_does_not(tmp_path, embedder):
    """FTS5 leaves a segment per write and the rows of deleted chunks in them: a forced build of
    Django grew its BM25 index 2.5x past one segment's pages and slowed a plain MATCH 2.7x."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def handler_{i}(request):\n    return {i}\n" for i in range(30)})

    def segments() -> tuple[int, int]:
        with Store(Codebase.open(repo).db_path, create=False) as store:
            return tuple(store.conn.execute(f"SELECT count(*) FROM {t}_data").fetchall()[0][0]
                         for t in ("chunks_fts", "file_trigrams"))
    first = build(repo, embedder)
    assert "compact" in first.phase_seconds
    compacted = segments()
    forced = build(repo, embedder, ignore_patterns=None)  # nothing changed: nothing written, nothing compacted
    assert "compact" not in forced.phase_seconds
    (repo / "m3.py").write_text("def handler_three(request):\n    return 3\n")
    edit = build(repo, embedder)
    assert edit.modified == 1 and "compact" not in edit.phase_seconds and segments() != compacted
    again = Indexer(Codebase.open(repo), embedder).build(force=True)
    assert "compact" in again.phase_seconds and segments() == compacted
    with Store(Codebase.open(repo).db_path, create=False) as store:
        store.run("fts_integrity_check")
        assert [r[0] for r in store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'handler_three'")]


def test_chunk_text_equals_file_lines(sample_repo, embedder):
    build(sample_repo, embedder)
    for f in rows(sample_repo, "files_all"):
        lines = (sample_repo / f["path"]).read_text(encoding="utf-8").split("\n")
        covered = set()
        for c in rows(sample_repo, "chunks_of_file", {"path": f["path"]}):
            chunk = rows(sample_repo, "chunk_by_id", {"id": c["id"]})[0]
            assert chunk["content"].rstrip("\n") == "\n".join(lines[c["start_line"] - 1: c["end_line"]]).rstrip("\n")
            covered.update(range(c["start_line"], c["end_line"] + 1))
        assert all(i + 1 in covered for i, line in enumerate(lines) if line.strip())


def test_unchanged_tree_reads_nothing(sample_repo, embedder):
    build(sample_repo, embedder)
    again = build(sample_repo, embedder)
    assert (again.added, again.modified, again.removed, again.chunks_written) == (0, 0, 0, 0)
    assert again.unchanged == 4


def test_only_the_edited_file_is_reindexed(sample_repo, embedder):
    first = build(sample_repo, embedder)
    p = sample_repo / "app/parse.py"
    p.write_text(p.read_text() + "\n\ndef brand_new_function():\n    return 42\n")
    report = build(sample_repo, embedder)
    assert (report.added, report.modified, report.removed) == (0, 1, 0)
    assert report.chunks_written == len(rows(sample_repo, "chunks_of_file", {"path": "app/parse.py"}))
    assert report.merkle_root != first.merkle_root
    assert any(c["symbol"] == "brand_new_function" for c in rows(sample_repo, "chunks_of_file", {"path": "app/parse.py"}))


def test_touch_without_content_change_rechunks_nothing(sample_repo, embedder):
    first = build(sample_repo, embedder)
    p = sample_repo / "app/http.py"
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    report = build(sample_repo, embedder)
    assert report.touched == 1 and report.modified == 0 and report.chunks_written == 0
    assert report.merkle_root == first.merkle_root


def test_rename_reuses_vectors_and_changes_root(sample_repo, embedder):
    first = build(sample_repo, embedder)
    os.rename(sample_repo / "app/parse.py", sample_repo / "app/headers.py")
    report = build(sample_repo, embedder)
    assert (report.added, report.removed) == (1, 1)
    assert report.chunks_embedded == 0 and report.vectors_reused > 0
    assert report.merkle_root != first.merkle_root
    paths = {r["path"] for r in rows(sample_repo, "files_all")}
    assert "app/headers.py" in paths and "app/parse.py" not in paths


def test_removed_file_leaves_no_rows(sample_repo, embedder):
    build(sample_repo, embedder)
    os.remove(sample_repo / "web/util.js")
    report = build(sample_repo, embedder)
    assert report.removed == 1
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        ids = [r[0] for r in store.conn.execute("SELECT id FROM chunks")]
        vec_ids = [r[0] for r in store.conn.execute("SELECT rowid FROM chunks_vec")]
        nodes = {r["path"] for r in store.rows("merkle_all")}
    assert sorted(ids) == sorted(vec_ids)
    assert "web/util.js" not in nodes and "web" not in nodes


def test_second_checkout_costs_no_model_time(sample_repo, tmp_path, embedder):
    from codii_sql.models.cache import EmbeddingCache

    clone = write_tree(tmp_path / "clone", {})
    import shutil

    shutil.copytree(sample_repo, clone, dirs_exist_ok=True)
    cache = EmbeddingCache()
    Indexer(Codebase.open(sample_repo), embedder, cache=cache).build()
    report = Indexer(Codebase.open(clone), embedder, cache=cache).build()
    cache.close()
    assert report.chunks_embedded == 0 and report.vectors_reused == report.chunks_written > 0


def test_model_change_is_detected_and_force_rebuilds(sample_repo, embedder):
    build(sample_repo, embedder)

    class Other(Embedder):
        name, model_id, dims, max_tokens, sha256 = "other", "another-model", embedder.dims, 256, embedder.sha256

        def embed(self, texts):
            return embedder.embed(texts)

    with pytest.raises(IndexMismatchError, match="forced build") as refused:
        build(sample_repo, Other())
    assert refused.value.hint.kind == "force_build"
    report = Indexer(Codebase.open(sample_repo), Other()).build(force=True)
    assert report.added == 4


def test_a_file_that_fails_to_chunk_is_reported_and_retried(sample_repo, embedder, monkeypatch):
    import codii_sql.ingest.prepare as prepare_mod

    real = prepare_mod.index_source

    def flaky(source, **kw):
        if "debounce" in source.regions[0].text:
            raise RuntimeError("parser exploded")
        return real(source, **kw)

    monkeypatch.setattr(prepare_mod, "index_source", flaky)
    report = build(sample_repo, embedder)
    assert list(report.failed) == ["web/util.js"] and report.files == 3
    monkeypatch.setattr(prepare_mod, "index_source", real)
    again = build(sample_repo, embedder)
    assert again.added == 1 and again.files == 4 and not again.failed


def test_changed_role_rules_reclassify_files_without_reindexing(sample_repo, embedder, monkeypatch):
    import codii_sql.ingest.roles as roles_mod

    build(sample_repo, embedder)
    monkeypatch.setattr(roles_mod, "VERSION", roles_mod.VERSION + 1)
    monkeypatch.setattr(roles_mod, "classify", lambda path, marks=None, declared_generated=False: "vendored")
    report = build(sample_repo, embedder)
    assert report.chunks_written == 0
    assert {r["role"] for r in rows(sample_repo, "stats_by_role")} == {"vendored"}


def test_progress_moves_within_each_phase(sample_repo, embedder, monkeypatch):
    """Files count up as they are chunked, and chunks as they are embedded, within one batch:
    a polling client sees progress before any batch commits."""
    from codii_sql.ingest import embedding as vectors_mod

    monkeypatch.setattr(vectors_mod, "EMBED_STEP", 2)
    seen = []
    report = Indexer(Codebase.open(sample_repo), embedder, progress=lambda *a: seen.append(a)).build()
    chunked = [done for phase, done, total in seen if phase == "chunk"]
    assert chunked == [0, 1, 2, 3, 4]
    embedded = [(done, total) for phase, done, total in seen if phase == "vectors"]
    assert embedded[-1] == (report.chunks, report.chunks) and report.vectors_pending == 0
    assert any(0 < d < report.chunks for d, _ in embedded) and embedded == sorted(embedded)


def test_vectors_reach_the_cache_before_the_batch_commits(sample_repo, embedder, monkeypatch, tmp_path):
    """A build stopped mid-batch keeps the model time it spent: each embedding step is cached."""
    from codii_sql.ingest import embedding as vectors_mod
    from codii_sql.models.cache import EmbeddingCache

    class StopsAfterOneStep(Embedder):
        name, model_id, dims, max_tokens, sha256 = "local", embedder.model_id, embedder.dims, 256, embedder.sha256
        calls = 0

        def embed(self, texts, **kw):
            self.calls += 1
            if self.calls > 1:
                raise KeyboardInterrupt
            return embedder.embed(texts, **kw)

    monkeypatch.setattr(vectors_mod, "EMBED_STEP", 2)
    cache = EmbeddingCache(tmp_path / "cache.db")
    with pytest.raises(KeyboardInterrupt):
        Indexer(Codebase.open(sample_repo), StopsAfterOneStep(), cache=cache).build()
    report = Indexer(Codebase.open(sample_repo), embedder, cache=cache).build()
    cache.close()
    assert report.vectors_reused == 2 and report.chunks_embedded == report.chunks - 2


def test_a_no_op_update_keeps_the_last_build_duration(sample_repo, embedder):
    build(sample_repo, embedder)
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        took = store.meta()["build_seconds"]
    build(sample_repo, embedder)
    with Store(Codebase.open(sample_repo).db_path, create=False) as store:
        assert store.meta()["build_seconds"] == took


def test_the_chunk_counts_of_a_build_add_up(tmp_path, embedder):
    """`1408 written, 1298 embedded, 0 reused`: the other 110 were chunks whose text another chunk
    of the build has (licence headers, copied files), embedded once and not counted."""
    licence = "# Copyright 2026 Example Corp.\n# Licensed under the Apache License, Version 2.0.\n\n"
    files = {f"pkg/m{i}.py": licence + f"def handler_{i}(x):\n    return x + {i}\n" for i in range(6)}
    repo = write_tree(tmp_path / "dup", {**files, "copy/a.py": "def same():\n    return 1\n",
                                         "copy/b.py": "def same():\n    return 1\n"})
    report = build(repo, embedder)
    assert report.vectors_deduplicated == 6  # five copies of the licence, one of the copied file
    assert report.chunks_written == report.chunks_embedded + report.vectors_deduplicated + report.vectors_reused
    res = CliRunner().invoke(cli, ["build", str(tmp_path / "dup"), "--force", "--no-cache"])
    assert "(14 written, 8 embedded, 6 identical to another chunk's text: embedded once, 0 vectors reused)" in res.output
