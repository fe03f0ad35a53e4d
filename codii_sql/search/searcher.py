"""Search: query text -> FTS5 expression + query embedding -> the one hybrid SQL statement -> results."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import EmbeddingFailedError, UsageError
from ..languages import language_name
from ..models.embedder import Embedder
from ..models.wordpiece import count_tokens
from ..storage.store import Store
from ..text import refuse_undecodable
from . import knn, pruning
from .evidence import implementation_first
from .query import Analysis, Named, analyze, coined_match, fts_all, symbol_match
from .fusion import (CONFIDENT_GAP, KNN_BY_BEST_SHAPES, LONG_QUERY_ROLE_WEIGHTS, ROLE_WEIGHTS, Bm25Weight,
                     by_file)
from .locations import places, resolve
from .results import Result, SearchOptions, place_pieces, sqlite_glob
from .staleness import StaleCheck

#: RRF constant; 60 is the value of Cormack, Clarke & Buettcher (SIGIR 2009).
RRF_K = 60
#: Weight of the RRF term next to the convex combination of normalised scores (see
#: sql/search.sql). Rank fusion alone loses to the better retriever on CoSQA dev (equal-weight
#: RRF NDCG@10 0.51 vs vectors 0.60); scores carry the confidence that ranks throw away.
RRF_WEIGHT = 2.0
#: Candidates per retriever before fusion (vec0 allows k <= 4096).
DEPTH = 50
#: :meth:`Searcher.match`, the workspace probe: the nearest chunks it averages (search.sql's
#: knn_match takes 10 too), the hamming candidates it re-scores per partition, and the size from
#: which it takes them (below, the exact scan). Measured over 48 SWE-bench titles, warm, p50:
#: 8 per partition 0.4-0.9 ms from 2.1k to 27.8k chunks, the exact scan 0.6-8.8 ms, 25 per
#: partition 0.95-1.9 ms; the mean match it gives reads 0.003-0.006 low on every member,
#: well inside the pruning gap of 0.09 (service/fanout.py).
PROBE_K = 10
PROBE_COARSE_K = 8
PROBE_COARSE_MIN = 1_000
#: ... so a probe is taken as up to this much below the full search's ``knn_match``.
PROBE_LOW_BY = 0.01
#: Fused chunks the cross-encoder re-scores (the issue asks 20-50; a MiniLM-L6 pair costs what embedding a chunk does).
RERANK_DEPTH = 30
#: With group_by_file, chunks fetched per file wanted: files with many matching chunks must
#: not crowd the others out of the candidates (5 gave 3 files for --limit 10 on click).
CHUNKS_PER_FILE = 10
#: ... fetching up to 4x deeper, to this many chunks, while fewer distinct files than the limit came back.
MAX_GROUPED_ROWS = 4096
#: Below this cosine between the query and its nearest chunk (and with no chunk holding every
#: query word, no named symbol or file), a search answers ``no_good_match``. Measured with the
#: bundled model: nearest-chunk cosine of 330 relevant queries (300 CoSQA on its corpus, 30
#: SWE-bench issue titles on their release) min 0.376, none below 0.35; of 69 unrelated ones
#: (cooking, hiking, gibberish, SQL injection text, on 6 real codebases) 59 below 0.33, max 0.518.
NO_MATCH_COSINE = 0.33
#: Word pieces from which a word no chunk holds is none the model knows (`zzqxnonexistentword` 9, `websocket` 4).
UNKNOWN_WORD_PIECES = 5
#: FTS5 column weights for bm25(): a hit on a chunk's symbol name or its path says more
#: than one in its body; sub-tokens ("user name" from getUserName) say a little less.
BM25_WEIGHTS = {"content": 1.0, "subtokens": 0.5, "symbol": 2.0, "path": 1.0}
#: BM25's fusion weight by query shape, as :class:`Bm25Weight` (usual, confident); vectors get 1 - it.
#: Tuned on the dev sets: on CoSQA's natural-language questions BM25 only helps when its best
#: hit stands out (NDCG@10: vectors 0.606, fixed weights at best 0.605, this 0.609);
#: identifiers and long issue texts (names, paths, tracebacks) are BM25's strength. A question
#: that names code ("where is __repr__ generated") is "mixed": none of CoSQA's 500 questions
#: is, so its weight is set between the two, not tuned (with 0, `__repr__` was ignored).
BM25_WEIGHT = {"natural": (0.0, 0.4), "mixed": (0.5, 0.8), "identifier": (0.7, 0.9), "long": (0.85, 0.95)}
#: A single retriever gets the whole weight: a zero weight would zero every score.
SINGLE_MODE_WEIGHT = {"bm25": (1.0, 1.0), "vector": (0.0, 0.0)}
#: The share of an index's chunks embedded from which its vector list counts in full. Below it
#: the few chunks embedded first fill the KNN list and took near-full scores however poor the
#: match (Django at 1,536 of 77,572: .po files above middleware/csrf.py), so the list's weight
#: is scaled by share / 0.2 and each chunk's BM25 score stands in for the rest. Measured by
#: benchmarks/partial_vectors.py, NDCG@10 at 2% / 10% / 20% embedded: CoSQA dev (500 queries)
#: 0.248 / 0.316 / 0.386 unscaled -> 0.348 / 0.359 / 0.386 (BM25 alone 0.347); SWE-bench issue
#: titles (48) 0.394 / 0.472 / 0.555 -> 0.484 / 0.484 / 0.540 (BM25 0.484); whole issues equal.
FULL_TRUST_COVERAGE = 0.2
#: Score multiplier for a candidate whose symbol or path the query names (sql/search.sql).
#: Identifier-shaped queries also rank such chunks first (:meth:`Searcher.search`, ``:tiered``).
NAME_BOOST = 1.5
#: The highest fused score sql/search.sql can give (before a re-rank): the convex combination is
#: at most 1, the RRF term at most RRF_WEIGHT / (RRF_K + 1), the role prior at most 1, times the
#: name boost. A workspace search leaves a shard out only when this, at its merge weight, cannot
#: enter the answer (service/fanout.py).
MAX_FUSED_SCORE = (1.0 + RRF_WEIGHT / (RRF_K + 1)) * NAME_BOOST
#: The vectors are weak when their nearest chunk's cosine is under this: no closer than unrelated
#: questions get (their nearest chunk reached 0.518; relevant ones' started at 0.376, see
#: NO_MATCH_COSINE). BM25 then gets at least WEAK_VECTORS_BM25, a code-naming question's weight.
#: Git dev set (900 subjects) hybrid hit@5 0.734 -> 0.739, all-gold@5 0.600 -> 0.608, MRR@10
#: 0.581 -> 0.585; CoSQA dev NDCG@10 0.6096 -> 0.6097; SWE-bench dev unchanged. 0.45 gave about
#: the same, 0.6 cost CoSQA 0.007, 0.7 cost 0.032.
WEAK_COSINE = 0.5
WEAK_VECTORS_BM25 = 0.5

#: search_hybrid's ``:held_*`` of an unfiltered search: not read there (:func:`_held`); its evidence is read over
#: the whole index, and only when the answer needs it (``fts_any``, ``coined_held``).
NOT_HELD: dict[str, str | None] = dict.fromkeys(("held_all", "held_coined", "held_members"))


@dataclass
class Hits:
    """What one index answers a query: ``results`` best first, the query's ``analysis`` (its BM25
    terms and what it names), ``best_cosine`` (the nearest chunk's, None without vectors),
    ``no_good_match`` (see :meth:`Searcher._nothing_close`), ``embedder_failed``: why the query
    was not embedded (the results are then BM25 only), else None; and, when no cosine tells how
    well the index matches (no vectors, none yet, BM25 mode), ``lexical_evidence``: whether a
    chunk holds every query word or a named symbol or file was found (None when its results carry a
    cosine, or for a long query, whose words no chunk holds all of)."""

    results: list[Result]
    analysis: Analysis | None
    best_cosine: float | None
    no_good_match: bool
    embedder_failed: str | None = None
    lexical_evidence: bool | None = None


class Searcher:
    """Runs searches against one index.

    Args:
        store: the open index.
        root: the codebase root on this machine (for ``stale`` checks); None for an index file
            searched without its source (``stale`` is then None).
        embedder: as for the indexer; only used by hybrid and vector modes.
    """

    def __init__(self, store: Store, root: Path | None, embedder: Embedder):
        self.store = store
        self.root = Path(root) if root is not None else None
        self.embedder = embedder
        self.dims = store.vector_dims()
        store.run("create_vocab")

    def _fusion_shape(self, shape: str, fq: str | None, quoted: bool = False) -> str:
        """The shape whose :data:`BM25_WEIGHT` fuses this query: one with a ``quoted`` phrase as an identifier
        (text given word for word: starlette's "Too many files" raise was 8th behind KNN's picks); a ``natural``
        one that shares a word with an indexed path (sql ``path_has_a_term``) as ``mixed``. Measured on the
        nine-repository git dev set (hybrid, 900 commit subjects): hit@5 0.721 -> 0.734, all-gold@5 0.584 -> 0.599
        (zod 0.70 -> 0.79); CoSQA dev NDCG@10 0.6097 -> 0.6096, SWE-bench dev unchanged (long queries)."""
        if shape != "long" and quoted:
            return "identifier"
        return "mixed" if shape == "natural" and fq and self.store.value("path_has_a_term", {"fq": fq}) else shape

    def analyze(self, query: str) -> Analysis:
        """The query's analysis (:func:`analyze`) against this index's term counts."""
        return analyze(query, lambda terms: {r["term"]: r["doc"] for r in
                                             self.store.rows("term_doc_counts", {"terms": json.dumps(terms)})})

    def find(self, query: str, opts: SearchOptions | None = None, query_vector: np.ndarray | None = None,
             *, embedder_failed: str | None = None) -> Hits:
        """The top ``opts.limit`` chunks (or files) for ``query``, with what the query analysis chose;
        ``query_vector`` (float32[dims]) is its embedding when the caller has it already (a search over
        several codebases embeds it once), ``embedder_failed`` why the caller could not embed it (the
        search then answers from BM25, and says so); an index without vectors answers from BM25
        without embedding it. ``opts.max_tokens`` is the caller's to apply
        (:func:`codii_sql.search.budget.fit` with the analysis's terms): over several codebases the
        budget is the merged answer's.

        An identifier-shaped query (:func:`~.query.query_shape`) puts first the chunks defining a symbol it
        names exactly (``Console.print``: not every ``print``) and the chunks of a file it names
        (``httpx/_auth.py``, ``_auth.py``, ``auth.py``); see sql/search.sql ``:tiered``. In a
        question or an issue, named things only get :data:`NAME_BOOST`: "where is __repr__
        generated" asks for the generator, not every ``__repr__`` (on 70 SWE-bench issue
        titles as queries, tiering questions too lowered NDCG@10 0.557 -> 0.544).

        Raises:
            UsageError: empty query, unknown mode, a limit out of range, or a language filter
                that names no language of the index.
        """
        opts = opts or SearchOptions()
        query = (query or "").strip()
        if not query:
            raise UsageError("the query is empty", "pass some words or an identifier to search for")
        if not any(ch.isalnum() for ch in query):
            # FTS5 drops punctuation and the model embeds it as noise: any answer would be arbitrary.
            raise UsageError(f"the query {query[:40]!r} has no letters or digits; punctuation is not indexed",
                             "search for a word or an identifier; a literal grep finds punctuation as written")
        opts.check()
        refuse_undecodable(query)
        # The query's analysis, once: its terms serve the statement, the no-match rule and the caller's budget.
        a = self.analyze(query)
        shape, named = a.shape, a.named
        # A place the query points at (`x.py:107`, a frame) names its file and symbol; a long traceback, its words.
        located = (spots := places(a.text, shape)) and resolve(self.store, named, spots)
        named, tiered = located or named, shape == "identifier" or bool(located)
        note = embedder_failed
        qvec = None
        if opts.mode != "bm25" and query_vector is None and not self.store.value("has_vectors"):
            opts = dataclasses.replace(opts, mode="bm25")  # nothing to compare an embedding with
        if opts.mode != "bm25" and note is None:
            qvec, note = self._query_vector(a.text, query_vector)
        if qvec is None and opts.mode != "bm25":  # the embedder did not answer: the note says so
            opts = dataclasses.replace(opts, mode="bm25")
        fq = a.fts if opts.mode != "vector" else None
        fused = opts.mode not in SINGLE_MODE_WEIGHT
        fshape = self._fusion_shape(shape, fq, bool(a.quoted)) if fused else shape
        usual, confident = SINGLE_MODE_WEIGHT.get(opts.mode) or BM25_WEIGHT[fshape]
        weight = Bm25Weight(usual, confident, max(usual, WEAK_VECTORS_BM25) if fused else usual,
                            knn_by_best=fused and fshape in KNN_BY_BEST_SHAPES)
        prior = (LONG_QUERY_ROLE_WEIGHTS if shape == "long" else ROLE_WEIGHTS) if opts.role_prior else None
        phrases = a.phrases if fq else ()
        held = _held(a) if opts.filtered else NOT_HELD
        rows = self._run(fq, qvec, opts, weight, named, prior, tiered=tiered, phrases=phrases, held=held)
        best = rows[0]["knn_best"] if rows and qvec is not None else None
        nothing_close = self._nothing_close(rows, a, best, opts.filtered)
        wanted = _rows_wanted(opts)
        while opts.group_by_file and len(rows) >= wanted and len({r["path"] for r in rows}) < opts.limit \
                and wanted < MAX_GROUPED_ROWS:
            # A few files held every chunk fetched (one long file can): fetch deeper for the others.
            wanted = min(wanted * 4, MAX_GROUPED_ROWS)
            rows = self._run(fq, qvec, opts, weight, named, prior, tiered=tiered, rows=wanted,
                             phrases=phrases, held=held)
        depth = max(DEPTH, wanted)  # the windows of one long line, one result, filled the KNN list: deeper
        while qvec is not None and len(rows) < wanted and depth < MAX_GROUPED_ROWS and not opts.filtered \
                and self.store.row("counts")["chunks"] > depth:  # (a 300,000-character line: 2 results of 10)
            depth = min(depth * 4, MAX_GROUPED_ROWS)
            rows = self._run(fq, qvec, opts, weight, named, prior, tiered, depth, phrases, held)[:wanted]
        results = self._results(rows)
        if opts.role_prior:
            results = implementation_first(results, a.terms)
        if not results and opts.language:
            self._check_language(language_name(opts.language))
        if opts.rerank:
            from .rerank import rerank  # onnxruntime session and tokenizer only when asked for

            results = rerank(a.text, results, model_path=opts.rerank_model, top_n=RERANK_DEPTH)
            tier = {r["id"]: r["tier"] for r in rows}  # the cross-encoder orders within a name tier
            results.sort(key=lambda r: -tier[r.id])
        cosine = best is not None and any(r.knn_match is not None for r in results)  # not of chunks without vectors
        evidence = None if cosine or shape == "long" else bool(rows) and (any(r["tier"] for r in rows) or self._holds_every_term(a.terms, rows, opts.filtered))
        return Hits(_top(results, opts, a.terms if opts.role_prior else None), a, best, nothing_close, note, evidence)

    def search(self, query: str, opts: SearchOptions | None = None,
               query_vector: np.ndarray | None = None) -> list[Result]:
        """:meth:`find`'s results alone."""
        return self.find(query, opts, query_vector).results

    def _nothing_close(self, rows: list[dict], a: Analysis, best: float | None, filtered: bool) -> bool:
        """Whether nothing matches the query ``a`` well (:attr:`Hits.no_good_match`): no chunk, or no named symbol or
        file and no name only code writes held (:func:`coined_match`; a made-up ``getUserAvatarUrl`` had
        ``Context.Param`` as a good match, 15 of 25 new-user tries) nor one word no chunk holds and the model reads
        as fragments (``zzqxnonexistentword``: cosine 0.38 to a colour scheme); else none within :data:`NO_MATCH_COSINE`
        and no chunk holding every term. Never while over 1 in 20 chunks lack vectors, nor BM25 of a long query.
        What chunks hold is read within a ``filtered`` search's filter (the statement's ``held``)."""
        named = any(r["tier"] for r in rows)
        if not rows or not named and a.shape != "long" and ((coined := coined_match(a.text)) and not (
                rows[0]["coined"] if filtered else self.store.value("coined_held", {"fts": coined[0], "members": json.dumps(
                    coined[1])})) or len(a.terms) == 1 and count_tokens(a.terms)[0] >= UNKNOWN_WORD_PIECES
                and not self._holds_every_term(a.terms, rows, filtered)):
            return True
        if named or best is None and a.shape == "long" or best is not None and best >= NO_MATCH_COSINE:
            return False
        # The queue's count last: it reads up to 1 in 20 chunks' rows (2.7 ms at the kernel's 2.77M, unembedded).
        return not self._holds_every_term(a.terms, rows, filtered) and not self.store.value("vectors_pending_many")

    def _holds_every_term(self, terms: list[str], rows: list[dict], filtered: bool) -> bool:
        """Whether some chunk holds every one of the query's BM25 ``terms`` (False for none); of a ``filtered``
        search, some chunk its filter allows, as its statement read it (``rows``' ``every_term``)."""
        if filtered:
            return bool(rows) and bool(rows[0]["every_term"])
        return bool(terms) and bool(self.store.value("fts_any", {"fts_all": fts_all(terms)}))

    def _query_vector(self, query: str, given: np.ndarray | None = None) -> tuple[bytes | None, str | None]:
        """The query's embedding as a float32 blob, or None and why, when the embedder did not
        answer or answered a vector as wide as the index's are not (a provider's model changed under its
        name): the search then answers from BM25 rather than fail, as for any other fault of the embedder."""
        try:
            vector = (given if given is not None else self.embedder.embed_query(query)).astype(np.float32)
        except EmbeddingFailedError as err:
            return None, str(err)
        if vector.shape[0] != self.dims:
            return None, (f"it now answers {vector.shape[0]}-dim vectors where this index holds {self.dims}-dim ones, "
                          "made by another model: a forced build embeds the chunks again")
        return vector.tobytes(), None

    def similar(self, vectors: np.ndarray, opts: SearchOptions, skip=None) -> list[Result]:
        """Chunks nearest to the mean of ``vectors`` (float32[n, dims], from the index), by cosine KNN, but ``skip``'s."""
        mean = vectors.mean(axis=0)
        mean = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
        prior = ROLE_WEIGHTS if opts.role_prior else None
        rows = self._run(None, mean.tobytes(), opts, Bm25Weight(0.0, 0.0), Named([], [], []), prior, tiered=False)
        return _top([r for r in self._results(rows) if skip is None or not skip(r)], opts)

    def _check_language(self, language: str) -> None:
        """Raise when a language filter names no language of this index (a typo, not a miss)."""
        present = [r["language"] for r in self.store.rows("stats_by_language") if r["language"] != "(none)"]
        if language not in present:
            raise UsageError(f"no {language!r} code in this index", f"its languages: {', '.join(present)}")

    def _run(self, fq: str | None, qvec: bytes | None, opts: SearchOptions, weight: Bm25Weight,
             named: Named, prior: dict[str, float] | None, tiered: bool, rows: int | None = None,
             phrases: tuple[str, ...] = (), held: dict[str, str | None] = NOT_HELD) -> list[dict]:
        """Rows of ``search_hybrid``. ``tiered``: chunks defining a named symbol, and the chunks of
        a named file, come first, fetched even when neither retriever found them (identifier
        queries only, see :meth:`search`); otherwise a name only multiplies the score by
        :data:`NAME_BOOST`. ``rows``: chunks to fetch (default :func:`_rows_wanted`). ``phrases``:
        those of ``fq``, whose BM25 list a large index computes ahead (:mod:`.pruning`). ``held``: :func:`_held`'s."""
        limit = rows or _rows_wanted(opts)
        exts = [e if e.startswith(".") else "." + e for e in opts.exts] if opts.exts else None
        under = (opts.under or "").strip("/") or None
        depth, pending = min(max(DEPTH, limit), 4096), bool(self.store.value("vectors_pending"))
        pruned = bool(fq) and not opts.filtered
        large = pruned and pruning.fts_rows(self.store) >= pruning.PRUNE_MIN_CHUNKS
        ahead = knn.ahead(self.store, qvec, depth, opts.filtered)

        def bm25() -> list[tuple[int, float]] | None:
            top = pruning.bm25_top(self.store, phrases, depth, BM25_WEIGHTS) if pruned else None
            # Beside a KNN list made ahead, an unsplit query is made ahead too: the two then overlap (knn.py).
            return pruning.plain_top(self.store, fq, depth, BM25_WEIGHTS) if top is None and large and ahead else top

        top, given = knn.alongside(self.store, ahead, bm25, large) if ahead else (bm25(), None)
        params = {
            "fts_query": fq, "bm25_given": pruning.as_json(top), "qvec": qvec, "rrf_k": RRF_K, "depth": depth,
            "knn_given": given,
            "rrf_weight": RRF_WEIGHT, "w_fts": weight.usual, "w_fts_confident": weight.confident,
            "confident_gap": CONFIDENT_GAP, "w_fts_weak": weight.weak_vectors, "weak_cosine": WEAK_COSINE,
            "knn_by_best": int(weight.knn_by_best),
            **{f"bm25_{col}": w for col, w in BM25_WEIGHTS.items()},
            "filtered": int(opts.filtered), "exts": json.dumps(exts) if exts else None, "glob": sqlite_glob(opts.glob),
            "language": language_name(opts.language) if opts.language else None, "exclude_path": opts.exclude_path,
            "under": under, "role": opts.role,
            "chunk_ids": json.dumps(opts.chunk_ids) if opts.chunk_ids is not None else None,
            "role_weights": json.dumps(prior) if prior else None, "limit": limit,
            "names": json.dumps(named.names), "tails": json.dumps(named.tails), "paths": json.dumps(named.paths), "cased": json.dumps(dict(named.cased)), "placed": json.dumps(named.placed), "typed": json.dumps(named.typed),
            "name_boost": NAME_BOOST, "tiered": int(tiered), "pending": int(pending),
            "knn_share": self._knn_share() if qvec is not None else 1.0,
            "fill": int(qvec is not None and fq is not None and not pending),
            "symbol_match": symbol_match(named.names) if tiered else None,
            **held,
        }
        return self.store.rows("search_hybrid", params)

    def match(self, query_vector: np.ndarray) -> float | None:
        """How well this index matches a query embedding (float32[dims]): the mean cosine of its
        :data:`PROBE_K` nearest chunks, as the ``knn_match`` of :meth:`search` (a workspace search's
        cheap first look, without BM25, fusion or naming). Exact below :data:`PROBE_COARSE_MIN`
        chunks; above, from :data:`PROBE_COARSE_K` hamming candidates per partition, which may
        miss a few of the nearest and read a little low. None with no vectors, or while some
        chunks still wait for theirs (the mean of the embedded ones would read low), or of another width.
        """
        if self.store.value("vectors_pending"):  # a partial mean reads low: unknown, so never left out
            return None
        qvec, _ = self._query_vector("", query_vector)
        if qvec is None:
            return None
        coarse = self.store.row("counts")["chunks"] >= PROBE_COARSE_MIN
        return self.store.value("knn_match", {"qvec": qvec, "depth": 2 * PROBE_K,
                                              "coarse_k": PROBE_COARSE_K if coarse else 0})

    def _knn_share(self) -> float:
        """The vector list's weight while chunks wait for their vectors: ``min(1, embedded share /
        FULL_TRUST_COVERAGE)``; 1 once every chunk has one (see :data:`FULL_TRUST_COVERAGE`)."""
        if not self.store.value("vectors_pending"):
            return 1.0
        counts = self.store.row("vector_counts")
        return min(1.0, (1.0 - counts["pending"] / max(counts["chunks"], 1)) / FULL_TRUST_COVERAGE)

    def _results(self, rows: list[dict]) -> list[Result]:
        # A shard searched without its source (a portable index file) cannot tell staleness: None.
        stale = StaleCheck(self.root) if self.root is not None else (lambda row: None)
        # Chunks still waiting for vectors would make the index look a worse match than it is.
        match = rows[0]["knn_match"] if rows and not self.store.value("vectors_pending") else None
        return place_pieces(self.store, [
            Result(path=r["path"], start_line=r["start_line"], end_line=r["end_line"], score=round(r["score"], 6),
                   language=r["language"], kind=r["kind"], symbol=r["symbol"], content=r["content"],
                   stale=stale(r), id=r["id"], role=r["role"], bm25_rank=r["bm25_rank"], knn_rank=r["knn_rank"],
                   cosine=None if r["distance"] is None else round(1.0 - r["distance"], 6), tier=r["tier"] or 0,
                   knn_match=match)
            for r in rows
        ])


def _held(a: Analysis) -> dict[str, str | None]:
    """search_hybrid's ``:held_*`` for the query ``a``, what a filtered search reads within its filter (sql/search.sql
    ``held``): its terms AND-ed, and the names only code writes (:func:`coined_match`), None for none."""
    coined = coined_match(a.text)
    return {"held_all": fts_all(a.terms) if a.terms else None,
            "held_coined": coined[0] if coined else None, "held_members": json.dumps(coined[1]) if coined else None}


def _rows_wanted(opts: SearchOptions) -> int:
    """Chunks the statement returns: more than the limit when grouping by file, re-ranking, or
    looking for the implementations that tests and declarations point at (the role prior)."""
    limit = opts.limit * CHUNKS_PER_FILE if opts.group_by_file else opts.limit
    return max(limit, RERANK_DEPTH) if opts.rerank or opts.role_prior else limit


def _top(results: list[Result], opts: SearchOptions, terms: list[str] | None = None) -> list[Result]:
    """The first ``opts.limit`` results; with ``group_by_file`` each file once (:func:`by_file`), the
    implementation rule applied again to the files when the query's ``terms`` are given (a test file's
    second chunk adds to its score, so it could lead the file it tests once more)."""
    if opts.group_by_file:
        results = by_file(results, aggregate=not opts.rerank)
        if terms is not None:
            results = implementation_first(results, terms)
    return results[: opts.limit]
