"""Query analysis: BM25 terms, the query's shape, the identifiers and paths it names, FTS5 syntax."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ..languages import detect_language
from ..text import cjk_bigrams, split_identifier, unspaced_script, with_cjk_bigrams

#: Bound on distinct FTS5 terms: an issue text has hundreds of words; OR-ing all of them is slow
#: (~0.5 us per posting) and drowns the informative ones.
MAX_FTS_TERMS = 32
#: Distinct words of a query weighed at most (their chunk counts are read to pick the rarest): the
#: 127 SWE-bench issues hold 2,239 together, a 100 KB paste 13,197, whose counts took 1.2 s.
MAX_QUERY_TERMS = 2_000
#: A query with more words than this is "long": an issue or a stack trace, not a question
#: (the 500 CoSQA web questions have at most 14 words; the 127 SWE-bench issues at least 26).
LONG_QUERY_WORDS = 20

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


def query_terms(query: str, *, numbers: bool = False, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """Distinct lower-case BM25 terms: each identifier as written plus its sub-tokens, ``stop_words`` dropped.

    ``"where is getUserName called"`` -> ``["getusername", "user", "name", "called"]`` ("get" is a stop word);
    ``"httpx/_auth.py"`` -> ``["httpx", "_auth", "auth", "py"]``.
    Dotted paths and ``::`` split at the separators. Not capped: see :meth:`Searcher.select_terms`.
    With ``numbers``, standalone numbers of two or more characters are terms too (``304``,
    ``8080``, ``4.17.2``: fts_query quotes it, so FTS5 matches the tokens 4 17 2 in a row).
    Chinese and Japanese text becomes its character pairs, as the index holds it (``用户名`` ->
    ``用户``, ``户名``); a lone character matches nothing and is dropped.
    """
    terms: list[str] = []
    seen = set()
    whole = _NUMBER.findall(query) if numbers else []
    for word in _WORD.findall(with_cjk_bigrams(query)) + whole:
        for t in [word.lower(), *(split_identifier(word) if word not in whole else [])]:
            if t not in seen and t not in stop_words and len(t) > 1:
                seen.add(t)
                terms.append(t)
    return terms


_NUMBER = re.compile(r"(?<![\w.-])\d+(?:[._-]\d+)*(?![\w-])")
_CODE_SHAPE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|^_+[A-Za-z]|[a-z][A-Z]|[A-Za-z][.#][A-Za-z_]|::")
_PATH = re.compile(r"(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z]\w{0,5}\b")
#: A type's name (capitalised: ``JoinHandle``, ``QuerySet``, ``Session``; not "Where") and a plain word after it
#: (``abort``, ``get``: a stop word too) name the member together, ``JoinHandle.abort``.
_MEMBER_OWNER = re.compile(r"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")
_PLAIN_WORD = re.compile(r"[a-z_][a-z0-9_]*")
#: A trailing ``!`` or ``?`` is part of a Ruby (Elixir, Crystal) method name: ``compile!`` is not ``compile``; so
#: are Haskell's and OCaml's primes ending a word (``modify'``, not the ``'`` of "user's").
_IDENTIFIER = re.compile(r"[A-Za-z_][\w]*(?:(?:\.|::|#)[A-Za-z_]\w*)*(?:[!?]|'+(?!\w))?")
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
        cased: ``(name, as written)`` for each name written with an upper-case letter (``queryset``,
            ``QuerySet``): a symbol that matches it only case-folded (a method ``queryset`` for
            ``QuerySet``) is weaker evidence than one spelled as asked.
        placed: ids of the chunks holding a place the query names (``sessions.py:703``), resolved
            against an index by :func:`~.locations.resolve`; they rank first.
        typed: names of ``names`` a type keyword names (``Context struct``, ``trait Visitor``): only a
            type's chunks match them (kind ``class``), not a method ``defaultValidator.Engine``.
    """

    names: list[str]
    tails: list[str]
    paths: list[str]
    cased: tuple[tuple[str, str], ...] = ()
    placed: tuple[int, ...] = ()
    typed: tuple[str, ...] = ()


#: Words after which a code-like query names a definition (``def get``, ``fn each``, ``class File``).
DEFINITION_KEYWORDS = frozenset("""
def fn func function class struct interface trait enum type impl module mod method sub proc macro
let const var val object record protocol extension
""".split())
#: Definition keywords that name a type: the word beside one is a type's name.
TYPE_KEYWORDS = frozenset({"class", "struct", "interface", "trait", "enum", "protocol", "record", "union"})
#: Tokens (case as written) only code has: a query holding one is code, whatever its other words.
CODE_LITERALS = frozenset({"None", "True", "False", "null", "nil", "NULL", "undefined", "nullptr", "self", "this"})
_CODE_PUNCTUATION = re.compile(r"[()\[\]{}=<>;:.#_$@]|->")


def looks_like_code(query: str) -> bool:
    """Whether a short query is code rather than English (``get``, ``def get``, ``get(``,
    ``is not None``): every word a stop word, code punctuation, a definition keyword first, or a
    token only code has. Its English words are then identifiers, not words to drop."""
    words = query.split()
    return bool(words) and (all(w.lower() in STOP_WORDS for w in words) or bool(_CODE_PUNCTUATION.search(query))
                            or words[0] in DEFINITION_KEYWORDS or any(w in CODE_LITERALS for w in words)
                            or _kind_last(words))


def _kind_last(words: list[str]) -> bool:
    """A name then its kind (``Context struct``, ``Deserializer trait``, ``parse function``): two words, the
    second a definition keyword, the first no stop word. A new user's `Context struct` ranked gin's Context
    below ten chunks that repeat "struct"."""
    return len(words) == 2 and words[1] in DEFINITION_KEYWORDS and words[0].lower() not in STOP_WORDS \
        and words[0] not in DEFINITION_KEYWORDS


def named_in_query(query: str, *, code: bool = False) -> Named:
    """Identifiers and file paths a query names (see :class:`Named`).

    A name is a code-shaped token (snake_case, camelCase, dotted or ``::`` path, ``Class#method`` as
    Javadoc and Ruby write it, or the whole query when it is one word). A path is a token with a ``/`` or with an extension
    :func:`~codii_sql.languages.detect_language` knows (``_auth.py``, not ``Session.send``);
    leading ``./`` and ``/`` are dropped so it can match the end of an indexed relative path,
    and a path is not also a name (``auth.py`` names no symbol ``py``). With ``code`` (the query is
    code, :func:`looks_like_code`), English words are names too (``get``), and a word after a
    definition keyword is one (``def get`` names ``get``).
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
    cased: dict[str, str] = {}
    tokens = _IDENTIFIER.findall(rest)
    defined = {b for a, b in zip(tokens, tokens[1:]) if a in DEFINITION_KEYWORDS} if code else set()
    if code and _kind_last(tokens):
        defined.add(tokens[0])
    typed = {b.lower() for a, b in zip(tokens, tokens[1:]) if a in TYPE_KEYWORDS} if code else set()
    if code and _kind_last(tokens) and tokens[1] in TYPE_KEYWORDS:
        typed.add(tokens[0].lower())
    for token in tokens:
        if one_word or token in defined or _CODE_SHAPE.search(token):
            parts = [p for p in re.split(r"\.|::|#", token.lower()) if p]
            names.add(".".join(parts))
            if not token.islower():
                cased[".".join(parts)] = ".".join(p for p in re.split(r"\.|::|#", token.rstrip("!?'")) if p)
            tails.update(parts[-1:] if len(parts) > 1 else [])
            if token[-1] in "!?'":  # also the plain name, as weaker evidence (Rust's vec! is macro vec)
                tails.add(parts[-1].rstrip("!?'"))
    # "JoinHandle abort", "QuerySet get": a type then a plain word name its member too (a new user's query
    # listed every one-line `impl ... for JoinHandle` chunk before JoinHandle.abort).
    for a, b in itertools.pairwise(tokens):
        if _MEMBER_OWNER.fullmatch(a) and a.lower() not in STOP_WORDS and _PLAIN_WORD.fullmatch(b) \
                and b not in DEFINITION_KEYWORDS:  # `Context struct` names the struct, no member `struct`
            names.add(f"{a.lower()}.{b.lower()}")
            cased[f"{a.lower()}.{b.lower()}"] = f"{a}.{b}"
    dropped = frozenset() if code else STOP_WORDS
    names -= dropped
    return Named(sorted(names), sorted(tails - names - dropped), sorted(set(paths) - {""}),
                 tuple(sorted((n, c) for n, c in cased.items() if n in names and c.lower() == n)),
                 typed=tuple(sorted(typed & names)))


def symbol_match(names: list[str]) -> str | None:
    """An FTS5 expression finding the chunks whose ``symbol`` column holds a name's parts as a
    phrase (``console.print`` -> ``symbol : ("console print")``), or None for no names.

    A superset: sql/search.sql keeps the chunks whose symbol is exactly the name or ends with it.
    """
    phrases = ['"' + " ".join(n.split(".")) + '"' for n in names]
    return f"symbol : ({' OR '.join(phrases)})" if phrases else None


CODE_SPAN = re.compile(r"`([^`\n]+)`")
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


_CODE_TOKEN = re.compile(r"[A-Za-z]+_\w|[a-z][A-Z]|\w\.\w|[A-Za-z]#[A-Za-z_]|::|\w\(|^\w+[!?]?$")


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


#: A package's exported member (``http.ErrAbortHandler``, ``io.ErrUnexpectedEOF``, ``json.JSONDecoder``): an API a
#: codebase may not use yet, so no sign that the question is about something not there (an agent's bug report on
#: gin was flagged no_good_match with the fix's file 2nd). ``sess.frobnicate``, ``Session.frobnicate`` are not.
_PACKAGE_MEMBER = re.compile(r"[a-z][a-z0-9]*\.[A-Z]\w*")
#: An exception's class (``FrozenError``, ``EOFError``, ``NullPointerException``, ``DeprecationWarning``): most are the
#: language's or a library's, which bug reports name as what was raised (an agent's "FrozenError when params
#: contains a frozen value" on sinatra was flagged no_good_match with the fix's file 2nd).
_EXCEPTION = re.compile(r"[A-Z]\w*(?:Error|Exception|Warning|Interrupt)")


def coined_match(text: str) -> tuple[str, list[str]] | None:
    """An FTS5 expression finding the chunks that hold a name of ``text`` only code writes (snake_case,
    camelCase, dotted, ``::``: ``getUserAvatarUrl``, ``Session.send``; not plain words, which prose holds
    too): whole, spelt in another case convention (its sub-tokens in order: ``ParseHeaderLinks`` is held by
    ``parse_header_links``), or, dotted, each of its parts (a small class's one chunk holds ``Session`` and
    its ``send``); and the last parts of the dotted ones, which a definition of that name holds too (a call on
    a variable: gin's ``ctx.Next`` is ``Context.Next``, whose receivers are named ``c``). None when ``text``
    names none but another package's API (:data:`_PACKAGE_MEMBER`: a bug report's ``suppress http.ErrAbortHandler
    in recover`` names what its fix will use, and its words find the code) or an exception's class (:data:`_EXCEPTION`)."""
    phrases, members = [], []
    for name in (n.rstrip("!?") for n in _IDENTIFIER.findall(text)
                 if _CODE_SHAPE.search(n) and not _PACKAGE_MEMBER.fullmatch(n) and not _EXCEPTION.fullmatch(n)):
        parts = [p for p in re.split(r"\.|::|#", name) if p]
        phrases.append("{content symbol path} : (" + " AND ".join(f'"{p}"' for p in parts) + ")")
        members += parts[-1:] if len(parts) > 1 else []
        if len(parts) == 1 and len(words := split_identifier(name)) > 1:
            phrases.append('subtokens : "' + " ".join(words) + '"')
    return (" OR ".join(phrases), members) if phrases else None


def fts_query(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression: every term quoted (raw user text is not valid FTS5 syntax), OR-ed.

    OR, not AND: BM25 already ranks chunks matching more terms higher, and AND of a long
    query matches nothing. None when there are no terms.
    """
    if not terms:
        return None
    return " OR ".join(map(fts_quoted, terms))


def fts_all(terms: list[str]) -> str:
    """An FTS5 expression matching the chunks that hold every one of ``terms`` (``terms`` not empty)."""
    return " AND ".join(map(fts_quoted, terms))


def fts_quoted(term: str) -> str:
    """``term`` as one FTS5 string (quoted, its quotes doubled): raw text is not valid FTS5 syntax."""
    return '"' + term.replace('"', '""') + '"'


@dataclass(frozen=True)
class Analysis:
    """A query as a search reads it, once: ``text`` (an issue's template instructions stripped),
    its ``shape`` (:func:`query_shape`), its BM25 ``terms`` (at most :data:`MAX_FTS_TERMS`) and the
    ``phrases`` its FTS5 expression ORs (the terms, after the words in their order for code), what it
    ``named`` (:func:`named_in_query`), and how many distinct words it has (``words``; more than
    :data:`MAX_QUERY_TERMS` are not all weighed), and what BM25 cannot match in it (``unmatched``: a
    script written without spaces, or a lone Han or kana character), else None."""

    text: str
    shape: str
    terms: list[str]
    phrases: tuple[str, ...]
    named: Named
    words: int = 0
    unmatched: str | None = None
    #: The quoted parts as phrases (:func:`quoted_phrases`): text the user gave word for word.
    quoted: tuple[str, ...] = ()

    @property
    def fts(self) -> str | None:
        """The FTS5 MATCH expression of :attr:`phrases` (None without terms)."""
        return fts_query(list(self.phrases))


def analyze(query: str, doc_counts: Callable[[list[str]], dict[str, int]]) -> Analysis:
    """The :class:`Analysis` of ``query``; ``doc_counts(terms)`` says how many chunks hold each term
    (absent terms left out), asked only for a query with more terms than the bound. Numbers name
    things in a short query (HTTP 304, port 8080, version 4.17.2); in an issue text they are
    mostly line numbers and versions of pasted output."""
    shape = query_shape(query)
    text = (strip_issue_template(query).strip() or query) if shape == "long" else query
    code = shape == "identifier" and looks_like_code(text)
    # Stop words are English: in code (``get``, ``def get``, ``is not None``) they are the names.
    words = query_terms(text, numbers=shape != "long", stop_words=frozenset() if code else STOP_WORDS)
    terms = select_terms(text, doc_counts, numbers=shape != "long", words=words)
    phrases = list(terms)
    if code and terms and len(text.split()) > 1:  # the words in their order count most: ``is not None``
        phrases.insert(0, " ".join(query_terms(text, stop_words=frozenset())))
    # A quoted message is matched as written, its stop words too: "what raises 'Too many files'" lost
    # `too` and `files` and ranked the "Too many fields" raise first (a new user). It weighs as many
    # terms as it has words (up to 4): FTS5's bm25() sums over the expression's phrases, so it is listed
    # that often, as a term boost (Lucene's ``^n``) is written here.
    quoted = quoted_phrases(text)
    phrases[:0] = [p for p in quoted for _ in range(min(len(p.split()), QUOTED_WEIGHT))]
    return Analysis(text, shape, terms, tuple(phrases), named_in_query(text, code=code), len(words), _unmatched(text),
                    tuple(quoted))


#: Most terms a quoted phrase weighs (see :func:`analyze`).
QUOTED_WEIGHT = 4
#: Text in quotes, typographic ones too, or backticks (not an apostrophe inside a word: "don't"), on one line.
_QUOTED = re.compile(r"(?<!\w)(?:\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'|`([^`\n]{1,200})`"
                     r"|\u201c([^\u201d\n]{1,200})\u201d|\u2018([^\u2019\n]{1,200})\u2019)(?!\w)")


def quoted_phrases(text: str) -> list[str]:
    """The quoted parts of ``text`` as FTS5 phrases: each one's words in order, stop words kept
    (``'Too many files'`` -> ``too many files``), at most :data:`MAX_FTS_TERMS`."""
    # Its words as the index's tokenizer cuts them (unicode61, ``_`` a token character): ``parse_header`` whole.
    found = (" ".join(re.findall(r"\w+", next(filter(None, m.groups())).lower())) for m in _QUOTED.finditer(text))
    return list(dict.fromkeys(p for p in found if p))[:MAX_FTS_TERMS]


def _unmatched(text: str) -> str | None:
    """What of ``text`` BM25 cannot match: Thai (Lao, Khmer, Myanmar) text, or a Chinese or Japanese
    character standing alone (no pair to match)."""
    script = unspaced_script(text)
    if script:
        return f"{script} text"
    if any(len(pair) == 1 for pair in cjk_bigrams(text)):
        return "lone Chinese or Japanese character"
    return None


def select_terms(query: str, doc_counts: Callable[[list[str]], dict[str, int]], *,
                 numbers: bool = False, words: list[str] | None = None) -> list[str]:
    """The query's BM25 terms (:func:`query_terms`), at most :data:`MAX_FTS_TERMS` of them.

    An issue text has hundreds of words: OR-ing them all costs ~0.5 us per posting and lets
    common words outvote the few that name the code. A long query keeps, in this order,
    the terms of its title (first line, when there are more lines), those of its code spans
    (`` `name` ``), then the rest by fewest matching chunks (highest IDF); absent terms go.
    Measured on 70 SWE-bench dev issues (hybrid, file level): IDF order alone Acc@5 0.643,
    title first 0.714, title and code spans first 0.714 with Acc@1 0.457 -> 0.486. Of a query with
    more than :data:`MAX_QUERY_TERMS` distinct words, the title's, the code spans' and then the first
    ones are weighed. ``words`` are its :func:`query_terms` when the caller has them.
    """
    terms = words if words is not None else query_terms(query, numbers=numbers)
    if len(terms) <= MAX_FTS_TERMS:
        return terms
    lines = query.strip().split("\n", 1)
    title = set(query_terms(lines[0])) if len(lines) > 1 else set()
    code = set(query_terms(" ".join(CODE_SPAN.findall(query))))
    if len(terms) > MAX_QUERY_TERMS:
        first = [t for t in terms if t in title or t in code]
        terms = list(dict.fromkeys(first + terms))[:MAX_QUERY_TERMS]
    df = doc_counts(terms)
    pos = {t: i for i, t in enumerate(terms)}

    def priority(t: str) -> tuple:
        return (0, pos[t]) if t in title else (1 if t in code else 2, df[t], pos[t])

    keep = set(sorted((t for t in terms if t in df), key=priority)[:MAX_FTS_TERMS])
    return [t for t in terms if t in keep]
