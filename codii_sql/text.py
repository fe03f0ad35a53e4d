"""Text primitives shared by every stage: decoding source bytes, splitting identifiers and CJK runs, numbering lines."""

from __future__ import annotations

import codecs
import re
import zlib

#: Above this share of undecodable bytes a file is taken to be Latin-1, not broken UTF-8...
_MAX_INVALID_UTF8_SHARE = 0.01
#: ...unless it holds at least one valid non-ASCII UTF-8 character for every this many undecodable bytes:
#: real Latin-1 text almost never forms a valid UTF-8 pair (a letter C2-DF then a symbol 80-BF), so those
#: characters say UTF-8 with stray bytes. At 1 (the rule before) a new user's changelog of `José Muñoz`
#: lines between cp1252 quotes (40 and 40) and a 69-byte file with one `é` and three stray bytes were
#: read as Latin-1: `JosÃ©` for search, BM25 and the symbol tools.
_VALID_PER_INVALID = 4

#: Unicode's bidirectional controls (marks, embeddings, overrides, isolates), a regex class's inside:
#: printed raw, an RTL override makes ``evil\u202etxt.py`` read as another name (Trojan Source).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[^\W_]+|_+", re.UNICODE)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEPARATORS = re.compile(r"[_\W]+")
#: C0 controls but tab, DEL, C1 controls and the bidirectional controls: shown escaped, so a file
#: name or line holding them cannot ring the bell, break the ``path:line`` format, send escape
#: sequences to a terminal or read as another name.
_CONTROLS = re.compile(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}]")
#: The same controls but newline: a whole text answer keeps its lines.
_CONTROLS_BUT_NEWLINE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}]")
#: A lone surrogate: how Python carries a byte that is not UTF-8 (a file name's, an argument's, or a
#: line's read by :func:`decode_kept`).
SURROGATES = re.compile("[\ud800-\udfff]")


def escaped(text: str, *, lines: bool = False) -> str:
    """``text`` with its control characters as escapes (``\\x1b``, ``\\x07``; with ``lines`` false
    newlines too, ``\\n``): safe to show on a terminal or in an agent's text, one field per line."""
    if text.isprintable():  # no control at all: the common line, ~10x cheaper than the substitution's scan
        return text
    pattern = _CONTROLS_BUT_NEWLINE if lines else _CONTROLS
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def has_controls(text: str) -> bool:
    """Whether :func:`escaped` would change ``text`` (one scan: a whole file's lines at once)."""
    return not text.isprintable() and _CONTROLS.search(text) is not None


def shown_bytes(text: str) -> str:
    """``text`` with each undecodable byte Python carried as a lone surrogate shown as ``\\xff`` (any other
    lone surrogate as ``\\ud800``): how a name that is not UTF-8 is written in one line of an error."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def pack_text(text: str) -> bytes:
    """``text`` as stored in the index (``file_texts``): zlib (RFC 1950) of its UTF-8 bytes, about a
    quarter of their size for source code (Django 5.1.4: 34.4 MB -> 8.9 MB)."""
    return zlib.compress(text.encode("utf-8"))


def unpack_text(blob: bytes) -> str:
    """The text :func:`pack_text` stored."""
    return zlib.decompress(blob).decode("utf-8")


def unpacked(blob: bytes) -> str | None:
    """:func:`unpack_text`, or None for a blob that does not unpack (a damaged page, a hand edit)."""
    try:
        return unpack_text(blob)
    except (zlib.error, UnicodeDecodeError, TypeError):
        return None


#: The byte-order marks of a UTF-16 file, which decode_source decodes as UTF-16.
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_source(data: bytes) -> str:
    """Decode a source file's bytes to text, deterministically and losslessly for line numbers.

    Rules, in order: a UTF-8 BOM is dropped; a UTF-16 LE/BE BOM decodes as UTF-16; strict
    UTF-8; UTF-8 with U+FFFD replacements when at most 1% of the bytes are invalid, or when it has a
    valid non-ASCII character for every 4 invalid bytes (:data:`_VALID_PER_INVALID`; a UTF-8 file with
    stray bytes: a new user's `café` ... `b"\xff"` ... `naïve` file was read as Latin-1, `naÃ¯ve`); else
    Latin-1 (which never fails). Lone ``\\r`` line endings become ``\\n`` (same length in characters and
    in UTF-8 bytes, so byte offsets stay valid); ``\\r\\n`` is kept. The result
    never holds lone surrogates, so it is always valid input for the tokenizer and SQLite.

    Args:
        data: the raw file content.
    Returns:
        str: the text. Line *n* (1-based) is ``text.split("\\n")[n - 1]``.
    """
    if data.startswith(codecs.BOM_UTF8):
        text = data[len(codecs.BOM_UTF8):].decode("utf-8", errors="replace")
    elif data.startswith(UTF16_BOMS):
        text = data.decode("utf-16", errors="replace")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            invalid = text.count("\ufffd")
            if invalid > _MAX_INVALID_UTF8_SHARE * max(len(data), 1) and \
                    (sum(not ch.isascii() for ch in text) - invalid) * _VALID_PER_INVALID < invalid:
                text = data.decode("latin-1")
    return _lone_cr_as_lf(text).replace("\x00", "\ufffd")


def _lone_cr_as_lf(text: str) -> str:
    return re.sub(r"\r(?!\n)", "\n", text) if "\r" in text else text


def decode_kept(data: bytes) -> str:
    """A file's bytes as grep reads them, as rg does: UTF-8, each byte that is not UTF-8 kept as a lone
    surrogate (Python's ``surrogateescape``, U+DC80-U+DCFF), which no pattern character matches and which
    prints as the byte it was; a BOM, UTF-16 and lone ``\\r`` as :func:`decode_source` reads them (the
    same lines as the index). :func:`decode_source`'s replacement characters (3 bytes each) and Latin-1
    reading (``caf\\xe9`` as ``café``) moved rg's columns and byte offsets and matched ``café`` where rg
    finds no such text (a new user's Latin-1 file)."""
    if data.startswith(codecs.BOM_UTF8) or data.startswith(UTF16_BOMS):
        return decode_source(data)
    return _lone_cr_as_lf(data.decode("utf-8", "surrogateescape"))


def char_spans(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans``, ``[start, end)`` byte offsets into ``text`` as the file holds it (UTF-8, a byte
    :func:`decode_kept` kept counting one), as character offsets into ``text``."""
    if text.isascii():
        return list(spans)
    raw = text.encode("utf-8", "surrogateescape")
    return [(len(raw[:a].decode("utf-8", "surrogateescape")), len(raw[:b].decode("utf-8", "surrogateescape")))
            for a, b in spans]


def refuse_undecodable(query: str) -> None:
    """Raise UsageError when ``query`` holds a byte that is not UTF-8 (a shell's Latin-1 ``caf\\xe9``, a lone
    surrogate from JSON): no indexed text holds one, and the model's tokenizer took it for a crash."""
    if holds_surrogates(query):
        from .errors import UsageError

        raise UsageError(f"'{shown_bytes(query)}' holds a byte that is not UTF-8, which no indexed text holds",
                         "pass the words as UTF-8 text", field="query")


def holds_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (a byte :func:`decode_kept` kept): UTF-8's strict encoder
    refuses one, and tells so 4x faster than a search for the class (0.11 against 0.47 ms over a 147 KB
    text; a third of the matching time of Django's non-ASCII candidates of `class \\w+Mixin\\b`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate (a byte :func:`decode_kept` kept) as U+FFFD: text any UTF-8
    writer takes (JSON for agents, a page)."""
    return text if text.isascii() else SURROGATES.sub("\ufffd", text)


def _split(word: str) -> tuple[str, ...]:
    letters = word.replace("_", "")
    if letters.isalpha() and (letters.islower() or letters.isupper()):
        # snake_case and UPPER_CASE (most C names): the words between underscores, as below
        return tuple(p.lower() for p in word.split("_") if p)
    parts: list[str] = []
    for piece in _SEPARATORS.split(word):
        if not piece:
            continue
        found = _CAMEL.findall(piece)
        parts.extend(p.lower() for p in (found if "".join(found) == piece else [piece]))
    return tuple(parts)


def split_identifier(word: str) -> list[str]:
    """Split one identifier into lower-case sub-tokens.

    ``getUserName`` -> ``["get", "user", "name"]``; ``HTTPServer2`` -> ``["http", "server", "2"]``;
    ``parse_header`` -> ``["parse", "header"]``. Non-ASCII letters stay inside their word.
    """
    return list(_split(word))


class _Compounds(dict):
    """identifier -> its sub-tokens space-separated, or ``""`` when it does not split: filled as
    identifiers are met (code repeats its identifiers), emptied past :data:`_MAX_COMPOUNDS` entries."""

    def __missing__(self, ident: str) -> str:
        if len(self) > _MAX_COMPOUNDS:
            self.clear()
        parts = _split(ident)
        self[ident] = joined = " ".join(parts) if len(parts) > 1 else ""
        return joined


_MAX_COMPOUNDS = 500_000
_compounds = _Compounds()


def identifier_subtokens(text: str) -> str:
    """The sub-tokens of every compound identifier in ``text``, space-separated.

    Only identifiers that actually split (camelCase, snake_case, digits) contribute, so the
    second FTS5 column adds what the ``unicode61 tokenchars '_'`` column cannot match,
    without doubling plain words. Used for the ``subtokens`` column of ``chunks_fts``.
    """
    return " ".join(filter(None, map(_compounds.__getitem__, _IDENT.findall(text))))


#: Han ideographs (extension A and compatibility forms too), hiragana and katakana (with the
#: halfwidth forms): scripts written without spaces between words, whose whole runs FTS5's
#: unicode61 tokenizer keeps as one token (``获取用户名称并检查权限``: ``用户`` matched nothing).
_CJK_RUN = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                      "\uff66-\uff9f\U00020000-\U0002fa1f]+")
#: Thai, Lao, Khmer and Myanmar: no spaces between words either, and no pairs that make words.
_UNSPACED = {"Thai": "\u0e00-\u0e7f", "Lao": "\u0e80-\u0eff", "Khmer": "\u1780-\u17ff", "Myanmar": "\u1000-\u109f"}
_UNSPACED_RUN = re.compile("|".join(f"(?P<{name}>[{span}]+)" for name, span in _UNSPACED.items()))


def cjk_bigrams(text: str) -> list[str]:
    """Each run of Chinese or Japanese characters of ``text`` as its overlapping pairs
    (``获取用户`` -> ``获取 取用 用户``), the index's words for them and a query's alike (the
    bigram method of CJK search engines: no dictionary, and any two-character word matches)."""
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        out += [run[i:i + 2] for i in range(max(len(run) - 1, 1))]
    return out


def with_cjk_bigrams(text: str) -> str:
    """``text`` with each Chinese or Japanese run replaced by its pairs, space-separated (see
    :func:`cjk_bigrams`): a query reads the words an index holds."""
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group())) + " ", text)


def unspaced_script(text: str) -> str | None:
    """The name of a script of ``text`` that is written without spaces and has no pairs to match
    (Thai, Lao, Khmer, Myanmar), or None."""
    found = _UNSPACED_RUN.search(text)
    return found.lastgroup if found else None


def content_lines(content: str) -> list[str]:
    """A chunk's (or a file's) lines as the file has them: split at ``\n`` only (a chunk's line span
    counts those), without the empty piece after a final newline."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def numbered_lines(content: str, start_line: int, end_line: int | None = None) -> list[tuple[int, str]]:
    """``(file line, text)`` of each line of ``content``, which starts at ``start_line`` (1-based):
    one number each, from ``start_line`` on, when it spans ``end_line - start_line + 1`` lines (or
    ``end_line`` is None); else ``start_line`` for every line (a notebook cell stored as one JSON
    string holds several lines on one file line). The one numbering of every text listing."""
    lines = content_lines(content)
    if end_line is None or end_line - start_line + 1 == len(lines):
        return list(enumerate(lines, start_line))
    return [(start_line, line) for line in lines]


_WORD_RUN = re.compile(r"\w+")
#: The parts of an identifier a query word may match: ``HTTP`` ``Server`` ``2`` of ``HTTPServer2``,
#: ``keepalive`` ``expiry`` of ``keepalive_expiry``.
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_]+")


def term_spans(text: str, terms: list[str]) -> list[tuple[int, int]]:
    """Where ``text`` holds one of the query's ``terms`` (lower-case words), as BM25 matched it: a whole
    word or identifier (``parse_header``), or a part of one (``Header`` in ``parseHeader``, ``expiry`` in
    ``keepalive_expiry``) that is the term or a form of it (:func:`_like`); case-blind. Spans are
    ``(start, end)`` character offsets, in order."""
    lowered = text.lower()
    # Every match shares its first 4 letters with a term (or is the term): most lines hold none.
    if not any(t[:4] in lowered for t in terms if t):
        return []
    words = {t for t in terms if t}
    spans: list[tuple[int, int]] = []
    for m in _WORD_RUN.finditer(text):
        if m.group().lower() in words:
            spans.append(m.span())
            continue
        for p in _PART.finditer(m.group()):
            if any(_like(p.group().lower(), w) for w in words):
                spans.append((m.start() + p.start(), m.start() + p.end()))
    return spans


def terms_held(text: str, terms: list[str]) -> set[str]:
    """The query ``terms`` (lower-case words) that ``text`` holds, as :func:`term_spans` finds them: a line
    holding ``$host`` and ``trustedHosts`` holds one term of "Untrusted Host", not two."""
    words = [t for t in terms if t]
    held = set()
    for a, b in term_spans(text, words):
        part = text[a:b].lower()
        held.update(w for w in words if part == w or _like(part, w))
    return held


def _like(word: str, term: str) -> bool:
    """``word`` is ``term`` or a form of it: they share all but the last 3 letters of the longer,
    and at least 4 (``retries``/``retry``, ``attempts``/``attempt``; not ``par``/``parse``). An
    approximation of the index's Porter stems."""
    if word == term:
        return True
    if min(len(word), len(term)) < 4:
        return False
    shared = 0
    for x, y in zip(word, term):
        if x != y:
            break
        shared += 1
    return shared >= max(4, max(len(word), len(term)) - 3)
