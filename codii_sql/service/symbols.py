"""Symbols for agents: definitions by name (from the index, small ones parsed now) and uses by name."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.chunking import Source, read_source, source_definitions
from ..ingest.config import size_cap
from ..languages import detect_language
from ..search.budget import json_tokens, page
from ..text import decode_source
from . import boundary
from .stored import stored_lines
from .status import not_indexed, open_store, scan_rules
from .symbol_rows import symbol_rows

#: Longest signature line shown (characters); a longer one ends in "…".
SIGNATURE_CHARS = 200
#: Definitions find_symbol returns at most.
MAX_DEFINITIONS = 100
#: Reference lines find_references returns at most, and the chunks it reads at most.
MAX_REFERENCES = 2_000
REFERENCE_CHUNKS = 5_000
#: Files find_references parses for definitions that find_symbol left unparsed (a few ms each).
REFERENCE_PARSED_FILES = 200
#: Files holding the name's last part parsed on demand at most (a few ms each).
PARSED_FILES = 40
#: What separates the parts of a qualified name (and generic parameters).
_SEPARATORS = re.compile(r"[.:#/<>]")
#: Bracket depth changes, for annotation arguments that span lines.
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
#: The kinds of definitions the chunker names (ingest/chunking/grammars.py).
KINDS = ("function", "method", "class")
#: Symbols with the name's last part read at most (a very common name such as ``get`` in a huge index).
CANDIDATE_CAP = 5_000
_HOW = {0: "exact", 1: "qualified", 2: "prefix"}
_ROLE_ORDER = {"source": 0, "test": 2}
#: What opens a comment line (or a docstring) in some language.
_COMMENT_MARKERS = ("#", "//", "/*", "*", "--", '"""', "'''")
#: Languages whose ``#`` opens a private class member's name.
_HASH_NAMES = frozenset({"javascript", "typescript", "tsx"})
#: Generic parameters (`Foo<'a>.bar`, `List<T>::get`): ignored on both sides of a comparison.
_GENERICS = re.compile(r"<[^<>]*>")


def reader(codebase: Codebase, fileset: boundary.FileSet | None) -> Callable[[str], tuple[str, Source]]:
    """How ``codebase``'s files are read, as the chunker reads them (a notebook as its cells, a
    component as its parts): through ``fileset`` (default: one under its current rules) from disk,
    or, for an index alone, as its stored chunks hold them (:func:`~.portable.stored_lines`: the
    lines no chunk holds are empty).

    The returned function gives ``(the path relative to the root, the source)``, and raises
    UsageError for a file it may not or cannot read.
    """
    if codebase.alone:
        def stored(path: str) -> tuple[str, Source]:
            lines = stored_lines(codebase, path)
            return path, read_source(path, "".join(lines.get(n, "") + "\n" for n in range(1, max(lines) + 1)))
        return stored
    files = fileset or boundary.FileSet(codebase.root, scan_rules(codebase))

    def on_disk(path: str) -> tuple[str, Source]:
        f = files.check(path)
        data = boundary.read_bytes(f, size_cap(f.rel, files.rules["max_file_bytes"]))
        return f.rel, read_source(f.rel, decode_source(data))
    return on_disk


def find_symbol(codebase: Codebase, name: str, *, kind: str | None = None, prefix: bool = False,
                limit: int = 20, offset: int = 0, max_tokens: int | None = None,
                fileset: boundary.FileSet | None = None) -> dict:
    """Definitions of ``name`` from the index: ``{"codebase", "name", "definitions": [{"path",
    "symbol", "kind", "start_line", "end_line", "signature", "role", "language", "match"}]}``,
    at most ``limit`` from the ``offset``-th (0-based) on, and with ``max_tokens`` (None: any) as
    many whole ones as fit in that many tokens (:func:`~codii_sql.search.budget.json_tokens` of
    each; at least one). A cut answer has ``truncated``, ``total`` (definitions found) and
    ``next_offset``, and its note says so.

    ``name`` is a symbol (``parse_header``), a qualified one (``Session.send``, ``pkg.mod.func``,
    ``Type::method``) or, with ``prefix``, its start. Generic parameters (``Parser<'a>``) and the
    separators ``::``/``#``/``.`` are normalised on both sides, so ``Parser.parse`` finds Rust's
    ``Parser<'a>.parse``. ``match`` is ``exact``, ``qualified`` (a symbol ending in ``.name``) or
    ``prefix``; exact first, then source before docs before tests, shorter symbols, path.
    Case-sensitive. Lines 1-based inclusive. ``fileset`` as for :func:`outline` (a long-lived face
    passes its cached one: a new one walks the tree once).

    Raises:
        UsageError: an empty name, a limit out of range, a negative offset, a max_tokens below 1.
        NotIndexedError: no index.
    """
    wanted = _normal(name or "")
    if not wanted.strip("."):
        raise UsageError("the symbol name is empty", "pass a name such as parse_header or Session.send")
    if not 1 <= limit <= MAX_DEFINITIONS:
        raise UsageError(f"must be between 1 and {MAX_DEFINITIONS}", field="limit")
    _check_page(offset, max_tokens)
    kind = kind.strip().lower() if kind else None
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    needle = (_parts(wanted) or [wanted])[-1]
    budget = max(PARSED_FILES, limit)
    with open_store(codebase) as store:
        rows = symbol_rows(store, needle, kind or None, CANDIDATE_CAP)
        files = store.rows("symbol_files", {"fts": _every_part(wanted), "hits": 20 * budget, "files": budget + 1})
    # Parse the files of matching chunk symbols first, then the text matches; at most ``budget``.
    near = [r for r in rows if _match(_normal(r["symbol"]), wanted, prefix) is not None]
    every = {r["path"]: r for r in [*near, *files]}
    candidates = dict(list(every.items())[:budget])
    parsed = _parsed(reader(codebase, fileset), candidates, kind)
    rows = [r for r in rows if r["path"] not in parsed] + [d for defs in parsed.values() for d in defs]
    found = []
    for r in rows:
        how = _match(_normal(r["symbol"]), wanted, prefix)
        if how is None and "." in wanted:  # pkg.module.func: the file's module path qualifies it too
            how = _match(f"{_module(r['path'])}.{_normal(r['symbol'])}", wanted, False) and 1
        if how is not None:
            found.append((how, _ROLE_ORDER.get(r["role"], 1), len(r["symbol"]), r["path"], r))
    found.sort(key=lambda item: item[:4])
    window = [{"path": r["path"], "symbol": r["symbol"], "kind": r["kind"], "start_line": r["start_line"],
               "end_line": r["end_line"],
               "signature": r.get("signature") or signature((r.get("first_content") or "").split("\n"), r["language"]),
               "role": r["role"], "language": r["language"], "match": _HOW[how]} for how, *_, r in found[offset:offset + limit]]
    defs = page(window, 0, limit, max_tokens)
    out = {"codebase": str(codebase.root), "name": name, "definitions": defs}
    qualified = needle != wanted
    if offset + len(defs) < len(found):
        cut = f"limit={limit}" if len(defs) == limit else f"max_tokens={max_tokens}"
        out.update(truncated=True, total=len(found), next_offset=offset + len(defs),
                   note=f"{len(found)} definitions found, {len(defs)} shown from offset {offset} (to fit {cut}): the "
                        f"rest from offset={offset + len(defs)}" + ("" if qualified else ", or pass a qualified name "
                                                                                       "(Class.method)"))
    elif len(every) > budget and len(defs) < limit and not qualified:  # small definitions are parsed, not read
        out["truncated"] = True
        out["note"] = (f"more than {budget} files hold {needle!r}: the {budget} likeliest were parsed for definitions; "
                       "a qualified name (Class.method) or a higher limit finds more")
    if not defs and found:
        out.update(total=len(found), note=f"offset {offset} is past the {len(found)} definitions found")
    elif not defs:
        out["note"] = (f"no {kind + ' ' if kind else 'definition '}named {name!r} in the index" + ("" if prefix else "; --prefix (MCP: prefix=true) "
                       "also finds symbols starting with it") + "; search finds uses and mentions")
    if codebase.alone:
        out["note"] = "; ".join(filter(None, (out.get("note"), ALONE_NOTE)))
    return out


#: What symbol lookups of an index alone say.
ALONE_NOTE = "read from the index's stored chunks: the source is not here"


def find_references(codebase: Codebase, name: str, *, limit: int = 200, offset: int = 0,
                    max_tokens: int | None = None, fileset: boundary.FileSet | None = None) -> dict:
    """Where the identifier ``name`` (its last part for a qualified name: ``send`` of
    ``Session.send``) is used: ``{"codebase", "name", "identifier", "files": [{"path", "role",
    "lines": [{"line", "text"}]}], "total", "total_files", "truncated"}``, exact on identifier boundaries, each
    occurrence's own 1-based line, its definitions' lines excluded. At most ``limit`` lines from
    the ``offset``-th (0-based, in the answer's order) on, and with ``max_tokens`` (None: any) as
    many whole lines as fit in that many tokens (:func:`~codii_sql.search.budget.json_tokens` of
    each line and its path; at least one); a cut answer has ``next_offset``, and its note says so.
    Lexical, from the indexed text: a same-named other thing counts too (the note says so).

    Raises:
        UsageError: a name that is no identifier, a limit out of range, a negative offset, a
            max_tokens below 1. NotIndexedError: no index.
    """
    if not 1 <= limit <= MAX_REFERENCES:
        raise UsageError(f"must be between 1 and {MAX_REFERENCES}", field="limit")
    _check_page(offset, max_tokens)
    ident = (_parts(_normal(name or "")) or [""])[-1]
    if not re.fullmatch(r"[\w$]+", ident):
        raise UsageError(f"{name!r} is not an identifier", "pass a name such as parse_header")
    # Every definition of the identifier, whatever its class: a definition is not a use.
    defined = find_symbol(codebase, ident, limit=MAX_DEFINITIONS, fileset=fileset)
    skip = {(d["path"], d["signature"]) for d in defined["definitions"]}
    word = re.compile(rf"(?<![\w$]){re.escape(ident)}(?![\w$])")
    with open_store(codebase) as store:
        chunks = store.rows("reference_chunks", {"fts": '{content}: "' + ident.replace('"', '""') + '"',
                                                 "cap": REFERENCE_CHUNKS})
    seen: dict[str, dict[int, str]] = {}
    roles = {}
    for c in chunks:
        roles[c["path"]] = c["role"]
        for i, line in enumerate(c["content"].split("\n")):
            text = line.strip()
            if word.search(line) and (c["path"], text[:SIGNATURE_CHARS]) not in skip:
                seen.setdefault(c["path"], {})[c["start_line"] + i] = text[:SIGNATURE_CHARS]
    order = sorted(seen, key=lambda p: (_ROLE_ORDER.get(roles[p], 1), p))
    _drop_definitions(seen, order, ident, {d["path"] for d in defined["definitions"]}, offset + limit,
                      reader(codebase, fileset), roles)
    every = [(path, n, t) for path in order for n, t in sorted(seen[path].items())]  # windows overlap: one per line
    # A line costs its JSON and its path (a listing shows the path on every line).
    shown = page(every, offset, limit, max_tokens, lambda use: json_tokens({"line": use[1], "text": use[2]}, plus=use[0]))
    files: list[dict] = []
    for path, n, t in shown:
        if not files or files[-1]["path"] != path:
            files.append({"path": path, "role": roles[path], "lines": []})
        files[-1]["lines"].append({"line": n, "text": t})
    out = {"codebase": str(codebase.root), "name": name, "identifier": ident, "files": files, "total": len(every),
           "total_files": len(seen), "truncated": offset + len(shown) < len(every),
           "note": "lexical: every use of the identifier on its word boundaries, whatever it refers to"}
    if out["truncated"]:
        cut = f"limit={limit}" if len(shown) == limit else f"max_tokens={max_tokens}"
        out["next_offset"] = offset + len(shown)
        out["note"] += (f"; {len(shown)} of {len(every)} lines shown from offset {offset} (to fit {cut}): the rest "
                        f"from offset={offset + len(shown)}")
    return out


def _check_page(offset: int, max_tokens: int | None) -> None:
    """Raise UsageError for a negative ``offset`` or a ``max_tokens`` below 1."""
    if offset < 0:
        raise UsageError("must be 0 or more", field="offset")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError("must be 1 or more", field="max_tokens")


def _parts(name: str) -> list[str]:
    """The parts of a (qualified) name: ``Session.send``, ``Type::method``, ``pkg/mod``, ``Foo<T>``."""
    return [p for p in _SEPARATORS.split(name) if p]


def _every_part(wanted: str) -> str:
    """An FTS5 expression for the files holding every part of ``wanted`` (``Widget7.run``: both
    words; a module path's parts match the path column), so that a qualified name narrows the
    files parsed for small definitions."""
    parts = _parts(wanted) or [wanted]
    return "{content symbol path}: (" + " AND ".join('"' + p.replace('"', '""') + '"' for p in parts) + ")"


def _drop_definitions(seen: dict[str, dict[int, str]], order: list[str], ident: str, parsed: set[str],
                      limit: int, read: Callable[[str], tuple[str, Source]], roles: dict[str, str]) -> None:
    """Remove from ``seen`` the lines that define ``ident`` in the files about to be shown that
    find_symbol did not parse (it parses its likeliest files only: in 5,000 files each defining
    ``run``, 4,960 definitions were listed as uses), at most :data:`REFERENCE_PARSED_FILES` of them."""
    shown, budget = 0, REFERENCE_PARSED_FILES
    for path in order:
        if shown >= limit or budget == 0:
            return
        if path not in parsed:
            budget -= 1
            info = {"language": detect_language(path), "role": roles[path]}
            for d in _parsed(read, {path: info}, None).get(path, []):
                if _parts(_normal(d["symbol"]))[-1:] == [ident]:
                    for line in range(d["start_line"], d["end_line"] + 1):
                        if seen[path].get(line) == d["signature"][:SIGNATURE_CHARS]:
                            del seen[path][line]
        shown += len(seen[path])


def _parsed(read: Callable[[str], tuple[str, Source]], files: dict[str, dict],
            kind: str | None) -> dict[str, list[dict]]:
    """``{path: definition rows}`` of the candidate ``files`` parsed now as the chunker parses them
    (every definition, however small, with its whole line range), those ``read`` can read (see
    :func:`reader`) and a grammar covers; the others keep their chunks' symbols."""
    out = {}
    for path, info in files.items():
        if not info["language"]:
            continue
        try:
            found = source_definitions(read(path)[1])
        except (UsageError, OSError):
            continue
        if not found:
            continue
        rows, stack = [], list(found)
        while stack:
            d = stack.pop()
            stack.extend(d.children)
            if kind is None or d.kind == kind:
                rows.append({"path": path, "symbol": d.symbol, "kind": d.kind, "start_line": d.start_line,
                             "end_line": d.end_line, "signature": signature(d.source, d.language),
                             "role": info["role"], "language": info["language"]})
        out[path] = rows
    return out


def _module(path: str) -> str:
    """``pkg/mod.py`` -> ``pkg.mod`` (``pkg/__init__.py``, ``pkg/index.js``, ``src/mod.rs`` -> ``pkg``, ``src``)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] in ("__init__", "index", "mod", "lib"):
        parts = parts[:-1]
    return ".".join(parts)


def _normal(symbol: str) -> str:
    """``symbol`` without generic parameters, with ``.`` for ``::`` and ``#``."""
    for _ in range(3):  # nested generics: Map<K, Vec<T>>
        symbol = _GENERICS.sub("", symbol)
    return symbol.replace("::", ".").replace("#", ".").strip()


def _match(symbol: str, wanted: str, prefix: bool) -> int | None:
    """0 exact, 1 qualified (``symbol`` ends in ``.wanted`` or ``/wanted``), 2 prefix, else None."""
    if symbol == wanted:
        return 0
    if symbol.endswith(("." + wanted, "/" + wanted)):
        return 1
    last = re.split(r"[./]", symbol)[-1]
    if prefix and (symbol.startswith(wanted) or last.startswith(wanted)):
        return 2
    return None


def signature(lines: list[str], language: str | None) -> str:
    """The first of a definition's ``lines`` (in ``language``) that is not a decorator, comment
    or blank. A line of annotations followed by code (Kotlin's ``@Throws(IOException::class) fun
    peek(): Token``) is the signature; an annotation whose arguments span lines (``@Component({``)
    is skipped to its closing line."""
    depth = 0  # open brackets of an annotation that goes on over lines
    for line in lines:
        stripped = line.strip()
        if depth:
            depth = max(0, depth + _depth(stripped))
            continue
        if stripped.startswith("@"):
            rest, depth = _after_annotations(stripped)
            if not rest:
                continue
            return _shown(stripped)
        if stripped.startswith("[") and stripped.endswith("]"):  # a C# attribute line: [Fact], [HttpGet("x")]
            continue
        if stripped and not _comment(stripped, language):
            return _shown(stripped)
    return ""


def _comment(line: str, language: str | None) -> bool:
    """Whether a stripped line opens with a comment marker; in JavaScript and TypeScript ``#`` opens a
    private name (``#compute(x) {``), not a comment: the first body line was shown as its signature."""
    if line.startswith("#") and language in _HASH_NAMES and not line.startswith("#!"):
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
