"""The search use case: one request -> one :class:`~codii_sql.search.answer.Answer`, for every face.

The CLI, the MCP server, the HTTP server, Ray Serve and ``eval`` all search through :func:`search`
(or :func:`opened`, for many queries over one set of shards). It resolves the request to shards
(:mod:`.targets`), prepares them (an update before a CLI search), asks them (one shard directly,
several through :mod:`.fanout`), fits the merged answer into the token budget, and tells why
results may be missing, all in this one place.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..errors import CodiiError, NotIndexedError, Remedy, UsageError, hint_text
from ..ingest.report import Progress
from ..languages import language_name
from ..search.answer import NOTE_KINDS, Answer, Member, Note, named_first
from ..search.budget import MIN_RESULT_TOKENS, envelope_tokens, fit, result_overhead
from ..search.locations import places
from ..search.merge import Merged, member_match
from ..search.pattern import GrepPattern
from ..search.query import Analysis
from ..search.results import SearchOptions
from ..text import refuse_undecodable
from .fanout import MAX_THREADS, Fanned, fan_out
from .indexes import OpenIndexes
from .models import check_reranker
from .notes import no_match_note, query_notes
from .shards import Shard, ShardAnswer
from .targets import Targets, resolve

#: The longest query searched (characters): an issue pasted whole is far shorter (the 127 SWE-bench
#: issues: at most 30,000); the MCP server's schema says the same.
MAX_QUERY_CHARS = 100_000


@dataclass
class SearchRequest:
    """One search, as every face asks it.

    Attributes:
        query: natural language, an identifier, or an issue's text.
        options: limit, mode, filters, grouping, re-rank, token budget (:class:`SearchOptions`).
        paths: codebase folders (a subfolder of an indexed codebase searches its files there);
            none: the current directory, or the codebase ``db`` records.
        workspace: a workspace whose members are searched too (see :mod:`.workspaces`).
        db: the index file of a one-codebase search (``--db``).
        shards: a folder of index files searched alone (:class:`~.shard_folder.ShardFolder`): every
            one, or those ``paths`` name (by file name, stem or path).
        update: bring each local index up to date first (a CLI search); else answer from the last
            committed states (the long-lived faces, whose watchers keep indexes fresh).
    """

    query: str
    options: SearchOptions = field(default_factory=SearchOptions)
    paths: list[str] = field(default_factory=list)
    workspace: str | None = None
    db: str | None = None
    shards: str | None = None
    update: bool = True


def search(request: SearchRequest, *, indexes: OpenIndexes | None = None, progress: Progress | None = None,
           building: Callable[[Codebase], bool] | None = None) -> Answer:
    """Answer ``request`` (see :func:`opened` for the keywords).

    Raises:
        UsageError: a bad query, option, path or workspace (refused before any indexing work).
        NotIndexedError, IndexMismatchError, StorageError: the one codebase asked for cannot be searched
            (over several, such a member is a failed member of the answer instead).
    """
    with opened(request, indexes=indexes, progress=progress, building=building) as ask:
        return ask(request.query)


@contextlib.contextmanager
def opened(request: SearchRequest, *, indexes: OpenIndexes | None = None, progress: Progress | None = None,
           building: Callable[[Codebase], bool] | None = None) -> Iterator[Callable[..., Answer]]:
    """The request's shards, resolved and prepared once, for many queries: yields ``ask(query,
    options=None) -> Answer`` (``options`` default: the request's).

    ``indexes`` are a long-lived face's open indexes (None: opened here, closed after);
    ``progress`` follows an update; ``building(codebase)`` says whether a build runs (a face that
    starts builds itself knows before the lock does).

    Raises:
        as :func:`search`.
    """
    request.options.check()  # a bad option is refused before any indexing work
    targets = resolve(request.paths, request.db, request.workspace, update=request.update, indexes=indexes,
                      progress=progress, building=building, shards=request.shards)
    try:
        prepared = _prepared(targets)
        yield lambda query, options=None: _ask(targets, prepared, query, options or request.options)
    finally:
        for shard in targets.shards:
            shard.close()


def _prepared(targets: Targets) -> dict[Shard, Note | CodiiError | None]:
    """Each shard's :meth:`Shard.prepare` note, or the error it raised; a one-codebase search raises it.
    Updates take seconds and run in threads of their own (they must not hold the search threads)."""
    if not targets.many:
        shard = targets.shards[0]
        return {shard: shard.prepare()}

    def prepare(shard: Shard):
        try:
            note = shard.prepare()
            shard.embedder  # noqa: B018 - opens the index: a failure to read it is this member's
            return note
        except CodiiError as err:
            return err

    with cf.ThreadPoolExecutor(max_workers=min(MAX_THREADS, len(targets.shards) or 1)) as pool:
        return dict(zip(targets.shards, pool.map(prepare, targets.shards)))


def _ask(targets: Targets, prepared: dict, query: str, opts: SearchOptions) -> Answer:
    """One query over the prepared shards: the answer, its budget applied once, its notes in order.

    Raises:
        UsageError: the query is longer than :data:`MAX_QUERY_CHARS` or holds a byte that is not UTF-8, or
            see :func:`search`.
    """
    started = time.perf_counter()
    opts.check()
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are searched",
                         "pass the part that names the code (an issue's title, its error and traceback)",
                         field="query")
    refuse_undecodable(query)
    notes: list[Note] = []
    rerank = None
    if opts.rerank:
        try:
            check_reranker(opts.rerank_model)
            rerank = "applied"
        except UsageError as err:  # the search still answers, in fused order, and says why not
            rerank = f"unavailable: {err.what}"
            notes.append(Note("rerank", f"re-rank {rerank}", err.hint))
            opts = dataclasses.replace(opts, rerank=False)
    if targets.many:
        answer, analysis = _many(targets, prepared, query, opts)
    else:
        answer, analysis = _one(targets, prepared, query, opts)
    answer.rerank = rerank
    answer.terms = list(analysis.terms) if analysis else []
    notes += query_notes(analysis)
    answer.notes = sorted(notes + answer.notes, key=lambda n: NOTE_KINDS.index(n.kind))
    if opts.max_tokens:
        # The answer's other fields come out of the budget first (a budget of 100 answered 306 tokens).
        reserved = envelope_tokens(answer.to_dict(hint_text))
        first = result_overhead(answer.results[0]) + MIN_RESULT_TOKENS if answer.results else 0
        for shorten in (_first_clauses, _one_per_kind):  # notes leaving no room for the first result
            if reserved + first <= opts.max_tokens:
                break
            answer.notes = shorten(answer.notes)
            reserved = envelope_tokens(answer.to_dict(hint_text))
        if reserved + first > opts.max_tokens:  # many members' rows: refused, not answered past the budget
            need = -(-(reserved + first) // 100) * 100
            raise UsageError(f"{opts.max_tokens} tokens cannot hold this answer: its {len(answer.members)} codebases' "
                             f"rows and notes take about {reserved} before a result", f"ask with at least {need}",
                             field="max_tokens")
        answer.results, answer.budget = fit(answer.results, analysis.terms if analysis else [], opts.max_tokens,
                                            places(analysis.text, analysis.shape) if analysis else (), reserved,
                                            GrepPattern([opts.grep]).regex if opts.grep else None)
        shards = {shard.name: shard for shard in targets.shards}
        for member in answer.members:  # each counts the results the answer still holds
            if member.status == "searched" and member.codebase in shards:
                owns = shards[member.codebase].owns
                member.results = sum(owns(r) for r in answer.results) if targets.many else len(answer.results)
        if answer.budget.note():
            answer.notes = sorted([*answer.notes, Note("budget", answer.budget.note(), Remedy("read_rest"))],
                                  key=lambda n: NOTE_KINDS.index(n.kind))
    answer.seconds = time.perf_counter() - started
    return answer


def _first_clauses(notes: list[Note]) -> list[Note]:
    """Each note by its first clause: what, not why (a new user's two members' "vectors off" notes took a
    workspace answer at 400 tokens to 476)."""
    return [dataclasses.replace(n, what=n.what.split(": ", 1)[0]) for n in notes]


def _one_per_kind(notes: list[Note]) -> list[Note]:
    """One note of each kind about members, saying how many more it stands for (a member's note names its
    folder twice: three members' went past 400 tokens however short)."""
    kept: dict[str, Note] = {}
    alike: dict[str, int] = {}
    out = []
    for n in notes:
        if n.codebase is None:
            out.append(n)
        elif n.kind in kept:
            alike[n.kind] += 1
        else:
            kept[n.kind], alike[n.kind] = n, 0
            out.append(n)
    return [dataclasses.replace(n, what=f"{n.what} (and {alike[n.kind]} more member(s) alike)")
            if n.codebase is not None and alike.get(n.kind) else n for n in out]


def _one(targets: Targets, prepared: dict, query: str, opts: SearchOptions) -> tuple[Answer, Analysis | None]:
    """One codebase: its shard's answer as it is (its results carry no ``codebase``)."""
    shard = targets.shards[0]
    got = shard.search(query, opts, None)
    hits = got.hits
    notes = [n for n in (prepared[shard], *got.notes) if n]
    if hits.no_good_match and not any(n.kind in ("filters", "scope") for n in notes):
        notes.append(no_match_note(hits.best_cosine, found=bool(hits.results),
                                   filtered=opts.filtered or bool(opts.grep)))
    member = Member(shard.name, "searched", len(hits.results), match=member_match(hits.results),
                    model_id=got.model_id, scope=shard.scope or None)
    return Answer(query, hits.results, 0.0, codebase=shard.name, members=[member], notes=notes,
                  no_good_match=hits.no_good_match, best_cosine=hits.best_cosine,
                  scope=shard.scope or None), hits.analysis


def _many(targets: Targets, prepared: dict, query: str, opts: SearchOptions) -> tuple[Answer, Analysis | None]:
    """Several codebases: the fan-out's merged list, each member's state, and their notes."""
    failed = {s: e for s, e in prepared.items() if isinstance(e, CodiiError)}
    live = [s for s in targets.shards if s not in failed]
    fanned = fan_out(live, query, opts) if live else Fanned({}, Merged([], False))
    _refuse_if_all_refused(fanned, opts)
    members, notes = list(targets.members), list(fanned.notes)
    for shard in targets.shards:
        if shard in failed:
            members.append(Member(shard.name, "failed"))
            notes.append(Note.of("member", failed[shard], shard.name))
        elif shard in fanned.pruned:
            members.append(Member(shard.name, "pruned", probe=fanned.pruned[shard]))
        else:
            members.append(_searched(shard, fanned, prepared[shard], notes))
    notes += [Note("member", m.what, m.hint, m.codebase) for m in targets.notes]
    _refuse_if_none_searched(members, notes, targets.workspace,
                             [*failed.values(), *(a for a in fanned.answers.values() if isinstance(a, CodiiError))])
    notes += _pruned_notes(fanned, opts)
    notes += _outranked_notes(fanned, members, opts)
    answers = [a for a in fanned.answers.values() if isinstance(a, ShardAnswer)]
    if len({a.model_id for a in answers}) > 1:  # no shared cosine scale: say why they merged by rank
        notes.append(Note("models", "the members' vectors come from different embedding models, so their results "
                                    "are merged by rank, not by similarity"))
    searched = [a.hits for a in answers]
    # A member without vectors cannot say "nothing close" itself; it agrees when no chunk of it holds every word and
    # none is named (lexical_evidence False): one built --no-vectors silenced the signal for a whole workspace
    # (a new user's "who won the 1998 world cup final", cosine 0.20 in the others).
    nothing = any(h.no_good_match for h in searched) and all(
        h.no_good_match or h.lexical_evidence is False for h in searched)
    cosines = [h.best_cosine for h in searched if h.best_cosine is not None]
    best = max(cosines) if cosines else None
    results = fanned.merged.results
    if (nothing or not results) and not any(n.kind in ("filters", "scope") for n in notes):
        notes.append(no_match_note(best, found=bool(results), many=True, filtered=opts.filtered or bool(opts.grep)))
    # The members' analyses differ only in the rarest terms a long query keeps: the first serves.
    analysis = next((h.analysis for h in searched if h.analysis is not None), None)
    return Answer(query, results, 0.0, workspace=targets.workspace, members=members, notes=notes,
                  no_good_match=nothing or not results, best_cosine=best), analysis


def _searched(shard: Shard, fanned: Fanned, update: Note | None, notes: list[Note]) -> Member:
    """The member row of a shard that was asked, its notes added to ``notes`` (a refusal, such as a
    language it has none of, is its note: it simply has nothing to give)."""
    got = fanned.answers[shard]
    member = Member(shard.name, "searched", probe=fanned.probes.get(shard), scope=shard.scope or None)
    if isinstance(got, CodiiError):
        if not isinstance(got, UsageError):
            member.status = "failed"
        notes.append(Note.of("member", got, shard.name))
        return member
    member.results = sum(shard.owns(r) for r in fanned.merged.results)
    member.match, member.model_id = member_match(got.hits.results), got.model_id
    if shard.scope:
        notes.append(Note("scope", f"files under {shard.scope}/ only", codebase=shard.name))
    notes += [dataclasses.replace(n, codebase=shard.name) for n in (update, *got.notes) if n
              and n.kind != "embedder"]
    return member


def _pruned_notes(fanned: Fanned, opts: SearchOptions) -> list[Note]:
    """One note per member left out: why, and how to search it."""
    best = max(fanned.probes.values(), default=0.0)
    return [Note("pruned", f"{shard.name} was left out: its nearest chunks match the query less "
                           f"({_against(probe, best)}), so none of its results could enter these {opts.limit}",
                 Remedy("search_member", {"root": shard.name}), shard.name)
            for shard, probe in fanned.pruned.items()]


def _against(mine: float, best: float) -> str:
    """``0.436 against 0.466``: with as many decimals (2 to 4) as tell them apart (a new user read "0.39 against
    0.39")."""
    digits = next((d for d in (2, 3) if round(mine, d) != round(best, d)), 4)
    return f"{mine:.{digits}f} against {best:.{digits}f}"


def _outranked_notes(fanned: Fanned, members: list[Member], opts: SearchOptions) -> list[Note]:
    """One note per member searched whose results all ranked below the answer's ``limit``: the list alone
    reads as if it had nothing (a helper's workspace of two CLI libraries gave all 6 places to cobra while
    commander, its own best result as good, matched 0.436 against cobra's 0.466)."""
    top = max((m.match for m in members if m.match is not None), default=None)
    named = {m.codebase: m for m in members}
    notes = []
    for shard, got in fanned.answers.items():
        member = named.get(shard.name)
        if not isinstance(got, ShardAnswer) or not got.hits.results or member is None or member.results:
            continue
        # the best match of all may rank below too (members without vectors rank by their words): "less (0.2170
        # against 0.2170)" told a new user it matched worse than itself
        why = (f"its nearest chunks match the query less ({_against(member.match, top)})"
               if member.match is not None and top is not None and member.match < top
               else "they rank below the other codebases' results")
        notes.append(Note("outranked", f"{shard.name} had results, none among these {opts.limit}: {why}",
                          Remedy("search_member", {"root": shard.name}), shard.name))
    return notes


def _refuse_if_none_searched(members: list[Member], notes: list[Note], workspace: str | None,
                             errors: list[CodiiError]) -> None:
    """Raise when no member could be searched (each failed, is gone or not indexed): an empty answer would
    say "no good match" of codebases nobody read (a new user's workspace of one damaged index).

    Raises:
        CodiiError: of the class of the first member's error (``errors``: a damaged index...), else
            NotIndexedError (every member gone or not indexed), with the first member note's hint.
    """
    if any(m.status in ("searched", "pruned") for m in members):
        return
    told = [n for n in notes if n.kind == "member"]
    why = named_first([f"{n.codebase}: {n.what}" for n in told], sep="; ")
    what = (f"none of the {len(members)} codebases of {f'workspace {workspace}' if workspace else 'the search'} "
            f"could be searched" + (f"; {why}" if told else ""))
    error = type(errors[0]) if errors else NotIndexedError
    raise error(what, told[0].hint if told else None)


def _refuse_if_all_refused(fanned: Fanned, opts: SearchOptions) -> None:
    """Raise when every member refused the query or an option (the request itself is wrong).

    Raises:
        UsageError: the first refusal, or one naming every member for a language none of them has.
    """
    got = list(fanned.answers.values())
    refusals = [a for a in got if isinstance(a, UsageError)]
    if not refusals or len(refusals) < len(got):
        return
    language = language_name(opts.language) if opts.language else None
    if language and all(r.what.startswith(f"no {language!r} code") for r in refusals):
        raise UsageError(f"no {language!r} code in any of the {len(refusals)} codebases searched")
    raise refusals[0]

