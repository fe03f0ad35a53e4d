"""Laying lines out as chunks: token-bounded windows, definitions placed among their gaps, the merge rule."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

TokenCounter = Callable[[list[str]], list[int]]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a file.

    Attributes:
        start_line: first line, 1-based inclusive.
        end_line: last line, 1-based inclusive.
        start_byte: offset of the first byte in ``text.encode("utf-8")``, inclusive.
        end_byte: offset in the same bytes, exclusive.
        kind: ``function``, ``method``, ``class``, ``module``, ``imports`` (:mod:`.imports`), ``section``, ``license`` or ``text``.
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


#: Characters a word piece is taken to cover at most, whatever the tokenizer says: BERT makes one [UNK]
#: of any word over 100 characters, so a line of 800,000 'A's counted 1 and a new user's search printed
#: an 800 KB chunk. 16 binds on no line of ordinary code (measured: see the commit that set it).
MAX_CHARS_PER_PIECE = 16


@dataclass(frozen=True, slots=True)
class ChunkSizes:
    """Chunk sizes in characters (``.codii.yaml``'s ``max_chunk_size`` and ``min_chunk_size``): a
    chunk holds at most ``max_chars`` (and still at most the word-piece budget); pieces under
    ``min_chars`` join a neighbour by the merge rule (instead of pieces under an eighth of the
    budget). None: the word-piece budget alone decides."""

    max_chars: int | None = None
    min_chars: int | None = None


class Lines:
    """The file as lines (with their ``\\n``), their byte offsets and their costs.

    A line's cost (``tokens``) is its word pieces, counted once per non-blank line in one batch;
    with a character budget (``max_chars`` filling ``max_tokens``), at least its share of that
    budget, so that a range within ``max_tokens`` is within both. The cost of a line range is the
    sum of its lines' costs. That is exact for BERT WordPiece, which never joins word pieces across
    whitespace, so a line break is always a piece boundary.
    """

    def __init__(self, text: str, count_tokens: TokenCounter, max_tokens: int = 0, max_chars: int | None = None):
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
        if max_chars:
            self.tokens = [max(n, char_cost(line, max_tokens, max_chars)) for n, line in zip(self.tokens, self.lines)]
        else:  # a word of over 100 characters is one [UNK] piece: it must not make a chunk of any length
            self.tokens = [max(n, -(-len(s) // MAX_CHARS_PER_PIECE)) for n, s in zip(self.tokens, stripped)]
        self._cumulative = list(itertools.accumulate(self.tokens, initial=0))
        self._chars = list(itertools.accumulate(map(len, self.lines), initial=0))

    def __len__(self) -> int:
        return len(self.lines)

    def count(self, first: int, last: int) -> int:
        """The cost (word pieces) of lines ``first..last`` (0-based, inclusive)."""
        return self._cumulative[last + 1] - self._cumulative[first]

    def chars(self, first: int, last: int) -> int:
        """Characters in lines ``first..last`` (0-based, inclusive)."""
        return self._chars[last + 1] - self._chars[first]

    def trim(self, first: int, last: int) -> tuple[int, int]:
        """The range without its leading and trailing blank lines (``first > last`` if empty)."""
        while first <= last and self.blank[first]:
            first += 1
        while last >= first and self.blank[last]:
            last -= 1
        return first, last


@dataclass(slots=True)
class Piece:
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
class Definition:
    """A definition: 0-based line range ``first..last`` including decorators and comments."""

    first: int
    last: int
    head: int  # first line of the node itself, which must not be shared with a sibling
    kind: str
    symbol: str
    children: list[Definition]
    #: Adds to a type defined elsewhere (a Rust ``impl``): a tiny header (``impl<'a> Foo<'a> {``)
    #: joins its first member, since ``struct Foo`` is the chunk a search for ``Foo`` should find.
    extends: bool = False


# Cut a long line at most this many characters before the even cut point to land on a word
# boundary; farther back the pieces would get uneven.
_WORD_BOUNDARY_SEARCH = 64


def _cut_evenly(line: str, parts: int) -> list[str]:
    """``line`` in ``parts`` near-equal pieces, each cut moved back after a character no identifier
    holds (``_`` and ``$`` do: a cut after ``alpha_`` split ``alpha_beta`` over two pieces, and refs,
    which reads pieces, missed it and found ``beta``)."""
    cuts = [0]
    for k in range(1, parts):
        cut = len(line) * k // parts
        for back in range(cut, max(cut - _WORD_BOUNDARY_SEARCH, cuts[-1] + 1), -1):
            if not (line[back - 1].isalnum() or line[back - 1] in "_$"):
                cut = back
                break
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(len(line))
    return [line[a:b] for a, b in itertools.pairwise(cuts)]


def char_cost(text: str, max_tokens: int, max_chars: int) -> int:
    """``text``'s share of a budget of ``max_tokens`` that ``max_chars`` characters fill, rounded up."""
    return -(-len(text) * max_tokens // max_chars)


class Layout:
    """Chunks one file; holds the lines and the budget shared by every step (``sizes``: see :class:`ChunkSizes`)."""

    def __init__(self, text: str, max_tokens: int, count_tokens: TokenCounter, sizes: ChunkSizes = ChunkSizes()):
        if max_tokens < 8:
            raise ValueError(f"max_tokens must be at least 8, got {max_tokens}")
        self.lines = Lines(text, count_tokens, max_tokens, sizes.max_chars)
        self.text = text
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        if sizes.max_chars:
            self.count_tokens = lambda parts: [max(n, char_cost(p, max_tokens, sizes.max_chars))
                                               for p, n in zip(parts, count_tokens(parts), strict=True)]
        else:
            self.count_tokens = lambda parts: [max(n, -(-len(p.strip()) // MAX_CHARS_PER_PIECE))
                                               for p, n in zip(parts, count_tokens(parts), strict=True)]
        self.tiny = max_tokens // 8
        self.min_chars = sizes.min_chars

    def small(self, tokens: int, first: int, last: int) -> bool:
        """Whether a piece of ``tokens`` over lines ``first..last`` is small enough to join a
        neighbour: under ``min_chars`` characters when set, else under an eighth of the budget."""
        return self.lines.chars(first, last) < self.min_chars if self.min_chars is not None else tokens < self.tiny

    # -- shared

    def line_parts(self, i: int, kind: str, symbol: str | None) -> list[Piece]:
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
            pieces.append(Piece(i, i, kind, symbol, tokens, mergeable=False,
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

    def windows(self, first: int, last: int, kind: str, symbol: str | None) -> list[Piece]:
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
            if j <= last and self.small(lines.count(j, last), j, last):
                end = min(self._halfway(i, last), j - 1)  # a tiny rest would be a junk chunk: split evenly
            a, b = lines.trim(i, end)
            pieces.append(Piece(a, b, kind, symbol, lines.count(a, b), mergeable=False))
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

    def chunks(self, pieces: list[Piece]) -> list[Chunk]:
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

    def text_windows(self) -> list[Piece]:
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
            pieces.append(Piece(a, b, "text", None, lines.count(a, b)))
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

    def layout(self, first: int, last: int, children: list[Definition], kind: str,
               symbol: str | None, extends: bool = False) -> list[Piece]:
        """Pieces of lines ``first..last`` owned by a unit of ``kind``/``symbol``.

        Children (sorted) are laid out by :meth:`place`; the lines between them belong to the
        owner. A child sharing a line with an earlier sibling is not separated (chunks are
        whole lines and must not overlap): its lines stay with the owner. The owner's header
        (a class's signature, docstring and fields before its first method) keeps a chunk under
        the unit's own kind and symbol, unless the unit ``extends`` a type defined elsewhere and
        the header is tiny: a bare ``impl Foo {`` line then joins the first member (it took top
        slots for any query naming ``Foo``, whose ``struct`` is the answer).
        """
        pieces: list[Piece] = []
        cursor = first
        for child in children:
            if child.head < cursor or child.last > last:
                continue
            child.first = max(child.first, cursor)
            pieces += self.gap(cursor, child.first - 1, kind, symbol)
            pieces += self.place(child)
            cursor = child.last + 1
        pieces += self.gap(cursor, last, kind, symbol)
        if symbol is not None and pieces and not pieces[0].is_def and not (
                extends and self.small(pieces[0].tokens, pieces[0].first, pieces[0].last)):
            pieces[0].mergeable = False
        return self.merge(pieces)

    def gap(self, first: int, last: int, kind: str, symbol: str | None) -> list[Piece]:
        first, last = self.lines.trim(first, last)
        if first > last or not any(ch.isalnum() for line in self.lines.lines[first:last + 1] for ch in line):
            # A lone `};` after a split definition: nothing to find, yet it ranked for any query.
            return []
        tokens = self.lines.count(first, last)
        if tokens <= self.max_tokens:
            return [Piece(first, last, kind, symbol, tokens)]
        return self.windows(first, last, kind, symbol)

    def place(self, d: Definition) -> list[Piece]:
        tokens = self.lines.count(d.first, d.last)
        if tokens <= self.max_tokens:
            return [Piece(d.first, d.last, d.kind, d.symbol, tokens, is_def=True)]
        if d.first < d.head and self.lines.count(d.first, d.head - 1) > self.max_tokens:
            # Comments above the node too long to ride along with it are text of their own: tokio's
            # 145-line doc comment of JoinHandle made seven windows named JoinHandle, read top-down
            # before the one holding `pub struct JoinHandle` (a new user's `--limit 5` showed no code).
            return self.windows(d.first, d.head - 1, "text", None) + self.place(dataclasses.replace(d, first=d.head))
        # A one-line definition cannot be divided by line: go straight to line parts. Only the first
        # part is named after it: the line may hold a minified bundle's other definitions (a new user's
        # 352 parts of one line were all "function f0", the one holding f4999 too).
        children = d.children if d.first < d.last else []
        if d.head == d.last:  # the node is one line, comments above it or not (a bundle's licence line)
            pieces, named = self.windows(d.first, d.last, d.kind, d.symbol), False
            for k, p in enumerate(pieces):
                if p.span is not None:
                    if named:
                        pieces[k] = dataclasses.replace(p, symbol=None, kind="text")
                    named = True
            return pieces
        if not children:
            return self.windows(d.first, d.last, d.kind, d.symbol)
        pieces = self.layout(d.first, d.last, children, d.kind, d.symbol, d.extends)
        for piece in pieces:  # merging stays among siblings: never across the parent's border
            piece.mergeable = False
        return pieces

    def merge(self, pieces: list[Piece]) -> list[Piece]:
        """Apply the merge rule of the module docstring to consecutive sibling pieces."""
        out: list[Piece] = []
        group: list[Piece] = []
        for piece in pieces:
            if self._joinable(group, piece):
                group.append(piece)
                continue
            if group:
                out.append(self._join(group))
            group = [piece]
        if group:
            out.append(self._join(group))
        return out

    def _joinable(self, group: list[Piece], piece: Piece) -> bool:
        """Whether ``piece`` joins ``group`` by the merge rule. Lines around a definition join it
        only when they are the small side: a file's imports and constants were merged into its
        first function when that function was tiny, and carried its name (``1-24 renderReason``)."""
        size = sum(p.tokens for p in group)
        if not (group and piece.mergeable and group[-1].mergeable) or size + piece.tokens > self.max_tokens:
            return False
        group_def = any(p.is_def for p in group)
        group_small = self.small(size, group[0].first, group[-1].last)
        if piece.is_def:
            return not group_def and group_small
        piece_small = self.small(piece.tokens, piece.first, piece.last)
        return piece_small if group_def else group_small or piece_small

    def _join(self, group: list[Piece]) -> Piece:
        if len(group) == 1:
            return group[0]
        defs = [p for p in group if p.is_def]
        named = defs[0] if defs else group[0]
        first, last = group[0].first, group[-1].last
        return Piece(first, last, named.kind, named.symbol, self.lines.count(first, last),
                      is_def=bool(defs))
