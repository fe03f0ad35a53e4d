"""Two scripted agents for ``eval tokens``: one greps with ripgrep and reads, one searches codii-sql over MCP and reads.

Neither has an LLM; both follow the same budget rules, so the tokens they read compare:

- every tool output is charged whole, as an agent receives it, at the product's own estimate
  (:func:`codii_sql.service.estimate_tokens`: 4 characters a token);
- a read is a window of :data:`WINDOW_LINES` lines starting :data:`BEFORE_LINES` above the line
  the agent was sent to (a match, or a search result), numbered as ``get_content`` numbers them;
  lines already read are not read again;
- an agent stops when it has read a gold line (a line the reference change touched) or spent
  its budget; the tokens spent when the first gold line arrived are what it paid.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..service import MAX_QUERY_CHARS, STOP_WORDS, estimate_tokens

#: Lines per read: "reads the matching files ... 200 lines at a time" (issue 28's grep agent), for both agents.
WINDOW_LINES = 200
#: Lines a read starts above its target, so the lines leading to a match or a chunk are seen too.
BEFORE_LINES = 50
#: Terms the grep agent searches for at once: the rarest of the query's identifiers, then words.
GREP_TERMS = 3
#: Files of the grep agent's ``rg -c`` listing it reads (``| head -100``).
LISTING_FILES = 100
#: Results the codii-sql agent asks ``search_code`` for.
SEARCH_LIMIT = 10
#: Words that say what a change does, not what the code says: an agent greps for the code's words.
CHANGE_WORDS = frozenset("""add added adds allow avoid change changed clarify correct drop ensure fix fixed fixes
improve increase decrease make move prevent refactor remove removed rename replace revert support tweak update
updated use""".split())
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: An identifier as an agent spots one: snake_case, camelCase, a digit, or written as a call or attribute.
_IDENTIFIER = re.compile(r"_|[a-z][A-Z]|[A-Za-z][0-9]")


@dataclass
class Ledger:
    """What one agent read for one query.

    ``gold`` maps a path to its gold lines (1-based); ``budget`` is the most tokens it may spend.
    ``spent`` counts the tokens of every tool output so far, ``first_gold`` the tokens spent when
    a gold line was first read (None: not yet), ``calls`` the tool calls, ``read`` the lines read per path.
    """

    gold: dict[str, set[int]]
    budget: int
    spent: int = 0
    first_gold: int | None = None
    calls: int = 0
    read: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))

    def charge(self, output: str, lines: dict[str, range | set[int]]) -> bool:
        """Charge one tool output that showed ``lines`` per path; True when the agent should stop."""
        self.spent += estimate_tokens(output)
        self.calls += 1
        for path, shown in lines.items():
            self.read[path].update(shown)
            if self.first_gold is None and self.gold.get(path, set()) & set(shown):
                self.first_gold = self.spent
        return self.done

    @property
    def done(self) -> bool:
        return self.first_gold is not None or self.spent >= self.budget

    def unread(self, path: str, line: int) -> bool:
        return line not in self.read[path]

    def outcome(self) -> dict:
        """``{"tokens", "first_gold", "calls", "files"}``: what the agent spent and read."""
        return {"tokens": self.spent, "first_gold": self.first_gold, "calls": self.calls,
                "files": sum(1 for lines in self.read.values() if lines)}


def window(line: int, total: int) -> tuple[int, int]:
    """The read a target ``line`` gets: ``(start, end)``, 1-based inclusive, within a file of ``total`` lines."""
    start = max(1, line - BEFORE_LINES)
    return start, max(start, min(total, start + WINDOW_LINES - 1))


def numbered(path: str, lines: list[str], start: int, end: int) -> str:
    """Lines ``start..end`` of ``lines`` as a read shows them: a header, then ``N<TAB>text`` per line."""
    body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1))
    return f"{path} lines {start}-{end} of {len(lines)}\n{body}"


# The grep agent ------------------------------------------------------------------------------


def grep_terms(root: Path, query: str, rg: str = "rg") -> list[str]:
    """The query's :data:`GREP_TERMS` rarest terms that occur in the tree (lower case): identifiers
    (written as code: snake or camel case, a digit, a call, an attribute, in backquotes) first, by how
    many files hold them, then longer first; then plain words; stop words and :data:`CHANGE_WORDS` never.

    Rarity comes from one ``rg -o -i -w -F`` over the tree with ripgrep's own ignore rules; that probe
    is not charged to the agent (an agent guesses the rare names; the probe is the best guess).
    """
    candidates = list(dict.fromkeys(w for w in _WORD.findall(query)
                                    if w.lower() not in STOP_WORDS and w.lower() not in CHANGE_WORDS))
    if not candidates:
        return []
    kind = {}
    for w in candidates:
        code = _IDENTIFIER.search(w) or any(f in query for f in (f"{w}(", f".{w}", f"{w}.", f"`{w}`"))
        kind.setdefault(w.lower(), 0 if code else 1)
    holders: dict[str, set[str]] = defaultdict(set)
    for path, term in _rg(root, rg, ["-o", "-i", "-w", "-F", "--no-line-number"], list(kind)):
        holders[term.lower()].add(path)
    present = [t for t in kind if holders.get(t)]
    return sorted(present, key=lambda t: (kind[t], len(holders[t]), -len(t), t))[:GREP_TERMS]


def grep_agent(root: Path, query: str, ledger: Ledger, rg: str = "rg") -> list[str]:
    """Run the grep agent on ``query`` over ``root``, charging ``ledger``; returns the terms it grepped.

    It runs ``rg -c -i -w -F -e T1 -e T2 -e T3`` (charged: the listing of path:count, at most
    :data:`LISTING_FILES` files), then reads the listed files in order of match count (ties by
    path), in each one a window around every match line not yet read, in line order.
    """
    terms = grep_terms(root, query, rg)
    if not terms:
        ledger.charge(f"$ rg (no term of the query occurs in {root.name})", {})
        return terms
    matches: dict[str, list[int]] = defaultdict(list)
    for path, line in _rg(root, rg, ["-n", "-i", "-w", "-F"], terms, line_numbers=True):
        matches[path].append(line)
    order = sorted(matches, key=lambda p: (-len(matches[p]), p))[:LISTING_FILES]
    command = "$ rg -c -i -w -F " + " ".join(f"-e {t}" for t in terms)
    if ledger.charge("\n".join([command, *(f"{p}:{len(matches[p])}" for p in order)]), {}):
        return terms
    for path in order:
        lines = _lines(root / path)
        for hit in sorted(set(matches[path])):
            if not ledger.unread(path, hit):
                continue
            start, end = window(hit, len(lines))
            if ledger.charge(numbered(path, lines, start, end), {path: range(start, end + 1)}):
                return terms
    return terms


def _rg(root: Path, rg: str, flags: list[str], terms: list[str], line_numbers: bool = False):
    """``(path, match text)`` per ``-o`` match, or ``(path, line)`` per matching line with ``line_numbers``
    (``--null`` ends each path with NUL, so any file name parses)."""
    args = [rg, *flags, "--with-filename", "--no-heading", "--null", "--color", "never"]
    for t in terms:
        args += ["-e", t]
    done = subprocess.run(args, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    for row in done.stdout.decode("utf-8", "replace").splitlines():
        path, nul, rest = row.partition("\0")
        if not nul:
            continue
        path = path.removeprefix("./")
        if not line_numbers:
            yield path, rest
            continue
        number = rest.partition(":")[0]
        if number.isdigit():
            yield path, int(number)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


# The codii-sql agent -------------------------------------------------------------------------


async def codii_agent(session, root: Path, query: str, ledger: Ledger, search_tokens: int) -> None:
    """Run the codii-sql agent on ``query`` over an MCP ``session`` (an initialised ``mcp.ClientSession``).

    It calls ``search_code`` (hybrid, :data:`SEARCH_LIMIT` results, ``max_tokens=search_tokens``;
    charged: the tool's text; read: every result's shown lines), then, result by result in rank
    order, reads the window around each result's first line through ``get_content`` unless an
    earlier read spans it (its first and last lines were read). An error answer is charged too, and ends the query.
    """
    found = await session.call_tool("search_code", {"query": query[:MAX_QUERY_CHARS], "path": str(root),
                                                    "limit": SEARCH_LIMIT, "max_tokens": search_tokens})
    results = [] if found.is_error else (found.structured_content or {}).get("results", [])
    shown: dict[str, set[int]] = defaultdict(set)
    for r in results:
        shown[r["path"]].update(range(r["start_line"], r["end_line"] + 1))
    if ledger.charge(_text(found), shown) or found.is_error:
        return
    for r in results:
        start = max(1, r["start_line"] - BEFORE_LINES)
        if not (ledger.unread(r["path"], start) or ledger.unread(r["path"], start + WINDOW_LINES - 1)):
            continue  # an earlier read spans this window
        got = await session.call_tool("get_content", {"path": str(root), "file": r["path"], "start_line": start,
                                                      "end_line": start + WINDOW_LINES - 1})
        data = {} if got.is_error else got.structured_content or {}
        lines = range(data["start_line"], data["end_line"] + 1) if data else range(0)
        if ledger.charge(_text(got), {r["path"]: lines}) or got.is_error:
            return


def _text(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
