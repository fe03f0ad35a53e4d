"""Places a query points at (``sessions.py:107``, a traceback's frame): the indexed file, the chunk and the symbol there.

A frame pasted from another machine names the file by its path there
(``/usr/lib/python3/site-packages/requests/sessions.py``); the index holds ``src/requests/sessions.py``.
The file is the one sharing the longest tail of path components with it (:func:`_files`). A search ranks
the chunk holding the line first, then the other chunks of the symbol there, as if the query had named it
(a new user's one-line frame of ``Session.send`` listed ``certs.py`` and ``setup.py`` first;
``sessions.py:107`` listed a function at line 819).
"""

from __future__ import annotations

import json
import re

from ..storage.store import Store
from .query import Named

#: Python's frame (``File "x.py", line 7``), the ``path:line[:column]`` of compilers, grep, Go, Rust,
#: Node and Java frames (``layer.js:95:5``, ``Bar.java:42``), and a forge's link to a line
#: (``.../blob/main/src/app.py#L703``, ``#L703-L710``, ``#L703C5``): a file with an extension, one in a
#: folder (``bin/run:12``) or a file name that has none (``Makefile:40``, ``LICENSE:3``), and a line.
_FILE = r"(?:(?:[\w.@+-]*/){0,40}[\w.@+-]*\w\.[A-Za-z]\w{0,5}|(?:[\w.@+-]*/){1,40}[\w.@+-]*\w|[A-Z][\w.-]*file|[A-Z]{4,})"
#: Each place's pattern and its marker, the text after the path (`line 7`, `(703)`, `:95`, `#L703`), found first:
#: the pattern is then tried over the :data:`_BEFORE` characters before the marker, up to the character after it
#: (what the pattern's end looks at), never over the whole query
#: (unanchored, over a 20,000-character word, the paths' runs backtracked for 5 s, which held a server's lock).
_PLACES = ((re.compile(r'File "(?P<path>[^"\n]{1,512})", line (?P<line>\d{1,9})'), re.compile(r'", line \d+')),
           # pdb's `> /x/sessions.py(703)send()`, .NET's `in /x/App.cs:line 42`, Perl's `at /x/a.pl line 12.`
           (re.compile(rf"(?<![\w.@+/-])(?P<path>{_FILE})\((?P<line>\d{{1,9}})\)"), re.compile(r"\(\d+\)")),
           (re.compile(r"\bin (?P<path>\S{1,512}?):line (?P<line>\d{1,9})\b"), re.compile(r":line \d+")),
           (re.compile(rf"(?<![\w.@+/-])(?P<path>{_FILE}) line (?P<line>\d{{1,9}})\b"), re.compile(r" line \d+")),
           (re.compile(rf"(?<![\w.@+/-])(?P<path>{_FILE}):(?P<line>\d{{1,9}})(?![\d.])"), re.compile(r":\d+")),
           (re.compile(rf"(?<![\w.@+/-])(?P<path>{_FILE})#L(?P<line>\d{{1,9}})(?!\d)"), re.compile(r"#L\d+")))
#: Characters before a marker a place's path (and its `File "` or `in `) may take: paths are read up to 512.
_BEFORE = 600
#: Markers looked at per pattern: a query of many `:12` is no traceback.
MAX_MARKERS = 32
#: Places read from one query: a traceback has many, and is read as a long query is (its words).
MAX_PLACES = 3
#: Files one place may stand for when several share its tail (vendored copies of one file).
MAX_FILES = 3
#: Chunks one query pins first: the pieces of one long line hold it several times over.
MAX_PLACED = 6


def places(text: str, shape: str = "") -> list[tuple[str, int]]:
    """``(path, line)`` of each place ``text`` names, the path lower-case with ``/`` separators and no
    leading ``./`` or ``/``, lines 1-based; at most :data:`MAX_PLACES`, in the order written. None for a
    query of ``shape`` ``long`` (:func:`~.query.query_shape`): a pasted traceback is read by its words."""
    if shape == "long":
        return []
    found: dict[tuple[str, int], None] = {}
    for pattern, marker in _PLACES:
        done = 0  # the text up to here was read
        for i, mark in enumerate(marker.finditer(text)):
            if i == MAX_MARKERS:
                break
            for m in pattern.finditer(text, max(done, mark.start() - _BEFORE), mark.end() + 1):
                path = m.group("path").replace("\\", "/").lower()
                path = re.sub(r"^(?:\.?/)+", "", path)
                if path and int(m.group("line")) > 0:
                    found.setdefault((path, int(m.group("line"))), None)
                done = max(done, m.end())
    return list(found)[:MAX_PLACES]


def resolve(store: Store, named: Named, spots: list[tuple[str, int]]) -> Named | None:
    """``named`` with each of ``spots`` (:func:`places`) as the indexed files it stands for (in ``paths``,
    replacing the path as written), the chunks holding its line (``placed``: they rank first) and the
    symbols defined there (in ``names``: their other windows follow, signature first); None when no spot
    is an indexed file."""
    paths, names, cased = list(named.paths), set(named.names), dict(named.cased)
    lines, found = [], False
    for path, line in spots:
        files = _files(store, path, line)
        if path in paths and files:
            paths.remove(path)
        paths += [f.lower() for f, _ in files if f.lower() not in paths]
        lines += [[f, line] for f, holds in files if holds]
        found = found or bool(files)
    if not found:
        return None
    for row in store.rows("symbols_at_lines", {"lines": json.dumps(lines)}):
        symbol = row["symbol"]
        names.add(symbol.lower())
        if symbol != symbol.lower():
            cased[symbol.lower()] = symbol
    placed = tuple(r["id"] for r in store.rows("chunks_at_places", {"lines": json.dumps(lines)}))[:MAX_PLACED]
    return Named(sorted(names), [t for t in named.tails if t not in names], sorted(paths),
                 tuple(sorted(cased.items())), placed, named.typed)


def _files(store: Store, path: str, line: int) -> list[tuple[str, bool]]:
    """The indexed files ``path`` stands for, each with whether it has ``line``, at most :data:`MAX_FILES`:
    of those of its name, the ones that have the line (Django has 36 ``base.py``: `base.py:870` means one
    of the few that long), sharing the longest tail with it (its folders may be another machine's:
    ``/app/node_modules/lodash/lodash.js`` is lodash's ``lodash.js``), the shortest first, or the whole path
    as written alone. When only the name is shared and no file of it is long enough, none: another
    codebase of a workspace may hold it (flask's 370-line ``sessions.py`` for `sessions.py:703`)."""
    parts = path.split("/")
    rows = store.rows("files_at_tail", {"tail": parts[-1]})  # by name: an app's /app/... or node_modules/pkg/...

    def shared(indexed: str) -> int:
        n = 0
        for a, b in zip(reversed(indexed.lower().split("/")), reversed(parts)):
            if a != b:
                break
            n += 1
        return n

    holding = [r for r in rows if (r["last_line"] or 0) >= line]
    if not holding and max((shared(r["path"]) for r in rows), default=0) < 2:
        return []
    pool = holding or rows
    exact = [r for r in pool if r["path"].lower() == path]  # README.md:10 is the root's, not tests/certs/README.md
    best = max((shared(r["path"]) for r in pool), default=0)
    pool = exact or sorted((r for r in pool if shared(r["path"]) == best), key=lambda r: (r["path"].count("/"), r["path"]))
    return [(r["path"], (r["last_line"] or 0) >= line) for r in pool[:MAX_FILES]]
