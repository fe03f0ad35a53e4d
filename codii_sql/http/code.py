"""Code for the web page: a file's lines as safe HTML, coloured by Pygments, its identifiers linked to
their definitions, and text with the query's words marked.

Every piece of a file (its name, its lines) is escaped here or by the templates' autoescaping: an
indexed file cannot put markup, a script or a bidirectional override into the page. Control
characters and bidi controls are shown as escapes (``\\u202e``), so a name cannot hide what it is.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from functools import lru_cache

from markupsafe import Markup
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_for_filename, guess_lexer_for_filename
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES, Name, Token, Whitespace
from pygments.util import ClassNotFound

from ..text import BIDI_CONTROLS, char_spans, term_spans, utf8_safe

#: C0 and C1 controls but tab, DEL, and the bidirectional controls (an RTL override reorders how a
#: name reads: ``evil\u202etxt.py``).
_INVISIBLE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
#: Names shorter than this are not linked (``i``, ``x``: every file has them).
MIN_LINKED = 2
#: Above this many characters a file is shown without colours (Pygments' regex lexers slow down).
MAX_COLOURED_CHARS = 2_000_000
#: The Pygments styles of the light and the dark scheme.
STYLES = ("default", "monokai")


def _plain_classes() -> frozenset[str]:
    """Token classes that look like the text around them in every style: written without a span
    (a 5,000-line file has some 50,000 tokens; half the elements go, docs/web.md)."""
    def looks(style, ttype):
        return {k: v for k, v in style.style_for_token(ttype).items() if v and "ansi" not in k}
    styles = [get_style_by_name(name) for name in STYLES]
    return frozenset(cls for ttype, cls in STANDARD_TYPES.items()
                     if all(looks(st, ttype) == looks(st, Token) for st in styles))


PLAIN = _plain_classes()


def visible(text: str) -> str:
    """``text`` with controls and bidi overrides as escapes (what the page shows of names and lines)."""
    return _INVISIBLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def css() -> str:
    """Pygments' colours for ``.code``: its default style, and monokai when the OS asks for dark."""
    light = HtmlFormatter(style=STYLES[0]).get_style_defs(".code")
    dark = HtmlFormatter(style=STYLES[1]).get_style_defs(".code")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def highlighted(path: str, lines: list[str], symbol_url) -> list[Markup]:
    """Each of ``lines`` (a file's, with their newlines) as HTML: Pygments' token classes, each
    identifier a link to ``symbol_url(name)``. One element per line, in order."""
    text = "".join(lines)
    out: list[list[str]] = [[]]
    links: dict[str, str] = {}
    classes: dict = {}
    for ttype, value in _tokens(path, text):
        cls = classes.get(ttype)
        if cls is None:
            cls = classes[ttype] = _css_class(ttype)
        for i, piece in enumerate(value.split("\n")):
            if i:
                out.append([])
            if piece:
                out[-1].append(_piece(piece, cls, ttype, links, symbol_url))
    return [Markup("".join(parts)) for parts in out[:len(lines)]] + [Markup("")] * (len(lines) - len(out))


def _tokens(path: str, text: str):
    if len(text) > MAX_COLOURED_CHARS:
        return [(Token.Text, text)]
    return _lexer(path, text[:2048]).get_tokens(text)


def _lexer(path: str, head: str):
    """A lexer for ``path`` (by its name, then its content), keeping every line as it is."""
    options = {"stripnl": False, "ensurenl": False, "tabsize": 0}
    try:
        return get_lexer_for_filename(path, **options)
    except ClassNotFound:
        try:
            return guess_lexer_for_filename(path, head, **options)
        except ClassNotFound:
            return _text_lexer()


@lru_cache(maxsize=1)
def _text_lexer():
    from pygments.lexers.special import TextLexer

    return TextLexer(stripnl=False, ensurenl=False)


def _css_class(ttype) -> str:
    """Pygments' short class for ``ttype``, "" for one that looks like plain text."""
    if ttype in Whitespace:
        return ""
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    cls = STANDARD_TYPES[ttype]
    return "" if cls in PLAIN else cls


def _piece(value: str, cls: str, ttype, links: dict[str, str], symbol_url) -> str:
    shown = html.escape(visible(value), quote=True)
    if ttype in Name and ttype not in Name.Builtin and len(value) >= MIN_LINKED and value.isidentifier():
        href = links.get(value)
        if href is None:
            href = links[value] = html.escape(symbol_url(value), quote=True)
        return f'<a class="{cls} name" href="{href}">{shown}</a>' if cls else f'<a class="name" href="{href}">{shown}</a>'
    return f'<span class="{cls}">{shown}</span>' if cls else shown


def marked_spans(text: str, spans: list[tuple[int, int]]) -> Markup:
    """``text`` escaped, its ``spans`` (``[start, end)`` byte offsets into the line, as grep gives them:
    :func:`~codii_sql.text.char_spans`) in ``<mark>``; control characters shown as escapes."""
    chars = char_spans(text, spans)
    text = utf8_safe(text)  # a byte that is not UTF-8 as U+FFFD: one character either way
    out, at = [], 0
    for start, end in chars:
        if end > start:
            out += [html.escape(visible(text[at:start]), quote=True),
                    f"<mark>{html.escape(visible(text[start:end]), quote=True)}</mark>"]
            at = end
    out.append(html.escape(visible(text[at:]), quote=True))
    return Markup("".join(out))


def marked(text: str, terms: list[str]) -> Markup:
    """``text`` escaped, each word or identifier part that matches one of ``terms`` in ``<mark>``, as
    :func:`~codii_sql.text.term_spans` finds them (``Header`` in ``parseHeader``)."""
    shown = visible(text)
    out, at = [], 0
    for a, b in term_spans(shown, [t.lower() for t in terms]):
        out += [html.escape(shown[at:a], quote=True), f"<mark>{html.escape(shown[a:b], quote=True)}</mark>"]
        at = b
    out.append(html.escape(shown[at:], quote=True))
    return Markup("".join(out))


def path_url(path: str) -> str:
    """A relative path as URL path segments (every character that is not a plain one quoted)."""
    return urllib.parse.quote(path, safe="/")
