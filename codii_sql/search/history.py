"""Searching the history: BM25 over commits and hunks and KNN over commit vectors, fused by RRF; one result per commit."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import EmbeddingFailedError, UsageError
from ..models.embedder import Embedder
from ..storage.store import Store
from ..text import refuse_undecodable
from .budget import json_tokens
from .fusion import CONFIDENT_GAP
from .query import fts_query, fts_quoted, query_terms
from .results import sqlite_glob

#: The RRF constant of Cormack et al. (2009), k = 60: ranks beyond the first few weigh alike.
RRF_K = 60
#: Rows each ranked list (commit BM25, hunk BM25, KNN) contributes before fusion.
LIST_DEPTH = 100
#: Query terms OR-ed into the MATCH expression: a pasted message of 200 words costs 200 term scans.
MAX_TERMS = 32
#: Hunks shown per commit (the matching ones first), and characters of a body shown.
HUNKS_SHOWN = 3
BODY_CHARS = 1200
#: Fewest tokens of a hunk worth showing: below, the hunk is dropped rather than cut to a line.
MIN_HUNK_TOKENS = 25


@dataclass
class HunkHit:
    """A hunk of a found commit: ``path`` (after the commit), ``old_path`` when renamed, the old and
    new line ranges (start 1-based, 0 for an empty side), ``content`` (the ``@@`` line then the
    `` ``/``-``/``+`` lines), ``matched``: it holds a query word."""

    path: str
    old_path: str | None
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    content: str
    matched: bool


@dataclass
class CommitHit:
    """One commit of a history answer: ``date`` in unix seconds (author date), ``files`` touched
    (those the rules keep), ``score`` (RRF), the 1-based rank in each list (None: not in it),
    ``cosine`` to the query (None without a vector), and its ``hunks``."""

    sha: str
    date: int
    author: str
    email: str
    subject: str
    body: str
    files: list[str]
    score: float
    commit_rank: int | None
    hunk_rank: int | None
    knn_rank: int | None
    cosine: float | None
    hunk_count: int
    hunks: list[HunkHit] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["score"] = round(self.score, 6)
        out["cosine"] = round(self.cosine, 4) if self.cosine is not None else None
        return out


class HistorySearcher:
    """Hybrid search over one index's history (``sql/history.sql`` ``history_search``).

    Args:
        store: the open index.
        embedder: its embedder; the query is embedded only when the index holds commit vectors.
    """

    def __init__(self, store: Store, embedder: Embedder):
        self.store, self.embedder = store, embedder

    def search(self, query: str, *, glob: str | None = None, since: int | None = None, limit: int = 10,
               hunks: int = HUNKS_SHOWN) -> tuple[list[CommitHit], str | None]:
        """The ``limit`` best commits for ``query`` among those authored at or after ``since`` (unix
        seconds) with a hunk whose path matches ``glob``, each with up to ``hunks`` hunks (matching
        first); and why the vectors were not used (None when they were or there are none).

        Raises:
            UsageError: ``glob`` is not a pattern SQLite accepts, or ``query`` holds a byte that is not UTF-8.
        """
        refuse_undecodable(query)
        if not self.store.value("history_vec_sql"):  # no history build has run on this index
            return [], None
        terms = query_terms(query, numbers=True)[:MAX_TERMS]
        fts = fts_query(terms)
        qvec, why = self._query_vector(query)
        glob = sqlite_glob(glob) if glob else None
        subject_all = f"subject : ({' AND '.join(fts_quoted(t) for t in terms)})" if terms else None
        params = {"fts": fts, "subject_all": subject_all, "qvec": qvec, "since": since, "glob": glob,
                  "filtered": int(bool(since or glob)),
                  "k": LIST_DEPTH, "rrf_k": RRF_K, "confident_gap": CONFIDENT_GAP, "limit": limit}
        if fts is None and qvec is None:
            rows = self.store.rows("history_search_unranked", params)
        else:
            rows = self.store.rows("history_search", params)
        found = {r["id"]: _hit(r) for r in rows}
        for h in self.store.rows("history_hunks_of", {"ids": json.dumps(list(found)), "fts": fts, "glob": glob,
                                                      "n": hunks}):
            found[h["commit_id"]].hunks.append(_hunk(h))
        return list(found.values()), why

    def _query_vector(self, query: str) -> tuple[bytes | None, str | None]:
        """The query's embedding when the index holds commit vectors of its width, else None and why
        (None when there simply are none yet)."""
        if not self.store.value("history_has_vectors"):
            return None, None
        try:
            vector = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        except EmbeddingFailedError as err:
            return None, f"the query could not be embedded ({err.what}): commits are ranked by BM25 alone"
        return vector.tobytes(), None


def _hit(row: dict) -> CommitHit:
    return CommitHit(row["sha"], row["date"], row["author"], row["email"], row["subject"], row["body"],
                     json.loads(row["files"]), row["score"], row["commit_rank"], row["hunk_rank"], row["knn_rank"],
                     row["cosine"], row["hunk_count"])


def _hunk(row: dict) -> HunkHit:
    return HunkHit(row["path"], row["old_path"], row["old_start"], row["old_lines"], row["new_start"],
                   row["new_lines"], row["content"], bool(row["matched"]))


def fit_commits(hits: list[CommitHit], max_tokens: int, reserved: int = 0) -> tuple[list[CommitHit], dict]:
    """``hits`` fitted into about ``max_tokens`` tokens (4 characters each), less the ``reserved`` tokens of the
    answer's other fields (its history state and notes: a long note made answers 28% over): bodies cut to
    :data:`BODY_CHARS`, then each commit's share of the budget spent on its hunks in order (a
    hunk cut to its first lines, or dropped under :data:`MIN_HUNK_TOKENS`), the lowest commits
    dropped when even their header does not fit.

    Returns:
        the fitted commits and ``{"max_tokens", "used_tokens", "trimmed", "dropped"}`` (hunks cut
        or left out; commits dropped).
    Raises:
        UsageError: ``max_tokens`` is not positive.
    """
    if max_tokens <= 0:
        raise UsageError("must be a positive number of tokens", field="max_tokens")
    report = {"max_tokens": max_tokens, "used_tokens": 0, "trimmed": 0, "dropped": 0}
    out: list[CommitHit] = []
    left = max(max_tokens - reserved, 0)
    for i, hit in enumerate(hits):
        body = hit.body if len(hit.body) <= BODY_CHARS else hit.body[:BODY_CHARS] + " …"
        # Counted as the JSON answer writes them (keys, escapes, every file): counted as plain text, a new
        # user's max_tokens 8000 answer came to ~25k tokens over MCP.
        head = json_tokens({**hit.to_dict(), "body": body, "hunks": []})
        files, shown = hit.files, len(hit.files)
        while head > left and not out and shown > 0:  # the best one stays, its file list cut: an "initial
            # import" of 70 files was dropped at max_tokens 500, and the answer said "0 commits"
            shown //= 2
            hit.files = [*files[:shown], f"… and {len(files) - shown} more files"]
            head = json_tokens({**hit.to_dict(), "body": body, "hunks": []})
        if head > left and out:
            report["dropped"] = len(hits) - i
            break
        share = max(0, (left - head) // max(1, min(len(hits) - i, 3)))
        kept, spent = [], 0
        for h in hit.hunks:
            cost = json_tokens(asdict(h))
            if spent + cost <= share:
                kept.append(h)
                spent += cost
                continue
            room = share - spent - json_tokens({**asdict(h), "content": ""})
            if room >= MIN_HUNK_TOKENS:
                kept.append(_cut(h, room))
                spent = share
            report["trimmed"] += 1
        hit.body, hit.hunks = body, kept
        left -= head + spent
        out.append(hit)
    report["used_tokens"] = max(max_tokens - reserved, 0) - left + reserved
    return out, report


def _cut(h: HunkHit, budget: int) -> HunkHit:
    """``h`` with its first lines, about ``budget`` tokens of them, and a line saying how many were left."""
    lines, kept, size = h.content.split("\n"), [], 0
    for line in lines:
        size += json_tokens(line) - 1  # its JSON quotes stand for the escaped newline
        if size > budget:
            break
        kept.append(line)
    return HunkHit(h.path, h.old_path, h.old_start, h.old_lines, h.new_start, h.new_lines,
                   "\n".join(kept + [f"… [{len(lines) - len(kept)} more lines]"]), h.matched)
