"""Files that hold other languages: notebook cells and component scripts, each chunked on its own.

A file is read as a :class:`Source`: the language stored for it and its regions, runs of text
in one language whose lines map to rows of the file. Most files are one region, the whole
file. Two kinds are split:

* Jupyter notebooks (``.ipynb``): one region per code or markdown cell, its decoded
  ``source`` (outputs, execution counts and metadata are not indexed). Code cells are in the
  notebook's language (``metadata.kernelspec.language`` or ``metadata.language_info.name``,
  default Python), which is also the file's language, so a search filtered to ``python``
  finds them. A cell line maps to the file row of the JSON string it comes from (nbformat
  writes each source line as a string on its own row; a one-string source maps every line
  to that row). A notebook that is not valid JSON, or has no ``cells``, is one region.
* Vue and Svelte components: one region per top-level ``<script>`` block, in TypeScript
  (``lang="ts"``), TSX (``lang="tsx"``) or JavaScript, and one region (line windows, no
  language) per run of the other rows (template, style, the script tags themselves).

Chunks and definitions of a region are given file lines (1-based inclusive). Chunk bytes
(``start_byte``/``end_byte``, offsets in the file's UTF-8 bytes) are exact for verbatim regions
(component parts, whole files); a notebook chunk's bytes are those of the file rows its lines
come from, since its ``content`` is decoded text that appears nowhere in the file as such.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from dataclasses import dataclass

import tree_sitter

from ...languages import detect_language
from ...models import wordpiece
from .chunker import DEFAULT_MAX_TOKENS, chunk_and_define, definitions
from .layout import Chunk, ChunkSizes, Definition, TokenCounter
from .nodes import parser_for

#: Kernel language names that are not grammar names.
_KERNEL_LANGUAGES = {"python3": "python", "c++": "cpp", "c#": "csharp", "sh": "bash", "shell": "bash"}
#: ``<script lang="...">`` values -> grammar; anything else is JavaScript.
_SCRIPT_LANGUAGES = {"ts": "typescript", "typescript": "typescript", "tsx": "tsx"}
_LANG_ATTRIBUTE = re.compile(r"""\blang\s*=\s*["']?([\w-]+)""")


@dataclass(frozen=True, slots=True)
class Region:
    """Text in one language: line ``i`` of ``text`` (split at ``\\n``) lies on file row
    ``rows[i]`` (0-based). ``offset`` is the file byte offset of ``text`` when ``text`` is a
    verbatim slice of the file, ``None`` when it is decoded (a notebook cell)."""

    language: str | None
    text: str
    rows: range | list[int]
    offset: int | None


@dataclass(frozen=True, slots=True)
class Source:
    """A file as the chunker reads it: ``language`` is stored for the file (and its chunks),
    ``regions`` are chunked one by one; ``row_starts[r]`` is the byte offset of file row ``r``
    (filled for notebooks only, whose chunk bytes are whole rows)."""

    language: str | None
    regions: list[Region]
    row_starts: list[int]

    @property
    def size(self) -> int:
        """Bytes of text that get indexed (UTF-8): a notebook's cells, not its outputs."""
        return sum(len(r.text.encode("utf-8")) for r in self.regions)


@dataclass(frozen=True, slots=True)
class FileDefinition:
    """A definition placed in its file: lines ``start_line..end_line`` (1-based inclusive, with
    its decorators and leading comments); ``source`` is its text from its own first line on, as
    lines (decoded for a notebook, whose file rows are JSON), in ``language`` (its region's)."""

    kind: str
    symbol: str
    start_line: int
    end_line: int
    source: list[str]
    children: list[FileDefinition]
    language: str


def read_source(path: str, text: str) -> Source:
    """The :class:`Source` of the file at ``path`` (``/``-separated) whose decoded text is ``text``."""
    language = detect_language(path, text[:256].split("\n", 1)[0], text)
    if language == "json" and path.lower().endswith(".ipynb"):
        notebook = _notebook(text)
        if notebook is not None:
            return notebook
    if language in ("vue", "svelte"):
        return Source(language, _component_regions(text, language), [])
    return Source(language, [Region(language, text, range(text.count("\n") + 1), 0)], [])


def index_source(source: Source, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 count_tokens: TokenCounter = wordpiece.count_tokens,
                 sizes: ChunkSizes = ChunkSizes()) -> tuple[list[Chunk], list[FileDefinition]]:
    """:func:`~.chunker.chunk_text` of every region (``sizes`` as there), in file lines and bytes,
    sorted by position (no chunk spans two regions), and :func:`source_definitions` of the same
    parses: what a build stores of a file."""
    chunks, found = [], []
    for region in source.regions:
        pieces, defs = chunk_and_define(region.text, region.language, max_tokens=max_tokens,
                                        count_tokens=count_tokens, sizes=sizes)
        chunks += [_placed(c, region, source.row_starts) for c in pieces]
        if defs:
            lines = region.text.split("\n")
            found += [_outlined(d, region.rows, lines, region.language) for d in defs]
    return sorted(chunks, key=lambda c: (c.start_line, c.start_byte)), sorted(found, key=lambda d: d.start_line)


def source_definitions(source: Source) -> list[FileDefinition]:
    """The definitions of every region as :func:`~.chunker.definitions` finds them, nested, in
    file lines, sorted by line."""
    found = []
    for region in source.regions:
        if region.language is not None:
            lines = region.text.split("\n")
            found += [_outlined(d, region.rows, lines, region.language)
                      for d in definitions(region.text, region.language)]
    return sorted(found, key=lambda d: d.start_line)


def _placed(chunk: Chunk, region: Region, row_starts: list[int]) -> Chunk:
    first, last = region.rows[chunk.start_line - 1], region.rows[chunk.end_line - 1]
    if region.offset is not None:
        start, end = region.offset + chunk.start_byte, region.offset + chunk.end_byte
    else:
        start, end = row_starts[first], row_starts[last + 1]
    return dataclasses.replace(chunk, start_line=first + 1, end_line=last + 1, start_byte=start, end_byte=end)


def _outlined(d: Definition, rows: range | list[int], lines: list[str], language: str) -> FileDefinition:
    return FileDefinition(d.kind, d.symbol, rows[d.first] + 1, rows[d.last] + 1, lines[d.head:d.last + 1],
                          [_outlined(c, rows, lines, language) for c in d.children], language)


def _row_starts(text: str) -> list[int]:
    """Byte offset (UTF-8) of each row of ``text``, and its length last."""
    sizes = [len(line.encode("utf-8")) + 1 for line in text.split("\n")]
    sizes[-1] -= 1  # the last row has no line break
    return list(itertools.accumulate(sizes, initial=0))


# -- notebooks

def _notebook(text: str) -> Source | None:
    """The cells of an nbformat 4 notebook, or ``None`` when ``text`` is no such JSON."""
    tree = parser_for("json").parse(text.encode("utf-8"))
    top = tree.root_node.named_children
    if tree.root_node.has_error or len(top) != 1 or top[0].type != "object":
        return None
    fields = _members(top[0])
    cells = fields.get("cells")
    if cells is None or cells.type != "array":
        return None
    language = _kernel_language(fields.get("metadata"))
    regions = []
    for cell in cells.named_children:
        region = _cell(cell, language) if cell.type == "object" else None
        if region is not None:
            regions.append(region)
    return Source(language, regions, _row_starts(text))


def _members(node: tree_sitter.Node) -> dict[str, tree_sitter.Node]:
    """``{key: value node}`` of a JSON object node."""
    out = {}
    for pair in node.named_children:
        key, value = pair.child_by_field_name("key"), pair.child_by_field_name("value")
        if pair.type == "pair" and key is not None and value is not None and key.type == "string":
            out[json.loads(key.text)] = value
    return out


def _kernel_language(metadata: tree_sitter.Node | None) -> str:
    """The grammar name of the notebook's language, from its ``metadata`` node; ``python`` if unnamed."""
    try:
        meta = json.loads(metadata.text) if metadata is not None else {}
        name = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
    except (ValueError, AttributeError):  # metadata of the wrong shape names no language
        name = None
    name = name.strip().lower() if isinstance(name, str) and name.strip() else "python"
    return _KERNEL_LANGUAGES.get(name, name)


def _cell(cell: tree_sitter.Node, language: str) -> Region | None:
    """A code cell in ``language`` or a markdown cell in Markdown; ``None`` for other cells."""
    fields = _members(cell)
    kind, source = fields.get("cell_type"), fields.get("source")
    if kind is None or source is None or kind.type != "string":
        return None
    cell_language = {"code": language, "markdown": "markdown"}.get(json.loads(kind.text))
    strings = source.named_children if source.type == "array" else [source]
    parts = [(_string(s), s.start_point[0]) for s in strings if s.type == "string"]
    if cell_language is None or not parts:
        return None
    return Region(cell_language, "".join(p for p, _ in parts), _line_rows(parts), None)


def _string(node: tree_sitter.Node) -> str:
    """A JSON string node's value; an escaped lone surrogate (``"\\ud800"``) becomes ``?``: it
    could not be stored as UTF-8."""
    return json.loads(node.text).encode("utf-8", "replace").decode("utf-8")


def _line_rows(parts: list[tuple[str, int]]) -> list[int]:
    """For the text ``"".join(parts)``, the row of each line: that of the part the line starts in."""
    rows, at_line_start = [], True
    for part, row in parts:
        if part:
            starts = part.count("\n") + at_line_start - part.endswith("\n")
            rows += [row] * starts
            at_line_start = part.endswith("\n")
    if at_line_start:  # the empty line after a final newline
        rows.append(parts[-1][1])
    return rows


# -- components

def _component_regions(text: str, language: str) -> list[Region]:
    """The top-level ``<script>`` blocks of a Vue or Svelte file, and the runs of rows between them."""
    data = text.encode("utf-8")
    starts = _row_starts(text)
    root = parser_for(language).parse(data).root_node
    regions, taken = [], set()
    for script in (n for n in root.named_children if n.type == "script_element"):
        region = _script(script, data, starts)
        if region is not None:
            regions.append(region)
            taken.update(row for row, line in zip(region.rows, region.text.split("\n")) if line.strip())
    rest = [row for row in range(len(starts) - 1) if row not in taken]
    for _, run in itertools.groupby(rest, key=lambda row, c=itertools.count(): row - next(c)):
        rows = list(run)
        first, end = starts[rows[0]], starts[rows[-1] + 1]
        regions.append(Region(None, data[first:end].decode("utf-8"), range(rows[0], rows[-1] + 1), first))
    return regions


def _script(script: tree_sitter.Node, data: bytes, starts: list[int]) -> Region | None:
    """The code of one ``<script>`` element (whole rows when its tags stand on rows of their own)."""
    tags = [c for c in script.children if c.type in ("start_tag", "end_tag")]
    if not tags or tags[0].type != "start_tag":
        return None
    start = tags[0].end_byte
    end = tags[-1].start_byte if tags[-1].type == "end_tag" else script.end_byte
    row = tags[0].end_point[0]
    if not data[start:starts[row + 1]].strip():  # nothing after the tag: code starts on the next row
        start, row = min(starts[row + 1], end), row + 1
    code = data[start:end]
    if not code.strip():
        return None
    match = _LANG_ATTRIBUTE.search(tags[0].text.decode("utf-8", "replace"))
    language = _SCRIPT_LANGUAGES.get(match.group(1).lower() if match else "", "javascript")
    text = code.decode("utf-8")
    return Region(language, text, range(row, row + text.count("\n") + 1), start)
