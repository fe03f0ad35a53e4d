"""``search``: ask a codebase a question, one at a time or a file of them."""

from __future__ import annotations

import json

import click

from .. import service
from ..errors import CodiiError, UsageError
from ..service import MAX_LIMIT, MODES, ROLES, SearchOptions
from .output import (
    db_option,
    echo,
    emit,
    json_option,
    json_text,
    print_results,
    say_pending_build,
)
from .progress import progress_bar, stderr_is_terminal
from .words import message, words


def _search_options(limit, mode, exts, glob, language, no_prior, group_by, rerank, rerank_model,
                    max_tokens=None, grep=None, role=None) -> SearchOptions:
    return SearchOptions(limit=limit, mode=mode, exts=list(exts), glob=glob, language=language, role=role,
                         role_prior=not no_prior, group_by_file=group_by == "file",
                         rerank=rerank or rerank_model is not None, rerank_model=rerank_model, max_tokens=max_tokens,
                         grep=grep)


@click.command()
@click.argument("query", required=False)
@click.option("--path", "paths", multiple=True,
              help="Codebase root (default: the root recorded in --db, else the current directory); a subfolder "
                   "of an indexed codebase searches that index, keeping files under the subfolder. Repeat it to "
                   "search several codebases at once.")
@click.option("--workspace", default=None,
              help="Search every codebase of this workspace (see `codii-sql workspace`), with any --path too.")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True)
@click.option("--ext", "exts", multiple=True, help="Only files ending in this extension (repeatable), e.g. --ext .py")
@click.option("--glob", default=None, help="Only paths matching this glob, e.g. 'src/*.py' (* also matches /).")
@click.option("--language", default=None, help="Only chunks of this language, e.g. python.")
@click.option("--role", type=click.Choice(ROLES), default=None,
              help="Only files of this role, e.g. source (no tests, docs or generated files) or test.")
@click.option("--group-by", type=click.Choice(["chunk", "file"]), default="chunk", show_default=True,
              help="file: one result per file, ranked by its best chunk.")
@click.option("--no-prior", is_flag=True, help="Turn off the soft source-over-tests/docs ranking prior.")
@click.option("--rerank", is_flag=True, help="Re-score the top 30 with a cross-encoder ($CODII_SQL_RERANK_MODEL).")
@click.option("--rerank-model", type=click.Path(exists=True), default=None,
              help="Cross-encoder for --rerank: an ONNX file/folder or a Hugging Face BERT folder (implies --rerank).")
@click.option("--max-tokens", type=int, default=None,
              help="Fit the answer in about this many tokens (4 characters each, at least 400): chunks trimmed to "
                   "the lines around their matches, a file's overlapping chunks merged, the lowest results dropped; a note says what. "
                   "With --json, the answer is printed on one line, as the budget counts it.")
@click.option("--grep", "grep_pattern", default=None, metavar="PATTERN",
              help="Only chunks holding a line this regex matches (as `codii-sql grep` finds them).")
@click.option("--no-update", is_flag=True, help="Search the index as it is, without updating it first.")
@click.option("--queries-file", type=click.File("r", encoding="utf-8", errors="surrogateescape"), default=None,
              help='Batch mode: JSONL lines {"id", "query"}; prints {"id", "results"} lines.')
@db_option
@json_option
@click.option("--jsonl", is_flag=True, help="Print one JSON result per line.")
def search(query, paths, workspace, limit, mode, exts, glob, language, role, group_by, no_prior, rerank, rerank_model,
           max_tokens, grep_pattern, no_update, queries_file, db, as_json, jsonl):
    """Search the codebase for QUERY (natural language or an identifier).

    Builds the index first if it is missing, and updates it if files changed.
    A QUERY that starts with "-" goes after "--": codii-sql search --path . -- "-v flag".
    """
    if as_json and jsonl:
        raise UsageError("pass either --json (one object) or --jsonl (one result per line), not both")
    opts = _search_options(limit, mode, exts, glob, language, no_prior, group_by, rerank, rerank_model, max_tokens,
                           grep_pattern, role)
    many = bool(workspace) or len(paths) > 1
    if many and queries_file is not None:
        raise UsageError("--queries-file searches one codebase: drop --workspace or the extra --path")
    request = service.SearchRequest(query or "", opts, list(paths), workspace, db, update=not no_update)
    if queries_file is not None:
        if query is not None:
            raise UsageError("pass either QUERY or --queries-file, not both")
        return _batch_search(request, queries_file, as_json)
    if query is None:
        raise UsageError("missing QUERY", 'codii-sql search "where are retries handled" --path REPO')
    if not (many or as_json or jsonl or no_update) and query.strip():
        say_pending_build(paths[0] if paths else None, db, "BM25", "searches")
    with progress_bar(not (as_json or jsonl) and stderr_is_terminal()) as bar:
        answer = service.search(request, progress=bar)
    if answer.scope and not (as_json or jsonl):
        echo(f"Note: searching the index of {answer.codebase}, files under {answer.scope}/ only", err=True)
    _print(answer, as_json, jsonl)


def _print(answer, as_json: bool, jsonl: bool) -> None:
    """The note on stderr (JSON carries it), then the answer as JSON, JSON lines or text."""
    note = answer.note(words)
    if note and not as_json:
        echo(f"Note: {note}", err=True)
    if as_json:
        data = answer.to_dict(words)
        emit(data, one_line=bool(data.get("budget")))  # a budget counts the JSON agents get: one line
    elif jsonl:
        for r in answer.results:
            click.echo(json_text(r.to_dict()))
    else:
        print_results(answer)


def _batch_search(request, lines, as_json):
    """One answer line per query line (streamed); with ``as_json`` one array of them at the end."""
    answers: list[dict] = []
    out = answers.append if as_json else (lambda answer: click.echo(json_text(answer)))
    failed = 0
    with service.opened(request) as ask:
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            item: dict = {}
            try:
                item = json.loads(line)
                if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                    raise UsageError('each line must be a JSON object with a "query" string')
                answer = ask(item["query"])
                # The answer as `search --json` gives it (a line had results, no_good_match and note only: no
                # notes, best_cosine or budget, a new user), with the line's id first.
                out({"id": item.get("id"), **answer.to_dict(words)})
            except (ValueError, CodiiError) as err:
                qid = item.get("id") if isinstance(item, dict) else None
                out({"id": qid, "line": n, "error": f"line {n}: {message(err) if isinstance(err, CodiiError) else err}"})
                failed += 1
    if as_json:
        emit(answers)
    if failed:
        # Every line was answered; the exit status tells a script that some answers are errors.
        echo(f"Error: {failed} queries failed (their lines carry an \"error\" key)", err=True)
        raise SystemExit(1)
