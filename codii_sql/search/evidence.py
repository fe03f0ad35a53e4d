"""Implementation before the code that only points at it: a test below the source it calls, a declaration below its definition.

Both rules only reorder what the search found: a source chunk whose symbol a higher-ranked test
chunk calls rises to just above that test; a definition rises to just above a declaration of the
same name in another file (a C or C++ header's prototype, a ``.d.ts`` type). Measured in
docs/eval.md ("Implementation over its tests").
"""

from __future__ import annotations

import dataclasses
import re

from .results import Result

#: Query words that ask for tests themselves: then tests keep their place.
TEST_WORDS = frozenset({"test", "tests", "testing", "tested", "spec", "specs", "unittest", "pytest", "fixture",
                        "fixtures", "mock", "mocks", "assert", "assertion", "assertions"})
#: Files that declare what another file defines: C/C++ headers (a chunk without a body) and TypeScript declarations.
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx")
TYPE_DECLARATION_SUFFIXES = (".d.ts", ".d.mts", ".d.cts")
#: Implementations one test or declaration chunk may lift: the first two it points at, in rank order.
MAX_LIFTS = 2
#: The lift above the chunk that pointed at the implementation: a tie broken, no new score scale.
LIFT = 1e-6
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def implementation_first(results: list[Result], terms: list[str]) -> list[Result]:
    """``results`` (best first) with each implementation moved to just above the first test chunk
    that calls it or declaration that names it; the others keep their order.

    A source chunk qualifies when its symbol's last part (``Class.method`` -> ``method``, 3+
    characters), defined by no other file among ``results``, is an identifier of a test chunk
    ranked above it in the same named tier, or the symbol of a declaration chunk in another file
    ranked above it in the same tier; at most :data:`MAX_LIFTS` per chunk above. Its score
    becomes at least that chunk's plus :data:`LIFT`. Tests keep their place when the query's BM25
    ``terms`` ask about tests (:data:`TEST_WORDS`).
    """
    tests_asked = bool(TEST_WORDS & set(terms))
    named = [(r, _name(r.symbol) if r.role == "source" and not _declares(r) else None) for r in results]
    defined: dict[str, set[str]] = {}
    for r, name in named:
        if name:
            defined.setdefault(name, set()).add(r.path)
    # A name several files define (v3 and v4 copies, one ``parse`` per module) says nothing about
    # which of them the test exercises: only a name one file defines points.
    out = [(r, name if name and len(defined[name]) == 1 else None) for r, name in named]
    i = 0
    while i < len(out):
        above = out[i][0]
        test, declaration = above.role == "test" and not tests_asked, _declares(above)
        below = [(j, name) for j, (r, name) in enumerate(out[i + 1:], i + 1)
                 if name and r.path != above.path and r.tier == above.tier] if test or declaration else []
        if below and test:  # a cheap substring look first: most test chunks name none of them
            present = {name for _, name in below if name in above.content}
            names = set(_IDENTIFIER.findall(above.content)) & present if present else set()
        else:
            names = {_name(above.symbol)} if below else set()
        movers = [j for j, name in below if name in names][:MAX_LIFTS]
        if movers:
            lifted = [(dataclasses.replace(out[j][0], score=max(out[j][0].score, round(above.score + LIFT, 6))),
                       out[j][1]) for j in movers]
            rest = [pair for k, pair in enumerate(out) if k not in set(movers)]
            out = rest[:i] + lifted + rest[i:]
            i += len(lifted)
        i += 1
    return [r for r, _ in out]


def _declares(r: Result) -> bool:
    """Whether ``r`` only declares: a header chunk without a body, or a TypeScript declaration file's."""
    if r.path.endswith(TYPE_DECLARATION_SUFFIXES):
        return True
    return r.path.endswith(HEADER_SUFFIXES) and "{" not in r.content


def _name(symbol: str | None) -> str | None:
    """A symbol's last part (``Class.method`` -> ``method``), or None when shorter than 3 characters."""
    if not symbol:
        return None
    name = re.split(r"[.:#]+", symbol)[-1].strip("()")
    return name if len(name) >= 3 else None
