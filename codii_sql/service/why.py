"""The ``why`` use case: the commits that made one line what it is, with their messages and hunks, as one answer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..codebase import Codebase
from ..errors import UsageError
from ..gitrepo import work_tree
from ..ingest.blame import UNCOMMITTED, blame, line_history
from ..ingest.exclusions import default_file_reason
from ..ingest.history_rules import HistoryRules
from ..ingest.read import SNIFF_BYTES, is_binary
from ..search.answer import Note, Words, with_notes, worded_notes
from ..search.history import CommitHit, HunkHit, fit_commits
from . import boundary
from .status import scan_rules

#: Commits told by default, and at most: the line's last change and the few before it say why it
#: is so; a line with 500 commits of history still answers in about a second (README).
DEFAULT_WHY_LIMIT = 5
MAX_WHY_LIMIT = 50
#: The keys of a commit of a why answer (a history result's ranks and score mean nothing here).
_KEYS = ("sha", "date", "author", "email", "subject", "body", "files", "hunks")


@dataclass
class WhyAnswer:
    """The commits that changed line ``line`` (1-based) of ``file`` (relative to the work tree's top
    ``root``), newest first from the one blame names; ``notes``, ``budget``, ``seconds``."""

    file: str
    line: int
    root: str
    results: list[CommitHit]
    seconds: float
    notes: list[Note] = field(default_factory=list)
    budget: dict | None = None

    def note(self, words: Words) -> str | None:
        return worded_notes(self.notes, words)

    def to_dict(self, words: Words) -> dict:
        """``{"file", "line", "root", "results": [{"sha", "date", "author", "email", "subject", "body",
        "files", "hunks"}], "seconds", ["budget"], ["note", "notes"]}`` (hunks as a history answer's)."""
        out: dict = {"file": self.file, "line": self.line, "root": self.root,
                     "results": [{k: v for k, v in r.to_dict().items() if k in _KEYS} for r in self.results],
                     "seconds": round(self.seconds, 4)}
        if self.budget is not None:
            out["budget"] = self.budget
        return with_notes(out, self.notes, words)


def explain_line(file: str, line: int, *, root: str | None = None, limit: int = DEFAULT_WHY_LIMIT,
                 max_tokens: int | None = None) -> WhyAnswer:
    """Blame line ``line`` of ``file`` (relative to ``root``, else to the current directory, or
    absolute), then follow the line back with ``git log -L``: at most ``limit`` commits.

    Raises:
        UsageError: no such file, a line out of range, a file git does not track, one that usually
            holds credentials, a folder that is in no git work tree, a bad limit or budget.
    """
    if not 1 <= limit <= MAX_WHY_LIMIT:
        raise UsageError(f"must be from 1 to {MAX_WHY_LIMIT}", field="limit")
    if line < 1:
        raise UsageError(f"is a 1-based line number, got {line}", field="line")
    base = Path(root).expanduser() if root else Path.cwd()
    path = (base / file).resolve() if not Path(file).is_absolute() else Path(file).resolve()
    if not path.is_file():
        raise UsageError(f"{file}: no such file", "pass FILE:LINE of a file in a git work tree")
    tree = work_tree(path.parent)
    if tree is None:
        raise UsageError(f"{path.parent} is not in a git work tree: why reads a line's history from git",
                         "run it on a file of a git clone")
    rel = path.relative_to(tree.top.resolve()).as_posix()
    reason = default_file_reason(PurePosixPath(rel).name)
    if reason == "secret":
        raise UsageError(f"{rel} usually holds credentials: its history is not shown",
                         "a .codiiignore negation (!name) lets codii-sql read such a file")
    with open(path, "rb") as fh:  # a new user's `why logo.png:1` printed a kilobyte of its bytes as a line
        if reason == "binary-extension" or is_binary(fh.read(SNIFF_BYTES)):
            raise UsageError(f"{rel} is a binary file: it has no lines to explain", "pass FILE:LINE of a text file")
    started = time.perf_counter()
    blamed = blame(tree.top, rel, line)
    notes = [Note("history", f"{tree.top} is a shallow clone: the line's history ends at its oldest commit")] \
        if tree.shallow else []
    if blamed.sha == UNCOMMITTED:
        notes.append(Note("history", f"line {line} of {rel} has changes not committed yet: no commit explains it"))
        return WhyAnswer(rel, line, str(tree.top), [], time.perf_counter() - started, notes)
    hits = [_hit(c) for c in line_history(tree.top, blamed, limit)]
    budget = None
    if max_tokens is not None:
        hits, budget = fit_commits(hits, max_tokens)
        if budget["trimmed"] or budget["dropped"]:
            notes.append(Note("budget", f"{budget['trimmed']} hunk(s) cut and {budget['dropped']} commit(s) dropped "
                                        f"to fit {max_tokens} tokens", "ask with a larger token budget, or fewer commits"))
    return WhyAnswer(rel, line, str(tree.top), hits, time.perf_counter() - started, notes, budget)


def explain_served_line(codebase: Codebase, file: str, line: int, *, limit: int = DEFAULT_WHY_LIMIT,
                        max_tokens: int | None = None) -> WhyAnswer:
    """:func:`explain_line` for a face that serves files to others (MCP): ``file`` (relative to the
    codebase root) must pass the same boundary as reading it back (:mod:`.boundary`: inside the root,
    links resolved, listed by the codebase's rules, neither binary nor a private key), since a line's
    hunks show the file's content.

    Raises:
        PathRefusedError: the boundary refuses the file. UsageError: as :func:`explain_line`, or an index
            file alone (its source and git history are not here).
    """
    if codebase.alone:  # a new user's agent was told "no such file" of a file the shard holds
        raise UsageError(f"{codebase.db_path} is an index file alone: a line's history needs the source's git "
                         "repository, which is not here", "ask where the repository is (search_history answers "
                         "from the history the shard holds)")
    files = boundary.FileSet(codebase.root, scan_rules(codebase))
    served = files.check(file)
    boundary.read_bytes(served, files.rules["max_file_bytes"])  # refuses a private key or a binary file
    return explain_line(str(served.real), line, limit=limit, max_tokens=max_tokens)


def _hit(commit) -> CommitHit:
    """A commit of the line's history as a result: its hunks of that line, a private key's left out."""
    hunks = [HunkHit(h.path, h.old_path, h.old_start, h.old_lines, h.new_start, h.new_lines, h.content, True)
             for h in commit.hunks if HistoryRules.content_kept(h.content)]
    return CommitHit(commit.sha, commit.date, commit.author, commit.email, commit.subject, commit.body,
                     commit.files, 0.0, None, None, None, None, len(hunks), hunks)
