"""Named SQL statements loaded from ``sql/*.sql`` (the aiosql convention: ``-- name: NAME`` headers)."""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^[ \t]*--.*\n?", re.MULTILINE)


def _sql_files() -> list[tuple[str, str]]:
    """``(file name, text)`` of every ``.sql`` file, sorted by name.

    Installed, they are the resources of ``codii_sql.sql`` (a namespace package in the
    wheel, so read through ``importlib.resources`` Traversables, never ``str()`` paths); in a
    source checkout that package does not exist and the top-level ``sql/`` folder is read.
    """
    try:
        folder = resources.files("codii_sql.sql")
        found = [(f.name, f.read_text(encoding="utf-8")) for f in folder.iterdir() if f.name.endswith(".sql")]
        if found:
            return sorted(found)
    except ModuleNotFoundError:
        pass
    checkout = Path(__file__).resolve().parents[2] / "sql"
    return sorted((p.name, p.read_text(encoding="utf-8")) for p in checkout.glob("*.sql"))


def parse(text: str) -> dict[str, str]:
    """Split one ``.sql`` file into ``{name: statement}``.

    Each statement starts at a ``-- name: NAME`` line and runs to the next header. Comment
    lines right under the header are the statement's documentation and stay in the text.

    Raises:
        ValueError: a name appears twice in the file.
    """
    out: dict[str, str] = {}
    heads = list(_HEADER.finditer(text))
    for head, nxt in zip(heads, heads[1:] + [None]):
        name = head.group(1)
        if name in out:
            raise ValueError(f"duplicate SQL statement name {name!r}")
        out[name] = text[head.end(): nxt.start() if nxt else len(text)].strip()
    return out


@functools.cache
def load() -> dict[str, str]:
    """Every named statement of every ``sql/*.sql`` file, loaded once per process.

    Raises:
        ValueError: the same name is defined in two files.
    """
    out: dict[str, str] = {}
    for file_name, text in _sql_files():
        for name, stmt in parse(text).items():
            if name in out:
                raise ValueError(f"SQL statement {name!r} defined twice ({file_name})")
            out[name] = stmt
    if not out:
        raise RuntimeError("no SQL statements found: the codii-sql installation is incomplete; reinstall it")
    return out


def sql(name: str) -> str:
    """The text of the statement called ``name``.

    Raises:
        KeyError: no such statement.
    """
    return load()[name]


@functools.cache
def runnable(name: str) -> str:
    """The statement called ``name`` without its whole-line comments: the text queries are prepared from.

    apsw keeps prepared statements of at most 16,384 bytes (``Connection.cache_stats()``'s
    ``max_cacheable_bytes``) and prepares a longer one again at every call: search_hybrid's comments
    took it to 17 KB, and preparing it cost every search 10-13 ms (docs/benchmarks.md, ninth round).
    Schema statements run from :func:`sql`, so ``sqlite3``'s ``.schema`` keeps their comments.

    Raises:
        KeyError: no such statement.
    """
    return _COMMENT_LINE.sub("", sql(name))
