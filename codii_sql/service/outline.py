"""A file's outline for agents: its definitions nested as in the source, parsed now as the chunker parses it."""

from __future__ import annotations

from collections.abc import Callable

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.chunking.regions import FileDefinition, Source, read_source, source_definitions
from ..ingest.chunking.signatures import last_name, signature
from ..ingest.config import size_cap
from ..languages import AST_LANGUAGES
from ..search.budget import envelope_tokens, json_tokens
from ..text import decode_source
from . import boundary
from .status import not_indexed, scan_rules
from .stored import stored_lines, stored_path, stored_text
from .symbols import ALONE_NOTE


def reader(codebase: Codebase, fileset: boundary.FileSet | None) -> Callable[[str], tuple[str, Source]]:
    """How ``codebase``'s files are read, as the chunker reads them (a notebook as its cells, a
    component as its parts): through ``fileset`` (default: one under its current rules) from disk,
    or, for an index alone, as it keeps the file's text for grep (:func:`~.stored.stored_text`), else as its
    stored chunks hold them (:func:`~.stored.stored_lines`: the lines no chunk holds are empty).

    The returned function gives ``(the path relative to the root, the source)``, and raises
    UsageError for a file it may not or cannot read.
    """
    if codebase.alone:
        def stored(path: str) -> tuple[str, Source]:
            path = stored_path(path)
            whole = stored_text(codebase, path)  # the file's own text, where the index keeps it for grep
            if whole is not None:
                return path, read_source(path, whole)
            lines = stored_lines(codebase, path)
            return path, read_source(path, "".join(lines.get(n, "") + "\n" for n in range(1, max(lines) + 1)))
        return stored
    files = fileset or boundary.FileSet(codebase.root, scan_rules(codebase))

    def on_disk(path: str) -> tuple[str, Source]:
        f = files.check(path)
        data = boundary.read_bytes(f, size_cap(f.rel, files.rules["max_file_bytes"]))
        return f.rel, read_source(f.rel, decode_source(data))
    return on_disk


def outline(codebase: Codebase, file: str, fileset: boundary.FileSet | None = None, *, limit: int | None = None,
            start_line: int = 1, max_tokens: int | None = None) -> dict:
    """``{"codebase", "path", "language", "symbols": [{"kind", "symbol", "start_line", "end_line",
    "signature", "children": [...]}], "total"}``: the file's definitions nested as in the source, lines
    1-based inclusive (a definition's range includes its decorators and leading comments),
    ``signature`` its first line of code. The file is read now, so the outline is current.

    ``fileset`` (default: one under the codebase's current rules) decides which files may be read.
    ``limit`` definitions at most, from ``start_line`` on (a definition starting before it is left
    out, its later children kept), and with ``max_tokens`` (None: any) as many whole definitions as
    fit in that many tokens (:func:`~codii_sql.search.budget.json_tokens` of each without its
    children; at least one): a cut outline has ``truncated`` and ``next_start_line``, where the next
    call goes on (a generated file of 3,000 functions is ~35k tokens whole).

    Raises:
        UsageError: the boundary refuses the file (see :mod:`.boundary`), or a limit or max_tokens below 1.
        NotIndexedError: no index.
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    if limit is not None and limit < 1:
        raise UsageError("must be 1 or more", field="limit")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError("must be 1 or more", field="max_tokens")
    rel, source = reader(codebase, fileset)(file)
    nodes = [_node(d) for d in source_definitions(source)]
    # The answer's other fields and its note at their longest first (the second verifying helper's 400 came to
    # 445 and 465 tokens of JSON).
    envelope = envelope_tokens({"codebase": codebase.shown, "path": rel, "language": source.language,
                                "total": 10**6, "truncated": True, "next_start_line": 10**6})
    tokens = None if max_tokens is None else max(max_tokens - envelope, 1)
    kept, next_line = _window(nodes, start_line, {"count": limit or -1, "tokens": tokens, "kept": 0})
    out = {"codebase": codebase.shown, "path": rel, "language": source.language, "symbols": kept,
           "total": _count(nodes)}
    if codebase.alone:
        out["note"] = ALONE_NOTE
    if next_line is not None:
        cut = f"limit={limit}" if _count(kept) == limit else f"max_tokens={max_tokens}"
        out.update(truncated=True, next_start_line=next_line,
                   note=f"{_count(kept)} of the file's {out['total']} definitions, from line {start_line} (to fit "
                        f"{cut}): the rest starts at line {next_line}")
    if nodes and not kept and start_line > 1:  # past the last definition: none shown, and why (a new user's agent)
        last = max(n["start_line"] for n in nodes)
        out["note"] = f"no definition starts at or after line {start_line} (the last starts at line {last}): " \
                      "ask from start_line=1"
    if not nodes:
        parsed = any(r.language in AST_LANGUAGES for r in source.regions)  # a component's <script> too
        out["note"] = (f"no definitions found: {source.language or 'this file type'} is chunked by "
                       f"{'its syntax tree' if parsed else 'line windows'}, and none was recognised")
    return out


def _window(nodes: list[dict], start: int, left: dict) -> tuple[list[dict], int | None]:
    """The definitions of ``nodes`` (nested) from line ``start`` on while ``left`` allows them
    (``count``: definitions, negative for all; ``tokens``: the JSON of each without its children,
    None for any; the first one kept always fits), and the line where the first one left out
    starts (None: none was)."""
    kept: list[dict] = []
    for n in nodes:
        if n["start_line"] < start:  # before the window: only its children may be in it
            children, next_line = _window(n["children"], start, left)
            kept += children
        else:
            cost = json_tokens({**n, "children": []}) if left["tokens"] is not None else 0
            if left["count"] == 0 or (left["kept"] and left["tokens"] is not None and cost > left["tokens"]):
                return kept, n["start_line"]
            left["count"] -= 1
            left["kept"] += 1
            if left["tokens"] is not None:
                left["tokens"] -= cost
            children, next_line = _window(n["children"], start, left)
            kept.append({**n, "children": children})
        if next_line is not None:
            return kept, next_line
    return kept, None


def _count(nodes: list[dict]) -> int:
    return sum(1 + _count(n["children"]) for n in nodes)


def _node(d: FileDefinition) -> dict:
    return {"kind": d.kind, "symbol": d.symbol, "start_line": d.start_line, "end_line": d.end_line,
            "signature": signature(d.source, d.language, last_name(d.symbol)), "children": [_node(c) for c in d.children]}
