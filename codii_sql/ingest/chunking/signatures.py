"""How a definition is named and shown: its name's parts as symbol look-ups compare them, and its signature line."""

from __future__ import annotations

import re

#: Longest signature line shown (characters); a longer one ends in "…".
SIGNATURE_CHARS = 200
#: What separates the parts of a qualified name (and generic parameters).
_SEPARATORS = re.compile(r"[.:#/<>]")
#: Generic parameters (`Foo<'a>.bar`, `List<T>::get`): ignored on both sides of a comparison. They follow a name or
#: hold one: an operator (Haskell's `(<+>)`, `<$>`) is no generic parameter list (every operator was named `()`,
#: and `symbol '(<+>)'` listed them all).
_GENERICS = re.compile(r"(?<=\w)<[^<>]*>|<[^<>]*\w[^<>]*>")
#: Bracket depth changes, for annotation arguments that span lines.
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
#: What opens a comment line (or a docstring) in some language.
_COMMENT_MARKERS = ("#", "//", "/*", "*", "--", '"""', "'''")
#: Lines of a definition's head searched for the line that holds its name.
_HEAD_LINES = 4
#: Languages whose ``#`` opens a private class member's name.
_HASH_NAMES = frozenset({"javascript", "typescript", "tsx"})


def name_parts(name: str) -> list[str]:
    """The parts of a (qualified) name: ``Session.send``, ``Type::method``, ``pkg/mod``, ``Foo<T>``."""
    return [p for p in _SEPARATORS.split(name) if p]


def normal_name(symbol: str) -> str:
    """``symbol`` without generic parameters, with ``.`` for ``::``, ``:`` (Lua's ``M:method``, Erlang's
    ``lists:foldl``: a new user's `symbol set` missed penlight's ``OrderedMap:set``), ``#`` and a Markdown
    section's `` > ``."""
    if is_operator(symbol):  # Haskell's `(<+>)`, OCaml's `( +! )`: the operator itself, as a look-up names it
        return "".join(symbol.split()).strip("()") or symbol.strip()
    for _ in range(3):  # nested generics: Map<K, Vec<T>>
        symbol = _GENERICS.sub("", symbol)
    return symbol.replace("::", ".").replace(":", ".").replace("#", ".").replace(" > ", ".").strip()


def is_operator(name: str) -> bool:
    """Whether ``name`` is an operator's (no letter, digit or ``_``: ``(<+>)``, ``<$>``), which is one name whole."""
    return bool(name.strip()) and re.search(r"\w", name) is None


def last_name(symbol: str) -> str:
    """The part of ``symbol`` a look-up by name compares (``send`` of ``Session.send`` and of
    ``Parser<'a>::send``): what the index keys definitions by."""
    if is_operator(symbol):
        return normal_name(symbol)
    if _SEPARATORS.search(symbol) is None:  # most symbols (a kernel's 2M macros): the name itself
        return symbol.strip() or symbol
    parts = name_parts(normal_name(symbol))
    return parts[-1] if parts else symbol


def signature(lines: list[str], language: str | None, name: str | None = None) -> str:
    """The first of a definition's ``lines`` (in ``language``) that is not a decorator, comment
    or blank. A line of annotations followed by code (Kotlin's ``@Throws(IOException::class) fun
    peek(): Token``) is the signature; an annotation whose arguments span lines (``@Component({``)
    is skipped to its closing line. With its ``name``, a first line without it is passed for the
    next code line that has it, among the first :data:`_HEAD_LINES`: GNU C puts the return type on a
    line of its own (``static int`` / ``cgt_works_p(void)``), and refs counted the name's line a use. A first
    line that opens a body or parameters is the head all the same: ``typedef struct _client {`` names ``client``
    only at its end, and a field's line mentioning ``client->randptr`` was shown as its signature."""
    first = ""
    depth = 0  # open brackets of an annotation that goes on over lines
    for number, line in enumerate(lines):
        stripped = line.strip()
        if depth:
            depth = max(0, depth + _depth(stripped))
            continue
        if stripped.startswith("@"):
            rest, depth = _after_annotations(stripped)
            if not rest:
                continue
        elif (stripped.startswith("[") and stripped.endswith("]")) or not stripped or _comment(stripped, language):
            continue  # a C# attribute line ([Fact]), a blank, a comment
        if not name or _holds(stripped, name) or not first and ("{" in stripped or "(" in stripped):
            return _shown(stripped)  # a first line that opens a body or parameters is the head, its name or not
        first = first or _shown(stripped)
        if number >= _HEAD_LINES:
            break
    return first


def _holds(line: str, name: str) -> bool:
    """Whether ``line`` holds ``name`` as a whole identifier (``i`` is not in ``static int``)."""
    at = line.find(name)
    while at >= 0:
        end = at + len(name)
        if (at == 0 or not _word_char(line[at - 1])) and (end == len(line) or not _word_char(line[end])):
            return True
        at = line.find(name, at + 1)
    return False


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def _comment(line: str, language: str | None) -> bool:
    """Whether a stripped line opens with a comment marker; in JavaScript and TypeScript ``#`` opens a
    private name (``#compute(x) {``), not a comment: the first body line was shown as its signature;
    in C and C++ it opens a directive (``#define kmalloc(...)`` is a macro's signature)."""
    if line.startswith("#") and (language in _HASH_NAMES and not line.startswith("#!") or language in ("c", "cpp")):
        return False
    return line.startswith(_COMMENT_MARKERS)


def _shown(line: str) -> str:
    return line[:SIGNATURE_CHARS] + ("…" if len(line) > SIGNATURE_CHARS else "")


def _depth(text: str) -> int:
    return sum(_BRACKETS.get(ch, 0) for ch in text)


def _after_annotations(line: str) -> tuple[str, int]:
    """What follows the leading ``@Name`` / ``@Name(...)`` annotations of ``line``, and how many
    brackets the last one leaves open ("" and > 0 when its arguments go on past the line)."""
    rest = line
    while rest.startswith("@"):
        m = re.match(r"@[\w.:]+\s*", rest)
        rest = rest[m.end():] if m else rest[1:]
        if rest.startswith("("):
            depth = 0
            for i, ch in enumerate(rest):
                depth += _BRACKETS.get(ch, 0)
                if depth == 0:
                    rest = rest[i + 1:]
                    break
            else:
                return "", depth
        rest = rest.lstrip()
    return rest, 0
