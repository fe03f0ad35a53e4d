"""The bulk writer: chunk, FTS5, float-vector and sign-bit rows of one batch stay aligned by chunk id."""

from __future__ import annotations

import numpy as np
from support.trees import write_tree

import codii_sql.ingest.prepare as prepare_mod
from codii_sql.codebase import Codebase
from codii_sql.ingest.chunking.version import CHUNKER_VERSION, rechunk_scope
from codii_sql.ingest.indexer import Indexer
from codii_sql.ingest.prepare import chunk_subtokens
from codii_sql.storage.store import Store


def _rows_by_id(repo) -> tuple[dict, dict, set, set]:
    """``({chunk id: content}, {chunk id: float32[384]}, bits rowids, FTS5 ids matching 'fetch')``."""
    with Store(Codebase.open(repo).db_path, create=False) as store:
        store.run("fts_integrity_check")
        q = store.conn.execute
        chunks = dict(q("SELECT id, content FROM chunks").fetchall())
        vecs = {i: np.frombuffer(b, np.float32) for i, b in q("SELECT rowid, embedding FROM chunks_vec").fetchall()}
        bits = {i for (i,) in q("SELECT rowid FROM chunks_bits").fetchall()}
        fts = {i for (i,) in q("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'subtokens:fetch'").fetchall()}
    return chunks, vecs, bits, fts


def test_a_batch_replacing_the_newest_chunks_keeps_every_table_aligned(tmp_path, embedder, monkeypatch):
    # Worker processes even for three files, so sub-tokens travel back from them as in a large build.
    monkeypatch.setattr(prepare_mod, "POOL_MIN_FILES", 1)
    repo = write_tree(tmp_path / "r", {
        "a.py": "def alpha(x):\n    return x + 1\n",
        "b.py": "def beta(y):\n    return y * 2\n",
    })
    Indexer(Codebase.open(repo), embedder).build()
    # b.py was written last, so it holds the highest chunk ids: the next batch reuses them.
    write_tree(repo, {
        "b.py": "def beta(y):\n    return y * 3\n\n\ndef gamma(z):\n    return z - 3\n",
        "c.py": "def fetchRemoteUser(session):\n    return session.get('/user')\n",
    })
    report = Indexer(Codebase.open(repo), embedder).build()
    assert (report.added, report.modified, report.failed) == (1, 1, {})

    chunks, vecs, bits, fts = _rows_by_id(repo)
    assert set(chunks) == set(vecs) == bits
    ids = sorted(chunks)
    expected = embedder.embed([chunks[i] for i in ids])
    assert np.allclose(np.stack([vecs[i] for i in ids]), expected, atol=1e-5)
    assert {chunks[i] for i in fts} == {"def fetchRemoteUser(session):\n    return session.get('/user')\n"}
    assert not any("y * 2" in c for c in chunks.values())


def test_chunk_subtokens_join_symbol_path_and_content(tmp_path):
    from codii_sql.ingest.chunking.layout import Chunk

    chunk = Chunk(1, 2, 0, 40, "function", "HttpClient.sendRequest", "def sendRequest(self):\n    pass\n")
    assert chunk_subtokens("net/http_client.py", [chunk]) == [
        "http client send request http client send request"]


def _lookup_indexes(repo) -> set[str]:
    with Store(Codebase.open(repo).db_path, create=False) as store:
        return {n for (n,) in store.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ('chunks_text_hash', 'definitions_by_name')")}


#: A version whose index re-chunks every file (a later one may change some languages alone: version.SCOPED).
EVERY_FILE_AGAIN = next(v for v in range(CHUNKER_VERSION - 1, 0, -1) if rechunk_scope(v) is None)


def _watched_tree(tmp_path, n: int):
    """A tree of ``n`` small modules, the look-up indexes present at each step of a build's chunk phase (``seen``)
    and the progress callback that records them."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(n)})
    seen: list[set[str]] = []

    def progress(phase, done, total):
        if phase == "chunk" and done:
            seen.append(_lookup_indexes(repo))
    return repo, seen, progress


def test_a_first_build_writes_without_the_look_up_indexes_and_sorts_them_after(tmp_path, embedder):
    """Their keys (a sha256, a name) arrive in random order: written batch by batch they dirtied pages all over
    the file at every commit (the kernel's build wrote ~10x its size). A stopped first build leaves them to the
    next build, even one that finds no file changed."""
    repo, seen, progress = _watched_tree(tmp_path, 3)

    Indexer(Codebase.open(repo), embedder, progress=progress).build()
    assert seen and seen[-1] == set(), seen
    assert _lookup_indexes(repo) == {"chunks_text_hash", "definitions_by_name"}
    with Store(Codebase.open(repo).db_path, create=False) as store, store.transaction():
        store.run("lookup_indexes_drop")  # what a build stopped after its last batch leaves
    report = Indexer(Codebase.open(repo), embedder).build()
    assert report.added == report.modified == 0
    assert _lookup_indexes(repo) == {"chunks_text_hash", "definitions_by_name"}
    Indexer(Codebase.open(repo), embedder, progress=progress).build(force=True)
    assert seen[-1] == set()  # no cache given: --force --no-cache embeds every chunk again, reusing none
    assert _lookup_indexes(repo) == {"chunks_text_hash", "definitions_by_name"}


def test_a_build_that_rewrites_most_files_writes_without_the_look_up_indexes_and_an_update_with_them(tmp_path, embedder):
    """New chunking rules re-chunk every file in place: with the look-up indexes kept, the kernel's re-chunk
    wrote 63 GB for a 4.5 GB file. An index without vectors reuses none, so both go; an edit of one file
    of several keeps both (sorting them again would cost more than its few rows)."""
    repo, seen, progress = _watched_tree(tmp_path, 4)

    Indexer(Codebase.open(repo), embedder, vectors=False).build()
    with Store(Codebase.open(repo).db_path, create=False) as store, store.transaction():
        store.set_meta(chunker_version=EVERY_FILE_AGAIN)
    report = Indexer(Codebase.open(repo), embedder, progress=progress, vectors=False).build()
    assert report.reindexed == 4 and seen[-1] == set(), (report.reindexed, seen)
    assert _lookup_indexes(repo) == {"chunks_text_hash", "definitions_by_name"}
    (repo / "m0.py").write_text("def g0(y):\n    return y\n")
    report = Indexer(Codebase.open(repo), embedder, progress=progress, vectors=False).build()
    assert report.modified == 1 and seen[-1] == {"chunks_text_hash", "definitions_by_name"}
    with Store(Codebase.open(repo).db_path, create=False) as store:
        assert [s for (s,) in store.conn.execute(
            "SELECT symbol FROM definitions INDEXED BY definitions_by_name WHERE name = 'g0'")] == ["g0"]


def test_a_re_chunk_that_reuses_the_indexs_vectors_keeps_their_look_up_by_text(tmp_path, embedder):
    repo, seen, progress = _watched_tree(tmp_path, 4)
    Indexer(Codebase.open(repo), embedder).build()
    with Store(Codebase.open(repo).db_path, create=False) as store, store.transaction():
        store.set_meta(chunker_version=EVERY_FILE_AGAIN)
    report = Indexer(Codebase.open(repo), embedder, progress=progress).build()
    assert report.reindexed == 4 and report.vectors_reused == 4 and report.chunks_embedded == 0
    assert seen[-1] == {"chunks_text_hash"}
    assert _lookup_indexes(repo) == {"chunks_text_hash", "definitions_by_name"}


def test_a_first_build_merges_text_segments_in_bulk_and_leaves_fts5s_default_after(tmp_path, embedder):
    """16 segments a merge while a first build writes (fewer rewrites of each posting), 4 again after it."""
    repo = write_tree(tmp_path / "r", {f"m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(3)})
    seen = []

    def automerge():
        with Store(Codebase.open(repo).db_path, create=False) as store:
            return [store.conn.execute(f"SELECT v FROM {t}_config WHERE k = 'automerge'").fetchone()
                    for t in ("chunks_fts", "file_trigrams")]

    Indexer(Codebase.open(repo), embedder, progress=lambda phase, done, total: phase == "chunk" and done
            and seen.append(automerge())).build()
    assert seen and seen[-1] == [(16,), (16,)], seen
    assert automerge() == [(4,), (4,)]


def test_an_upgrade_that_changed_some_languages_re_chunks_their_files_alone(tmp_path, embedder):
    """Chunker 18 read seven more languages by their syntax, 19 four more: the kernel's 86k C files re-chunked for
    15 min for none of them. An index of the version before re-chunks those languages' files (and .cljs, once no
    language) alone."""
    repo = write_tree(tmp_path / "r", {"a.py": "def f(x):\n    return x\n", "b.c": "int g(void)\n{\n\treturn 0;\n}\n",
                                       "c.ml": "let split s =\n  String.split_on_char ',' s\n",
                                       "d.cljs": "(defn go-home\n  \"Go.\"\n  [x]\n  x)\n"})
    Indexer(Codebase.open(repo), embedder, vectors=False).build()
    db = Codebase.open(repo).db_path
    with Store(db, create=False) as store, store.transaction():
        store.set_meta(chunker_version=CHUNKER_VERSION - 1)
        store.conn.execute("UPDATE files SET language = NULL WHERE path = 'd.cljs'")  # as chunker 18 stored it
        store.conn.execute("DELETE FROM definitions WHERE file_id IN (SELECT id FROM files WHERE path IN ('c.ml', 'd.cljs'))")
    assert rechunk_scope(CHUNKER_VERSION - 1) is not None
    report = Indexer(Codebase.open(repo), embedder, vectors=False).build()
    assert report.reindexed == 2, report.reindexed
    with Store(db, create=False) as store:
        assert dict(store.conn.execute("SELECT path, language FROM files WHERE path LIKE '%.clj%'")) == {"d.cljs": "clojure"}
        assert store.meta()["chunker_version"] == CHUNKER_VERSION
        assert [s for (s,) in store.conn.execute("SELECT symbol FROM definitions ORDER BY symbol")] == \
            ["f", "g", "go-home", "split"]
    with Store(db, create=False) as store, store.transaction():
        store.set_meta(chunker_version=EVERY_FILE_AGAIN)
    assert Indexer(Codebase.open(repo), embedder, vectors=False).build().reindexed == 4
