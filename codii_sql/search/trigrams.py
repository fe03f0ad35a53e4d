"""From a regular expression to the trigrams its every match must contain: an AND/OR query for the trigram index.

After Russ Cox, "Regular Expression Matching with a Trigram Index" (2012), simplified: each node
of Python's own parse of the pattern (``re._parser``) yields either the small set of strings it can
match exactly (``exact``), or a query that every string it matches satisfies (``match``). A
concatenation multiplies exact sets while they stay small, an alternation unions them (or ORs the
queries), anything else (``.``, ``\\w+``, a large class, ``x*``) ends the literal run. Each exact
set becomes the OR, over its strings, of the AND of each string's trigrams. Every simplification
drops a requirement, never adds one: the query may select more files than match, never fewer.

The index folds case (FTS5 ``trigram``, ``case_sensitive 0``), so trigrams are kept in lower case
and one query serves ``-i`` and case-sensitive patterns alike; a letter whose folding SQLite and
Python might not agree on (a non-ASCII letter with a case) is treated as unknown.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from re import _constants as C  # noqa: N812 - the parser's own opcode names
from re import _parser

#: A node's exact strings are kept while at most this many (Cox's sets are bounded the same way;
#: ``[abc][def][ghi]`` is 27): past it the run is turned into a query and a new run starts.
MAX_EXACT = 32
#: A character class of at most this many characters is an exact set of one-character strings.
MAX_CLASS = 8
#: Trigrams ANDed per exact string at most, evenly spread: each costs the query its doclist (some 0.2 ms on
#: the kernel), and a rare one left out lets in every file holding the others apart (12 took
#: DEFINE_IDTENTRY_RAW to 478 kernel files where all 17 give 27; docs/benchmarks.md "Grep", eighth round).
MAX_TRIGRAMS = 32

#: Characters a run needs to be checked in a file's bytes (:func:`required_bytes`): shorter ones are in
#: nearly every file.
MIN_NEEDLE = 3

#: No requirement: every file is a candidate (the empty AND).
ANY: tuple = ("and", ())


@dataclass(frozen=True)
class Info:
    """What is known of the strings a node matches: ``exact`` (all of them, lower-cased) or ``match``."""

    exact: frozenset[str] | None = None
    match: tuple = ANY


def _and(*queries: tuple | str) -> tuple:
    """The AND of ``queries``, flattened; ANY parts dropped."""
    parts: list = []
    for q in queries:
        if q == ANY:
            continue
        parts.extend(q[1] if isinstance(q, tuple) and q[0] == "and" else [q])
    unique = tuple(dict.fromkeys(parts))
    return unique[0] if len(unique) == 1 else ("and", unique)


def _or(*queries: tuple | str) -> tuple:
    """The OR of ``queries``, flattened; ANY if any part is ANY."""
    parts: list = []
    for q in queries:
        if q == ANY:
            return ANY
        parts.extend(q[1] if isinstance(q, tuple) and q[0] == "or" else [q])
    unique = tuple(dict.fromkeys(parts))
    if not unique:
        return ANY
    return unique[0] if len(unique) == 1 else ("or", unique)


def fold(char: str, cased: bool = False) -> str | None:
    """``char`` as the index stores it, or None when that is uncertain: ASCII is lower-cased, a
    character without case (punctuation, CJK) kept; a NUL or a line break is unknown, and so is a
    non-ASCII letter with a case (``É``, ``ſ``) under ``-i``, whose matches Python's folding picks and
    SQLite's may store otherwise. A ``cased`` pattern matches that very letter, which FTS5 folds alike
    in the file and in the query: it is kept (``Пароль`` scanned every file)."""
    if char in "\x00\n":
        return None
    if char.isascii():
        return char.lower()
    return char if cased or char.lower() == char == char.upper() else None


def string_query(text: str) -> tuple | str:
    """The AND of ``text``'s trigrams (ANY under 3 characters), at most :data:`MAX_TRIGRAMS`."""
    grams = list(dict.fromkeys(text[i:i + 3] for i in range(len(text) - 2)))
    if len(grams) > MAX_TRIGRAMS:
        step = (len(grams) - 1) / (MAX_TRIGRAMS - 1)
        grams = [grams[round(k * step)] for k in range(MAX_TRIGRAMS)]
    return _and(*grams)


def exact_query(strings: frozenset[str]) -> tuple | str:
    """The OR over ``strings`` of each one's trigrams (ANY when one is under 3 characters)."""
    return _or(*(string_query(s) for s in sorted(strings)))


def as_query(info: Info) -> tuple | str:
    return info.match if info.exact is None else exact_query(info.exact)


def _literal(code: int, cased: bool) -> Info:
    folded = fold(chr(code), cased)
    return Info(frozenset({folded})) if folded is not None else Info()


def _class(items: list, cased: bool) -> Info:
    """A ``[...]`` class: its characters when few, known and not negated; else one unknown character."""
    chars: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            chars.append(chr(av))
        elif op is C.RANGE and av[1] - av[0] < MAX_CLASS:
            chars.extend(chr(c) for c in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY (\d, \w), a wide range, a charset the compiler built
            return Info()
    folded = {fold(c, cased) for c in chars}
    if None in folded or not folded or len(folded) > MAX_CLASS:
        return Info()
    return Info(frozenset(folded))


def _repeat(av: tuple, cased: bool) -> Info:
    low, high, sub = av
    inner = _sequence(sub, cased)
    if low == 0:
        if high == 1 and inner.exact is not None:  # x? : x or nothing
            return Info(inner.exact | {""})
        return Info()  # x*, x{0,n}: may match nothing, so requires nothing
    if low == high and inner.exact is not None:
        strings = frozenset({""})
        for _ in range(low):
            strings = frozenset(a + b for a in strings for b in inner.exact)
            if len(strings) > MAX_EXACT:
                return Info(match=as_query(inner))
        return Info(strings)
    return Info(match=as_query(inner))  # x+, x{2,5}: x at least once


def _branch(alternatives: list, cased: bool) -> Info:
    infos = [_sequence(a, cased) for a in alternatives]
    if all(i.exact is not None for i in infos):
        union = frozenset().union(*(i.exact for i in infos))
        if len(union) <= MAX_EXACT:
            return Info(union)
    return Info(match=_or(*(as_query(i) for i in infos)))


#: Zero-width nodes: they consume nothing, so the strings around them stay adjacent.
_ZERO_WIDTH = frozenset({C.AT, C.ASSERT, C.ASSERT_NOT})


def _node(op, av, cased: bool) -> Info:
    if op is C.LITERAL:
        return _literal(av, cased)
    if op is C.IN:
        return _class(av, cased)
    if op is C.SUBPATTERN:
        return _sequence(av[3], cased)
    if op is C.ATOMIC_GROUP:
        return _sequence(av, cased)
    if op is C.BRANCH:
        return _branch(av[1], cased)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return _repeat(av, cased)
    if op in _ZERO_WIDTH:
        return Info(frozenset({""}))
    return Info()  # ANY, NOT_LITERAL, GROUPREF...: one or more unknown characters


def _sequence(items, cased: bool) -> Info:
    """A concatenation: exact sets multiplied while small; each run ended becomes a query part."""
    run, parts = frozenset({""}), []
    for op, av in items:
        info = _node(op, av, cased)
        if info.exact is not None:
            product = frozenset(a + b for a in run for b in info.exact)
            if len(product) <= MAX_EXACT:
                run = product
                continue
            parts.append(exact_query(run))
            run = info.exact
            continue
        parts += [exact_query(run), info.match]
        run = frozenset({""})
    if not parts:
        return Info(run)
    return Info(match=_and(*parts, exact_query(run)))


def parse(pattern: str, flags: int = 0) -> _parser.SubPattern:
    """Python's parse of ``pattern``.

    Raises:
        re.error: the pattern is not valid ``re`` syntax (``pos`` says where).
    """
    with warnings.catch_warnings():  # '[[:alpha:]]' warns of a future set syntax, on the user's terminal
        warnings.simplefilter("ignore", FutureWarning)
        return _parser.parse(pattern, flags)


def required(parsed: list[_parser.SubPattern]) -> tuple | str:
    """The trigram query every line matching one of the ``parsed`` patterns satisfies (an OR over
    them); :data:`ANY` when some pattern requires no trigram."""
    return _or(*(as_query(_sequence(p, _case_sensitive(p))) for p in parsed))


def required_bytes(parsed: _parser.SubPattern, flags: int = 0) -> tuple[bytes, ...]:
    """The ASCII runs of :data:`MIN_NEEDLE` or more characters every match of ``parsed`` holds, as bytes,
    longest first; none under case-blindness anywhere (a case-blind group's run is left out). A run is the
    pattern's literal characters in a row (zero-width anchors and look-arounds between them keep the row)
    at its top, in its groups and in repeats taken at least once; no line break, carriage return or NUL,
    which decoding changes. A file's bytes that lack one hold no match once decoded as UTF-8 (its ASCII is
    itself): the check is C's substring search, where the candidates of a selective pattern are mostly
    files holding its trigrams apart (``DEFINE_IDTENTRY_RAW``: 478 candidates of the kernel, 7 hold it)."""
    if (flags | parsed.state.flags) & re.IGNORECASE:
        return ()
    runs: list[bytes] = []

    def walk(items) -> None:
        run = bytearray()
        for op, av in items:
            if op is C.LITERAL and 0 < av < 128 and av not in (10, 13):
                run.append(av)
                continue
            if op in _ZERO_WIDTH:
                continue
            runs.append(bytes(run))
            run.clear()
            if op is C.SUBPATTERN and not av[1] & re.IGNORECASE:
                walk(av[3])
            elif op is C.ATOMIC_GROUP:
                walk(av)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] >= 1:
                walk(av[2])
        runs.append(bytes(run))

    walk(parsed)
    return tuple(sorted({r for r in runs if len(r) >= MIN_NEEDLE}, key=lambda r: (-len(r), r)))


def _case_sensitive(parsed: _parser.SubPattern) -> bool:
    """Whether no part of the pattern ignores case (no ``-i``, ``(?i)``, ``(?i:...)``)."""
    return not parsed.state.flags & re.IGNORECASE and not any(
        op is C.SUBPATTERN and av[1] & re.IGNORECASE for op, av in _walk(parsed))


def to_fts(query: tuple | str) -> str | None:
    """``query`` as an FTS5 MATCH expression of quoted trigrams; None for :data:`ANY`."""
    if query == ANY:
        return None
    if isinstance(query, str):
        return '"' + query.replace('"', '""') + '"'
    joiner = " AND " if query[0] == "and" else " OR "
    return joiner.join(f"({to_fts(q)})" if isinstance(q, tuple) else to_fts(q) for q in query[1])


def _walk(items):
    """Every (op, av) of a parse tree, depth first, assertions and groups included."""
    for op, av in items:
        yield op, av
        if op is C.SUBPATTERN:
            yield from _walk(av[3])
        elif op is C.ATOMIC_GROUP:
            yield from _walk(av)
        elif op is C.BRANCH:
            for alternative in av[1]:
                yield from _walk(alternative)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            yield from _walk(av[2])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            yield from _walk(av[1])
        elif op is C.GROUPREF_EXISTS:
            yield from _walk(av[1])
            if av[2] is not None:
                yield from _walk(av[2])


#: Classes (``\\s``, ``\\W``, ``\\D``) whose members include a line break.
_BREAKING_CATEGORIES = frozenset({C.CATEGORY_SPACE, C.CATEGORY_NOT_WORD, C.CATEGORY_NOT_DIGIT,
                                  C.CATEGORY_UNI_SPACE, C.CATEGORY_UNI_NOT_WORD, C.CATEGORY_UNI_NOT_DIGIT,
                                  C.CATEGORY_LINEBREAK, C.CATEGORY_UNI_LINEBREAK})


def _class_takes_newline(items: list) -> bool:
    negated = any(op is C.NEGATE for op, _ in items)
    holds = any((op is C.LITERAL and av == 10) or (op is C.RANGE and av[0] <= 10 <= av[1])
                or (op is C.CATEGORY and av in _BREAKING_CATEGORIES) for op, av in items)
    return holds != negated


def largest_repeat(parsed: _parser.SubPattern) -> int:
    """The largest finite repeat count of the pattern (``a{5000}``: 5000; ``a+``: 1), 0 without one."""
    counts = [n for op, av in _walk(parsed) if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
              for n in av[:2] if n != C.MAXREPEAT]
    return max(counts, default=0)


def has_repeat(parsed: _parser.SubPattern) -> bool:
    """Whether the pattern holds a repeat (``*``, ``+``, ``?``, ``{m,n}``), the only way a backtracking
    engine's time per starting position grows past the pattern's own size."""
    return any(op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) for op, _ in _walk(parsed))


def names_newline(parsed: _parser.SubPattern) -> bool:
    """Whether the pattern holds a literal line break (``\\n``), which a line never contains."""
    return any(op is C.LITERAL and av == 10 for op, av in _walk(parsed))


def line_bound(parsed: _parser.SubPattern) -> bool:
    """Whether the pattern can be run over a whole file at once (MULTILINE) and give exactly the
    matches it gives line by line: nothing in it (assertions included) can match a line break (a ``\\n``
    only a multiline grep takes), and
    it has no ``\\A``/``\\Z`` (which a file has once, its lines each)."""
    dotall = bool(parsed.state.flags & re.DOTALL)
    for op, av in _walk(parsed):
        if (op is C.NOT_LITERAL and av != 10) or (op is C.LITERAL and av == 10):
            return False
        if op is C.ANY and (dotall or _dotall_inside(parsed)):
            return False
        if op is C.IN and _class_takes_newline(av):
            return False
        if op is C.AT and av in (C.AT_BEGINNING_STRING, C.AT_END_STRING):
            return False
    return True


def _dotall_inside(parsed: _parser.SubPattern) -> bool:
    """Whether a scoped flag group ``(?s:...)`` turns DOTALL on somewhere."""
    return any(op is C.SUBPATTERN and av[1] & re.DOTALL for op, av in _walk(parsed))


def whole_text_implied(parsed: _parser.SubPattern) -> bool:
    """Whether every match the pattern has in one line is also a match in the whole file (MULTILINE),
    so a file the pattern does not match as a whole has no matching line: true without lookarounds
    (which may see past the line's end) and without ``\\A``/``\\Z`` (which a file has once)."""
    for op, av in _walk(parsed):
        if op in (C.ASSERT, C.ASSERT_NOT):
            return False
        if op is C.AT and av in (C.AT_BEGINNING_STRING, C.AT_END_STRING):
            return False
    return True


#: Classes whose ASCII (bytes) meaning differs from the str one on ASCII text: Python's str ``\\s``
#: also takes the separators \\x1c-\\x1f, its bytes ``\\s`` does not.
_SPACE_CATEGORIES = frozenset({C.CATEGORY_SPACE, C.CATEGORY_NOT_SPACE, C.CATEGORY_UNI_SPACE,
                               C.CATEGORY_UNI_NOT_SPACE})


def same_on_ascii(parsed: _parser.SubPattern) -> bool:
    """Whether the pattern, compiled over bytes, matches an ASCII text exactly where its str form
    matches the decoded text: true unless a class names ``\\s``/``\\S`` (the source must be ASCII too)."""
    for op, av in _walk(parsed):
        if op is C.IN and any(o is C.CATEGORY and a in _SPACE_CATEGORIES for o, a in av):
            return False
    return True

