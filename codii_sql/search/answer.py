"""One search answer for every face: results, notes, the no-match signal, the budget, each member's state.

The service assembles it once (:func:`codii_sql.service.searching.search`); the CLI, the MCP
server, the HTTP server, Ray Serve and ``eval`` only render it. Notes and member failures are data
(:class:`Note`: a kind, what happened, a hint), so each face words the hints in its own terms.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CodiiError, Hint, Remedy
from .budget import BudgetReport
from .results import Result

#: The note kinds an answer may carry, in the order they are told.
NOTE_KINDS = ("no_good_match", "budget", "grep", "query", "script", "rerank", "update", "indexing", "embedder", "filters",
              "scope", "vectors", "source", "member", "models", "pruned", "outranked", "history")
#: Member states: searched in full; left out by the routing probe (its best result could not
#: reach the answer, see service/fanout.py); failed (the index could not be read); missing (no
#: such folder); not indexed.
MEMBER_STATES = ("searched", "pruned", "failed", "missing", "not_indexed")
#: Notes of one kind and wording about more codebases than this are told once, naming this many: a
#: workspace of 400 gone folders gave a note of 106 KB, and an agent's answer of 102k tokens (a new user).
NAMED_IN_A_NOTE = 3
#: Members listed in an answer's ``codebases`` at most (those with results first); the others are counted
#: by state in ``codebases_left_out``: 400 members were 75 KB of JSON in every answer.
LISTED_MEMBERS = 50
#: ... and while their roots take at most this many characters (~4k tokens): 60 members under an 820-character
#: root made an agent's answer 41k tokens, past Claude Code's 25k (a new user).
LISTED_MEMBER_CHARS = 16_000
#: A query echoed back longer than this is cut: an issue pasted as the query can be 100k characters.
SHOWN_QUERY_CHARS = 200

#: How a face words a hint: the hint -> its sentence, or None.
Words = Callable[[Hint], "str | None"]


@dataclass(frozen=True)
class Note:
    """Why the answer may not be what the user expects: ``kind`` (one of :data:`NOTE_KINDS`),
    ``what`` happened (one line, face-neutral), ``hint`` (see :mod:`codii_sql.errors`), and the
    ``codebase`` it concerns in a search over several (None: the whole answer)."""

    kind: str
    what: str
    hint: Hint = None
    codebase: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in NOTE_KINDS:
            raise ValueError(f"unknown note kind {self.kind!r}")

    @classmethod
    def of(cls, kind: str, err: CodiiError, codebase: str | None = None) -> Note:
        """A note telling ``err`` (its field named in its words)."""
        what = f"{err.field} {err.what}" if err.field else err.what
        return cls(kind, what, err.hint, codebase)

    def worded(self, words: Words) -> str:
        """``[codebase: ]what[; hint]`` with the hint in ``words``."""
        hint = words(self.hint)
        text = f"{self.what}; {hint}" if hint else self.what
        return f"{self.codebase}: {text}" if self.codebase and not self.what.startswith(self.codebase) else text


@dataclass
class Member:
    """One codebase (shard) of the search: its ``status`` (:data:`MEMBER_STATES`), how many of the
    answer's results are its own, its routing ``probe`` and its ``match`` (the mean cosine of its 10
    nearest chunks: from the cheap probe, and from the full search), the ``model_id`` of its vectors,
    and the ``scope`` folder it was kept to. A server that merges this answer with others (a remote
    shard) weighs it by ``match`` when the models agree."""

    codebase: str
    status: str
    results: int = 0
    probe: float | None = None
    match: float | None = None
    model_id: str | None = None
    scope: str | None = None

    def to_dict(self) -> dict:
        out: dict = {"codebase": self.codebase, "status": self.status, "results": self.results}
        for key in ("probe", "match"):
            if getattr(self, key) is not None:
                out[key] = round(getattr(self, key), 6)
        if self.model_id:
            out["model_id"] = self.model_id
        if self.scope:
            out["scope"] = self.scope
        return out


@dataclass
class Answer:
    """The answer to one search request.

    Attributes:
        query: the query as asked (cut at :data:`SHOWN_QUERY_CHARS` when shown).
        results: best first; lines 1-based inclusive, each result's content exactly its lines.
        seconds: wall time of the search (index updates excluded).
        codebase: the root searched, for a search of one codebase; None over several.
        workspace: the workspace's name, when one was searched.
        members: every codebase asked, with its state.
        notes: why results may be missing or cut (see :class:`Note`).
        no_good_match: nothing matched the query well in any member searched.
        best_cosine: the cosine of the query's nearest chunk over the members (None without vectors).
        budget: what ``max_tokens`` cut (None without one).
        scope: the subfolder a one-codebase search was kept to.
        rerank: ``applied`` or ``unavailable: why`` when a re-rank was asked for.
    """

    query: str
    results: list[Result]
    seconds: float
    codebase: str | None = None
    workspace: str | None = None
    members: list[Member] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    no_good_match: bool = False
    best_cosine: float | None = None
    budget: BudgetReport | None = None
    scope: str | None = None
    rerank: str | None = None
    #: The BM25 terms the query's analysis chose (a page highlights them; not part of the JSON).
    terms: list[str] = field(default_factory=list)

    @property
    def shown_query(self) -> str:
        q = self.query
        return q if len(q) <= SHOWN_QUERY_CHARS else q[:SHOWN_QUERY_CHARS] + "…"

    @property
    def many(self) -> bool:
        """Whether results come from several codebases (then each carries its ``codebase``)."""
        return self.codebase is None

    def note(self, words: Words) -> str | None:
        """Every note in one line, hints in ``words`` (None without notes)."""
        return worded_notes(self.notes, words)

    def named_members(self, most: int = 10) -> str:
        """``codebase (status), ...`` of the first ``most`` members (:func:`first_members`) and how many others
        by status: a one-line summary (a 400-member workspace's was 75 KB)."""
        shown, others = first_members(self.members, most)
        text = ", ".join(f"{m.codebase} ({m.status})" for m in shown)
        return text + (" and " + ", ".join(f"{n} more {status}" for status, n in others.items()) if others else "")

    def to_dict(self, words: Words) -> dict:
        """The documented JSON shape, the same from every face but for the hints' words:
        ``{"query", ["codebase"] | ["workspace"], "codebases": [member], "results": [...], "seconds",
        "no_good_match", "best_cosine", ["codebases_left_out"], ["budget"], ["scope"], ["rerank"], ["note"],
        ["notes"]}`` (``codebases`` at most :data:`LISTED_MEMBERS`, those with results first, the others counted
        by status in ``codebases_left_out``; ``best_cosine`` null when no member had a cosine to give: BM25 mode, no vectors); ``notes`` lists
        the notes' kinds in order, ``note`` tells them in ``words``."""
        out: dict = {"query": self.shown_query}
        if self.codebase is not None:
            out["codebase"] = self.codebase
        if self.workspace:
            out["workspace"] = self.workspace
        listed, others = first_members(self.members, LISTED_MEMBERS)
        out.update(codebases=[m.to_dict() for m in listed], results=[r.to_dict() for r in self.results],
                   seconds=round(self.seconds, 4), no_good_match=self.no_good_match,
                   # Always there, as README's shape says (a client's d["best_cosine"] failed on an index
                   # without vectors).
                   best_cosine=None if self.best_cosine is None else round(self.best_cosine, 4))
        if others:
            out["codebases_left_out"] = others
        if self.budget is not None:
            out["budget"] = dataclasses.asdict(self.budget)
        if self.scope:
            out["scope"] = self.scope
        if self.rerank:
            out["rerank"] = self.rerank
        return with_notes(out, self.notes, words)


def first_members(members: list[Member], most: int) -> tuple[list[Member], dict[str, int]]:
    """``members`` when they are at most ``most`` and their roots :data:`LISTED_MEMBER_CHARS`, else the first
    ``most`` of those with results then the others, as many as those characters hold (one at least), and how
    many are left out by status (``{"missing": 350}``)."""
    if len(members) <= most and sum(len(m.codebase) for m in members) <= LISTED_MEMBER_CHARS:
        return members, {}
    shown, chars = [], 0
    for m in sorted(members, key=lambda m: not m.results)[:most]:
        chars += len(m.codebase)
        if shown and chars > LISTED_MEMBER_CHARS:
            break
        shown.append(m)
    kept = {id(m) for m in shown}
    return shown, dict(collections.Counter(m.status for m in members if id(m) not in kept))


def named_first(names: list[str], most: int = NAMED_IN_A_NOTE, sep: str = ", ") -> str:
    """``names`` as one phrase: the first ``most`` joined by ``sep``, and how many more (``a, b, c and 4 more``)."""
    return sep.join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def worded_notes(notes: list[Note], words: Words) -> str | None:
    """Every one of ``notes`` in one line, hints in ``words`` (None without notes); notes that say the same
    of more than :data:`NAMED_IN_A_NOTE` codebases (kind, words and hint alike but for the codebase) are
    told once where the first was: how many, the first few named, the first one's hint."""
    groups: dict[tuple, list[Note]] = {}
    for n in notes:
        hint = n.hint.kind if isinstance(n.hint, Remedy) else n.hint
        groups.setdefault((n.kind, n.what, hint) if n.codebase else (id(n),), []).append(n)
    told = []
    for same in groups.values():
        if len(same) <= NAMED_IN_A_NOTE:
            told += [n.worded(words) for n in same]
            continue
        first, hint = same[0], words(same[0].hint)
        told.append(f"{len(same)} codebases ({named_first([n.codebase for n in same])}): {first.what}"
                    + (f"; for each, as for {first.codebase}: {hint}" if hint else ""))
    return "; ".join(told) or None


def with_notes(out: dict, notes: list[Note], words: Words) -> dict:
    """``out`` with ``note`` (``notes`` told in ``words``) and ``notes`` (their kinds in order, each once)
    when there are any: the tail of every answer's JSON (search, history, why)."""
    if notes:
        out.update(note=worded_notes(notes, words), notes=list(dict.fromkeys(n.kind for n in notes)))
    return out
