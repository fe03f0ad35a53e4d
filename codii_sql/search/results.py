"""What a search takes and gives: its options and its result records."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from ..errors import UsageError
from ..languages import bad_extension

MODES = ("hybrid", "bm25", "vector")
#: The roles a file can have (ingest/roles.py classify, .gitattributes marks), as a filter names them.
ROLES = ("source", "test", "docs", "config", "generated", "vendored", "data", "changelog")
MAX_LIMIT = 200
#: The least max_tokens a search takes: the answer's own fields (query, codebase, member, notes, the budget's
#: report) and its best result's first lines came to 243-352 tokens on httpx, rack, cobra and attrs, so an
#: answer asked for in 100 (the old least) used about three times that (two helpers, separately).
MIN_TOKENS = 400
MAX_TOKENS = 1_000_000


@dataclass
class Result:
    """One chunk hit. Lines are 1-based inclusive; ``score`` is the fused score (higher is better);
    ``stale`` says whether the file changed since indexing (None when the source is not here).

    Results come in score order, except that an identifier query's named symbols and files come first
    (:meth:`Searcher._run`), so a named chunk may lead with a lower score. ``codebase`` (the root) is
    set in a search over several codebases; ``cosine`` (the raw cosine similarity to the query,
    when the chunk was a KNN candidate) and ``knn_match`` (the mean cosine of the index's 10 nearest
    chunks: how well the whole codebase matches) serve merging and are not part of the JSON;
    ``tier`` (the named-symbol/file tier) is, when above 0, so another server can merge it.
    ``start_column``/``end_column`` (1-based characters, inclusive) and ``line_chars`` say where a
    chunk that is a part of one long line lies in it, and how long the line is (None for whole
    lines; in the JSON only when set): its ``content`` is then that part alone.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    language: str | None
    kind: str
    symbol: str | None
    content: str
    stale: bool | None
    id: int
    role: str
    bm25_rank: int | None = None
    knn_rank: int | None = None
    codebase: str | None = None
    cosine: float | None = field(default=None, repr=False)
    tier: int = field(default=0, repr=False)
    knn_match: float | None = field(default=None, repr=False)
    start_column: int | None = None
    end_column: int | None = None
    line_chars: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict with the documented result keys first (``codebase`` only when set)."""
        out = asdict(self)
        del out["cosine"], out["knn_match"]
        if self.start_column is None:
            del out["start_column"], out["end_column"], out["line_chars"]
        if not self.tier:
            del out["tier"]
        if self.codebase is None:
            del out["codebase"]
        return out


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
        role: keep only files of this role (:data:`ROLES`: ``source``, ``test``, ``docs``...).
        role_prior: multiply scores by :data:`~codii_sql.search.fusion.ROLE_WEIGHTS` (``LONG_QUERY_ROLE_WEIGHTS`` for
            long queries): a soft prior for source files.
        group_by_file: one result per file, ranked by its best chunk's score plus 0.3 x its second best
            (search/fusion.py by_file).
        rerank: re-score the top ``searcher.RERANK_DEPTH`` fused chunks with the cross-encoder.
        rerank_model: its path; None: ``$CODII_SQL_RERANK_MODEL`` (see :mod:`codii_sql.search.rerank`).
        max_tokens: fit the answer in about this many tokens (see :mod:`codii_sql.search.budget`);
            None: every result whole.
        grep: keep only chunks holding a line this pattern (Python ``re`` syntax) matches, as
            ``codii-sql grep`` finds them (``search --grep``).
        chunk_ids: keep only these chunks: the shard sets it from ``grep`` before it searches.
    """

    limit: int = 10
    mode: str = "hybrid"
    exts: list[str] = field(default_factory=list)
    glob: str | None = None
    language: str | None = None
    exclude_path: str | None = None
    under: str | None = None
    role: str | None = None
    role_prior: bool = True
    group_by_file: bool = False
    rerank: bool = False
    rerank_model: str | None = None
    max_tokens: int | None = None
    grep: str | None = None
    chunk_ids: list[int] | None = None

    @property
    def filtered(self) -> bool:
        """Whether a filter keeps some chunks out (the statement then pushes it into both retrievers)."""
        return bool(self.exts or self.glob or self.language or self.exclude_path or (self.under or "").strip("/")
                    or self.role or self.chunk_ids is not None)

    def check(self) -> None:
        """Raise UsageError on an option out of range, or a filter that can only match nothing by
        mistake (a typo, not a miss)."""
        if self.mode not in MODES:
            raise UsageError(f"unknown mode {self.mode!r}", f"use one of {', '.join(MODES)}")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise UsageError(f"must be between 1 and {MAX_LIMIT}", field="limit")
        if self.max_tokens is not None and not MIN_TOKENS <= self.max_tokens <= MAX_TOKENS:
            raise UsageError(f"must be between {MIN_TOKENS} and {MAX_TOKENS:,} (a search answer's own fields and "
                             f"its best lines take about 300)", field="max_tokens")
        problem = next(filter(None, map(bad_extension, self.exts)), None)
        if problem is not None:
            raise UsageError(problem)
        if self.role is not None and self.role not in ROLES:
            raise UsageError(f"{self.role!r} is not known", f"use one of {', '.join(ROLES)}", field="role")
        if self.language is not None and not self.language.strip():
            raise UsageError("the language filter is empty", "pass one such as python")
        glob = self.glob
        if glob is None:
            return
        if not glob.strip():
            raise UsageError("the path glob is empty", "pass one such as 'src/*.py'")
        if glob.startswith(("/", "./")):
            raise UsageError(f"bad path glob {glob!r}: paths are relative to the codebase root", "write 'src/*.py'")
        if glob.startswith("!"):
            raise UsageError(f"bad path glob {glob!r}: a leading '!' does not negate a path glob",
                             "use a negated class such as '[!t]*', or search a subfolder")
        if not _classes_closed(sqlite_glob(glob)):
            raise UsageError(f"bad path glob {glob!r}", "close every '[' (or match a literal one with '[[]')")
        if "\\" in glob:
            raise UsageError(f"bad path glob {glob!r}", "use '/' between folders, e.g. 'src/*.py'")
        if re.search(r"\{[^{}]*,[^{}]*\}", glob):  # '*.{py,rst}' matched nothing, and the note contradicted it
            raise UsageError(f"bad path glob {glob!r}: a search's glob has no {{a,b}} alternation",
                             "pass --ext for each extension (--ext py --ext rst), or a glob per search")


def _classes_closed(glob: str) -> bool:
    """Whether every ``[`` of ``glob`` opens a class SQLite's GLOB closes: after ``[`` and an
    optional ``^``, a ``]`` is a member, so ``[]`` and ``[!]`` are left open and match nothing."""
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            i += 2 if glob[i + 1:i + 2] == "^" else 1
            end = glob.find("]", i + 1)
            if end < 0:
                return False
            i = end
        i += 1
    return True


def sqlite_glob(glob: str | None) -> str | None:
    """``glob`` for SQLite's GLOB: a shell's negated class ``[!a]`` becomes ``[^a]`` (SQLite reads
    ``!`` as a member, and ``src/[!t]*`` matched nothing instead of every folder but ``t...``), and a
    folder (``tests/``, at any depth; ``src/tests/`` from the root) every file under it (it matched nothing,
    and the note listed extensions)."""
    if not glob:
        return glob
    glob = glob.replace("[!", "[^")
    if glob.endswith("/"):  # a folder's files; a name alone (`json/`) at any depth, as .gitignore reads it
        glob = (glob if "/" in glob[:-1] or glob.startswith("**/") else "**/" + glob) + "*"
    return glob


def place_pieces(store, results: list[Result]) -> list[Result]:
    """``results`` with the columns set of those that are a part of one long line (see :class:`Result`),
    from ``store``'s ``line_pieces`` (sql/search.sql): a new user's agent read a 3,449-character piece
    of an 800,059-character line 1 as "line 1", nothing saying it was a part."""
    ids = [r.id for r in results if r.start_line == r.end_line]  # a part of a long line is one line
    by_id: dict[int, list[dict]] = {}
    for row in store.rows("line_pieces", {"ids": json.dumps(ids)}) if ids else ():
        by_id.setdefault(row["id"], []).append(row)
    for r in results:
        rows = by_id.get(r.id) or []
        contiguous = all(a["end_byte"] == b["start_byte"] for a, b in zip(rows, rows[1:]))
        if len(rows) < 2 or not contiguous:
            continue
        at = next(i for i, row in enumerate(rows) if row["own"])
        before, own = sum(row["chars"] for row in rows[:at]), rows[at]
        r.start_column = before + 1
        r.end_column = before + own["chars"] - bool(own["ends_line"])
        r.line_chars = sum(row["chars"] for row in rows) - bool(rows[-1]["ends_line"])
    return results
