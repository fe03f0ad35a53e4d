"""Search: query text -> FTS5 expression + query embedding -> the one hybrid SQL statement -> results."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import UsageError
from .languages import detect_language
from .storage.store import Store
from .text import split_identifier

MODES = ("hybrid", "bm25", "vector")

#: RRF constant; 60 is the value of Cormack, Clarke & Buettcher (SIGIR 2009).
RRF_K = 60
#: Weight of the RRF term next to the convex combination of normalised scores (see
#: sql/search.sql). Rank fusion alone loses to the better retriever on CoSQA dev (equal-weight
#: RRF NDCG@10 0.51 vs vectors 0.60); scores carry the confidence that ranks throw away.
RRF_WEIGHT = 2.0
#: Candidates per retriever before fusion (vec0 allows k <= 4096).
DEPTH = 50
#: From this many chunks on, KNN takes its candidates by hamming distance over the vectors'
#: sign bits and re-scores them with the float cosine (sql/search.sql); below it the exact
#: float scan is fast enough (measured, idle: 31 ms at 50k, 66 ms at 100k chunks).
COARSE_MIN_CHUNKS = 20_000
#: Hamming candidates re-scored, as a multiple of the KNN depth, taken evenly from the 8
#: partitions of chunks_bits (sql/search.sql ``coarse``). Measured on Sphinx 5.1.1 (27.9k real
#: chunk vectors, 180 CoSQA, SWE-bench and benchmark queries), share of the exact top 10 kept:
#: one top-100 0.83, 8 x 13 0.83, 8 x 25 0.90, 8 x 32 0.91, 8 x 50 0.94; CPU ms at 50k chunks
#: (load 6): 15.1, 9.3, 12.3, 13.1, 22.5. 4 x depth it is: better than before at less cost.
COARSE_FACTOR = 4
#: Partitions of chunks_bits (rowid % 8; sql/schema.sql and sql/search.sql hold the same 8).
BITS_PARTITIONS = 8
#: Fused chunks the cross-encoder re-scores (the issue asks for 20-50; a MiniLM-L6
#: cross-encoder costs about as much per pair as embedding one chunk).
RERANK_DEPTH = 30
#: With group_by_file, chunks fetched per file wanted: files with many matching chunks must
#: not crowd the others out of the candidates (5 gave 3 files for --limit 10 on click).
CHUNKS_PER_FILE = 10
#: FTS5 column weights for bm25(): a hit on a chunk's symbol name or its path says more
#: than one in its body; sub-tokens ("user name" from getUserName) say a little less.
BM25_WEIGHTS = {"content": 1.0, "subtokens": 0.5, "symbol": 2.0, "path": 1.0}
#: BM25's fusion weight by query shape, (normal, when BM25 is confident); vectors get 1 - it.
#: Tuned on the dev sets: on CoSQA's natural-language questions BM25 only helps when its best
#: hit stands out (NDCG@10: vectors 0.606, fixed weights at best 0.605, this 0.609);
#: identifiers and long issue texts (names, paths, tracebacks) are BM25's strength. A question
#: that names code ("where is __repr__ generated") is "mixed": none of CoSQA's 500 questions
#: is, so its weight is set between the two, not tuned (with 0, `__repr__` was ignored).
BM25_WEIGHT = {"natural": (0.0, 0.4), "mixed": (0.5, 0.8), "identifier": (0.7, 0.9), "long": (0.85, 0.95)}
#: Score multiplier for a candidate whose symbol or path the query names (sql/search.sql).
#: Identifier-shaped queries also rank such chunks first (:meth:`Searcher.search`, ``:tiered``).
NAME_BOOST = 1.5
#: BM25 is confident when (s1 - s2) / s1 of its two best scores reaches this (sql/search.sql).
CONFIDENT_GAP = 0.25
#: A query with more words than this is "long": an issue or a stack trace, not a question
#: (the 500 CoSQA web questions have at most 14 words; the 127 SWE-bench issues at least 26).
LONG_QUERY_WORDS = 20
MAX_LIMIT = 200
#: Bound on distinct FTS5 terms: an issue text has hundreds of words; OR-ing all of them is slow
#: (~0.5 us per posting) and drowns the informative ones.
MAX_FTS_TERMS = 32

#: A word may start with underscores: FTS5 keeps ``_auth`` and ``__init__`` whole (``_`` is a
#: token character, sql/schema.sql), so only the word as written matches a path ``httpx/_auth.py``
#: or a private name; its sub-tokens (``auth``) still match the subtokens column.
_WORD = re.compile(r"_*[^\W\d_]\w*|\d+[A-Za-z_]\w*", re.UNICODE)
#: Stop words dropped on the BM25 side only (the model still sees the whole query): common
#: English function words and question words that carry no code signal.
STOP_WORDS = frozenset("""
a an the and or not no of to in on at by for from with without into onto as is are was were be been being
it its this that these those there here what which who whom whose where when why how do does did done
can could should would will shall may might must i me my we our you your he she they them their
if then else than so such very too also just only any some all each every both either neither
get gets got find finds use uses using used way ways code function method file files want need
""".split())


@dataclass
class Result:
    """One chunk hit. Lines are 1-based inclusive; ``score`` is the fused score (higher is better).

    Results come in score order, except that an identifier query's named symbols and files come first
    (:meth:`Searcher._run`), so a named chunk may lead with a lower score.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    language: str | None
    kind: str
    symbol: str | None
    content: str
    stale: bool
    id: int
    role: str
    bm25_rank: int | None = None
    knn_rank: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict with the documented result keys first."""
        return asdict(self)


@dataclass
class SearchOptions:
    """Everything that shapes one search besides the query text.

    Attributes:
        limit: results returned (1..200).
        mode: ``hybrid``, ``bm25`` or ``vector``.
        exts: file name endings to keep, e.g. ``[".py"]``; empty keeps all.
        glob: SQLite GLOB over the relative path (``*`` also matches ``/``); a pattern
            without ``/`` is also matched against the file name.
        language: keep only this language.
        exclude_path: leave this file out.
        under: keep only files under this folder (relative POSIX path, e.g. ``src/pkg``); a
            search from a subfolder of an indexed codebase sets it (:meth:`Codebase.find`).
        role_prior: multiply scores by :data:`ROLE_WEIGHTS` (:data:`LONG_QUERY_ROLE_WEIGHTS` for long
            queries): a soft prior for source files.
        group_by_file: one result per file, ranked by its best chunk.
        rerank: re-score the top :data:`RERANK_DEPTH` fused chunks with the cross-encoder.
        rerank_model: its path; None: ``$CODII_SQL_RERANK_MODEL`` (see :mod:`rerank`).
    """

    limit: int = 10
    mode: str = "hybrid"
    exts: list[str] = field(default_factory=list)
    glob: str | None = None
    language: str | None = None
    exclude_path: str | None = None
    under: str | None = None
    role_prior: bool = True
    group_by_file: bool = False
    rerank: bool = False
    rerank_model: str | None = None


#: Soft prior by file role (roles.classify). Measured on the SWE-bench dev set (issue 6):
#: halving docs/tests/non-source scores lifts file Acc@1 0.13 -> 0.39. A query that names a
#: test or doc file still finds it: the prior only reorders near-ties.
ROLE_WEIGHTS = {"source": 1.0, "test": 0.6, "docs": 0.6, "config": 0.5, "generated": 0.5, "vendored": 0.5}
#: The prior for long queries (issue reports, stack traces), which nearly always ask which
#: source file to change. Tuned on 70 SWE-bench dev issues (hybrid NDCG@10 0.677 -> 0.702,
#: Acc@k unchanged) and checked on the 57 held-out Sphinx issues (BM25: Acc@5 0.439 -> 0.544,
#: NDCG@10 0.388 -> 0.448). A file the query names still gets NAME_BOOST.
LONG_QUERY_ROLE_WEIGHTS = {"source": 1.0, "test": 0.4, "docs": 0.4, "config": 0.3, "generated": 0.3,
                           "vendored": 0.3}


def query_terms(query: str, *, numbers: bool = False) -> list[str]:
    """Distinct lower-case BM25 terms: each identifier as written plus its sub-tokens, stop words dropped.

    ``"where is getUserName called"`` -> ``["getusername", "user", "name", "called"]`` ("get" is a stop word);
    ``"httpx/_auth.py"`` -> ``["httpx", "_auth", "auth", "py"]``.
    Dotted paths and ``::`` split at the separators. Not capped: see :meth:`Searcher.select_terms`.
    With ``numbers``, standalone numbers of two or more characters are terms too (``304``,
    ``8080``, ``4.17.2``: fts_query quotes it, so FTS5 matches the tokens 4 17 2 in a row).
    """
    terms: list[str] = []
    seen = set()
    whole = _NUMBER.findall(query) if numbers else []
    for word in _WORD.findall(query) + whole:
        for t in [word.lower(), *(split_identifier(word) if word not in whole else [])]:
            if t not in seen and t not in STOP_WORDS and len(t) > 1:
                seen.add(t)
                terms.append(t)
    return terms


_NUMBER = re.compile(r"(?<![\w.-])\d+(?:[._-]\d+)*(?![\w-])")
_CODE_SHAPE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|^_+[A-Za-z]|[a-z][A-Z]|[A-Za-z]\.[A-Za-z_]|::")
_PATH = re.compile(r"(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z]\w{0,5}\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*")
_PATH_PREFIX = re.compile(r"^(?:\.?/)+")
#: Longest whitespace-free token searched for a file path. _PATH backtracks, so its cost grows
#: with the square of a token's length: one 100,000-character token took 89 s, and blocked
#: the MCP server meanwhile. Real paths are far shorter.
MAX_PATH_TOKEN = 512


class Named(NamedTuple):
    """What a query names, lower-cased (:func:`named_in_query`).

    Attributes:
        names: identifiers as written, dotted ones joined by ``.`` (``console.print``, ``print``):
            a symbol matches when it is the name or ends with ``.`` + the name.
        tails: the last part of each dotted name that is not itself named (``print``): weaker
            evidence, since ``rich/jupyter.py print`` is not ``Console.print``.
        paths: file paths and file names with a known extension (``httpx/_auth.py``, ``auth.py``).
    """

    names: list[str]
    tails: list[str]
    paths: list[str]


def named_in_query(query: str) -> Named:
    """Identifiers and file paths a query names (see :class:`Named`).

    A name is a code-shaped token (snake_case, camelCase, dotted or ``::`` path, or the whole
    query when it is one word). A path is a token with a ``/`` or with an extension
    :func:`~codii_sql.languages.detect_language` knows (``_auth.py``, not ``Session.send``);
    leading ``./`` and ``/`` are dropped so it can match the end of an indexed relative path,
    and a path is not also a name (``auth.py`` names no symbol ``py``).
    """
    paths: list[str] = []

    def take_path(m: re.Match) -> str:
        if "/" not in m.group(0) and detect_language(m.group(0)) is None:
            return m.group(0)
        paths.append(_PATH_PREFIX.sub("", m.group(0).lower()))
        return " "

    rest = " ".join(_PATH.sub(take_path, t) if len(t) <= MAX_PATH_TOKEN else t for t in query.split())
    one_word = len(query.split()) == 1
    names: set[str] = set()
    tails: set[str] = set()
    for token in _IDENTIFIER.findall(rest):
        if one_word or _CODE_SHAPE.search(token):
            parts = [p for p in re.split(r"\.|::", token.lower()) if p]
            names.add(".".join(parts))
            tails.update(parts[-1:] if len(parts) > 1 else [])
    names -= STOP_WORDS
    return Named(sorted(names), sorted(tails - names - STOP_WORDS), sorted(set(paths) - {""}))


def symbol_match(names: list[str]) -> str | None:
    """An FTS5 expression finding the chunks whose ``symbol`` column holds a name's parts as a
    phrase (``console.print`` -> ``symbol : ("console print")``), or None for no names.

    A superset: sql/search.sql keeps the chunks whose symbol is exactly the name or ends with it.
    """
    phrases = ['"' + " ".join(n.split(".")) + '"' for n in names]
    return f"symbol : ({' OR '.join(phrases)})" if phrases else None


_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_TASK_LIST_ITEM = re.compile(r"^[ \t]*[-*] \[[ xX]\].*$", re.M)


def strip_issue_template(text: str) -> str:
    """An issue text without its template's instructions: HTML comments (invisible once
    rendered) and task-list lines (``- [x] a detailed description of the bug``).

    Issue templates put the same boilerplate into every issue of a project, and it matches the
    template file itself (``.github/ISSUE_TEMPLATE/bug_report.md``) better than any code.
    Measured on 70 SWE-bench dev issues (hybrid, file level): Acc@1 0.429 -> 0.457.
    """
    return _TASK_LIST_ITEM.sub("", _HTML_COMMENT.sub("", text))


_CODE_TOKEN = re.compile(r"[A-Za-z]+_\w|[a-z][A-Z]|\w\.\w|::|\w\(|^\w+$")


def query_shape(query: str) -> str:
    """``identifier`` (a few tokens, at least one code-like: snake_case, camelCase, dotted,
    ``::``, a call, or a single word), ``long`` (more than :data:`LONG_QUERY_WORDS` words),
    ``mixed`` (a question naming code: ``where is __repr__ generated``), else ``natural``."""
    words = query.split()
    if len(words) > LONG_QUERY_WORDS:
        return "long"
    if len(words) <= 3 and any(_CODE_TOKEN.search(w) for w in words):
        return "identifier"
    if any(_CODE_SHAPE.search(t) for t in _IDENTIFIER.findall(query)):
        return "mixed"
    return "natural"


def fts_query(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression: every term quoted (raw user text is not valid FTS5 syntax), OR-ed.

    OR, not AND: BM25 already ranks chunks matching more terms higher, and AND of a long
    query matches nothing. None when there are no terms.
    """
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class Searcher:
    """Runs searches against one index.

    Args:
        store: the open index.
        root: the codebase root on this machine (for ``stale`` checks).
        embedder: as for the indexer; only used by hybrid and vector modes.
    """

    def __init__(self, store: Store, root: Path, embedder):
        self.store = store
        self.root = Path(root)
        self.embedder = embedder
        store.run("create_vocab")

    def select_terms(self, query: str, *, numbers: bool = False) -> list[str]:
        """The query's BM25 terms (:func:`query_terms`), at most :data:`MAX_FTS_TERMS` of them.

        An issue text has hundreds of words: OR-ing them all costs ~0.5 us per posting and lets
        common words outvote the few that name the code. A long query keeps, in this order,
        the terms of its title (first line, when there are more lines), those of its code spans
        (`` `name` ``), then the rest by fewest matching chunks (highest IDF); absent terms go.
        Measured on 70 SWE-bench dev issues (hybrid, file level): IDF order alone Acc@5 0.643,
        title first 0.714, title and code spans first 0.714 with Acc@1 0.457 -> 0.486.
        """
        terms = query_terms(query, numbers=numbers)
        if len(terms) <= MAX_FTS_TERMS:
            return terms
        df = {r["term"]: r["doc"] for r in self.store.rows("term_doc_counts", {"terms": json.dumps(terms)})}
        lines = query.strip().split("\n", 1)
        title = set(query_terms(lines[0])) if len(lines) > 1 else set()
        code = set(query_terms(" ".join(_CODE_SPAN.findall(query))))
        pos = {t: i for i, t in enumerate(terms)}

        def priority(t: str) -> tuple:
            return (0, pos[t]) if t in title else (1 if t in code else 2, df[t], pos[t])

        keep = set(sorted((t for t in terms if t in df), key=priority)[:MAX_FTS_TERMS])
        return [t for t in terms if t in keep]

    def search(self, query: str, opts: SearchOptions | None = None) -> list[Result]:
        """The top ``opts.limit`` chunks (or files) for ``query``.

        An identifier-shaped query (:func:`query_shape`) puts first the chunks defining a symbol it
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
            raise UsageError("the query is empty: pass some words or an identifier to search for")
        if not any(ch.isalnum() for ch in query):
            # FTS5 drops punctuation and the model embeds it as noise: any answer would be arbitrary.
            raise UsageError(f"the query {query[:40]!r} has no letters or digits; punctuation is not indexed: "
                             "search for a word or an identifier")
        if opts.mode not in MODES:
            raise UsageError(f"unknown mode {opts.mode!r}: use one of {', '.join(MODES)}")
        if not 1 <= opts.limit <= MAX_LIMIT:
            raise UsageError(f"limit must be between 1 and {MAX_LIMIT}")
        _check_filters(opts)
        shape = query_shape(query)
        if shape == "long":
            query = strip_issue_template(query).strip() or query
        # Numbers name things in a short query (HTTP 304, port 8080, version 4.17.2); in an
        # issue text they are mostly line numbers and versions of pasted output.
        fq = fts_query(self.select_terms(query, numbers=shape != "long")) if opts.mode != "vector" else None
        qvec = None
        if opts.mode != "bm25":
            qvec = self.embedder.embed([query])[0].astype(np.float32).tobytes()
        # A single retriever gets the whole weight: a zero weight would zero every score.
        w_fts = {"bm25": (1.0, 1.0), "vector": (0.0, 0.0)}.get(opts.mode) or BM25_WEIGHT[shape]
        prior = (LONG_QUERY_ROLE_WEIGHTS if shape == "long" else ROLE_WEIGHTS) if opts.role_prior else None
        named = named_in_query(query)
        rows = self._run(fq, qvec, opts, w_fts, named, prior, tiered=shape == "identifier")
        results = self._results(rows)
        if not results and opts.language:
            self._check_language(opts.language.lower())
        if opts.rerank:
            from .rerank import rerank  # onnxruntime session and tokenizer only when asked for

            results = rerank(query, results, model_path=opts.rerank_model, top_n=RERANK_DEPTH)
            tier = {r["id"]: r["tier"] for r in rows}  # the cross-encoder orders within a name tier
            results.sort(key=lambda r: -tier[r.id])
        return _top(results, opts)

    def similar(self, vectors: np.ndarray, opts: SearchOptions) -> list[Result]:
        """Chunks nearest to the mean of ``vectors`` (float32[n, dims], from the index), by cosine KNN."""
        mean = vectors.mean(axis=0)
        mean = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
        prior = ROLE_WEIGHTS if opts.role_prior else None
        rows = self._run(None, mean.tobytes(), opts, (0.0, 0.0), Named([], [], []), prior, tiered=False)
        return _top(self._results(rows), opts)

    def _check_language(self, language: str) -> None:
        """Raise when a language filter names no language of this index (a typo, not a miss)."""
        present = [r["language"] for r in self.store.rows("stats_by_language") if r["language"] != "(none)"]
        if language not in present:
            raise UsageError(f"no {language!r} code in this index; its languages: {', '.join(present)}")

    def _run(self, fq: str | None, qvec: bytes | None, opts: SearchOptions, w_fts: tuple[float, float],
             named: Named, prior: dict[str, float] | None, tiered: bool) -> list[dict]:
        """Rows of ``search_hybrid``. ``tiered``: chunks defining a named symbol, and the chunks of
        a named file, come first, fetched even when neither retriever found them (identifier
        queries only, see :meth:`search`); otherwise a name only multiplies the score by
        :data:`NAME_BOOST`.
        """
        limit = opts.limit * CHUNKS_PER_FILE if opts.group_by_file else opts.limit
        if opts.rerank:
            limit = max(limit, RERANK_DEPTH)
        exts = [e if e.startswith(".") else "." + e for e in opts.exts] if opts.exts else None
        under = (opts.under or "").strip("/") or None
        filtered = bool(exts or opts.glob or opts.language or opts.exclude_path or under)
        depth = min(max(DEPTH, limit), 4096)
        coarse = qvec is not None and not filtered and self.store.row("counts")["chunks"] >= COARSE_MIN_CHUNKS
        params = {
            "fts_query": fq, "qvec": qvec, "depth": depth, "rrf_k": RRF_K,
            "coarse_k": min(-(-COARSE_FACTOR * depth // BITS_PARTITIONS), 4096) if coarse else 0,
            "rrf_weight": RRF_WEIGHT, "w_fts": w_fts[0], "w_fts_confident": w_fts[1], "confident_gap": CONFIDENT_GAP,
            **{f"bm25_{col}": w for col, w in BM25_WEIGHTS.items()},
            "filtered": int(filtered), "exts": json.dumps(exts) if exts else None, "glob": opts.glob,
            "language": opts.language.lower() if opts.language else None, "exclude_path": opts.exclude_path,
            "under": under,
            "role_weights": json.dumps(prior) if prior else None, "limit": limit,
            "names": json.dumps(named.names), "tails": json.dumps(named.tails), "paths": json.dumps(named.paths),
            "name_boost": NAME_BOOST, "tiered": int(tiered),
            "symbol_match": symbol_match(named.names) if tiered else None,
        }
        return self.store.rows("search_hybrid", params)

    def _results(self, rows: list[dict]) -> list[Result]:
        stale = StaleCheck(self.root)
        return [
            Result(path=r["path"], start_line=r["start_line"], end_line=r["end_line"], score=round(r["score"], 6),
                   language=r["language"], kind=r["kind"], symbol=r["symbol"], content=r["content"],
                   stale=stale(r), id=r["id"], role=r["role"], bm25_rank=r["bm25_rank"], knn_rank=r["knn_rank"])
            for r in rows
        ]


def _check_filters(opts: SearchOptions) -> None:
    """Raise on a filter that can only match nothing by mistake (a typo, not a miss)."""
    if any(e.strip(". ") == "" for e in opts.exts):
        raise UsageError("an empty extension filter matches nothing: pass one such as .py")
    if opts.language is not None and not opts.language.strip():
        raise UsageError("the language filter is empty: pass one such as python")
    glob = opts.glob
    if glob is None:
        return
    if not glob.strip():
        raise UsageError("the path glob is empty: pass one such as 'src/*.py'")
    if glob.startswith("/"):
        raise UsageError(f"bad path glob {glob!r}: paths are relative to the codebase root, e.g. 'src/*.py'")
    if glob.count("[") > glob.count("]"):
        raise UsageError(f"bad path glob {glob!r}: close every '[' (or match a literal one with '[[]')")


def _top(results: list[Result], opts: SearchOptions) -> list[Result]:
    """The first ``opts.limit`` results; with ``group_by_file`` each file once, at its best chunk's rank."""
    if opts.group_by_file:
        best: dict[str, Result] = {}
        for r in results:
            best.setdefault(r.path, r)
        results = list(best.values())
    return results[: opts.limit]


class StaleCheck:
    """Whether a result's file on disk still matches the indexed content (memoised per path).

    size + mtime equal to the indexed row is taken as unchanged (a hint, as in the indexer);
    otherwise the content sha256 decides. A missing or unreadable file is stale.
    """

    def __init__(self, root: Path):
        self.root = root
        self.memo: dict[str, bool] = {}

    def __call__(self, row: dict) -> bool:
        path = row["path"]
        if path not in self.memo:
            self.memo[path] = self._stale(path, row)
        return self.memo[path]

    def _stale(self, path: str, row: dict) -> bool:
        full = self.root / path
        try:
            st = os.stat(full)
            if st.st_size == row["file_size"] and st.st_mtime_ns == row["file_mtime_ns"]:
                return False
            with open(full, "rb") as fh:
                return hashlib.sha256(fh.read()).hexdigest() != row["file_hash"]
        except OSError:
            return True
