"""The MCP server object, the session its tools share, and how their answers and errors are shaped.

Every tool returns ``structured_content`` (JSON) plus two text blocks: a short summary and the
same JSON (clients that only read text content still see every field); ``get_content`` and
``get_chunk`` send the line-numbered code as the second block instead.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import json
import logging
from pathlib import Path
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from ..codebase import Codebase
from ..errors import CodiiError, Remedy, UsageError
from ..service import MIN_TOKENS, Session, find_codebase, open_codebase
from ..text import escaped, holds_surrogates, numbered_lines, shown_bytes
from .words import message, words

#: search_code's result bound: enough for an agent to pick from, small enough for its context.
MAX_SEARCH_LIMIT = 50

SESSION = Session()

#: SQLite's largest INTEGER (64-bit signed): a bigger id or line cannot be bound to a statement.
SQLITE_MAX_INTEGER = 2**63 - 1


class CodiiServer(MCPServer):
    """The SDK's server, with a tool's rejected arguments told in one line an agent can act on
    (the SDK forwards pydantic's multi-line report, with its links and types), and an argument the
    tool does not take refused (the SDK drops it: a new user's misspelled ``pathglob`` filter was
    ignored without a word, results unfiltered; HTTP refuses an unknown parameter too)."""

    _taken: dict[str, list[str]] | None = None

    async def call_tool(self, name, arguments, context=None):
        if self._taken is None:
            self._taken = {t.name: list(t.input_schema.get("properties", {})) for t in await self.list_tools()}
        unknown = [a for a in arguments or {} if name in self._taken and a not in self._taken[name]]
        if unknown:
            raise ToolError(f"{name}: {unknown_argument(unknown[0], self._taken[name])}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            if not isinstance(err.__cause__, ValidationError):
                raise
            raise ToolError(f"{name}: {argument_errors(err.__cause__)}: fix the arguments as the tool's "
                            "input schema says") from err.__cause__


#: Names agents send for an argument that has another name here (HTTP's /grep says ``glob``; rg, files).
_SYNONYMS = {"glob": "pathGlob", "globs": "pathGlob", "symbol": "name", "identifier": "name", "file_path": "file",
             "filepath": "file", "filename": "file", "regex": "pattern", "q": "query"}


def unknown_argument(given: str, taken: list[str]) -> str:
    """``unknown argument 'pathglob' (did you mean pathGlob?); it takes ...``."""
    folded = {t.lower().replace("_", ""): t for t in taken}
    synonym = _SYNONYMS.get(given.lower())
    close = folded.get(given.lower().replace("_", "")) or (synonym if synonym in taken else None) or next(
        iter(difflib.get_close_matches(given, taken, 1)), None)
    return (f"unknown argument {given!r}" + (f" (did you mean {close}?)" if close else "")
            + f"; it takes {', '.join(taken)}")


def argument_errors(err: ValidationError) -> str:
    """Each rejected argument as ``name should be ... (got VALUE)``, ``; ``-separated."""
    said = []
    for e in err.errors(include_url=False):
        where = ".".join(str(part) for part in e["loc"]) or "arguments"
        msg = e["msg"].removeprefix("Input ").removeprefix("Value error, ")
        if e["type"] == "missing":
            said.append(f"{where} is required")
            continue
        got = repr(e.get("input"))
        said.append(f"{where} {msg[:1].lower()}{msg[1:]} (got {got if len(got) <= 40 else got[:40] + '…'})")
    return "; ".join(said)


server = CodiiServer(
    name="codii-sql",
    version=importlib.metadata.version("codii-sql"),
    instructions=(
        "Local hybrid code search (BM25 + embeddings) over indexed codebases. Call index_codebase once per "
        "repository (it returns at once; poll get_indexing_status), then search_code with natural language or "
        "identifiers. Results carry path and 1-based inclusive line ranges; read more with get_content."),
    log_level="WARNING",
)

PathArg = Annotated[str, Field(description="Absolute path of the codebase root directory.")]
FileArg = Annotated[str, Field(description="File path relative to the codebase root (as search_code returns it), "
                                           "or an absolute path inside the root.")]
LineArg = Annotated[int | None, Field(ge=1, le=SQLITE_MAX_INTEGER, description="1-based line number, inclusive; null for the file's start/end.")]

#: The token budget of an answer that holds code when the agent names none, and the most it may
#: name. Claude Code refuses a tool result over 25,000 tokens; the code is in the answer twice
#: (the structured JSON and the numbered listing), and 4 characters a token undercounts code.
DEFAULT_MAX_TOKENS = 6_000
MAX_MAX_TOKENS = 8_000

MaxTokensArg = Annotated[int | None, Field(ge=100, le=MAX_MAX_TOKENS, description=(
    f"Fit the answer in about this many tokens (4 characters each); null: {DEFAULT_MAX_TOKENS:,}. Code is "
    "trimmed to the lines around what matched and the last items dropped; the note says what was cut and how "
    "to read the rest."))]
#: Least budget of get_indexing_status (see StatusTokensArg).
STATUS_MIN_TOKENS = 400
#: The budget of a search's answer: its own fields and best lines take about 300 tokens (search.results.MIN_TOKENS).
SearchTokensArg = Annotated[int | None, Field(ge=MIN_TOKENS, le=MAX_MAX_TOKENS, description=(
    f"Fit the answer in about this many tokens (4 characters each), at least {MIN_TOKENS}; null: "
    f"{DEFAULT_MAX_TOKENS:,}. Results are trimmed to the lines around what matched and the last ones dropped; the "
    "note says what was cut and how to read the rest."))]
#: The same budget for an answer that lists things (definitions, uses, codebases, paths).
ListTokensArg = Annotated[int | None, Field(ge=100, le=MAX_MAX_TOKENS, description=(
    f"Fit the answer in about this many tokens (4 characters each); null: {DEFAULT_MAX_TOKENS:,}. Whole items "
    "are left out from the end; truncated, total and the note say how many and where the next call starts."))]
#: A status's budget: its own fields (state, phase, counts, times, vectors) take about 300 tokens, which a budget of
#: 100 was told to fit (a new user's status at 100 came to 304); the lists of skipped and failed paths fit the rest.
StatusTokensArg = Annotated[int | None, Field(ge=STATUS_MIN_TOKENS, le=MAX_MAX_TOKENS, description=(
    f"Fit the answer in about this many tokens (4 characters each), at least {STATUS_MIN_TOKENS} (the status's own "
    f"fields); null: {DEFAULT_MAX_TOKENS:,}. The lists of skipped and failed paths are cut to fit."))]
OffsetArg = Annotated[int, Field(ge=0, le=1_000_000, description="Skip this many items first (0-based): a cut "
                                                                  "answer's next_offset.")]
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def agent_errors(fn):
    """Turn :class:`CodiiError` into :class:`ToolError`, whose one-line message (its remedy in an
    agent's terms, :mod:`.words`) reaches the agent."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CodiiError as err:
            raise ToolError(shown_bytes(message(err))) from None
        except ToolError:  # the tool's own one-line refusal
            raise
        except Exception as err:  # a bug: the agent gets its one line, the server's log the traceback
            # (a 500-deep file's RecursionError reached an agent as "Error executing tool get_file_outline")
            logging.getLogger("codii_sql.mcp").exception("%s failed", fn.__name__)
            raise ToolError(f"{fn.__name__} failed on an internal error ({type(err).__name__}: "
                            f"{shown_bytes(str(err))[:200]}): a bug in codii-sql; its traceback is in the "
                            "server's log (stderr)") from None

    return wrapper


def answer(summary: str, data: dict, body: str | None = None) -> CallToolResult:
    """A tool result: ``data`` as structured content, and text blocks ``summary`` then ``body``.

    One copy per answer: the text never repeats the JSON (a client forwarding both blocks paid
    for every field twice). ``body`` defaults to :func:`rendered` ``data``, the same facts as
    ``key: value`` lines for clients that read only text. Remedies in ``data`` are worded for an agent.
    """
    data = _worded(data)
    text = shown_bytes(escaped(body if body is not None else rendered(data), lines=True))
    blocks = [TextContent(type="text", text=shown_bytes(escaped(summary, lines=True)))] + (
        [TextContent(type="text", text=text)] if text else [])
    return CallToolResult(content=blocks, structured_content=data)


def _worded(value):
    """``value`` with every :class:`Remedy` in it as an agent's sentence, and a name's bytes that are not UTF-8
    written as ``\\xff`` (a lone surrogate in a path stopped the server's writer: a helper's `list_codebases`)."""
    if isinstance(value, str):
        return shown_bytes(value) if holds_surrogates(value) else value
    if isinstance(value, Remedy):
        return words(value)
    if isinstance(value, dict):
        return {k: _worded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_worded(v) for v in value]
    return value


def with_note(summary: str, note: str | None) -> str:
    """``summary`` and, when there is one, the answer's note on a line of its own."""
    return f"{summary}\nNote: {note}" if note else summary


def rendered(data: dict) -> str:
    """``key: value`` per field; nested values as compact JSON on their line."""
    return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)}"
                     for k, v in data.items() if v not in (None, [], {}))


def check_path(path: str) -> str:
    """``path`` unless it is empty or relative: Path("") and "." are the server's own working
    directory, which the agent never meant (and would index or read back that folder); ``~`` is
    expanded by the service."""
    if not path.strip():
        raise ToolError("path is empty: pass the codebase's absolute path")
    if not path.startswith(("/", "~")) and not Path(path).is_absolute():
        raise ToolError(f"{path!r} is relative to the server's folder, not yours: pass the codebase's absolute path")
    return path


def is_shard_folder(path: str) -> bool:
    """Whether ``path`` is the folder of index files this server serves (``serve --shards``)."""
    return SESSION.shards is not None and Path(path).expanduser().absolute() == SESSION.shards.folder


def refuse_shard_folder(path: str) -> str:
    """``path``, unless it is the folder of index files this server serves, which is no codebase (a new
    user's agent was told to index it).

    Raises:
        UsageError: naming its files to pass instead.
    """
    if is_shard_folder(path):
        folder = SESSION.shards
        names = ", ".join(p.name for p in folder.files()[:5])
        raise UsageError(f"{folder.folder} is the folder of index files this server serves, not a codebase",
                         f"pass one of its files as path ({names}), or search_code without a path to search them all")
    return path


def codebase_at(path: str, *, enclosing: bool = True) -> Codebase:
    """The codebase whose index answers for the agent's ``path`` (see :func:`check_path`), as search_code
    and the CLI read it: its own, else that of the indexed codebase holding the folder, unless the folder
    is a repository of its own (:func:`~codii_sql.service.find_codebase`); with ``enclosing`` false, the
    folder itself (index_codebase builds what it names). A subfolder worked in search_code and
    find_symbol and was refused by grep_code, get_content and get_file_outline (a new user's agent)."""
    checked = refuse_shard_folder(check_path(path))
    if not enclosing:
        return open_codebase(checked)
    return find_codebase(checked)[0]


def file_of(path: str, cb: Codebase, file: str) -> str:
    """``file`` as the agent meant it: relative to ``cb``'s root, as every answer writes paths, or, when
    no such file is there, to the subfolder ``path`` names (a new user's agent passed `pkg` and `mod.py`)."""
    folder = Path(path).expanduser().absolute()
    if cb.alone or folder == cb.root or not folder.is_relative_to(cb.root) or (cb.root / file).exists():
        return file
    try:
        return (folder / file).relative_to(cb.root).as_posix() if (folder / file).exists() else file
    except ValueError:  # an absolute file elsewhere: the boundary answers for it
        return file


def numbered(content: str, first_line: int, last_line: int | None = None) -> str:
    """``cat -n`` style: right-aligned 1-based line number, a tab, the line; numbered as
    :func:`~codii_sql.text.numbered_lines` says (a notebook cell's lines share one file line). A CRLF line
    is shown without its CR, the line end's (a new user's agent copied `\\r` into an edit); the structured
    ``content`` keeps the exact text."""
    return "\n".join(f"{n:>6}\t{line.removesuffix(chr(13))}" for n, line in numbered_lines(content, first_line,
                                                                                             last_line))


__all__ = ["DEFAULT_MAX_TOKENS", "FileArg", "LineArg", "ListTokensArg", "MaxTokensArg", "OffsetArg", "StatusTokensArg", "MAX_SEARCH_LIMIT", "PathArg", "READ_ONLY", "SESSION", "SQLITE_MAX_INTEGER",
           "SearchTokensArg", "agent_errors", "answer", "check_path", "codebase_at", "file_of", "is_shard_folder",
           "numbered", "refuse_shard_folder", "server", "with_note"]
