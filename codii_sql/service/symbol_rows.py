"""The index's chunk symbols holding a name, one row per (file, symbol), for find_symbol."""

from __future__ import annotations

import bisect
import re
from itertools import groupby

from ..storage.store import Store

#: What joins a class's symbol to its members' (``Session.send``, ``Type::method``).
_MEMBER_JOINS = (".", "::")
#: A character FTS5's unicode61 tokenizer keeps in a word: a needle with one is a word of the symbols it names.
_WORDY = re.compile(r"\w")


def symbol_rows(store: Store, needle: str, kind: str | None, cap: int, *, prefix: bool = False) -> list[dict]:
    """``[{"path", "symbol", "kind", "start_line", "end_line", "first_content", "role", "language"}]``:
    each (file, symbol) whose chunk symbol holds ``needle``, in file and symbol order, at most
    ``cap`` of them. Lines are 1-based inclusive: the union of the symbol's chunks of ``kind``
    (None: any), a class's extended to the end of its members' chunks (``symbol.x``, ``symbol::x``);
    ``first_content`` is the text of its first such chunk. One pass over the matched chunks, sorted
    per file: a class looks its members up by bisection, not by a query of its own. Unless ``prefix``
    (a symbol's start, which FTS5's stemmed words cannot find), FTS5's symbol column finds the chunks.
    """
    out: list[dict] = []
    fts = None if prefix or not _WORDY.search(needle) else 'symbol : "' + needle.replace('"', '""') + '"'
    chunks = store.rows("symbol_candidates", {"needle": needle, "kind": kind, "fts": fts})
    for _, of_file in groupby(chunks, key=lambda c: c["file_id"]):
        of_file = list(of_file)
        symbols = [c["symbol"] for c in of_file]  # sorted: the statement orders by file, symbol
        for symbol, group in groupby((c for c in of_file if c["in_kind"]), key=lambda c: c["symbol"]):
            if len(out) == cap:
                return out
            group = list(group)
            end = max(c["end_line"] for c in group)
            for join in _MEMBER_JOINS:
                head = symbol + join
                i = bisect.bisect_left(symbols, head)
                while i < len(symbols) and symbols[i].startswith(head):
                    end = max(end, of_file[i]["end_line"])
                    i += 1
            first = group[0]
            out.append({"path": first["path"], "symbol": symbol, "kind": min(c["kind"] for c in group),
                        "start_line": min(c["start_line"] for c in group), "end_line": end,
                        "first_content": next(c["first_content"] for c in group if c["first_content"] is not None),
                        "role": first["role"],
                        "language": first["language"]})
    return out
