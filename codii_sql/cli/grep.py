"""``grep``: exact and regular-expression search of the indexed files, with ripgrep's options and output."""

from __future__ import annotations

import os
import sys

import click

from .. import service
from ..text import has_controls
from .output import db_option, echo, json_text, shown
from .words import words

_CONTEXT = click.IntRange(0, service.MAX_CONTEXT)


@click.command("grep")
@click.argument("pattern", required=False)
@click.argument("paths", nargs=-1)
@click.option("-e", "--regexp", "patterns", multiple=True, metavar="PATTERN",
              help="A pattern (repeatable: a line matches when any does); PATTERN is then a PATH.")
@click.option("-F", "--fixed-strings", "fixed", is_flag=True, help="The patterns are literal strings, not regexes.")
@click.option("-i", "--ignore-case", "ignore_case", is_flag=True, help="Match case-insensitively.")
@click.option("-w", "--word-regexp", "word", is_flag=True, help="Only matches with no word character around them.")
@click.option("-S", "--smart-case", "smart_case", is_flag=True,
              help="Case-insensitive when the patterns hold no upper-case letter.")
@click.option("-x", "--line-regexp", "line_regexp", is_flag=True, help="Only matches that are a whole line.")
@click.option("-v", "--invert-match", "invert", is_flag=True, help="The lines that do not match (every indexed file).")
@click.option("-o", "--only-matching", "only_matching", is_flag=True, help="Print each match alone, a line each.")
@click.option("-m", "--max-count", "max_count", type=click.IntRange(1), default=None,
              help="Each file's first NUM matching lines at most.")
@click.option("--hidden", is_flag=True, help="Also files and folders whose name starts with '.' (as rg, left out "
                                             "by default; a path given is searched whatever its name).")
@click.option("-l", "--files-with-matches", "files_only", is_flag=True, help="Print the paths of files that match.")
@click.option("--files-without-match", "without_match", is_flag=True,
              help="Print the paths of the files where nothing matches.")
@click.option("-c", "--count", "count", is_flag=True, help="Print each matching file's number of matching lines.")
@click.option("--count-matches", "count_matches", is_flag=True, help="Print each matching file's number of matches.")
@click.option("-n/-N", "--line-number/--no-line-number", "numbers", default=True, help="Show line numbers (default).")
@click.option("-H/-I", "--with-filename/--no-filename", "with_filename", default=None,
              help="Show each line's path, or not [default: shown, but for a single FILE given, as rg].")
@click.option("-A", "--after-context", "after", type=_CONTEXT, default=None, help="Lines after each match.")
@click.option("-B", "--before-context", "before", type=_CONTEXT, default=None, help="Lines before each match.")
@click.option("-C", "--context", "context", type=_CONTEXT, default=0, help="Lines before and after each match.")
@click.option("-g", "--glob", "globs", multiple=True,
              help="Only paths matching this gitignore-style glob ('!' excludes; repeatable, the last match wins).")
@click.option("-t", "--type", "types", multiple=True, help="Only files of this language (py, rust, go...; repeatable).")
@click.option("--sort", type=click.Choice(["path", "role"]), default="path", show_default=True,
              help="File order: by path, or source files first, then tests, docs, config, the rest.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Stop after this many matching lines.")
@click.option("-j", "--threads", "processes", type=click.IntRange(1), default=None,
              help="Processes reading and matching files (1 or 2) [default: two for a long grep while a CPU is idle].")
@click.option("--no-update", is_flag=True, help="Search the index as it is, without updating it first.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="JSON lines in rg --json's shape (begin, match, context, "
                                                       "end, summary).")
def grep(pattern, paths, patterns, fixed, ignore_case, word, smart_case, line_regexp, invert, only_matching, max_count,
         hidden, files_only, without_match, count, count_matches, numbers, with_filename, after, before, context, globs,
         types, sort, limit, processes, no_update, db, as_json):
    """Lines matching PATTERN (Python regex syntax) in the indexed files under PATH (default: the current
    folder's codebase), in path and line order, as `rg -n --no-heading` prints them. Candidate files come
    from the index's trigrams; every one is read and matched exactly. Exit status 1 when nothing matched,
    2 on an error or when nothing matched but some files timed out (their answer is unknown)."""
    if as_json:  # as rg: a count or a list of files has no JSON lines (they were dropped without a word)
        clash = next((flag for flag, given in (("--count", count), ("--count-matches", count_matches),
                                               ("--files-with-matches", files_only),
                                               ("--files-without-match", without_match)) if given), None)
        if clash:
            raise click.UsageError(f"{clash} cannot be used with --json")
    if count_matches:  # rg's --count-matches is -c -o
        count = only_matching = True
    without_match = without_match and not count  # -c wins, as in rg
    if patterns:
        paths = ((pattern,) if pattern is not None else ()) + tuple(paths)
    elif pattern is not None:
        patterns = (pattern,)
    request = service.GrepRequest(list(patterns), fixed=fixed, ignore_case=ignore_case, word=word, paths=list(paths),
                                  db=db, globs=list(globs), types=list(types),
                                  before=context if before is None else before,
                                  after=context if after is None else after, limit=limit, sort=sort,
                                  update=not no_update,
                                  counts_only=(files_only or count or without_match) and not (as_json or only_matching),
                                  glob_base=os.getcwd(), smart_case=smart_case, max_count=max_count, invert=invert,
                                  hidden=hidden, line_regexp=line_regexp, without_match=without_match,
                                  processes=processes, offsets=as_json)
    if not (as_json or no_update) and all(os.path.lexists(p) for p in paths[:1]):
        first = service.first_build(_folder(paths[0]) if paths else None, db)
        if first is not None:
            echo(f"Indexing {first} first: every file is searchable by grep in seconds (a search embeds the "
                 "chunks later); later greps update only changed files.", err=True)
    answer = service.grep(request)
    if with_filename is None:  # rg leaves the path out when it searches one file it was given
        with_filename = not (len(paths) == 1 and os.path.isfile(paths[0]))
    try:
        if as_json:
            _print_json(answer)
        elif count:  # -c over -l, as rg: the count says whether the file matched too (with -o: of matches)
            counted = ((f, sum(len(g.spans) for g in f.lines) if only_matching and not invert else f.matches)
                       for f in answer.files)
            _write(f"{shown(f.path)}:{n}\n" if with_filename else f"{n}\n" for f, n in counted)
        elif files_only or without_match:
            _write(shown(f.path) + "\n" for f in answer.files)
        elif only_matching and not invert:
            _write(_matches_alone(answer, numbers, with_filename))
        else:
            _write(_text_lines(answer, numbers, bool(request.before or request.after), with_filename))
    except BrokenPipeError:  # `grep x | head -1`: the reader has what it wanted; exit as rg does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        raise SystemExit(0 if answer.matched_lines or without_match and answer.files else 1) from None
    note = answer.note(words)
    if note and not as_json:
        echo(f"Note: {note}", err=True)
    if answer.missing_paths:  # rg: a path that is not there is an error, whatever the others held
        raise SystemExit(2)
    if without_match:  # rg: success when a file was printed
        raise SystemExit(0 if answer.files else 2 if answer.timed_out or answer.nothing_selected else 1)
    if not answer.matched_lines:
        # Files the pattern timed out on may hold a match: "none" would be a guess (rg exits 2 on errors);
        # filters that leave no file to search are no answer either (rg: "No files were searched", 2).
        raise SystemExit(2 if answer.timed_out or answer.nothing_selected else 1)


def _folder(path: str) -> str:
    """``path`` if a folder, else the folder it lies in (grep also takes files)."""
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def _write(lines) -> None:
    """Write ``lines`` to stdout in blocks (one terminal write per line made 100k-line answers slow)."""
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) >= 4096:
            sys.stdout.write("".join(block))
            block = []
    sys.stdout.write("".join(block))
    sys.stdout.flush()


def _text_lines(answer, numbers: bool, with_context: bool, with_filename: bool = True):
    """rg's ``path:line:text`` (``path-line-text`` for context lines, ``--`` between groups; without the
    path when ``with_filename`` is false)."""
    last = None
    for f in answer.files:
        path = shown(f.path) if with_filename else ""
        if not with_context and not has_controls("".join(g.text for g in f.lines)):
            # A file's lines at once, none needing an escape: a call per line was most of printing
            # Django's 99k `self` lines (docs/benchmarks.md "Grep", fifth round).
            head = f"{path}:" if with_filename else ""
            yield "".join([f"{head}{g.line}:{g.text}\n" for g in f.lines] if numbers
                          else [f"{head}{g.text}\n" for g in f.lines])
            continue
        for g in f.lines:
            if with_context and last is not None and last != (f.path, g.line - 1):
                yield "--\n"
            last = (f.path, g.line)
            mark = ":" if g.matched else "-"
            text = shown(g.text[:-1]) + "\r" if g.text.endswith("\r") else shown(g.text)  # a CRLF line as rg prints it
            if not with_filename:
                yield f"{g.line}{mark}{text}\n" if numbers else f"{text}\n"
            else:
                yield f"{path}{mark}{g.line}{mark}{text}\n" if numbers else f"{path}{mark}{text}\n"


def _matches_alone(answer, numbers: bool, with_filename: bool):
    """rg's ``-o``: each match's text alone on a line, after its path and line number."""
    for f in answer.files:
        head = f"{shown(f.path)}:" if with_filename else ""
        for g in f.lines:
            raw = g.text.encode("utf-8")
            for start, end in g.spans:
                text = shown(raw[start:end].decode("utf-8", "replace"))
                yield f"{head}{g.line}:{text}\n" if numbers else f"{head}{text}\n"


def _print_json(answer) -> None:
    """JSON lines as ``rg --json`` prints them: per file ``begin``, ``match``/``context``, ``end``; then a
    ``summary`` whose ``codii`` member tells how the candidates were found and the notes."""
    out = []
    for f in answer.files:
        path = {"text": f.path}
        out.append({"type": "begin", "data": {"path": path}})
        for g in f.lines:
            raw = g.text.encode("utf-8")
            subs = [{"match": {"text": raw[s:e].decode("utf-8", "replace")}, "start": s, "end": e} for s, e in g.spans]
            out.append({"type": "match" if g.matched else "context",
                        "data": {"path": path, "lines": {"text": g.text + "\n"}, "line_number": g.line,
                                 "absolute_offset": g.offset, "submatches": subs}})
        out.append({"type": "end", "data": {"path": path, "binary_offset": None,
                                            "stats": {"searches": 1, "searches_with_match": 1,
                                                      "matched_lines": f.matches,
                                                      "matches": sum(len(g.spans) for g in f.lines)}}})
    seconds = answer.seconds
    elapsed = {"secs": int(seconds), "nanos": int((seconds % 1) * 1e9), "human": f"{seconds:.6f}s"}
    out.append({"type": "summary", "data": {
        "elapsed_total": elapsed,
        "stats": {"elapsed": elapsed, "searches": answer.files_read, "searches_with_match": answer.matched_files,
                  "matched_lines": answer.matched_lines,
                  "matches": sum(len(g.spans) for f in answer.files for g in f.lines)},
        "codii": {k: v for k, v in answer.to_dict(words).items() if k not in ("files", "patterns")}}})
    _write(json_text(o) + "\n" for o in out)
