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
* Other text (and a failed parse) is cut into token-bounded line windows that overlap by up
  to ``max_tokens // 4`` word pieces, a few lines (kind ``text``).
* Merge rule: neighbouring whole units with the same parent (an import block and the function
  after it, a class's closing brace and its last method) are merged while the merged chunk
  fits ``max_tokens`` and either side is below ``max_tokens // 8`` word pieces (about three
  lines of code): a one-line chunk is a poor search result. A merged chunk holds at most one
  definition, so every function keeps its own symbol (a search for a one-line function's name
  must name that function); it takes that definition's kind and symbol.
* A single line above ``max_tokens`` (minified code) is cut into pieces on character
  boundaries, preferring word boundaries; these chunks share the line number and have
  distinct byte ranges.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import tree_sitter
import tree_sitter_language_pack

from codii_sql.models import wordpiece
from codii_sql.languages import AST_LANGUAGES

#: Stored in the index; bump whenever the chunks produced for the same input change (the next
#: build then re-chunks every file, reusing the vectors of unchanged chunk texts).
#: 2: a window split no longer leaves a tiny last piece (a lone ``)`` of a long signature).
#: 3: JS/TS assignments of functions are definitions; Markdown setext headings start sections.
CHUNKER_VERSION = 3

#: ``max_tokens`` default: the model's 256-piece window minus room for the path/symbol header
#: the embedder may prepend to each chunk.
DEFAULT_MAX_TOKENS = wordpiece.MAX_TOKENS - 16

TokenCounter = Callable[[list[str]], list[int]]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a file.

    Attributes:
        start_line: first line, 1-based inclusive.
        end_line: last line, 1-based inclusive.
        start_byte: offset of the first byte in ``text.encode("utf-8")``, inclusive.
        end_byte: offset in the same bytes, exclusive.
        kind: ``function``, ``method``, ``class``, ``module``, ``section`` or ``text``.
        symbol: qualified name (``Session.resolve_redirects``, Markdown ``Install > Linux``)
            or ``None`` for module-level code and text windows.
        content: the file's lines ``start_line..end_line`` with their line breaks, i.e.
            ``text.encode()[start_byte:end_byte].decode()``; a part of one line when that line
            alone exceeds the token budget.
    """

    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    kind: str
    symbol: str | None
    content: str


# --- grammars -------------------------------------------------------------------------------


def _text(node: tree_sitter.Node) -> str:
    return " ".join(node.text.decode("utf-8", "replace").split())


def _field_name(node: tree_sitter.Node) -> str | None:
    name = node.child_by_field_name("name")
    return _text(name) if name is not None else None


def _first_child_name(*types: str) -> Callable[[tree_sitter.Node], str | None]:
    """Name from the first named child of one of ``types`` (grammars without a ``name`` field)."""
    def name(node: tree_sitter.Node) -> str | None:
        for child in node.named_children:
            if child.type in types:
                return _text(child)
        return None
    return name


#: Values that make a JS/TS variable or assignment a definition.
_JS_FUNCTION_VALUES = frozenset({
    "arrow_function", "function_expression", "function", "generator_function", "class"})

#: Parts of an assignment target that no one types when searching: ``X.prototype.m`` is
#: ``X.m`` (the name an ES2015 class method gets, and ``m`` or ``X.m`` then both find it),
#: ``this.m = function`` inside ``function X`` is ``X.m`` (the parent adds the ``X``).
_JS_SILENT_PARTS = frozenset({"prototype", "this"})


def _js_variable_name(node: tree_sitter.Node) -> str | None:
    """``const f = () => {}``: a definition only if its single declarator binds a function/class."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None or value.type not in _JS_FUNCTION_VALUES:
        return None
    return _field_name(declarators[0])


def _js_target_parts(node: tree_sitter.Node) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; ``None`` for computed targets (``a[k]``, ``f().x``)."""
    parts: list[str] = []
    while node.type == "member_expression":
        prop = node.child_by_field_name("property")
        if prop is None or prop.type not in ("property_identifier", "private_property_identifier"):
            return None
        parts.append(_text(prop))
        node = node.child_by_field_name("object")
        if node is None:
            return None
    if node.type not in ("identifier", "this"):
        return None
    return [_text(node)] + parts[::-1]


def _js_assignment_name(node: tree_sitter.Node) -> str | None:
    """``res.send = function send() {}`` (an expression statement): a definition when it assigns
    a function or class to a name or member; named by the target (``res.send``)."""
    expression = node.named_children[0] if node.named_child_count else None
    if expression is None or expression.type != "assignment_expression":
        return None
    target, value = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    # ``res.type = res.contentType = function type()``: the first target is the main name.
    while value is not None and value.type == "assignment_expression":
        value = value.child_by_field_name("right")
    if target is None or value is None or value.type not in _JS_FUNCTION_VALUES:
        return None
    parts = _js_target_parts(target)
    if parts is None:
        return None
    own = _field_name(value)
    if parts in (["module", "exports"], ["exports"]) and own:
        return own  # ``module.exports = function debounce()``: searched for as ``debounce``
    return ".".join(p for p in parts if p not in _JS_SILENT_PARTS) or None


def _go_method_name(node: tree_sitter.Node) -> str | None:
    """``func (s *Server) Start()`` -> ``Server.Start``."""
    method = _field_name(node)
    receiver = node.child_by_field_name("receiver")
    stack = [receiver] if receiver is not None else []
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return f"{_text(current)}.{method}"
        stack.extend(reversed(current.named_children))
    return method


def _go_type_name(node: tree_sitter.Node) -> str | None:
    """A ``type`` declaration is a definition when it declares exactly one type."""
    specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
    return _field_name(specs[0]) if len(specs) == 1 else None


def _c_function_name(node: tree_sitter.Node) -> str | None:
    """Follow ``declarator`` fields through pointer/function declarators to the identifier."""
    current = node.child_by_field_name("declarator")
    while current is not None:
        inner = current.child_by_field_name("declarator")
        if inner is None:
            return _text(current)
        current = inner
    return None


def _c_type_name(node: tree_sitter.Node) -> str | None:
    """``struct s {...}`` with a body; an anonymous one takes its ``typedef`` name."""
    if node.child_by_field_name("body") is None:
        return None
    name = _field_name(node)
    parent = node.parent
    if name is None and parent is not None and parent.type == "type_definition":
        declarator = parent.child_by_field_name("declarator")
        name = _text(declarator) if declarator is not None else None
    return name


def _impl_name(node: tree_sitter.Node) -> str | None:
    target = node.child_by_field_name("type")
    return _text(target) if target is not None else None


@dataclass(frozen=True, slots=True)
class _Span:
    """A definition found in the tree, not yet nested: bytes ``start..end`` decide the nesting,
    0-based rows ``head..last`` are its lines (without the comments above it)."""

    start: int
    end: int
    head: int
    last: int
    kind: str
    name: str


#: Heading level of a setext underline; ATX levels come from the ``atx_hN_marker`` child.
_SETEXT_LEVELS = {"setext_h1_underline": 1, "setext_h2_underline": 2}


def _heading_level(heading: tree_sitter.Node) -> int:
    """1..6 for ``#``..``######``, 1 for a ``===`` and 2 for a ``---`` underline."""
    for child in heading.children:
        if child.type in _SETEXT_LEVELS:
            return _SETEXT_LEVELS[child.type]
        if child.type.startswith("atx_h") and child.type.endswith("_marker"):
            return int(child.type[len("atx_h")])
    return 1


def _heading_container(heading: tree_sitter.Node) -> tree_sitter.Node:
    """The document, block quote or list item holding the heading (sections are skipped)."""
    node = heading.parent
    while node.type == "section" and node.parent is not None:
        node = node.parent
    return node


def _markdown_spans(root: tree_sitter.Node) -> list[_Span]:
    """One section per heading, up to the next heading of the same or a higher level in the
    same container (document, block quote, list item) or to the container's end.

    The grammar's ``section`` nodes follow ATX headings only: a setext heading is a plain
    child of the section before it. So sections are rebuilt from the headings of both styles,
    the way the grammar builds them for ATX.
    """
    by_container: dict[int, tuple[tree_sitter.Node, list[tree_sitter.Node]]] = {}
    for heading in _capture("markdown", ("atx_heading", "setext_heading"), root):
        container = _heading_container(heading)
        by_container.setdefault(container.id, (container, []))[1].append(heading)
    return [span for container, headings in by_container.values()
            for span in _container_sections(container, headings)]


def _container_sections(container: tree_sitter.Node,
                        headings: list[tree_sitter.Node]) -> list[_Span]:
    """The sections of one container's headings. A heading without text ends sections like
    any other but is no definition: its lines stay with the enclosing section."""
    ends = [(h, h.start_byte, h.start_point[0] - 1, _heading_level(h))
            for h in sorted(headings, key=lambda h: h.start_byte)]
    ends.append((None, container.end_byte, _last_row(container), 0))
    spans: list[_Span] = []
    open_: list[tuple[int, tree_sitter.Node, str]] = []  # (level, heading, name), outermost first
    for heading, end, last, level in ends:
        while open_ and open_[-1][0] >= level:
            _, opener, name = open_.pop()
            row = opener.start_point[0]
            spans.append(_Span(opener.start_byte, end, row, max(last, row), "section", name))
        content = heading.child_by_field_name("heading_content") if heading is not None else None
        if content is not None and _text(content):
            open_.append((level, heading, _text(content)))
    return spans


@dataclass(frozen=True)
class _Grammar:
    """How to find definitions in one tree-sitter grammar (node types found by parsing samples).

    ``defs`` maps a node type to its kind (``function`` becomes ``method`` inside a class);
    ``names`` overrides the default ``name``-field lookup and may reject a node (``None``);
    ``wrappers`` are parents that belong to the definition (decorators, ``export``,
    ``template<>``); ``prefixes`` are node types kept with the definition below them when they
    sit on their own lines (comments, Rust ``#[attributes]``). ``spans`` replaces the lookup
    by node type where definitions are no nodes of their own (Markdown sections).
    """

    defs: dict[str, str]
    names: dict[str, Callable[[tree_sitter.Node], str | None]] = field(default_factory=dict)
    wrappers: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ("comment",)
    separator: str = "."
    module_kind: str = "module"
    spans: Callable[[tree_sitter.Node], list[_Span]] | None = None


_JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "lexical_declaration": "function", "variable_declaration": "function",
    "class_declaration": "class", "method_definition": "function",
    "expression_statement": "function",
}
_JS_NAMES = {"lexical_declaration": _js_variable_name, "variable_declaration": _js_variable_name,
             "expression_statement": _js_assignment_name}
_TS_DEFS = _JS_DEFS | {
    "abstract_class_declaration": "class", "interface_declaration": "class",
    "enum_declaration": "class",
}
_C_TYPES = {"struct_specifier": "class", "union_specifier": "class", "enum_specifier": "class"}
_C_NAMES = {"function_definition": _c_function_name} | dict.fromkeys(_C_TYPES, _c_type_name)
_KOTLIN_NAME = _first_child_name("type_identifier", "simple_identifier")

_GRAMMARS: dict[str, _Grammar] = {
    "python": _Grammar(
        {"function_definition": "function", "class_definition": "class"},
        wrappers=frozenset({"decorated_definition"})),
    "javascript": _Grammar(_JS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "typescript": _Grammar(_TS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "tsx": _Grammar(_TS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "go": _Grammar(
        {"function_declaration": "function", "method_declaration": "method",
         "type_declaration": "class"},
        {"method_declaration": _go_method_name, "type_declaration": _go_type_name}),
    "rust": _Grammar(
        {"function_item": "function", "impl_item": "class", "trait_item": "class",
         "struct_item": "class", "enum_item": "class", "union_item": "class",
         "macro_definition": "function"},
        {"impl_item": _impl_name},
        prefixes=("line_comment", "block_comment", "attribute_item")),
    "java": _Grammar(
        {"class_declaration": "class", "interface_declaration": "class",
         "enum_declaration": "class", "record_declaration": "class",
         "annotation_type_declaration": "class", "method_declaration": "function",
         "constructor_declaration": "function"},
        prefixes=("line_comment", "block_comment")),
    "c": _Grammar({"function_definition": "function"} | _C_TYPES, _C_NAMES,
                  frozenset({"type_definition"})),
    "cpp": _Grammar(
        {"function_definition": "function", "class_specifier": "class"} | _C_TYPES,
        _C_NAMES | {"class_specifier": _c_type_name},
        frozenset({"type_definition", "template_declaration"})),
    "csharp": _Grammar(
        {"class_declaration": "class", "struct_declaration": "class",
         "interface_declaration": "class", "enum_declaration": "class",
         "record_declaration": "class", "method_declaration": "function",
         "constructor_declaration": "function", "destructor_declaration": "function",
         "operator_declaration": "function", "local_function_statement": "function"}),
    "ruby": _Grammar(
        {"class": "class", "module": "class", "method": "function",
         "singleton_method": "function"}),
    "php": _Grammar(
        {"class_declaration": "class", "interface_declaration": "class",
         "trait_declaration": "class", "enum_declaration": "class",
         "function_definition": "function", "method_declaration": "function"}),
    "kotlin": _Grammar(
        {"class_declaration": "class", "object_declaration": "class",
         "function_declaration": "function", "secondary_constructor": "function"},
        {"class_declaration": _KOTLIN_NAME, "object_declaration": _KOTLIN_NAME,
         "function_declaration": _KOTLIN_NAME, "secondary_constructor": lambda _: "constructor"},
        prefixes=("line_comment", "multiline_comment")),
    "swift": _Grammar(
        {"class_declaration": "class", "protocol_declaration": "class",
         "function_declaration": "function", "init_declaration": "function",
         "deinit_declaration": "function"},
        {"init_declaration": lambda _: "init", "deinit_declaration": lambda _: "deinit"}),
    "bash": _Grammar({"function_definition": "function"}),
    "markdown": _Grammar({}, prefixes=(), separator=" > ", module_kind="section",
                         spans=_markdown_spans),
}

assert set(_GRAMMARS) == AST_LANGUAGES

_thread_state = threading.local()


def _parser(language: str) -> tree_sitter.Parser:
    """A parser per thread and language: a tree-sitter parser must not parse on two threads."""
    parsers = _thread_state.__dict__.setdefault("parsers", {})
    if language not in parsers:
        parsers[language] = tree_sitter_language_pack.get_parser(language)
    return parsers[language]


_query_lock = threading.Lock()
_queries: dict[tuple[str, tuple[str, ...]], tree_sitter.Query] = {}


def _query(language: str, node_types: tuple[str, ...]) -> tree_sitter.Query:
    """Compiled ``[(t1) (t2) ...] @n`` query; queries are immutable and shared by threads."""
    key = (language, node_types)
    with _query_lock:
        if key not in _queries:
            source = "[" + " ".join(f"({t})" for t in node_types) + "] @n"
            _queries[key] = tree_sitter.Query(
                tree_sitter_language_pack.get_language(language), source)
        return _queries[key]


def _capture(language: str, node_types: tuple[str, ...],
             root: tree_sitter.Node) -> list[tree_sitter.Node]:
    if not node_types:
        return []
    return tree_sitter.QueryCursor(_query(language, node_types)).captures(root).get("n", [])


# --- lines ----------------------------------------------------------------------------------


class _Lines:
    """The file as lines (with their ``\\n``), their byte offsets and word-piece counts.

    Tokens are counted once per non-blank line in one batch; the count of a line range is the
    sum of its lines' counts. That is exact for BERT WordPiece, which never joins word pieces
    across whitespace, so a line break is always a piece boundary.
    """

    def __init__(self, text: str, count_tokens: TokenCounter):
        parts = text.split("\n")
        self.lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        self.byte_starts = list(itertools.accumulate(
            (len(line.encode("utf-8")) for line in self.lines), initial=0))
        # Indentation holds no word pieces; stripped, repeated lines (``}``, ``return None``)
        # are counted once, which saves ~15-20% of the tokenizer time on Python code.
        stripped = [line.strip() for line in self.lines]
        self.blank = [not s for s in stripped]
        distinct = list(dict.fromkeys(s for s in stripped if s))
        counts = dict(zip(distinct, count_tokens(distinct))) if distinct else {}
        self.tokens = [counts.get(s, 0) for s in stripped]
        self._cumulative = list(itertools.accumulate(self.tokens, initial=0))

    def __len__(self) -> int:
        return len(self.lines)

    def count(self, first: int, last: int) -> int:
        """Word pieces in lines ``first..last`` (0-based, inclusive)."""
        return self._cumulative[last + 1] - self._cumulative[first]

    def trim(self, first: int, last: int) -> tuple[int, int]:
        """The range without its leading and trailing blank lines (``first > last`` if empty)."""
        while first <= last and self.blank[first]:
            first += 1
        while last >= first and self.blank[last]:
            last -= 1
        return first, last


@dataclass(slots=True)
class _Piece:
    """A future chunk: lines ``first..last`` (0-based), or part of one line if ``span``."""

    first: int
    last: int
    kind: str
    symbol: str | None
    tokens: int
    is_def: bool = False
    mergeable: bool = True
    span: tuple[int, int, str] | None = None  # (start byte, end byte, content) of a line part


@dataclass(slots=True)
class _Def:
    """A definition: 0-based line range ``first..last`` including decorators and comments."""

    first: int
    last: int
    head: int  # first line of the node itself, which must not be shared with a sibling
    kind: str
    symbol: str
    children: list[_Def]


# --- splitting ------------------------------------------------------------------------------

# Cut a long line at most this many characters before the even cut point to land on a word
# boundary; farther back the pieces would get uneven.
_WORD_BOUNDARY_SEARCH = 64


def _cut_evenly(line: str, parts: int) -> list[str]:
    """``line`` in ``parts`` near-equal pieces, each cut moved back after a non-word character."""
    cuts = [0]
    for k in range(1, parts):
        cut = len(line) * k // parts
        for back in range(cut, max(cut - _WORD_BOUNDARY_SEARCH, cuts[-1] + 1), -1):
            if not line[back - 1].isalnum():
                cut = back
                break
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(len(line))
    return [line[a:b] for a, b in itertools.pairwise(cuts)]


class _Chunker:
    """Chunks one file; holds the lines and the budget shared by every step."""

    def __init__(self, text: str, max_tokens: int, count_tokens: TokenCounter):
        if max_tokens < 8:
            raise ValueError(f"max_tokens must be at least 8, got {max_tokens}")
        self.lines = _Lines(text, count_tokens)
        self.text = text
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        self.tiny = max_tokens // 8

    # -- shared

    def line_parts(self, i: int, kind: str, symbol: str | None) -> list[_Piece]:
        """Line ``i`` (over the budget by itself) cut into token-bounded character pieces."""
        parts: list[tuple[str, int]] = []
        for part, tokens in self._split_long(self.lines.lines[i], self.lines.tokens[i]):
            # Whitespace has no word pieces: glue it to a neighbour rather than emit it alone.
            if parts and (not part.strip() or not parts[-1][0].strip()):
                parts[-1] = (parts[-1][0] + part, parts[-1][1] + tokens)
            else:
                parts.append((part, tokens))
        pieces, offset = [], self.lines.byte_starts[i]
        for part, tokens in parts:
            size = len(part.encode("utf-8"))
            pieces.append(_Piece(i, i, kind, symbol, tokens, mergeable=False,
                                 span=(offset, offset + size, part)))
            offset += size
        return pieces

    def _split_long(self, line: str, tokens: int) -> list[tuple[str, int]]:
        # Aim at 90% of the budget so that most first guesses fit; re-cut the ones that don't.
        parts = _cut_evenly(line, max(2, math.ceil(tokens / (0.9 * self.max_tokens))))
        out: list[tuple[str, int]] = []
        for part, n in zip(parts, self.count_tokens(parts)):
            if n <= self.max_tokens or len(part) == 1:
                out.append((part, n))
            else:
                out.extend(self._split_long(part, n))
        return out

    def windows(self, first: int, last: int, kind: str, symbol: str | None) -> list[_Piece]:
        """Non-overlapping token-bounded pieces of lines ``first..last``.

        A window is cut at its last blank line when that keeps at least half of it, so that
        pieces of a long function end between groups of statements rather than inside one.
        """
        lines, pieces = self.lines, []
        i, last = lines.trim(first, last)
        while i <= last:
            if lines.tokens[i] > self.max_tokens:
                pieces += self.line_parts(i, kind, symbol)
                i = lines.trim(i + 1, last)[0]
                continue
            j, total, cut = i, 0, None
            while j <= last and total + lines.tokens[j] <= self.max_tokens:
                total += lines.tokens[j]
                if lines.blank[j]:
                    cut = j
                j += 1
            keep_cut = j <= last and cut is not None and 2 * (cut - i) >= j - i
            end = cut - 1 if keep_cut else j - 1
            if j <= last and lines.count(j, last) < self.tiny:
                end = min(self._halfway(i, last), j - 1)  # a tiny rest would be a junk chunk: split evenly
            a, b = lines.trim(i, end)
            pieces.append(_Piece(a, b, kind, symbol, lines.count(a, b), mergeable=False))
            i = lines.trim(end + 1, last)[0]
        return pieces

    def _halfway(self, first: int, last: int) -> int:
        """The line ending the most even split (by tokens) of lines ``first..last`` into two
        pieces of at most ``max_tokens`` each; ``last`` when there is none."""
        total, best, best_gap = self.lines.count(first, last), last, None
        for k in range(first, last):
            head = self.lines.count(first, k)
            if head <= self.max_tokens and total - head <= self.max_tokens:
                gap = abs(2 * head - total)
                if best_gap is None or gap < best_gap:
                    best, best_gap = k, gap
        return best

    def chunks(self, pieces: list[_Piece]) -> list[Chunk]:
        """The public records: 1-based lines, byte offsets, content sliced from the lines."""
        out = []
        for p in pieces:
            if p.span is not None:
                start, end, content = p.span
            else:
                start, end = self.lines.byte_starts[p.first], self.lines.byte_starts[p.last + 1]
                content = "".join(self.lines.lines[p.first:p.last + 1])
            out.append(Chunk(p.first + 1, p.last + 1, start, end, p.kind, p.symbol, content))
        return out

    # -- text windows

    def text_windows(self) -> list[_Piece]:
        """Overlapping line windows over the whole file (kind ``text``)."""
        lines, overlap, pieces = self.lines, self.max_tokens // 4, []
        i, last = lines.trim(0, len(lines) - 1)
        while i <= last:
            if lines.tokens[i] > self.max_tokens:
                pieces += self.line_parts(i, "text", None)
                i = lines.trim(i + 1, last)[0]
                continue
            j, total = i, 0
            while j <= last and total + lines.tokens[j] <= self.max_tokens:
                total += lines.tokens[j]
                j += 1
            a, b = lines.trim(i, j - 1)
            pieces.append(_Piece(a, b, "text", None, lines.count(a, b)))
            if j > last:
                break
            # Step back over the window's last lines, up to `overlap` pieces, leaving room for
            # line j so that the next window always gets past this one.
            room = min(overlap, self.max_tokens - lines.tokens[j])
            k, shared = j, 0
            while k - 1 > i and shared + lines.tokens[k - 1] <= room:
                k -= 1
                shared += lines.tokens[k]
            i = lines.trim(k, last)[0]
        return pieces

    # -- AST layout

    def layout(self, first: int, last: int, children: list[_Def], kind: str,
               symbol: str | None) -> list[_Piece]:
        """Pieces of lines ``first..last`` owned by a unit of ``kind``/``symbol``.

        Children (sorted) are laid out by :meth:`place`; the lines between them belong to the
        owner. A child sharing a line with an earlier sibling is not separated (chunks are
        whole lines and must not overlap): its lines stay with the owner. The owner's header
        (a class's signature, docstring and fields before its first method) is never merged
        into a child, so that the unit keeps a chunk under its own kind and symbol.
        """
        pieces: list[_Piece] = []
        cursor = first
        for child in children:
            if child.head < cursor or child.last > last:
                continue
            child.first = max(child.first, cursor)
            pieces += self.gap(cursor, child.first - 1, kind, symbol)
            pieces += self.place(child)
            cursor = child.last + 1
        pieces += self.gap(cursor, last, kind, symbol)
        if symbol is not None and pieces and not pieces[0].is_def:
            pieces[0].mergeable = False
        return self.merge(pieces)

    def gap(self, first: int, last: int, kind: str, symbol: str | None) -> list[_Piece]:
        first, last = self.lines.trim(first, last)
        if first > last or not any(ch.isalnum() for line in self.lines.lines[first:last + 1] for ch in line):
            # A lone `};` after a split definition: nothing to find, yet it ranked for any query.
            return []
        tokens = self.lines.count(first, last)
        if tokens <= self.max_tokens:
            return [_Piece(first, last, kind, symbol, tokens)]
        return self.windows(first, last, kind, symbol)

    def place(self, d: _Def) -> list[_Piece]:
        tokens = self.lines.count(d.first, d.last)
        if tokens <= self.max_tokens:
            return [_Piece(d.first, d.last, d.kind, d.symbol, tokens, is_def=True)]
        # A one-line definition cannot be divided by line: go straight to line parts.
        children = d.children if d.first < d.last else []
        if not children:
            return self.windows(d.first, d.last, d.kind, d.symbol)
        pieces = self.layout(d.first, d.last, children, d.kind, d.symbol)
        for piece in pieces:  # merging stays among siblings: never across the parent's border
            piece.mergeable = False
        return pieces

    def merge(self, pieces: list[_Piece]) -> list[_Piece]:
        """Apply the merge rule of the module docstring to consecutive sibling pieces."""
        out: list[_Piece] = []
        group: list[_Piece] = []
        for piece in pieces:
            size = sum(p.tokens for p in group)
            if (group and piece.mergeable and group[-1].mergeable
                    and not (piece.is_def and any(p.is_def for p in group))
                    and size + piece.tokens <= self.max_tokens
                    and min(size, piece.tokens) < self.tiny):
                group.append(piece)
                continue
            if group:
                out.append(self._join(group))
            group = [piece]
        if group:
            out.append(self._join(group))
        return out

    def _join(self, group: list[_Piece]) -> _Piece:
        if len(group) == 1:
            return group[0]
        defs = [p for p in group if p.is_def]
        named = defs[0] if defs else group[0]
        first, last = group[0].first, group[-1].last
        return _Piece(first, last, named.kind, named.symbol, self.lines.count(first, last),
                      is_def=bool(defs))


# --- definitions from the syntax tree -------------------------------------------------------


def _own_line_rows(lines: _Lines, nodes: list[tree_sitter.Node]) -> set[int]:
    """Rows of ``nodes`` (comments, attributes) that hold nothing else: no code before or after."""
    rows: set[int] = set()
    data = [line.encode("utf-8") for line in lines.lines] if nodes else []
    for node in nodes:
        (sr, sc), (er, ec) = node.start_point, node.end_point
        if ec == 0 and er > sr:
            er, ec = er - 1, len(data[er - 1])
        if er >= len(data) or data[sr][:sc].strip() or data[er][ec:].strip():
            continue
        rows.update(range(sr, er + 1))
    return rows


def _last_row(node: tree_sitter.Node) -> int:
    """Last row holding the node's text (a node ending with its newline ends at column 0)."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _node_spans(language: str, root: tree_sitter.Node) -> list[_Span]:
    """Definitions found by node type (``grammar.defs``), each with its wrappers' lines."""
    grammar = _GRAMMARS[language]
    spans = []
    for node in _capture(language, tuple(grammar.defs), root):
        name = grammar.names.get(node.type, _field_name)(node)
        if not name:
            continue
        outer = node
        while outer.parent is not None and outer.parent.type in grammar.wrappers:
            outer = outer.parent
        spans.append(_Span(node.start_byte, node.end_byte, outer.start_point[0],
                           _last_row(outer), grammar.defs[node.type], name))
    return spans


def _definitions(language: str, root: tree_sitter.Node, lines: _Lines) -> list[_Def]:
    """The top-level definitions of the tree, each with its nested ones, sorted by line."""
    grammar = _GRAMMARS[language]
    prefix_rows = _own_line_rows(lines, _capture(language, grammar.prefixes, root))
    spans = grammar.spans(root) if grammar.spans is not None else _node_spans(language, root)
    top: list[_Def] = []
    stack: list[tuple[int, _Def]] = []  # (end byte, definition) of the enclosing definitions
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and stack[-1][0] <= span.start:
            stack.pop()
        parent = stack[-1][1] if stack else None
        first = span.head
        while first - 1 in prefix_rows:
            first -= 1
        kind = span.kind
        if kind == "function" and parent is not None and parent.kind == "class":
            kind = "method"
        symbol = span.name if parent is None else f"{parent.symbol}{grammar.separator}{span.name}"
        d = _Def(first, span.last, span.head, kind, symbol, [])
        (parent.children if parent is not None else top).append(d)
        stack.append((span.end, d))
    return top


def _ast_pieces(chunker: _Chunker, language: str) -> list[_Piece]:
    """Pieces from the syntax tree; raises ``RecursionError`` on absurdly nested definitions."""
    lines = chunker.lines
    tree = _parser(language).parse(chunker.text.encode("utf-8"))
    definitions = _definitions(language, tree.root_node, lines)
    kind = _GRAMMARS[language].module_kind
    return chunker.layout(0, len(lines) - 1, definitions, kind, None)


def chunk_text(text: str, language: str | None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
               count_tokens: TokenCounter = wordpiece.count_tokens) -> list[Chunk]:
    """Split ``text`` into chunks of whole lines, following the rules of the module docstring.

    Args:
        text: the decoded file (see :func:`codii_sql.text.decode_source`); any line endings.
        language: a name from :func:`codii_sql.languages.detect_language`, or ``None``.
            Languages outside :data:`~codii_sql.languages.AST_LANGUAGES` get line windows.
        max_tokens: upper bound on ``count_tokens([chunk.content])`` of every chunk, in word
            pieces (default: the model's 256 minus 16 for a header); at least 8.
        count_tokens: word pieces of each text of a batch. The chunker counts each line once
            and adds lines up, so the counter must be additive over lines (true for WordPiece).
    Returns:
        list[Chunk]: sorted by position. AST chunks never overlap and cover every line with a
        letter or digit; text windows overlap. Empty for blank text.
    Raises:
        ValueError: if ``max_tokens < 8``.
    """
    chunker = _Chunker(text, max_tokens, count_tokens)
    if language in AST_LANGUAGES:
        try:
            return chunker.chunks(_ast_pieces(chunker, language))
        except RecursionError:
            pass  # pathological nesting: line windows below still index the file
    return chunker.chunks(chunker.text_windows())
