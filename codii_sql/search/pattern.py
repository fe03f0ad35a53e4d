"""A grep pattern as asked (``-e`` patterns, ``-F``, ``-i``, ``-w``): checked, compiled, and planned into trigrams."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex

from ..errors import Remedy, UsageError
from ..text import SURROGATES, shown_bytes
from . import trigrams

#: Largest repeat count a pattern may hold: the regex module unrolls a counted repeat when it compiles
#: it (``a{99999}`` 33 ms, ``a{99999999}`` did not finish in minutes, and neither did the trigram plan).
#: rg refuses such a pattern too ("compiled regex exceeds size limit").
MAX_REPEAT_COUNT = 10_000
#: Leading global flags, ``(?i)``: Python allows them only at the very start of a pattern, so
#: wrapping several patterns (``-e``, ``-w``) moves them to the front of the whole.
_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")
#: POSIX classes as rg reads them inside a bracket (``[[:upper:]]``), ASCII only (the regex-syntax
#: crate's table). Python's ``re`` reads ``[[:upper:]]`` as the set ``[:uper`` and a ``]``, the regex
#: module as a class: spelled out, the trigram plan and the matcher read one pattern (a new user's
#: ``[[:upper:]]{5}`` planned the trigram ``]]]`` and matched nothing).
POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\x0b\\x0c\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_POSIX_NAME = re.compile(r"\[:(\^?)([a-z]+):\]")
#: A Unicode property escape: ``\p{Greek}``, ``\P{Lu}``, ``\pL``.
_PROPERTY = re.compile(r"\\[pP](?:\{[^}]*\}|[A-Za-z])")
#: Longest whole pattern (characters) that runs without a time bound when it holds no repeat: each
#: starting position then costs at most its length in steps, 128 x a 1 MiB file well under the
#: bound, and the bound's clock reads tripled the engine's time over Django's `self` (22 -> 70 ms).
LINEAR_PATTERN_CHARS = 128


@dataclass
class GrepPattern:
    """The patterns of one grep, compiled.

    Args:
        patterns: one or more patterns in Python's ``re`` syntax (``-e`` may repeat): a line matches
            when any of them matches it.
        fixed: the patterns are literal strings (``-F``).
        ignore_case: case-insensitive (``-i``), Unicode simple folding as Python's ``re`` does it.
        word: only matches with no word character right before or after them (``-w``, as rg's
            ``(?:^|\\W)pattern(?:\\W|$)`` test).
        line: only matches that are a whole line (``-x``, rg's ``^(?:pattern)$``; a CRLF line's ``\\r``
            is part of it, as for rg).
        multiline: rg's ``-U``: a match may span lines (``\\n``, ``\\s``, ``[^x]`` take a line break; ``.``
            only with ``dotall``, rg's ``--multiline-dotall``); ``^`` and ``$`` still mark each line's ends.
    Raises:
        UsageError: an empty list, a pattern that is not valid syntax (the message names the
            position), or one holding a line break without ``multiline``.

    ``regex`` is the compiled whole (the ``regex`` module, for its per-call ``timeout``: Python's
    ``re`` cannot be stopped); ``fts`` the trigram expression candidates must satisfy, None when the
    patterns require no trigram (every file is read); ``line_bound`` whether it may run over a whole
    file at once (:func:`~.trigrams.line_bound`); ``prefilter`` whether a file the whole pattern does
    not match can be skipped before matching line by line (:func:`~.trigrams.whole_text_implied`);
    ``ascii_regex`` the same line-bound pattern compiled over bytes, for ASCII files read as they are
    (:func:`~.grep.matches_bytes`), None when it has no such form (non-ASCII, ``\\s``, line by line);
    ``spans_lines`` whether a match may hold a line break (``multiline`` and a pattern that can match one: the
    file is matched whole, :mod:`.grep_blocks`; rg too searches line by line a ``-U`` pattern that cannot);
    ``linear`` whether it needs no time bound: no repeat and at most :data:`LINEAR_PATTERN_CHARS`
    characters (a literal, a class, an alternation of literals, with ``-w``/``-i``); ``needles`` the
    bytes every match holds in a file's own bytes (:func:`~.trigrams.required_bytes` of one pattern; none
    for several or under ``-i``): a file that lacks one is skipped unread by the engine.
    """

    patterns: list[str]
    fixed: bool = False
    ignore_case: bool = False
    word: bool = False
    line: bool = False
    multiline: bool = False
    dotall: bool = False
    regex: regex.Pattern = field(init=False)
    fts: str | None = field(init=False)
    line_bound: bool = field(init=False)
    prefilter: bool = field(init=False)
    ascii_regex: regex.Pattern | None = field(init=False)
    linear: bool = field(init=False)
    needles: tuple[bytes, ...] = field(init=False)
    #: With ``ignore_case``, the pattern with its i letters apart as rg folds them (:func:`_dotted_i_apart`),
    #: for a text holding ``ı`` or ``İ`` (for any, when the patterns hold one): ``(?-i:[iI])`` costs the
    #: engine its literal prefix search (Django's `-i is_valid` 17 -> 25 ms), so only where they can differ.
    apart_regex: regex.Pattern | None = field(init=False)
    apart_always: bool = field(init=False)
    spans_lines: bool = field(init=False)

    def __post_init__(self) -> None:
        if not self.patterns:
            raise UsageError("is missing", "pass a pattern to search for", field="pattern")
        for p in self.patterns:
            if SURROGATES.search(p):  # a byte the shell passed that is no UTF-8: no decoded text holds it
                raise UsageError(f"'{shown_bytes(p)}' holds a byte that is not UTF-8, which no decoded file holds",
                                 "pass the text as it reads in the file, in UTF-8", field="pattern")
        flags = (re.IGNORECASE if self.ignore_case else 0) | (re.DOTALL if self.multiline and self.dotall else 0)
        if self.fixed:
            sources = planned = [re.escape(p) for p in self.patterns]
        else:
            typed = [rust_escapes(p) for p in self.patterns]
            for p, shown in zip(typed, self.patterns):  # errors named at their place in the pattern as typed
                _parsed(posix_spelled(p, planned=True) if "\\p" in p or "\\P" in p else p, flags, shown, self.multiline)
            sources = [posix_spelled(p) for p in typed]
            planned = [posix_spelled(p, planned=True) for p in typed]
        parsed = [_parsed(s, flags, shown, self.multiline) for s, shown in zip(planned, self.patterns)]
        whole = _combined(sources, self.word, self.line)
        tree = _parsed(_combined(planned, self.word, self.line), flags, " | ".join(self.patterns), self.multiline)
        properties = planned != sources  # \p{Greek}: the regex module's, no ASCII form
        self.fts = trigrams.to_fts(trigrams.required(parsed))
        self.line_bound = trigrams.line_bound(tree)
        self.spans_lines = self.multiline and not self.line_bound
        self.prefilter = trigrams.whole_text_implied(tree)
        self.linear = len(whole) <= LINEAR_PATTERN_CHARS and not trigrams.has_repeat(tree)
        self.needles = trigrams.required_bytes(parsed[0], flags) if len(parsed) == 1 else ()
        try:
            self.regex = regex.compile(whole, flags | regex.MULTILINE | regex.VERSION0)  # ^ $ at each line
        except (regex.error, ValueError) as err:  # syntax the re parser accepts but regex refuses
            raise _bad(" | ".join(self.patterns), getattr(err, "msg", str(err)), getattr(err, "pos", None)) from None
        apart = _combined([_dotted_i_apart(s) if self.ignore_case or _GLOBAL_I.match(s) else s for s in sources],
                          self.word, self.line)
        self.apart_regex = None if apart == whole else regex.compile(apart, flags | regex.MULTILINE | regex.VERSION0)
        self.apart_always = self.apart_regex is not None and any(c in p for p in self.patterns for c in "ıİ")
        self.ascii_regex = None
        if self.line_bound and whole.isascii() and trigrams.same_on_ascii(tree) and not properties:
            try:
                self.ascii_regex = regex.compile(whole.encode("ascii"), flags | regex.MULTILINE | regex.VERSION0)
            except (regex.error, ValueError):  # a flag only str patterns take: (?u) raises ValueError
                pass

    def regex_for(self, text: str) -> regex.Pattern:
        """The compiled pattern to run over ``text``: :attr:`apart_regex` where ``ı`` or ``İ`` may be
        matched, else :attr:`regex`."""
        if self.apart_regex is not None and (self.apart_always or (
                not text.isascii() and ("ı" in text or "İ" in text))):
            return self.apart_regex
        return self.regex

    @property
    def scans(self) -> bool:
        """Whether every indexed file is read: the patterns require no trigram (none has a literal run
        of 3 or more characters that every match contains)."""
        return self.fts is None


#: rg's escapes Python spells otherwise: ``\\z`` (the end of the text), ``\\x{HHHH}`` (a code point),
#: ``\\<`` and ``\\>`` (a word's start and end, as in rg 14 and GNU grep; Python read them as ``<``, ``>``).
_RUST_ESCAPE = re.compile(r"\\(?:(z)|[xu]\{([0-9A-Fa-f]{1,8})\}|([<>])|.)", re.DOTALL)


#: What :func:`_dotted_i_apart` skips whole: an escape (``\\p{..}``, ``\\N{..}``, ``\\x{..}`` with its braces), a
#: class, and a group's opening with its flags or name (``(?i)``, ``(?P<id>``, ``(?#..)``).
_NOT_A_LETTER = re.compile(
    r"\\[pPNx]\{[^}]*\}|\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\."  # escapes
    r"|\[\^?\]?(?:\[:[a-z]+:\]|\\.|[^\]])*\]"  # a class
    r"|\(\?(?:P?<[^>]*>|#[^)]*\)|[^:)]*[:)])?",  # a group's opening, its flags or name
    re.DOTALL)
#: Each letter of the i family as Unicode's simple case folding (rg's) relates them: i with I, the dotless ı and
#: the dotted İ each alone. Python's folding also relates i with İ and I with ı.
_I_LETTERS = {"i": "(?-i:[iI])", "I": "(?-i:[iI])", "ı": "(?-i:ı)", "İ": "(?-i:İ)"}


#: A group that turns case-blind matching off (``(?-i:...)``, ``(?s-i)``).
_CASE_OFF = re.compile(r"\(\?[a-zA-Z]*-[a-zA-Z]*i")
#: A pattern that turns case-blind matching on for its whole self (``(?i)``, ``(?mi)``).
_GLOBAL_I = re.compile(r"\(\?[a-zA-Z]*i[a-zA-Z]*\)")
#: Escapes of the i letters (``\\x49``, ``\\u0131``; rg's ``\\x{131}`` is one once :func:`rust_escapes` ran).
_I_ESCAPES = {"\\x69": "i", "\\x49": "I", "\\u0069": "i", "\\u0049": "I", "\\u0131": "ı", "\\u0130": "İ"}


def _dotted_i_apart(source: str) -> str:
    """``source`` (Python syntax) with each literal ``i``, ``I``, ``ı`` and ``İ`` (or its escape) matched
    case-blind as rg matches it (:data:`_I_LETTERS`), and each class too (:func:`_class_apart`): a new user's
    ``-i in`` counted 4 lines more than rg over Django's Turkish and Azeri catalogues, ``-i ı`` 3,412 files
    where rg found 38, ``-i [a-z]+`` took ``İ``. A pattern that turns case-blindness off in a part
    (``(?-i:I)``) is left as a whole."""
    holds_one = any(c in source for c in _I_LETTERS) or any(e in source.lower() for e in _I_ESCAPES) or \
        any(c in source for c in ("[", "\\p", "\\P"))
    if not holds_one or _CASE_OFF.search(source):
        return source
    out, at = [], 0
    for m in _NOT_A_LETTER.finditer(source):
        out.append("".join(_I_LETTERS.get(c, c) for c in source[at:m.start()]))
        token = m.group()
        letter = _I_ESCAPES.get(token.lower() if token[:2].lower() in ("\\x", "\\u") else "")
        apart = token[0] == "[" or token[:2] in ("\\p", "\\P")  # a class, or a property (a class of its own)
        out.append(_I_LETTERS[letter] if letter else _class_apart(token) if apart else token)
        at = m.end()
    out.append("".join(_I_LETTERS.get(c, c) for c in source[at:]))
    return "".join(out)


def _class_apart(cls: str) -> str:
    """A class ``[...]`` (or a property, ``\\p{Lu}``) that takes (or leaves) one of ``i I ı İ`` case-blind where
    rg's folding does not, as a group that leaves (or takes) those letters first: rg relates ``i`` with ``I``
    alone and ``ı``, ``İ`` with nothing, where Python relates ``İ`` with ``i`` and ``ı`` with ``I`` (``[a-z]``
    took ``İ``, ``[^a-z]`` left it).
    Each letter's membership is asked of the engine itself, case-blind and (for rg's) case-sensitive over
    the letter's rg fold (any of it for a class, all of it for a negated one); a class it cannot compile
    alone stays as it is."""
    try:
        blind, exact = (regex.compile(f"{flags}{cls}", regex.VERSION0) for flags in ("(?i)", ""))
    except (regex.error, ValueError):
        return cls
    every = all if cls.startswith(("[^", "\\P")) else any  # a negated class: the complement of its folded members
    takes = {c: every(exact.fullmatch(f) for f in ("iI" if c in "iI" else c)) for c in "iIıİ"}
    give = "".join(c for c, rg in takes.items() if rg and not blind.fullmatch(c))
    keep_out = "".join(c for c, rg in takes.items() if not rg and blind.fullmatch(c))
    if not (give or keep_out):
        return cls
    body = f"(?-i:(?![{keep_out}])){cls}" if keep_out else cls
    return f"(?:(?-i:[{give}])|{body})" if give else f"(?:{body})"


def rust_escapes(source: str) -> str:
    """``source`` with rg's (Rust regex's) ``\\z`` as ``\\Z`` and ``\\x{e9}`` or ``\\u{e9}`` as ``\\xe9`` (``\\u``,
    ``\\U`` for wider code points), which Python's ``re`` refuses ("bad escape", "incomplete escape"),
    and ``\\<``/``\\>`` as word-boundary assertions (Python matched a literal ``<``: no line, silently);
    other escapes, ``\\\\z`` included, as they are."""
    if not any(e in source for e in ("\\z", "\\x{", "\\u{", "\\<", "\\>")):
        return source

    def spelled(m: re.Match) -> str:
        if m.group(1):
            return "\\Z"
        if m.group(3):
            return "\\b(?=\\w)" if m.group(3) == "<" else "\\b(?<=\\w)"
        if m.group(2) is None:
            return m.group()
        point = int(m.group(2), 16)
        return f"\\x{point:02x}" if point <= 0xFF else f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"

    return _RUST_ESCAPE.sub(spelled, source)


def posix_spelled(source: str, planned: bool = False) -> str:
    """``source`` with each POSIX class in a bracket spelled as its ASCII ranges (:data:`POSIX_CLASSES`):
    ``[[:upper:]_]`` -> ``[A-Z_]``; a negated one, ``[[:^space:]]``, only as a bracket of its own.
    ``planned``: also each Unicode property (``\\p{Greek}``, ``\\PL``, which the regex module matches
    and rg takes but Python's parser refuses) as any character, ``[\\s\\S]``: the form the trigram
    planner reads (it requires no trigram there, and may match a line break, so the pattern runs
    line by line).

    Raises:
        UsageError: an unknown class name (``[[:foo:]]``, as rg refuses it), or a negated class beside
            other members (Python has no set difference to spell it with).
    """
    if "[:" not in source and not (planned and _PROPERTY.search(source)):
        return source
    out, i = [], 0
    while i < len(source):
        escaped = _escape(source, i, planned, "[\\s\\S]")
        if escaped:
            out.append(escaped[0])
            i = escaped[1]
        elif source[i] == "[":
            end, body = _bracket(source, i, planned)
            out.append(body)
            i = end
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def _escape(source: str, i: int, planned: bool, any_char: str) -> tuple[str, int] | None:
    """The escape at ``i`` as it is, or a Unicode property as ``any_char`` when ``planned``:
    ``(text, index past it)``; None when ``i`` holds no backslash."""
    if source[i] != "\\":
        return None
    prop = _PROPERTY.match(source, i) if planned else None
    return (any_char, prop.end()) if prop else (source[i:i + 2], i + 2)


def _bracket(source: str, start: int, planned: bool) -> tuple[int, str]:
    """The bracket opening at ``start``: ``(index past its ']', its text with POSIX classes spelled)``,
    properties as any character when ``planned``; an unclosed one is left as it is (the parser names
    the error)."""
    i = start + 1
    negated = source.startswith("^", i)
    i += negated
    members: list[str] = []
    if source.startswith("]", i):  # a ']' first is a member
        members.append("]")
        i += 1
    flipped = None
    while i < len(source) and source[i] != "]":
        named = _POSIX_NAME.match(source, i)
        escaped = _escape(source, i, planned, "\\s\\S")
        if escaped:
            members.append(escaped[0])
            i = escaped[1]
        elif named:
            ranges = POSIX_CLASSES.get(named.group(2))
            if ranges is None:
                raise _bad(source, f"unknown POSIX class {named.group(2)!r}", i)
            if named.group(1):
                flipped = named.start()
            members.append(ranges)
            i = named.end()
        else:
            members.append(source[i])
            i += 1
    if i >= len(source):
        return len(source), source[start:]
    if flipped is not None:
        if len(members) > 1:
            raise _bad(source, "a negated POSIX class beside other members", flipped)
        negated = not negated
    return i + 1, "[" + ("^" if negated else "") + "".join(members) + "]"


def _combined(sources: list[str], word: bool, line: bool = False) -> str:
    """One pattern for all ``sources``: each a non-capturing group, ``-w`` bounds or ``-x`` anchors
    (which win, as in rg) around them, the global flags hoisted to the front."""
    flags, bodies = "", []
    for s in sources:
        head = _GLOBAL_FLAGS.match(s)
        if head:
            flags += head.group(1)
            s = s[head.end():]
        bodies.append(s)
    body = bodies[0] if len(bodies) == 1 and not (word or line) else "|".join(f"(?:{b})" for b in bodies)
    if line:
        body = rf"^(?:{body})$"
    elif word:
        body = rf"(?<!\w)(?:{body})(?!\w)"
    return (f"(?{''.join(dict.fromkeys(flags))})" if flags else "") + body


def _parsed(source: str, flags: int, shown: str, multiline: bool = False):
    """Python's parse of ``source``.

    Raises:
        UsageError: bad syntax (naming the position in ``shown``), or a literal line break unless ``multiline``.
    """
    try:
        tree = trigrams.parse(source, flags)
    except re.error as err:
        raise _bad(shown, err.msg, err.pos) from None
    except (RecursionError, OverflowError) as err:  # thousands of nested groups, a repeat count past 4 billion
        raise _bad(shown, f"too complex ({type(err).__name__})", None) from None
    if trigrams.largest_repeat(tree) > MAX_REPEAT_COUNT:
        raise UsageError(f"{_quoted(shown)} repeats something more than {MAX_REPEAT_COUNT:,} times, which makes the compiled "
                         "pattern too large", "use a smaller count, or + or *", field="pattern")
    if not multiline and trigrams.names_newline(tree):
        raise UsageError(f"{_quoted(shown)} holds a line break, and grep matches within one line unless asked to "
                         "match across lines", Remedy("multiline"),
                         field="pattern")
    return tree


def _quoted(shown: str, most: int = 80) -> str:
    """The pattern as typed (no doubled backslashes), cut after ``most`` characters, a line break in it as ``\\n``
    (the error stays one line): a 10 KB pattern was echoed whole in its error (~2,500 tokens), and repr() showed
    'a\\\\Kb' for a\\Kb."""
    cut = shown if len(shown) <= most else shown[:most] + "…"
    return "'" + cut.replace("\r", "\\r").replace("\n", "\\n") + "'"


def _bad(shown: str, why: str, pos: int | None) -> UsageError:
    where = f" at position {pos}" if pos is not None else ""
    return UsageError(f"{_quoted(shown)} is not a valid regular expression: {why}{where}",
                      "fix the pattern, or search it as a literal string", field="pattern")
