"""Approximate KNN (IVF lists, storage/ann.py): real SQLite files and the real model throughout, a
threshold lowered by .codii.yaml; old read-only files, migration, incremental builds, filters."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from support.trees import write_tree

from codii_sql.codebase import Codebase
from codii_sql.ingest.indexer import Indexer
from codii_sql.search import knn
from codii_sql.search.results import SearchOptions
from codii_sql.search.searcher import Searcher
from codii_sql.storage import ann
from codii_sql.storage.store import SCHEMA_VERSION, Store

VERBS = ("parse", "send", "retry", "cache", "encode", "validate", "render", "schedule", "compress", "hash")
NOUNS = ("http request", "json config", "user session", "database row", "image thumbnail", "log line",
         "email message", "csv report", "cookie header", "socket buffer")
STYLES = ("{v} the {n} and return it", "helper that will {v} every {n} in a batch", "{v} one {n}, raising on error")
QUERIES = ("parse a json config file", "send an email", "retry a failed http request", "cache the user session",
           "compress an image thumbnail", "hash a password row in the database", "validate csv report columns",
           "schedule sending messages", "render a log line", "encode cookie headers", "read from a socket buffer",
           "batch helper for reports", "raise an error when parsing fails", "thumbnail generation")


def _files() -> dict[str, str]:
    """300 one-function chunks in 100 files: three per file, each its own docstring."""
    files: dict[str, list[str]] = {}
    for i, (v, n, s) in enumerate((v, n, s) for v in VERBS for n in NOUNS for s in STYLES):
        name = f"{v}_{n.replace(' ', '_')}_{i}"
        files.setdefault(f"pkg/{v}/{n.split()[0]}.py", []).append(
            f'def {name}(item):\n    """{s.format(v=v, n=n).capitalize()}."""\n    return item\n')
    return {path: "\n\n".join(body) for path, body in files.items()}


def _open(clustered):
    root, db = clustered
    return root, Store(db, create=False)


def _vector_ids(s: Searcher, q: str, **opts) -> list[int]:
    return [r.id for r in s.search(q, SearchOptions(limit=10, mode="vector", **opts))]


def _exact_ids(s: Searcher, q: str, monkeypatch, **opts) -> list[int]:
    """The same search by today's unclustered path: no list is probed."""
    with monkeypatch.context() as m:
        m.setattr(ann, "lists", lambda store: 0)
        m.setattr("codii_sql.search.knn.COARSE_MIN_CHUNKS", 10**9)  # the exact float scan, not sign bits
        return _vector_ids(s, q, **opts)


@pytest.fixture(scope="module")
def clustered(tmp_path_factory, embedder):
    """A 301-chunk codebase (300 functions and its .codii.yaml) clustered from 50 vectors (17 lists):
    its root and index file, in a home of its own (the autouse home is per test)."""
    work = tmp_path_factory.mktemp("ann")
    root = write_tree(work / "repo", {**_files(), ".codii.yaml": "ann_min_vectors: 50\n"})
    with pytest.MonkeyPatch.context() as m:
        m.setenv("CODII_SQL_HOME", str(work / "home"))
        cb = Codebase.open(root)
        Indexer(cb, embedder).build()
        return root, cb.db_path


@pytest.fixture
def fresh(clustered, tmp_path, monkeypatch):
    """A copy of the clustered codebase (with its index) that a test may change."""
    root = shutil.copytree(clustered[0], tmp_path / "repo")
    target = Codebase.open(root).db_path
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(clustered[1], target)
    return root


def test_a_large_index_probes_lists_and_keeps_the_exact_top_10(clustered, embedder, monkeypatch):
    monkeypatch.setattr(ann, "NPROBE", 4)  # 4 of 17 lists: most vectors are not scanned
    root, store = _open(clustered)
    with store:
        n = store.value("vector_rows")
        assert n == 301 and ann.lists(store) == round(n ** 0.5) == 17
        assert store.row("ann_unlisted") == {"unlisted": 0, "orphans": 0}
        s = Searcher(store, root, embedder)
        assert knn.ahead(store, b"x", 10, False)["nprobe"] == 4
        recall = [len(set(_vector_ids(s, q)) & set(_exact_ids(s, q, monkeypatch))) / 10 for q in QUERIES]
    assert np.mean(recall) >= 0.9, recall


def test_a_small_index_stays_exact(sample_repo, embedder):
    cb = Codebase.open(sample_repo)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        assert ann.lists(store) == 0 and store.value("ann_has_tables")
        assert knn.ahead(store, b"x", 10, False) is None


def test_filtered_searches_scan_exactly(clustered, embedder, monkeypatch):
    monkeypatch.setattr(ann, "NPROBE", 1)  # a probe would miss most of the answer
    root, store = _open(clustered)
    with store:
        s = Searcher(store, root, embedder)
        assert knn.ahead(store, b"x", 10, True) is None
        for opts in ({"exts": [".py"]}, {"glob": "pkg/send/*"}, {"under": "pkg/retry"}):
            got = _vector_ids(s, "send an email message", **opts)
            assert got == _exact_ids(s, "send an email message", monkeypatch, **opts) and got


def test_incremental_builds_after_clustering_keep_lists_right(fresh, embedder, monkeypatch):
    """New, changed and deleted files after clustering: each new vector lands in its nearest list,
    deleted ones leave theirs, and the search finds the new function at once."""
    (fresh / "pkg/new.py").write_text('def launch_rocket(fuel):\n    """Launch the rocket into orbit."""\n'
                                      '    return fuel\n')
    (fresh / "pkg/send/email.py").write_text('def send_pigeon(note):\n    """Send a carrier pigeon."""\n'
                                             '    return note\n')
    (fresh / "pkg/hash/log.py").unlink()
    cb = Codebase.open(fresh)
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        assert store.row("ann_unlisted") == {"unlisted": 0, "orphans": 0}
        assert store.value("vector_rows") == 301 - 3 - 3 + 1 + 1 and ann.lists(store) == 17  # within RECLUSTER_GROWTH
        s = Searcher(store, cb.root, embedder)
        for q, path in (("launch a rocket into orbit", "pkg/new.py"), ("carrier pigeon", "pkg/send/email.py")):
            top = s.search(q, SearchOptions(limit=3, mode="vector"))
            assert top[0].path == path
        assert not [r for r in s.search("hash a log line", SearchOptions(limit=50, mode="vector"))
                    if r.path == "pkg/hash/log.py"]


def test_shrinking_below_the_threshold_empties_the_lists_and_growing_reclusters(fresh, embedder):
    cb = Codebase.open(fresh)
    (fresh / ".codii.yaml").write_text("ann_min_vectors: 1000\n")
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        assert ann.lists(store) == 0 and store.value("vector_rows") == 301
        (fresh / ".codii.yaml").write_text("ann_min_vectors: 50\n")
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        assert ann.lists(store) == 17 and store.meta()["ann_vectors"] == 301


def _as_schema_7(db):
    """Make ``db`` what codii-sql of schema 7 wrote: no IVF tables."""
    with Store(db, create=False) as store:
        store.conn.execute("DROP TABLE chunks_ivf; DROP TABLE chunks_lists")
        with store.transaction():
            store.set_meta(schema_version=7)
        store.run("wal_checkpoint")


def test_an_old_read_only_index_is_searched_exactly_as_it_is(fresh, embedder, monkeypatch):
    cb = Codebase.open(fresh)
    _as_schema_7(cb.db_path)
    before = cb.db_path.read_bytes()
    with Store(cb.db_path, readonly=True) as old:
        assert old.meta()["schema_version"] == 7 and ann.lists(old) == 0
        s = Searcher(old, cb.root, embedder)
        for q in QUERIES[:4]:
            assert _vector_ids(s, q) == _exact_ids(s, q, monkeypatch)
        assert s.search("parse json config", SearchOptions(limit=5))  # hybrid too
    assert cb.db_path.read_bytes() == before  # never written


def test_a_writable_old_index_migrates_and_the_next_build_clusters_it(fresh, embedder):
    cb = Codebase.open(fresh)
    _as_schema_7(cb.db_path)
    with Store(cb.db_path, create=False) as store:
        assert store.meta()["schema_version"] == SCHEMA_VERSION and ann.lists(store) == 0
    Indexer(cb, embedder).build()
    with Store(cb.db_path, create=False) as store:
        assert ann.lists(store) == 17 and store.row("ann_unlisted") == {"unlisted": 0, "orphans": 0}


def test_a_migration_killed_midway_leaves_the_old_index(fresh, monkeypatch):
    cb = Codebase.open(fresh)
    _as_schema_7(cb.db_path)
    run = Store.run

    def dies(self, name, params=None):
        run(self, name, params)
        if name == "history_schema":  # after create_schema made the IVF tables, before the commit
            raise KeyboardInterrupt

    monkeypatch.setattr(Store, "run", dies)
    with pytest.raises(KeyboardInterrupt):
        Store(cb.db_path, create=False)
    monkeypatch.setattr(Store, "run", run)
    with Store(cb.db_path, readonly=True) as old:
        assert old.meta()["schema_version"] == 7 and not old.value("ann_has_tables")


def test_kmeans_separates_clear_clusters():
    """Unit test without SQLite: three far-apart groups come back as three lists."""
    rng = np.random.default_rng(0)
    centres = np.eye(8, dtype=np.float32)[:3]
    x = np.concatenate([c + 0.05 * rng.standard_normal((50, 8)) for c in centres]).astype(np.float32)
    found = ann.kmeans(x, 3)
    assert sorted(np.argmax(found @ centres.T, axis=1).tolist()) == [0, 1, 2]


def test_doctor_finds_a_vector_missing_from_its_list_and_repair_makes_search_exact(fresh):
    from codii_sql.ingest.doctor import examine

    cb = Codebase.open(fresh)
    with Store(cb.db_path, create=False) as store:
        assert [c for c in examine(store, repair=False).checks if c.name == "IVF lists match vectors"][0].ok
        with store.transaction():
            store.conn.execute("DELETE FROM chunks_lists WHERE rowid = (SELECT min(rowid) FROM chunks_vec)")
        check = [c for c in examine(store, repair=True).checks if c.name == "IVF lists match vectors"][0]
        assert not check.ok and check.repaired and "1 vectors in no list" in check.detail
        assert ann.lists(store) == 0
