"""``history`` and ``why``: search the commits of a codebase, and explain one line by the commits that made it."""

from __future__ import annotations

import datetime
import os

import click

from .. import service
from ..errors import UsageError
from ..service import DEFAULT_WHY_LIMIT, MAX_HISTORY_LIMIT, MAX_WHY_LIMIT
from .output import db_option, echo, emit, json_option, shown
from .words import words

#: Lines of a commit body shown in text output (``--json`` carries all of it).
BODY_LINES = 4


@click.command()
@click.argument("query")
@click.argument("path", required=False)
@click.option("--path", "--glob", "glob", default=None,
              help="Only commits with a hunk in a path matching this glob, e.g. 'src/*.py' (* also matches /).")
@click.option("--since", default=None, help="Only commits authored on or after this date, e.g. 2024-01-31.")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_HISTORY_LIMIT), default=10, show_default=True)
@click.option("--max-tokens", type=click.IntRange(1), default=None,
              help="Fit the answer in about this many tokens (4 characters each): hunks cut, the lowest commits dropped.")
@click.option("--no-update", is_flag=True, help="Search the history as indexed, without reading new commits first.")
@db_option
@json_option
def history(query, path, glob, since, limit, max_tokens, no_update, db, as_json):
    """Search the commits of the codebase at PATH (default: here) for QUERY: BM25 over messages and
    diff hunks and embedding KNN over commits, fused by RRF; one result per commit with its
    matching hunks. The index must exist (codii-sql build PATH reads the history)."""
    if path is None and glob and os.path.isdir(os.path.expanduser(glob)):
        # `search --path` names the codebase; here the codebase is the PATH argument.
        raise UsageError(f"--path takes a glob over the files of the commits, and {glob!r} is a folder",
                         f"codii-sql history {query!r} {glob}")
    request = service.HistoryRequest(query, path, glob, since, limit, max_tokens, update=not no_update, db=db)
    answer = service.search_history(request)
    note = answer.note(words)
    if note and not as_json:
        echo(f"Note: {note}", err=True)
    if as_json:
        return emit(answer.to_dict(words), one_line=max_tokens is not None)  # as the budget counts it
    if not answer.results:
        echo("No commits found.")
    for n, hit in enumerate(answer.results, 1):
        _print_commit(n, hit, with_score=True)


@click.command()
@click.argument("location", metavar="FILE:LINE")
@click.argument("path", required=False, default=None)
@click.option("--path", "root", default=None, help="The folder FILE is relative to (default: the current directory); "
                                                   "also PATH after FILE:LINE, as history takes it.")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_WHY_LIMIT), default=DEFAULT_WHY_LIMIT, show_default=True,
              help="Commits told at most, newest first.")
@click.option("--max-tokens", type=click.IntRange(1), default=None,
              help="Fit the answer in about this many tokens (4 characters each).")
@json_option
def why(location, path, root, limit, max_tokens, as_json):
    """The commits that made line LINE of FILE what it is: git blame names the last, git log -L
    follows the line back; each with its subject, body and the hunk of that line. Needs git, not an index."""
    if path is not None and path.strip().isdigit() and ":" not in location:  # `why yaml.go 88` (a new user)
        raise UsageError(f"the line goes after the file, with a colon: {location}:{path.strip()}",
                         f"codii-sql why {location}:{path.strip()}" + (f" --path {root}" if root else ""))
    if path is not None and root is not None and os.path.abspath(path) != os.path.abspath(root):
        raise UsageError(f"PATH {path} and --path {root} name two folders", "pass one of them")
    root = root if root is not None else path
    file, sep, line = location.rpartition(":")
    if not sep or not file or not line.strip().isdigit():
        raise UsageError(f"{location!r} is not FILE:LINE", "codii-sql why src/app.py:42")
    answer = service.explain_line(file if root or os.path.isabs(file) else os.path.abspath(file), int(line),
                                  root=root, limit=limit, max_tokens=max_tokens)
    note = answer.note(words)
    if note and not as_json:
        echo(f"Note: {note}", err=True)
    if as_json:
        return emit(answer.to_dict(words), one_line=max_tokens is not None)  # as the budget counts it
    echo(f"{shown(answer.file)}:{answer.line}  ({answer.root})")
    for n, hit in enumerate(answer.results, 1):
        _print_commit(n, hit, with_score=False)


def _print_commit(n: int, hit, *, with_score: bool) -> None:
    """``N. sha date author  subject``, the body's first lines, then each hunk under its path."""
    date = datetime.datetime.fromtimestamp(hit.date).astimezone().date().isoformat()
    score = f"  score={hit.score:.4f}" if with_score else ""
    echo(f"{n}. {hit.sha[:12]} {date} {shown(hit.author)}  {shown(hit.subject)}{score}", bold=True)
    body = [ln for ln in hit.body.split("\n") if ln.strip()]
    for ln in body[:BODY_LINES]:
        echo(f"    {shown(ln)}")
    if len(body) > BODY_LINES:
        echo(f"    … ({len(body) - BODY_LINES} more lines)")
    for h in hit.hunks:
        renamed = f" (from {shown(h.old_path)})" if h.old_path else ""
        echo(f"    {shown(h.path)}{renamed}  -{h.old_start},{h.old_lines} +{h.new_start},{h.new_lines}")
        for ln in h.content.split("\n")[1:]:
            echo(f"      {shown(ln)}")
    if hit.hunk_count > len(hit.hunks):
        echo(f"    ({hit.hunk_count - len(hit.hunks)} more hunks)")
