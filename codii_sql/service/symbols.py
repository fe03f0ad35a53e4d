"""Symbols for agents: definitions by name (from the index, small ones parsed now); uses are in :mod:`.references`."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.chunking import Source, read_source, source_definitions
from ..ingest.config import size_cap
from ..search.budget import page
from ..text import decode_source
from . import boundary
from .builds import ensure_index
from .stored import stored_lines
from .status import not_indexed, open_store, scan_rules
from .symbol_rows import symbol_rows

#: Longest signature line shown (characters); a longer one ends in "…".
SIGNATURE_CHARS = 200
#: Definitions find_symbol returns at most.
MAX_DEFINITIONS = 100
#: Files holding the name's last part parsed on demand at most (a few ms each).
PARSED_FILES = 40
#: What separates the parts of a qualified name (and generic parameters).
_SEPARATORS = re.compile(r"[.:#/<>]")
#: Bracket depth changes, for annotation arguments that span lines.
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
#: The kinds of definitions the chunker names (ingest/chunking/grammars.py), and of the declarations
#: outlines add (ingest/chunking/declarations.py).
KINDS = ("function", "method", "class", "type", "macro", "constant", "variable")
#: Symbols with the name's last part read at most (a very common name such as ``get`` in a huge index).
CANDIDATE_CAP = 5_000
_HOW = {0: "exact", 1: "qualified", 2: "prefix"}
ROLE_ORDER = {"source": 0, "test": 2}
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
                fileset: boundary.FileSet | None = None, mentions: bool = True, update: bool = False,
                under: str | None = None) -> dict:
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
    passes its cached one). ``mentions`` false parses only the files whose chunk symbols hold the
    name, not those whose text mentions it (find_references parses the files it lists itself).
    ``update`` brings the index up to date first, as a CLI search does (building it if missing;
    lexical only), and a note says when it could not. ``under`` (a subfolder, relative POSIX) keeps its
    files alone, as a search from that folder does.

    Raises:
        UsageError: an empty name, a limit out of range, a negative offset, a max_tokens below 1.
        NotIndexedError: no index.
    """
    wanted = normal_name(name or "")
    if not wanted.strip("."):
        raise UsageError("the symbol name is empty", "pass a name such as parse_header or Session.send")
    if not 1 <= limit <= MAX_DEFINITIONS:
        raise UsageError(f"must be between 1 and {MAX_DEFINITIONS}", field="limit")
    check_page(offset, max_tokens)
    kind = kind.strip().lower() if kind else None
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")
    fresh = ensure_index(codebase, update=True, vectors=False) if update and not codebase.alone else None
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    needle = (name_parts(wanted) or [wanted])[-1]
    budget = max(PARSED_FILES, limit)
    with open_store(codebase) as store:
        rows = symbol_rows(store, needle, kind or None, CANDIDATE_CAP, prefix=prefix)
        files = store.rows("symbol_files", {"fts": _every_part(wanted), "hits": 20 * budget,
                                            "files": budget + 1}) if mentions else []
        wordy = mentions and not prefix and re.search(r"\w", needle)
        declared = store.rows("symbol_files", {"fts": _declared(needle), "hits": 20 * budget,
                                               "files": budget + 1}) if wordy else []
    if under and under.strip("/"):
        inside = under.strip("/") + "/"
        rows, files, declared = ([r for r in got if r["path"].startswith(inside)] for got in (rows, files, declared))
    # Parse the files of matching chunk symbols first, then those that seem to declare the name
    # (#define kmalloc, type Foo: the kernel's container_of.h ranked below thousands of files using it),
    # then the text matches; at most ``budget``.
    near = [r for r in rows if _match(normal_name(r["symbol"]), wanted, prefix) is not None]
    every = {r["path"]: r for r in [*near, *declared, *files]}
    candidates = dict(list(every.items())[:budget])
    parsed = parsed_definitions(reader(codebase, fileset), candidates, kind)
    rows = [r for r in rows if r["path"] not in parsed] + [d for defs in parsed.values() for d in defs]
    found = []
    for r in rows:
        how = _match(normal_name(r["symbol"]), wanted, prefix)
        if how is None and "." in wanted:  # pkg.module.func: the file's module path qualifies it too
            how = _match(f"{_module(r['path'])}.{normal_name(r['symbol'])}", wanted, False) and 1
        if how is not None:
            found.append((how, ROLE_ORDER.get(r["role"], 1), _declared_only(r), len(r["symbol"]), r["path"], r))
    found.sort(key=lambda item: item[:5])
    # One place once: `typedef struct cJSON {...} cJSON` is a struct and a typedef of the same lines.
    first: dict[tuple, tuple] = {}
    for item in found:
        r = item[-1]
        first.setdefault((r["path"], r["start_line"], r["end_line"], r["symbol"]), item)
    found = list(first.values())
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
    if codebase.alone or fresh:
        out["note"] = "; ".join(filter(None, (out.get("note"), ALONE_NOTE if codebase.alone else fresh.what)))
    return out


#: What symbol lookups of an index alone say.
ALONE_NOTE = "read from the index's stored chunks: the source is not here"


def check_page(offset: int, max_tokens: int | None) -> None:
    """Raise UsageError for a negative ``offset`` or a ``max_tokens`` below 1."""
    if offset < 0:
        raise UsageError("must be 0 or more", field="offset")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError("must be 1 or more", field="max_tokens")


def name_parts(name: str) -> list[str]:
    """The parts of a (qualified) name: ``Session.send``, ``Type::method``, ``pkg/mod``, ``Foo<T>``."""
    return [p for p in _SEPARATORS.split(name) if p]


def _every_part(wanted: str) -> str:
    """An FTS5 expression for the files holding every part of ``wanted`` (``Widget7.run``: both
    words; a module path's parts match the path column), so that a qualified name narrows the
    files parsed for small definitions."""
    parts = name_parts(wanted) or [wanted]
    return "{content symbol path}: (" + " AND ".join('"' + p.replace('"', '""') + '"' for p in parts) + ")"


def _declared_only(row: dict) -> bool:
    """Whether a function row only declares it (a header's prototype, an abstract or interface method:
    one line ending in ``;``): the definition with its body comes first (`symbol tcp_retransmit_timer`
    listed include/net/tcp.h's prototype above net/ipv4/tcp_timer.c's function)."""
    if row["kind"] not in ("function", "method") or row["start_line"] != row["end_line"]:
        return False
    text = row.get("signature") or row.get("first_content") or ""
    return text.rstrip().endswith(";")


def _declared(needle: str) -> str:
    """An FTS5 expression for the chunks that seem to declare ``needle`` (a macro, type, constant,
    variable or typedef; the words are stemmed as the index's are): files to parse first."""
    name = '"' + needle.replace('"', '""') + '"'
    phrases = " OR ".join(f'"{word} {name[1:-1]}"' for word in ("define", "type", "const", "var", "static", "let"))
    return f"{{content}}: ({phrases} OR NEAR(typedef {name}, 8) OR NEAR(final {name}, 3))"


def parsed_definitions(read: Callable[[str], tuple[str, Source]], files: dict[str, dict],
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


def normal_name(symbol: str) -> str:
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
    private name (``#compute(x) {``), not a comment: the first body line was shown as its signature;
    in C and C++ it opens a directive (``#define kmalloc(...)`` is a macro's signature)."""
    if line.startswith("#") and (language in _HASH_NAMES and not line.startswith("#!") or language in ("c", "cpp")):
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
