"""Uses of an identifier for agents: every line that holds it on its word boundaries, counted whole, listed by page."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ..codebase import Codebase
from ..errors import UsageError
from ..ingest.chunking.signatures import SIGNATURE_CHARS, name_parts, normal_name
from ..search.budget import envelope_tokens, json_tokens, page
from ..search.staleness import StaleCheck
from .builds import ensure_index
from .status import open_store, refuse_damaged
from .symbols import changed_note, check_page, definitions_named, echoed, scoped_note

#: Reference lines find_references returns at most.
MAX_REFERENCES = 2_000
#: Chunks holding the identifier read at most: every one is read and counted below it (``kmalloc``
#: in Linux 6.12 is in ~5,400 chunks; 50,000 chunks are ~2M lines, a few seconds of matching).
#: Above it the answer says it stopped.
REFERENCE_CHUNKS = 50_000
#: Definitions of the identifier read at most, whose lines are no uses (``init``: ~2,000 in Linux 6.12).
REFERENCE_DEFINITIONS = 50_000
#: Chunk texts read per statement: the texts are read in slices, never all at once.
TEXT_SLICE = 1_000
NOTE = "lexical: every use of the identifier on its word boundaries, whatever it refers to"
#: What refs takes for a name: word characters (and ``$``), dash-joined as Lisp and CSS names are
#: (``magit-git-string``), with Ruby's and Elixir's ``?`` or ``!`` at the end (``blank?``, ``eager_load!``): a new
#: user's refs of each was refused as "not an identifier".
IDENTIFIER = re.compile(r"[\w$]+(?:-[\w$]+)*[?!]?")


class _Tally:
    """The uses of one identifier, file by file in the answer's order: every line counted, only
    the lines from ``offset`` to ``offset + limit`` kept. A line that is the signature of one of the
    file's stored definitions of the identifier (``skip``: (path, signature line)) is no use unless it names
    the identifier twice; ``definitions`` counts those left out."""

    def __init__(self, ident: str, offset: int, limit: int, skip: set[tuple[str, str]]) -> None:
        self.offset, self.limit, self.skip = offset, limit, skip
        # rg -w's boundaries, (?<!\w) NAME (?!\w): `$OUTDIR` in a shell or PHP line uses OUTDIR (a `$`
        # around the name hid it). The look-behind is tested by hand (:meth:`add`): in the pattern it
        # keeps `re` from searching for the name's letters first, 40x slower (docs/benchmarks.md,
        # "refs: one search per chunk").
        # A Lisp name holds dashes (`magit-git-string`): a dash is then a word's part, so `magit-git-string-p`
        # is another name.
        self.joiner = "-" if "-" in ident else ""
        word = rf"[\w{self.joiner}]"
        self.word = re.compile(rf"{re.escape(ident)}(?!{word})")
        # A definition's line that names the identifier again uses it (`impl ser::SerializeSeq for SerializeSeq`,
        # `type Error = A::Error;`: a new user's `refs SerializeSeq` missed 7 of rg's 26 lines); counted rarely.
        self.twice = re.compile(rf"(?<!{word}){re.escape(ident)}(?!{word}).*?(?<!{word}){re.escape(ident)}(?!{word})")
        self.total = self.files = self.definitions = 0
        self.window: list[tuple[str, str, int, str]] = []  # (path, role, line, text)
        self.path: str | None = None
        self.role = ""
        self.lines: dict[int, str] = {}  # the current file's: chunks overlap, one entry per line

    def add(self, path: str, role: str, start_line: int, content: str, end_line: int | None = None) -> None:
        """One chunk's lines (``start_line``/``end_line`` 1-based inclusive, numbered as every listing numbers
        them: :func:`~codii_sql.text.numbered_lines`); chunks come grouped by file."""
        if path != self.path:
            self.close()
            self.path, self.role, self.lines = path, role, {}
        # One search over the chunk, then a step per matching line: a search per line was two thirds of
        # `refs GFP_KERNEL` on the kernel (43,591 uses in 38,627 chunks: 0.49 of 0.89 s profiled). A match
        # cannot span lines: the name holds no line break.
        # A notebook cell stored as one JSON string holds its lines on one file line: every use is there.
        linear = end_line is None or content.count("\n", 0, len(content) - content.endswith("\n")) == end_line - start_line
        line, cursor, stop = start_line, 0, -1
        for m in self.word.finditer(content):
            at = m.start()
            if at <= stop or (at and (content[at - 1].isalnum() or content[at - 1] in "_" + self.joiner)):  # \w
                continue  # another use on the line just taken, or the name's end inside a longer word
            if linear:
                line += content.count("\n", cursor, at)
            cursor = at
            stop = content.find("\n", at)
            if stop < 0:
                stop = len(content)
            whole = content[content.rfind("\n", 0, at) + 1:stop]
            text = whole.strip()[:SIGNATURE_CHARS]
            if (path, text) not in self.skip or self.twice.search(whole):
                self.lines[line] = text
            else:
                self.definitions += 1
        # Texts are dropped once read: only this file's matching lines stay.

    def close(self) -> None:
        """Count the current file."""
        if self.path is None:
            return
        for n, text in sorted(self.lines.items()):
            if self.offset <= self.total < self.offset + self.limit:
                self.window.append((self.path, self.role, n, text))
            self.total += 1
        self.files += bool(self.lines)
        self.path = None


def find_references(codebase: Codebase, name: str, *, limit: int = 200, offset: int = 0,
                    max_tokens: int | None = None, update: bool = False, under: str | None = None) -> dict:
    """Where the identifier ``name`` (its last part for a qualified name: ``send`` of
    ``Session.send``) is used: ``{"codebase", "name", "identifier", "files": [{"path", "role", "stale",
    "lines": [{"line", "text"}]}], "total", "total_files", "truncated"}`` (``stale`` as for a definition), exact on identifier
    boundaries, each occurrence's own 1-based line, its definitions' lines excluded, source files
    first and tests last, then by path. ``total`` counts every use in the index; at most
    ``limit`` lines from the ``offset``-th (0-based, in the answer's order) on are listed, and with
    ``max_tokens`` (None: any) as many whole lines as fit in that many tokens
    (:func:`~codii_sql.search.budget.json_tokens` of each line and its path; at least one); a cut
    answer has ``next_offset``, and its note says so. Above :data:`REFERENCE_CHUNKS` chunks
    holding the word, the count stops there: ``truncated``, ``stopped_after_chunks`` and
    ``chunks_holding`` say so, and the note. Lexical, from the indexed text: a same-named other
    thing counts too (the note says so). ``update`` and ``under`` (a subfolder, relative POSIX: only
    its files) as for :func:`~.symbols.find_symbol`.

    Raises:
        UsageError: a name that is no identifier, a limit out of range, a negative offset, a
            max_tokens below 1. NotIndexedError: no index.
    """
    if not 1 <= limit <= MAX_REFERENCES:
        raise UsageError(f"must be between 1 and {MAX_REFERENCES}", field="limit")
    check_page(offset, max_tokens)
    ident = (name_parts(normal_name(name or "")) or [""])[-1]
    if not IDENTIFIER.fullmatch(ident):
        raise UsageError(f"'{echoed(name)}' is not an identifier", "pass a name such as parse_header")
    # Without an update too: the answer then says why the index may be behind (a malformed .codii.yaml).
    fresh = ensure_index(codebase, update=update, vectors=False) if not codebase.alone and \
        (update or codebase.db_path.is_file()) else None
    under = under.strip("/") or None if under else None
    fts = '{content}: "' + ident.replace('"', '""') + '"'
    with open_store(codebase) as store:
        refuse_damaged(codebase, store)  # an answer from broken pages would read as true
        # Every stored definition of the identifier, whatever its class: a definition is not a use.
        defined, unread = definitions_named(store, ident, under=under, cap=REFERENCE_DEFINITIONS)
        tally = _Tally(ident, offset, limit, {(d["path"], d["signature"][:SIGNATURE_CHARS]) for d in defined})
        keys = store.rows("reference_chunks", {"fts": fts, "cap": REFERENCE_CHUNKS + 1, "under": under})
        holding = store.value("reference_chunk_count", {"fts": fts, "under": under}) \
            if len(keys) > REFERENCE_CHUNKS else len(keys)
        keys = keys[:REFERENCE_CHUNKS]
        for start in range(0, len(keys), TEXT_SLICE):
            part = keys[start:start + TEXT_SLICE]
            texts = {r["id"]: r["content"] for r in
                     store.rows("reference_texts", {"ids": json.dumps([k["id"] for k in part])})}
            for k in part:
                tally.add(k["path"], k["role"], k["start_line"], texts.get(k["id"], ""), k["end_line"])
    tally.close()
    file_rows = {k["path"]: k for k in reversed(keys)}  # one of each file's rows, for its stale check
    check = (lambda row: None) if codebase.alone else StaleCheck(codebase.root)
    out = _answer(codebase, name, ident, tally, offset, limit, max_tokens, holding, lambda p: check(file_rows[p]))
    if under:
        out["scope"] = under
        elsewhere = 0 if tally.total else find_references(codebase, name, limit=1)["total"]
        out["note"] = scoped_note(out["note"], under, elsewhere, "use")
    for extra in (unread, fresh.what if fresh else None, changed_note(out["files"])):
        if extra:
            out["note"] += f"; {extra}"
    return out


#: A file's head in the JSON (path, role, stale) counted on each of its lines: a page of lines from many files pays
#: for each head.
FILE_TOKENS = 4


def _answer(codebase: Codebase, name: str, ident: str, tally: _Tally, offset: int, limit: int,
            max_tokens: int | None, holding: int, stale: Callable[[str], bool | None]) -> dict:
    # A line costs its JSON and its path (a listing shows the path on every line); the answer's other fields and
    # its note at their longest come first, as a search's (an agent's stand-in's 400 came to 517 tokens of JSON).
    envelope = envelope_tokens({"codebase": codebase.shown, "name": echoed(name), "identifier": ident,
                                "total": tally.total, "total_files": tally.files, "truncated": True,
                                "next_offset": offset + tally.total, "note": NOTE + _defined_only(tally, ident)})
    shown = page(tally.window, 0, limit, None if max_tokens is None else max(max_tokens - envelope, 1),
                 lambda use: json_tokens({"line": use[2], "text": use[3]}, plus=use[0]) + FILE_TOKENS)
    files: list[dict] = []
    for path, role, n, text in shown:
        if not files or files[-1]["path"] != path:
            files.append({"path": path, "role": role, "stale": stale(path), "lines": []})
        files[-1]["lines"].append({"line": n, "text": text})
    more = offset + len(shown) < tally.total
    stopped = holding > REFERENCE_CHUNKS
    out = {"codebase": codebase.shown, "name": echoed(name), "identifier": ident, "files": files, "total": tally.total,
           "total_files": tally.files, "truncated": more or stopped, "note": NOTE}
    if tally.definitions:  # a rename needs them too: said
        out["note"] += _defined_only(tally, ident)
    if more:
        cut = f"limit={limit}" if len(shown) == limit else f"max_tokens={max_tokens}"
        out["next_offset"] = offset + len(shown)
        out["note"] += (f"; {len(shown)} of {tally.total} lines shown from offset {offset} (to fit {cut}): the rest "
                        f"from offset={offset + len(shown)}")
    if offset and offset >= tally.total:  # a page past the end: none shown, and why (a new user's agent)
        out["note"] += f"; offset {offset} is past the last of the {tally.total} lines: ask from offset=0"
    if stopped:
        out.update(stopped_after_chunks=REFERENCE_CHUNKS, chunks_holding=holding)
        out["note"] += (f"; stopped after reading {REFERENCE_CHUNKS:,} of the {holding:,} chunks holding {ident!r} "
                        "(source first, then by path): total counts the uses in those only")
    return out


def _defined_only(tally: _Tally, ident: str) -> str:
    """The note's clause on the lines left out as the identifier's definitions ("" for none)."""
    return f"; {tally.definitions} line(s) that only define {ident!r} left out" if tally.definitions else ""
