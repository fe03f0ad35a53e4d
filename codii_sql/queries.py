"""Named SQL statements loaded from ``sql/*.sql`` (the aiosql convention: ``-- name: NAME`` headers)."""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


def _sql_dir() -> Path:
    """``codii_sql/sql`` in an installed wheel; the repository's top-level ``sql/`` in a checkout."""
    try:
        packaged = Path(str(resources.files("codii_sql.sql")))
        if any(packaged.glob("*.sql")):
            return packaged
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parent.parent / "sql"


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
    for path in sorted(_sql_dir().glob("*.sql")):
        for name, stmt in parse(path.read_text(encoding="utf-8")).items():
            if name in out:
                raise ValueError(f"SQL statement {name!r} defined twice ({path.name})")
            out[name] = stmt
    return out


def sql(name: str) -> str:
    """The text of the statement called ``name``.

    Raises:
        KeyError: no such statement.
    """
    return load()[name]
