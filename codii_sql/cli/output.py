"""Output of the CLI: shared options, JSON, result listings (progress: :mod:`.progress`)."""

from __future__ import annotations

import datetime
import json
import re

import click

from .. import service
from ..errors import Remedy
from ..text import escaped, shown_bytes
from .words import words


def db_option(f):
    """The ``--db FILE`` option of every command."""
    return click.option("--db", type=click.Path(dir_okay=False), default=None,
                        help="Index file to use instead of $CODII_SQL_HOME/indexes/<name>-<hash>.db.")(f)


def json_option(f):
    """The ``--json`` flag of every command."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(f)


def emit(obj, *, one_line: bool = False) -> None:
    """Print ``obj`` as indented JSON (non-ASCII kept as is), times (``*_at``) as in text output;
    ``one_line`` as one line (the last line of a JSON-lines stream)."""
    click.echo(json_text(_dated(obj), indent=None if one_line else 2))


#: C1 controls, which ``json.dumps(ensure_ascii=False)`` writes raw (C0 it escapes), and lone surrogates (a
#: name's bytes that are not UTF-8), which it writes as no UTF-8 at all (a helper's `list --json` was unreadable).
_C1 = re.compile("[\x80-\x9f\ud800-\udfff]")


def json_text(obj, *, indent: int | None = None, compact: bool = False) -> str:
    """``obj`` as JSON, non-ASCII kept as is but every control character escaped (``\\u009b``):
    the same value for a parser, and nothing that drives a terminal; ``compact``: no spaces (rg's)."""
    return c1_escaped(json.dumps(obj, ensure_ascii=False, indent=indent, default=_plain,
                                 separators=(",", ":") if compact else None))


def c1_escaped(json_text: str) -> str:
    """JSON text with its raw C1 controls and lone surrogates as ``\\u0080``-style escapes (C0 ones json escapes
    itself): valid UTF-8 that a parser reads back as the same string."""
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def _plain(value) -> str:
    """A value JSON has no type for: a remedy in the CLI's words, anything else as text."""
    return words(value) if isinstance(value, Remedy) else str(value)


def _dated(obj):
    """``obj`` with every number under a ``*_at`` key as local ISO 8601 (:func:`iso_time`)."""
    if isinstance(obj, dict):
        return {k: iso_time(v) if k.endswith("_at") and isinstance(v, (int, float)) and not isinstance(v, bool)
                else _dated(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_dated(v) for v in obj]
    return obj


def iso_time(ts: float) -> str:
    """Epoch seconds as local ISO 8601 with its UTC offset (``2026-12-01T13:20:05+00:00``)."""
    return datetime.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def fmt_value(key: str, value):
    """A status or snapshot value for text output: times (``*_at``) as local ISO 8601, containers as JSON."""
    if key.endswith("_at") and isinstance(value, (int, float)):
        return iso_time(value)
    if isinstance(value, Remedy):
        return words(value)
    return json.dumps(_dated(value), default=_plain) if isinstance(value, (dict, list)) else value


def echo(message: str = "", *, err: bool = False, nl: bool = True, bold: bool = False) -> None:
    """``click.secho`` for text answers, with control characters but newline and tab escaped: a
    codebase folder or a message quoting one (``esc\x1b]0;T\x07dir``) cannot drive the terminal. On stderr
    (errors, notes), a byte of a name that is not UTF-8 is written as ``\xff``, not as Python's ``\udcff``."""
    text = escaped(str(message), lines=True)
    if err:
        text = shown_bytes(text)
    if bold:
        click.secho(text, err=err, nl=nl, bold=True)
    else:  # secho without a style still ends in a reset sequence on a terminal (a new user saw a stray \e[0m)
        click.echo(text, err=err, nl=nl)


def say_pending_build(path: str | None, db: str | None, searchable_by: str, later: str, embeds: bool = True) -> None:
    """On stderr, before a command's update builds at length (:func:`~codii_sql.service.pending_build`): a
    first build, or the rest of one that did not finish; ``searchable_by`` names how the files are found
    once the lexical phase is done (``BM25``, ``grep``...), ``later`` the command's later calls, ``embeds``
    whether the command's build goes on to embed the chunks (grep's and symbol's do not)."""
    pending = service.pending_build(path, db)
    if pending is None:
        return
    root, left = pending
    if left is None:
        vectors = ("the model embeds the chunks in the background" if embeds and service.embeds_first(root) else
                   "no chunk is embedded: its .codii.yaml says vectors: false" if embeds else
                   "no chunk is embedded: a search or `codii-sql build` embeds them")
        echo(f"Indexing {root} first: every file is searchable by {searchable_by} in seconds ({vectors}); later "
             f"{later} update only changed files.", err=True)
    else:  # its vectors were on or off: the build goes on as it was
        echo(f"Finishing the last build of {root} first ({left}); later {later} update only changed files.", err=True)


def shown(text: str) -> str:
    """``text`` with control characters as escapes (``\\n``, ``\\x07``): safe to print on a terminal."""
    return escaped(text)


def print_results(answer) -> None:
    """The answer's results with their first 12 lines (:data:`~codii_sql.service.PERSON`), then a
    count and the time on stderr; over several codebases each path after its codebase's root."""
    if not answer.results:
        echo("No results.")
    for line in service.listing(answer.results, service.PERSON_LISTING, with_codebase=answer.many, safe=shown):
        echo(line, bold=not line.startswith(" "))
    n = len(answer.results)
    echo(f"({n} result{'' if n == 1 else 's'} in {answer.seconds * 1000:.0f} ms)", err=True)


def describe_filters(filters: dict) -> str:
    """``only .py .md; ignore tests/`` for the filters a build recorded."""
    parts = [f"only {' '.join(filters['extensions'])}"] if filters["extensions"] else []
    parts += [f"ignore {' '.join(filters['ignore_patterns'])}"] if filters["ignore_patterns"] else []
    return "; ".join(parts)


def print_dry_run(survey: dict) -> None:
    """The text form of ``build --dry-run``: totals, languages, roles, skips, folders, model time."""
    estimate = survey.get("estimate")
    # The files too are an estimate then: those the sample found binary or minified are taken out by extension.
    about = (f" (estimated from a random sample of {estimate['sample_files']:,} of the {estimate['files']:,} files the "
             "walk found)" if estimate else "")
    echo(f"{survey['codebase']}: {'about ' if estimate else ''}{survey['files']:,} files and {survey['chunks']:,} chunks "
         f"would be indexed{about}")
    for title, key in (("by language", "languages"), ("by role", "roles"), ("largest folders", "largest_folders")):
        rows = survey[key]
        echo(f"  {title}: " + ", ".join(f"{r.get('name', r.get('path'))} {r['files']} files/{r['chunks']} chunks"
                                             for r in rows[:12]))
    if survey["skipped"]:
        echo("  skipped: " + ", ".join(f"{k} {v}" for k, v in survey["skipped"].items()))
    if survey.get("hidden_by"):
        rules = ", ".join(f"{h['where']} `{h['rule']}` ({h['paths']:,} paths)" for h in survey["hidden_by"])
        echo(f"  nothing to index: the ignore rules leave every path out, most by {rules}")
    embed = survey["embed"]
    if not embed["vectors"]:
        echo(f"  vectors: off ({embed['texts']} texts would wait for a build with --vectors)")
    elif not embed["texts"]:
        echo("  model: nothing to embed (every chunk text has a vector in the index or the cache)")
    else:
        minutes = embed["estimated_seconds"] / 60
        echo(f"  model: {embed['texts']} new texts ({embed['word_pieces']} word pieces), about "
                   f"{minutes:.1f} min on this machine ({embed['chunks_per_second']} chunks/s measured on "
                   f"{embed['sample']} of them); BM25 covers every file before that")


def print_export(out: dict) -> None:
    """The text form of an export: where, how big against the index, and what it holds."""
    m = out["manifest"]
    git = f", {m['git']['commit'][:12]}{' (uncommitted changes)' if m['git'].get('dirty') else ''}" if m.get("git") else ""
    echo(f"{out['file']}: {out['bytes'] / 1e6:.1f} MB (the index: {out['source_bytes'] / 1e6:.1f} MB), in "
         f"{out['seconds']:.1f} s; {m['codebase']}{git}: {m['files']} files, {m['chunks']} chunks, vectors "
         f"{m['vectors']['done']}/{m['vectors']['total']} ({m['embedder']})")
