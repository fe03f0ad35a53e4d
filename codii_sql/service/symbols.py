"""Symbols for agents: definitions by name, from the definitions a build stored; uses are in :mod:`.references`."""

from __future__ import annotations

import re

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.chunking.signatures import is_operator, name_parts, normal_name
from ..search.budget import page
from ..search.evidence import TYPE_DECLARATION_SUFFIXES
from ..search.staleness import StaleCheck
from ..storage.store import Store
from ..text import shown_bytes
from .builds import ensure_index
from .status import not_indexed, open_store, refuse_damaged

#: Definitions find_symbol returns at most.
MAX_DEFINITIONS = 100
#: The kinds of definitions the chunker names (ingest/chunking/grammars.py; Markdown's sections), and of
#: the declarations outlines add (ingest/chunking/declarations.py).
KINDS = ("function", "method", "class", "type", "macro", "constant", "variable", "section")
#: Definitions with the name's last part read at most (a name as common as ``init`` in a huge index).
CANDIDATE_CAP = 20_000
_HOW = {0: "exact", 1: "qualified", 2: "prefix", 3: "name"}
ROLE_ORDER = {"source": 0, "test": 2}
#: Files that only declare what other files define: Python's type stubs and TypeScript's declarations.
STUB_SUFFIXES = (".pyi", *TYPE_DECLARATION_SUFFIXES)
#: A Go method expression's receiver: ``(*FlagSet).`` or ``(FlagSet).``.
_GO_RECEIVER = re.compile(r"\(\*?\s*([A-Za-z_]\w*)\)\.")
#: An arity after a function's name (Erlang's and Elixir's docs write ``lists:foldl/3``, ``Enum.map/2``).
_ARITY = re.compile(r"(?<=\w)/\d+$")
#: What symbol lookups of an index alone say.
ALONE_NOTE = "read from what the index stores: the source is not here"


def find_symbol(codebase: Codebase, name: str, *, kind: str | None = None, prefix: bool = False,
                limit: int = 20, offset: int = 0, max_tokens: int | None = None, update: bool = False,
                under: str | None = None) -> dict:
    """Definitions of ``name`` from the index: ``{"codebase", "name", "definitions": [{"path",
    "symbol", "kind", "start_line", "end_line", "signature", "role", "language", "match", "stale"}]}``
    (``stale``: the file changed or went since the index took it, as a search result's; None for an
    index alone),
    at most ``limit`` from the ``offset``-th (0-based) on, and with ``max_tokens`` (None: any) as
    many whole ones as fit in that many tokens (:func:`~codii_sql.search.budget.json_tokens` of
    each; at least one). A cut answer has ``truncated``, ``total`` (definitions found) and
    ``next_offset``, and its note says so.

    ``name`` is a symbol (``parse_header``), a qualified one (``Session.send``, ``pkg.mod.func``,
    ``Type::method``, PHP's ``Ns\\Type::method``) or, with ``prefix``, its start. Generic parameters
    (``Parser<'a>``) and the separators ``::``/``#``/``.`` are normalised on both sides, so ``Parser.parse``
    finds Rust's ``Parser<'a>.parse``. ``match`` is ``exact``, ``qualified`` (a symbol ending in ``.name``),
    ``prefix``, or ``name`` when no definition is qualified as asked (``requests.get``: the name as it is
    imported) and those named by its last part are listed instead, the note says so; exact first, then source before docs before tests, a definition with its body before
    a one-line declaration, shorter symbols, path. Case-sensitive. Lines 1-based inclusive, a
    definition's whole range (a class with its methods). Every definition a build's parse found is
    stored (sql/schema.sql ``definitions``), however small: nothing is parsed at question time.
    ``update`` brings the index up to date first, as a CLI search does (building it if missing;
    lexical only), and a note says when it could not. ``under`` (a subfolder, relative POSIX) keeps its
    files alone, as a search from that folder does.

    Raises:
        UsageError: an empty name, a limit out of range, a negative offset, a max_tokens below 1.
        NotIndexedError: no index.
    """
    # PHP's namespaces (`Monolog\Handler\StreamHandler::write`, `\Foo\Bar`): qualified as `.` qualifies; Go's
    # method expressions (`(*FlagSet).Parse`, as Go's docs and stack traces write them) name `FlagSet.Parse`.
    # Erlang's and Elixir's arity (`lists:foldl/3`, `Enum.map/2`) and Perl's method call (`Mojo::UserAgent->start`)
    # name the same definition.
    typed = _ARITY.sub("", _GO_RECEIVER.sub(r"\1.", name or "").replace("->", "."))
    wanted = normal_name(typed.replace("\\", ".").strip(".") if "\\" in typed else typed)
    if not wanted.strip("."):
        said = "is empty" if not (name or "").strip() else f"{(name or '').strip()!r} holds no identifier"
        raise UsageError(f"the symbol name {said}", "pass a name such as parse_header or Session.send")
    if not 1 <= limit <= MAX_DEFINITIONS:
        raise UsageError(f"must be between 1 and {MAX_DEFINITIONS}", field="limit")
    check_page(offset, max_tokens)
    kind = kind.strip().lower() if kind else None
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")
    # Without an update too: the answer then says why the index may be behind (a malformed .codii.yaml).
    fresh = ensure_index(codebase, update=update, vectors=False) if not codebase.alone and \
        (update or codebase.db_path.is_file()) else None
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    needle = wanted if is_operator(wanted) else (name_parts(wanted) or [wanted])[-1]
    with open_store(codebase) as store:
        refuse_damaged(codebase, store)  # an answer from broken pages would read as true
        rows, unread = definitions_named(store, needle, wanted=wanted, kind=kind, prefix=prefix, under=under,
                                         cap=CANDIDATE_CAP)
    found = []
    for r in rows:
        how = _match(normal_name(r["symbol"]), wanted, prefix)
        if how is None and "." in wanted:  # pkg.module.func: the file's module path qualifies it too
            # (Clojure's `clojure.string/join` names its namespace with a slash)
            how = _match(f"{_module(r['path'], r['language'])}.{normal_name(r['symbol'])}", wanted.replace("/", "."),
                         False) and 1
        if how is not None:
            found.append((how, ROLE_ORDER.get(r["role"], 1), _declared_only(r), len(r["symbol"]), r["path"], r))
    # `requests.get`, `models.Model`: a name as it is imported, not where it is defined (requests/api.py,
    # django/db/models/base.py): the definitions of its longest tail that some symbol ends in
    # (`requests.Session.get` -> Session.get, `mpsc::Sender::send` -> Sender.send), else of its last part.
    by_name = not found and needle != wanted and not prefix
    if by_name:
        parts = name_parts(wanted)
        tails = [".".join(parts[i:]) for i in range(1, len(parts))]
        tail = next((t for t in tails if any(_match(normal_name(r["symbol"]), t, False) is not None for r in rows)),
                    needle)
        found = [(3, ROLE_ORDER.get(r["role"], 1), _declared_only(r), len(r["symbol"]), r["path"], r) for r in rows
                 if _match(normal_name(r["symbol"]), tail, False) is not None]
    # A definition named exactly as asked, plain or as a member (`get`: QuerySet.get), in source before one in
    # vendored code or docs: a new user's `symbol get` on Django listed 11 jQuery keys before any Django method.
    found.sort(key=lambda item: (0 if item[0] < 2 else item[0], item[1], *item[:1], *item[2:5]))
    # One place once: `typedef struct cJSON {...} cJSON` is a struct and a typedef of the same lines.
    first: dict[tuple, tuple] = {}
    for item in found:
        r = item[-1]
        first.setdefault((r["path"], r["start_line"], r["end_line"], r["symbol"]), item)
    found = list(first.values())
    stale = (lambda row: None) if codebase.alone else StaleCheck(codebase.root)
    window = [{"path": r["path"], "symbol": r["symbol"], "kind": r["kind"], "start_line": r["start_line"],
               "end_line": r["end_line"], "signature": r["signature"], "role": r["role"], "language": r["language"],
               "match": _HOW[how], "stale": stale(r)} for how, *_, r in found[offset:offset + limit]]
    defs = page(window, 0, limit, max_tokens)
    name = echoed(name)
    out = {"codebase": codebase.shown, "name": name, "definitions": defs}
    if offset + len(defs) < len(found):
        cut = f"limit={limit}" if len(defs) == limit else f"max_tokens={max_tokens}"
        out.update(truncated=True, total=len(found), next_offset=offset + len(defs),
                   note=f"{len(found)} definitions found, {len(defs)} shown from offset {offset} (to fit {cut}): the "
                        f"rest from offset={offset + len(defs)}" + ("" if needle != wanted else ", or pass a qualified "
                                                                                              "name (Class.method)"))
    elif len(rows) == CANDIDATE_CAP:
        out.update(truncated=True, note=f"more than {CANDIDATE_CAP:,} definitions are named {needle!r}: the likeliest "
                                        f"{CANDIDATE_CAP:,} were read; a qualified name (Class.method) or a subfolder narrows them")
    if not defs and found:
        out.update(total=len(found), note=f"offset {offset} is past the {len(found)} definitions found")
    elif not defs:
        out["note"] = (f"no {kind + ' ' if kind else 'definition '}{'starting with' if prefix else 'named'} {name!r} in the index" + ("" if prefix else "; a prefix search "
                       "also finds symbols starting with it") + "; search finds uses and mentions")
    if not found and not prefix and not needle.startswith("_") and typed.endswith(needle) and offset == 0:
        # `parse_header_links` for httpx's `_parse_header_links`: a private name asked without its underscores
        # found nothing, and the note's prefix search did not help (a new user's agent).
        for underscores in ("_", "__"):
            private = typed[:len(typed) - len(needle)] + underscores + needle
            alt = find_symbol(codebase, private, kind=kind, limit=limit, max_tokens=max_tokens, under=under)
            if alt["definitions"]:
                alt["note"] = "; ".join(filter(None, (f"no definition is named {name!r}; these are named {private!r}",
                                                      alt.get("note"))))
                return {**alt, "name": name}
    if by_name and defs:
        out["note"] = "; ".join(filter(None, (
            f"no definition is qualified as '{name}' (an import path can differ from the defining module's); "
            f"these are named {tail!r}", out.get("note"))))
    if under:
        out["scope"] = under
        elsewhere = 0
        if not any(how < 2 for how, *_ in found):  # no definition named as asked here: say where they are
            whole = find_symbol(codebase, name, kind=kind, prefix=prefix, limit=1, update=False)
            if whole["definitions"] and whole["definitions"][0]["match"] in ("exact", "qualified", "prefix"):
                elsewhere = whole.get("total", len(whole["definitions"]))
        out["note"] = scoped_note(out.get("note"), under, elsewhere, "definition")
    extra = [ALONE_NOTE if codebase.alone else None, unread, fresh.what if fresh else None, changed_note(defs)]
    if any(extra):
        out["note"] = "; ".join(filter(None, (out.get("note"), *extra)))
    return out


def scoped_note(note: str | None, under: str, elsewhere: int, what: str) -> str:
    """``note`` for an answer kept to the files under ``under``: it says so, and when nothing was found
    there, how many ``what`` lie elsewhere in the codebase (a new user asked from tests/ and was told a
    name defined three times was in no file of the index)."""
    said = (note or "").replace(" in the index", f" under {under}/")
    scope = f"files under {under}/ only (the folder asked from or given)"
    if elsewhere:
        scope += f"; {elsewhere:,} {what}{'' if elsewhere == 1 else 's'} elsewhere in the codebase: ask from its root"
    return "; ".join(filter(None, (scope, said)))


def definitions_named(store: Store, needle: str, *, wanted: str | None = None, kind: str | None = None,
                      prefix: bool = False, under: str | None = None, cap: int) -> tuple[list[dict], str | None]:
    """The stored definitions whose last name part is ``needle`` (with ``prefix``: starts with it), of
    ``kind`` (None: any), in the files under ``under`` (a subfolder, relative POSIX; None: all), at most
    ``cap``: ``[{"path", "symbol", "kind", "start_line", "end_line", "signature", "role", "language"}]``
    (sql/symbols.sql ``definitions_named``: the symbol equal to ``wanted`` first). Also a note when some
    files' definitions are not stored yet (an index upgraded from an older codii-sql, before its next
    build; one read as it is, whose table is a stand-in), else None."""
    meta = store.meta()
    unread = None
    if not meta.get("definitions_complete") and meta.get("files"):
        if not store.value("definitions_present"):
            store.run("definitions_stand_in")
        unread = ("this index was built by an older codii-sql and lacks some files' definitions: "
                  "`codii-sql build` reads them")
    under = under.strip("/") or None if under else None
    rows = store.rows("definitions_named", {"name": needle, "prefix": int(prefix), "kind": kind, "under": under,
                                            "wanted": wanted or needle, "cap": cap})
    return rows, unread


#: Characters of the name asked for that an answer repeats (a 5,000-character name came back whole, twice).
ECHO_CHARS = 200


def echoed(name: str) -> str:
    """``name`` as an answer repeats it: at most :data:`ECHO_CHARS` characters, then "…"."""
    name = shown_bytes(name)  # a byte no encoding decodes as \xff, not as Python's lone surrogate
    return name if len(name) <= ECHO_CHARS else name[:ECHO_CHARS] + "…"


def changed_note(listed: list[dict]) -> str | None:
    """What an answer says when files it lists changed or went since the index took them (their
    ``stale``), else None."""
    changed = sorted({d["path"] for d in listed if d.get("stale")})
    if not changed:
        return None
    return (f"{len(changed)} listed file{'s' if len(changed) > 1 else ''} changed or went since the index took "
            f"{'them' if len(changed) > 1 else 'it'} ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}): "
            "their lines may have moved until the index is updated (a build)")


def check_page(offset: int, max_tokens: int | None) -> None:
    """Raise UsageError for a negative ``offset`` or a ``max_tokens`` below 1."""
    if offset < 0:
        raise UsageError("must be 0 or more", field="offset")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError("must be 1 or more", field="max_tokens")


def _declared_only(row: dict) -> bool:
    """Whether a row only declares it (a header's prototype, an abstract or interface method: a head ending
    in ``;``, with its doc comment above or not; anything in a stub file, ``.pyi`` or ``.d.ts``): the
    definition with its body comes first (`symbol tcp_retransmit_timer` listed include/net/tcp.h's prototype
    above net/ipv4/tcp_timer.c's function; `SchemaValidator::validate_python` pydantic-core's ``.pyi`` stub
    above its Rust method; an agent's `hasNext` on moshi, JsonReader's documented abstract method first)."""
    if row["path"].endswith(STUB_SUFFIXES):
        return True
    if row["kind"] not in ("function", "method"):
        return False
    head = row["signature"].rstrip()
    if head.endswith(";"):
        return True
    # Kotlin's abstract members end in no ';' (moshi's `abstract fun nextSource(): BufferedSource`)
    has_body = head.endswith(("{", "=")) or " = " in head
    return re.search(r"\babstract\b", head) is not None and not has_body


def _module(path: str, language: str | None = None) -> str:
    """``pkg/mod.py`` -> ``pkg.mod`` (``pkg/__init__.py``, ``pkg/index.js``, ``src/mod.rs`` -> ``pkg``, ``src``).
    An Erlang file is the module its name says, an OCaml file the module its name capitalised says
    (``stdlib/lists.erl`` -> ``lists``, ``stdlib/hashtbl.ml`` -> ``Hashtbl``: ``symbol Hashtbl.create`` listed every
    file's ``create`` alike); a Go file's package is its folder (``net/http/server.go`` -> ``net.http``, so
    ``http.ErrAbortHandler`` is qualified); a Clojure file is its namespace (``clojure/core_deftype.clj`` ->
    ``clojure.core-deftype``)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    parts = [p for p in stem.split("/") if p]
    if language in ("ocaml", "ocaml_interface", "erlang") and parts:
        return parts[-1] if language == "erlang" else parts[-1][:1].upper() + parts[-1][1:]
    if language == "go":
        parts = parts[:-1]
    if language == "clojure":  # a namespace's file names its dashes with underscores (core_deftype.clj)
        parts = [p.replace("_", "-") for p in parts]
    if parts and parts[-1] in ("__init__", "index", "mod", "lib"):
        parts = parts[:-1]
    return ".".join(parts)


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
