"""Split a source file into chunks of whole lines: AST units for code, sections for Markdown.

Rules (all sizes in word pieces of the embedding model, see :mod:`codii_sql.wordpiece`):

* Code in :data:`~codii_sql.languages.AST_LANGUAGES` is parsed with tree-sitter. Every
  definition (function, method, class-like type) spans whole lines, from its decorators and the
  own-line comments directly above it to its last line. A definition that fits ``max_tokens``
  is one chunk; a larger one is laid out like a file: its nested definitions become their own
  chunks (``Class.method``) and the lines between them chunks of the definition's own kind and
  symbol. A definition without nested definitions is cut into token-bounded line windows
  (preferring blank lines as cut points). Lines outside definitions are ``module`` chunks.
  AST chunks never overlap and cover every line that holds a letter or digit (a run of
  lines of punctuation alone, such as the ``};`` closing a split definition, is left out).
  JavaScript/TypeScript assignments of a function or class (``res.send = function ...``,
  ``X.prototype.m = () => ...``) are definitions named by their target (``res.send``, ``X.m``).
* Markdown is split at headings in the same way (kind ``section``, symbol ``A > B``); ATX
  (``#``, ``##``) and setext (a line underlined with ``===`` or ``---``) headings alike.
* SQL is split at its definitions (:mod:`.sql`): ``-- name:`` blocks, ``CREATE TABLE/VIEW/INDEX/
  TRIGGER...`` statements and the CTEs of ``WITH`` clauses.
* Other text (and a failed parse) is cut into token-bounded line windows that overlap by up
  to ``max_tokens // 4`` word pieces, a few lines (kind ``text``).
* Merge rule: neighbouring whole units with the same parent (an import line and the function
  after it, a class's closing brace and its last method) are merged while the merged chunk
  fits ``max_tokens`` and either side is below ``max_tokens // 8`` word pieces (about three
  lines of code): a one-line chunk is a poor search result. Lines around a definition join it
  only when they are that small side, so a file's preamble (imports, constants) stays a chunk
  of its own. A merged chunk holds at most one definition, so every function keeps its own
  symbol (a search for a one-line function's name must name that function); it takes that
  definition's kind and symbol.
* A licence header (the comments opening a file, when they name a copyright, licence or SPDX
  identifier) is a chunk of its own, kind ``license``, which ranking weighs low.
* A single line above ``max_tokens`` (minified code) is cut into pieces on character
  boundaries, preferring word boundaries; these chunks share the line number and have
  distinct byte ranges.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import tree_sitter

from ...languages import AST_LANGUAGES
from ...models import wordpiece
from .cmacros import MACRO_NAME, hide_attribute_macros, hide_cpp_macros, macro_call_spans
from .declarations import DECLARATIONS, kind_of
from .grammars import GRAMMARS, Grammar
from .imports import only_imports
from .layout import Chunk, ChunkSizes, Definition, Layout, Lines, Piece, TokenCounter
from .nodes import Span, capture, field_name, last_row, parser_for
from .rustmacros import macro_body_spans, macro_prefix_rows
from .swift import hide_directives
from .version import CHUNKER_VERSION  # noqa: F401 - the chunker's version is named with it


#: ``max_tokens`` default: the model's 256-piece window minus room for the path/symbol header
#: the embedder may prepend to each chunk.
DEFAULT_MAX_TOKENS = wordpiece.MAX_TOKENS - 16


def _own_line_rows(lines: Lines, nodes: list[tree_sitter.Node]) -> set[int]:
    """Rows of ``nodes`` (comments, attributes) that hold nothing else: no code before, nothing after but a
    ``//`` comment (``#[allow(clippy::x)] // why``: 30 of tokio's definitions lost their attributes and docs)."""
    rows: set[int] = set()
    data = [line.encode("utf-8") for line in lines.lines] if nodes else []
    for node in nodes:
        (sr, sc), (er, ec) = node.start_point, node.end_point
        if ec == 0 and er > sr:
            er, ec = er - 1, len(data[er - 1])
        if er >= len(data) or data[sr][:sc].strip() or data[er][ec:].strip() and not data[er][ec:].lstrip().startswith(b"//"):
            continue
        rows.update(range(sr, er + 1))
    return rows


#: Blank lines a doc comment (``/** ... */``: JSDoc, Javadoc, PHPDoc, KDoc, Doxygen) may leave before the
#: definition it documents and still be its own: commander writes every method's JSDoc, a blank line, then
#: the method, and each comment was a chunk of its own labelled with the class, above the method in ranks.
DOC_GAP_LINES = 1


def _doc_gaps(lines: Lines, nodes: list[tree_sitter.Node], prefix_rows: set[int]) -> set[int]:
    """The blank rows between an own-line ``/**`` comment and the line after it (at most
    :data:`DOC_GAP_LINES`), so that a definition there widens over them to its doc comment. Not after a
    comment opening the file (a file's or licence's header: ``/** @license ... */`` above the first
    function is the file's), nor before another comment or a blank line more."""
    gaps: set[int] = set()
    blank = lines.blank
    opening = next((i for i, b in enumerate(blank) if not b), 0)
    for node in nodes:
        start, end = node.start_point[0], last_row(node)
        if start == opening or start not in prefix_rows or not node.text.lstrip().startswith(b"/**"):
            continue
        gap = range(end + 1, end + 1 + DOC_GAP_LINES)
        after = gap.stop
        if after < len(blank) and all(blank[i] for i in gap) and not blank[after] and after not in prefix_rows:
            gaps.update(gap)
    return gaps


def _node_spans(language: str, root: tree_sitter.Node, declared: bool) -> tuple[list[Span], list[Span]]:
    """Definitions found by node type (``grammar.defs``), each with its wrappers' lines, and with
    ``declared`` the named declarations of :mod:`.declarations` (outlines and symbol look-ups, not
    chunks; one capture of the tree finds both), which never hide a prototype as a body does."""
    grammar = GRAMMARS[language]
    extra = DECLARATIONS.get(language, {}) if declared else {}
    spans, forward, declarations = [], [], []
    for node in capture(language, (*grammar.defs, *extra), root):
        if node.type in grammar.defs:
            names = [grammar.names.get(node.type, field_name)(node)]
        else:  # a declaration may name several (Go's `const a, b = 1, 2`, Java's `X = 1, Y = 2`)
            named = extra[node.type][1](node)
            names = [named] if isinstance(named, str) else named or []
        outer = node
        while outer.parent is not None and outer.parent.type in grammar.wrappers:
            outer = outer.parent
        for name in names:
            kind = None
            if isinstance(name, tuple):  # a declaration whose modifiers decide its kind
                name, kind = name
            if not name or (language in ("c", "cpp") and not _plausible_c_name(name)):
                continue
            if node.type in grammar.defs:
                spans.append(Span(node.start_byte, node.end_byte, outer.start_point[0], last_row(outer),
                                  grammar.defs[node.type], name, node.type in grammar.extensions))
                forward.append(node.type in grammar.forward)
            else:  # empty, at its end: inside a class, never a definition inside it (typedef struct n {...} n_t),
                # and nothing inside it (Python's `AA = BB = 1` ends both at one byte: BB was `AA.BB`)
                declarations.append(Span(node.end_byte, node.end_byte, outer.start_point[0], last_row(_accessors(outer)),
                                         kind or kind_of(language, node.type, name), name))
    if language in ("c", "cpp"):  # SYSCALL_DEFINE3(read, ...) { ... }: a call and a block to the grammar
        found = macro_call_spans(root)
        spans.extend(found)
        forward.extend([False] * len(found))
    if language == "rust":  # cfg_rt! { pub fn spawn_blocking ... }: a token tree to the grammar
        found, declared_inside = macro_body_spans(root, lambda body: _node_spans("rust", body, declared))
        spans.extend(found)
        forward.extend([False] * len(found))
        declarations.extend(declared_inside)
    bodies = {s.name for s, fwd in zip(spans, forward, strict=True) if not fwd}
    return [s for s, fwd in zip(spans, forward, strict=True) if not fwd or s.name not in bodies], declarations


def _accessors(node: tree_sitter.Node) -> tree_sitter.Node:
    """The last of a Kotlin property's ``get()``/``set()``, which the grammar gives as the property's next
    siblings (a helper's `AppContext.currentActivity` ended on its first line, before its getter), else ``node``."""
    last = node
    while node.type == "property_declaration" and (after := last.next_named_sibling) is not None \
            and after.type in ("getter", "setter"):
        last = after
    return last


#: Keywords a C/C++ declarator never names: tree-sitter's error recovery around unknown macros
#: (fmt's ``FMT_BEGIN_NAMESPACE``, ``FMT_EXPORT template <...> class``) made a "function namespace"
#: over a whole header and names of a doc comment and a class head.
_C_KEYWORDS = frozenset({"namespace", "template", "class", "struct", "union", "enum", "typedef", "extern",
                         "static", "inline", "const", "return", "using", "typename", "public", "private",
                         # an `else if` just after an `#if` block was a function `if` (pybind11's cast.h)
                         "if", "else", "for", "while", "do", "switch", "case", "try", "catch", "sizeof"})


#: A name's template arguments, which may hold white space.
_TEMPLATE_ARGUMENTS = re.compile(r"<.*>")
#: White space, which a C/C++ name holds only in ``operator new`` and template arguments.
_SPACE = re.compile(r"\s")


def _plausible_c_name(name: str) -> bool:
    """Whether ``name`` can be a C/C++ definition's name: no keyword, no white space (but ``operator
    new`` and template arguments), not longer than a line."""
    if name.startswith("operator"):
        return len(name) <= 40
    # a template's arguments are written with ", " (`type_caster<std::vector<Type, Alloc>>` was no definition)
    return name not in _C_KEYWORDS and len(name) <= 120 and _SPACE.search(_TEMPLATE_ARGUMENTS.sub("", name)) is None


def _definitions(language: str, root: tree_sitter.Node, lines: Lines,
                 declared: bool = False) -> tuple[list[Definition], list[Definition]]:
    """The top-level definitions of the tree a chunk is made of, each with its nested ones, sorted by
    line; and with ``declared`` the same with the named declarations of :mod:`.declarations` nested
    among them (what an outline lists), else an empty list."""
    grammar = GRAMMARS[language]
    prefixes = capture(language, grammar.prefixes, root)
    prefix_rows = _own_line_rows(lines, prefixes)
    prefix_rows |= _doc_gaps(lines, prefixes, prefix_rows)
    if language == "rust":
        prefix_rows |= macro_prefix_rows(root, grammar.prefixes)
    if grammar.spans is not None:
        spans, declarations = grammar.spans(root), []
    else:
        spans, declarations = _node_spans(language, root, declared)
    chunked = _nest(grammar, prefix_rows, spans)
    if not declared:
        return chunked, []
    return chunked, _nest(grammar, prefix_rows, spans + declarations) if declarations else chunked


#: Definitions nested deeper than this are no definitions of their own (their lines stay in the deepest kept
#: one): hand-written code nests far less, and a generated 500-deep file (a new user's) ran the recursive walks
#: of a definition's children (its outline, its symbol rows) out of Python's stack: the file was not indexed.
MAX_NESTING = 64


def _nest(grammar: Grammar, prefix_rows: set[int], spans: list[Span]) -> list[Definition]:
    """``spans`` as top-level definitions with their nested ones (a method in its class), each widened
    over the own-line comments and attributes above it (``prefix_rows``)."""
    top: list[Definition] = []
    stack: list[tuple[int, Definition]] = []  # (end byte, definition) of the enclosing definitions
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and stack[-1][0] <= span.start:
            stack.pop()
        if len(stack) >= MAX_NESTING:
            continue  # its lines stay its deepest kept ancestor's
        parent = stack[-1][1] if stack else None
        first = span.head
        while first - 1 in prefix_rows and (parent is None or first - 1 > parent.head):
            first -= 1
        kind = span.kind
        if kind == "function" and parent is not None and parent.kind == "class":
            kind = "method"
        symbol = span.name if parent is None else f"{parent.symbol}{grammar.separator}{span.name}"
        d = Definition(first, span.last, span.head, kind, symbol, [], span.extends)
        (parent.children if parent is not None else top).append(d)
        stack.append((span.end, d))
    return top


def definitions(text: str, language: str) -> list[Definition]:
    """The definitions of ``text`` as the chunker sees them, and the named declarations of
    :mod:`.declarations` (macros, type aliases, constants), nested (a class's methods are its
    ``children``), each with its 0-based line range, kind and qualified symbol; empty for a
    language without a grammar (see :data:`~codii_sql.languages.AST_LANGUAGES`) or Markdown.
    The same as :func:`chunk_and_define` gives with the chunks."""
    if language not in AST_LANGUAGES:
        return []
    layout = Layout(text, DEFAULT_MAX_TOKENS, lambda texts: [0] * len(texts))  # token counts unused
    tree = _parse(layout.text, language)
    try:
        return _definitions(language, tree.root_node, layout.lines, declared=True)[1]
    except RecursionError:
        return []


#: Phrases that make a file's opening comments a licence header: a copyright line (a year, (c) or
#: the sign), an SPDX tag, a grant or a licence's name; not the word "licence" alone (sql/search.sql's
#: parameter notes, which mention "a licence header chunk", became 7 licence chunks).
_LICENCE = re.compile(r"\bcopyright\b.{0,40}(\d{4}|\(c\)|©)|©\s*\d{4}|\(c\)\s*\d{4}|spdx-license-identifier"
                      r"|\blicensed\s+(under|to)\b|permission\s+is\s+hereby\s+granted|all\s+rights\s+reserved"
                      r"|\b(general\s+public|apache|mit|bsd|mozilla\s+public|eclipse\s+public)\s+licen[cs]e\b"
                      r"|\blicen[cs]e,?\s+version\s+\d", re.IGNORECASE)


def _licence_end(language: str, root: tree_sitter.Node, lines: Layout) -> int:
    """The last row (0-based) of the licence header opening the file, or -1 for none: the comment
    nodes before any code (a shebang line may come first), when they match :data:`_LICENCE`."""
    prefixes, last = GRAMMARS[language].prefixes, -1
    for node in root.named_children:
        if node.type not in prefixes:
            break
        last = last_row(node)
    if last < 0 or not _LICENCE.search("".join(lines.lines.lines[:last + 1])):
        return -1
    return last


def _rereads(language: str, data: bytes) -> Iterator[bytes]:
    """What a file the grammar could not read whole is read again as, in order (see :func:`_parse`): a C++ file
    without its macros, then without its attribute macros alone (hidden once for both); a C file without its
    attribute macros; a Swift file without its conditional compilation lines."""
    if language == "swift":
        yield hide_directives(data)
    elif language in ("c", "cpp"):
        attributes = hide_attribute_macros(data)
        if language == "cpp":
            yield hide_cpp_macros(attributes)
        yield attributes


def _parse(text: str, language: str) -> tree_sitter.Tree:
    """The syntax tree of ``text``; a C or C++ file the grammar could not read whole is read again without its
    attribute macros (:mod:`.cmacros`), when it has some, a C++ one first without its other macros too, a Swift
    one without its conditional compilation lines (:mod:`.swift`); such a
    tree is kept when it reads no less of the file and defines every name the first did, or when its errors
    cover at most a quarter of the first's bytes and it gains more names than it loses (the lost ones then
    the first's misreadings: pybind11's pytypes.h, 104,244 bytes of errors -> 53, lost a class named
    ``std::exception``)."""
    data = text.encode("utf-8")
    parser = parser_for(language)
    tree = parser.parse(data)
    if language in ("c", "cpp", "swift") and tree.root_node.has_error:
        tried, errors, before = {data}, _error_bytes(language, tree.root_node), None
        for hidden in _rereads(language, data):
            if hidden in tried:
                continue
            tried.add(hidden)
            # Kept when the grammar's errors cover no more of the file and it loses no name: hiding some of a
            # file's macros can lead error recovery astray (a Linux header's #else branch read as one error).
            other = parser.parse(hidden)
            fewer = _error_bytes(language, other.root_node)
            if fewer > errors:
                continue
            before = before or _named(language, tree.root_node)
            after = _named(language, other.root_node)
            lost = _lost(before, after, data, hidden)
            if not lost or 4 * fewer <= errors and len(after.keys() - before.keys()) > len(lost):
                return other
    return tree


def _named(language: str, root: tree_sitter.Node) -> dict[str, int]:
    """The names the tree defines, but those of macros, each with the byte its first definition starts at: a
    tree read without some macros must define them all (hiding some of a BPF test's `__success __retval(0)
    __flag(...)` lines lost its function)."""
    spans, declarations = _node_spans(language, root, True)
    named: dict[str, int] = {}
    for s in spans + declarations:
        if not MACRO_NAME.fullmatch(s.name.rsplit(".", 1)[0]):
            named.setdefault(s.name, s.start)
    return named


def _lost(before: dict[str, int], after: dict[str, int], data: bytes, hidden: bytes) -> set[str]:
    """The names of ``before`` not in ``after``, but those whose definition started in a hidden macro (the
    `type` of pybind11's `PYBIND11_TYPE_CASTER(type, ...)`, which the grammar read as a function)."""
    return {name for name, start in before.items()
            if name not in after and not hidden[start:start + 1] == b" " != data[start:start + 1]}


def _error_bytes(language: str, root: tree_sitter.Node) -> int:
    """How many bytes of the file the tree's ERROR nodes cover."""
    covered = end = 0
    for node in sorted(capture(language, ("ERROR",), root), key=lambda n: n.start_byte):
        if node.end_byte > end:
            covered += node.end_byte - max(node.start_byte, end)
            end = node.end_byte
    return covered


def _ast_pieces(layout: Layout, language: str, declared: bool) -> tuple[list[Piece], list[Definition]]:
    """Pieces from the syntax tree, and with ``declared`` the definitions :func:`definitions` gives
    (from the same parse); raises ``RecursionError`` on absurdly nested definitions."""
    lines = layout.lines
    tree = _parse(layout.text, language)
    definitions, outline = _definitions(language, tree.root_node, lines, declared)
    kind = GRAMMARS[language].module_kind
    licence = _licence_end(language, tree.root_node, layout) if kind == "module" else -1
    if definitions:  # never past a definition's own first line (SQL's "-- name:" header is a comment)
        licence = min(licence, definitions[0].head - 1)
    head = layout.windows(0, licence, "license", None) if licence >= 0 else []
    return head + layout.layout(licence + 1, len(lines) - 1, definitions, kind, None), outline


def chunk_text(text: str, language: str | None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
               count_tokens: TokenCounter = wordpiece.count_tokens, sizes: ChunkSizes = ChunkSizes()) -> list[Chunk]:
    """Split ``text`` into chunks of whole lines, following the rules of the module docstring.

    Args:
        text: the decoded file (see :func:`codii_sql.text.decode_source`); any line endings.
        language: a name from :func:`codii_sql.languages.detect_language`, or ``None``.
            Languages outside :data:`~codii_sql.languages.AST_LANGUAGES` get line windows.
        max_tokens: upper bound on ``count_tokens([chunk.content])`` of every chunk, in word
            pieces (default: the model's 256 minus 16 for a header); at least 8.
        count_tokens: word pieces of each text of a batch. The chunker counts each line once
            and adds lines up, so the counter must be additive over lines (true for WordPiece).
        sizes: chunk sizes in characters on top of ``max_tokens`` (see :class:`~.layout.ChunkSizes`).
    Returns:
        list[Chunk]: sorted by position. AST chunks never overlap and cover every line with a
        letter or digit; text windows overlap. Empty for blank text.
    Raises:
        ValueError: if ``max_tokens < 8``.
    """
    return _chunk(text, language, max_tokens, count_tokens, sizes, declared=False)[0]


def chunk_and_define(text: str, language: str | None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                     count_tokens: TokenCounter = wordpiece.count_tokens,
                     sizes: ChunkSizes = ChunkSizes()) -> tuple[list[Chunk], list[Definition]]:
    """:func:`chunk_text` and :func:`definitions` of ``text`` from one parse (what a build stores
    for symbol look-ups); arguments and errors as for :func:`chunk_text`."""
    return _chunk(text, language, max_tokens, count_tokens, sizes, declared=True)


def _chunk(text: str, language: str | None, max_tokens: int, count_tokens: TokenCounter, sizes: ChunkSizes,
           declared: bool) -> tuple[list[Chunk], list[Definition]]:
    layout = Layout(text, max_tokens, count_tokens, sizes)
    if language in AST_LANGUAGES:
        try:
            pieces, outline = _ast_pieces(layout, language, declared)
            return [dataclasses.replace(c, kind="imports") if c.kind == "module" and c.symbol is None
                    and only_imports(c.content, language) else c for c in layout.chunks(pieces)], outline
        except RecursionError:
            pass  # pathological nesting: line windows below still index the file
    return layout.chunks(layout.text_windows()), []
