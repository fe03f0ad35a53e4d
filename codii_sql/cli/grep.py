"""``grep``: exact and regular-expression search of the indexed files, with ripgrep's options and output."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Callable

import click

from .. import service
from ..text import has_controls
from .output import db_option, echo, json_text, shown
from .words import words

_CONTEXT = click.IntRange(0, service.MAX_CONTEXT)


def _case(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Note which of -s, -i and -S came last: click calls these in the order they were given."""
    if value:
        ctx.meta["codii_case"] = param.name
    return value


@click.command("grep")
@click.argument("pattern", required=False)
@click.argument("paths", nargs=-1)
@click.option("-e", "--regexp", "patterns", multiple=True, metavar="PATTERN",
              help="A pattern (repeatable: a line matches when any does); PATTERN is then a PATH.")
@click.option("-F", "--fixed-strings", "fixed", is_flag=True, help="The patterns are literal strings, not regexes.")
@click.option("-i", "--ignore-case", "ignore_case", is_flag=True, callback=_case, help="Match case-insensitively.")
@click.option("-w", "--word-regexp", "word", is_flag=True, help="Only matches with no word character around them.")
@click.option("-S", "--smart-case", "smart_case", is_flag=True, callback=_case,
              help="Case-insensitive when the patterns hold no upper-case letter.")
@click.option("-s", "--case-sensitive", "case_sensitive", is_flag=True, callback=_case,
              help="Case-sensitive (the last of -s, -i and -S wins, as in rg).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; exit 0 at the first match, 1 when none.")
@click.option("--column", "column", is_flag=True, help="Show the column (1-based byte) of each line's first match.")
@click.option("--vimgrep", is_flag=True, help="Each match on a line of its own as path:line:column:text (vim's "
                                             "grepprg, editors).")
@click.option("-b", "--byte-offset", "byte_offset", is_flag=True,
              help="Show the byte offset (0-based) of each line's start in its file (with -o: of each match).")
@click.option("-T", "--type-not", "types_not", multiple=True, help="Leave out files of this language (repeatable).")
@click.option("-x", "--line-regexp", "line_regexp", is_flag=True, help="Only matches that are a whole line.")
@click.option("-v", "--invert-match", "invert", is_flag=True, help="The lines that do not match (every indexed file).")
@click.option("-o", "--only-matching", "only_matching", is_flag=True, help="Print each match alone, a line each.")
@click.option("-m", "--max-count", "max_count", type=click.IntRange(0), default=None,
              help="Each file's first NUM matching lines at most (0: none, exit 1, as rg).")
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
def grep(pattern, paths, patterns, fixed, ignore_case, word, smart_case, case_sensitive, quiet, column, vimgrep,
         byte_offset, types_not, line_regexp, invert, only_matching, max_count, hidden, files_only, without_match,
         count, count_matches, numbers, with_filename, after, before, context, globs, types, sort, limit, processes,
         no_update, db, as_json):
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
    if max_count == 0:  # rg: no line of any file, so no match
        raise SystemExit(1)
    if count_matches:  # rg's --count-matches is -c -o
        count = only_matching = True
    last = click.get_current_context().meta.get("codii_case")  # rg: the last of -s, -i, -S decides
    ignore_case, smart_case = last == "ignore_case", last == "smart_case"
    if quiet:  # the first match answers (rg -q): counted, not printed
        as_json = count = only_matching = without_match = vimgrep = False
        files_only, limit = True, 1
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
                                  processes=processes, offsets=as_json or byte_offset, types_not=list(types_not))
    if not (as_json or no_update) and all(os.path.lexists(p) for p in paths[:1]):
        first = service.first_build(_folder(paths[0]) if paths else None, db)
        if first is not None:
            echo(f"Indexing {first} first: every file is searchable by grep in seconds (a search embeds the "
                 "chunks later); later greps update only changed files.", err=True)
    if with_filename is None:  # rg leaves the path out when it searches one file it was given
        with_filename = not (len(paths) == 1 and os.path.isfile(paths[0]))
    printer = _Printer("quiet" if quiet else "json" if as_json else "count" if count else "files" if files_only
                       or without_match else "vim" if vimgrep and not invert else "only" if only_matching and not invert
                       else "lines",
                       numbers=numbers, with_context=bool(request.before or request.after),
                       with_filename=with_filename or vimgrep, count_matches=only_matching and not invert, paths=paths,
                       column=column or vimgrep, byte_offset=byte_offset, only=only_matching and not invert)
    try:
        answer = service.grep(request, on_file=printer.file)
        for f in answer.files if without_match else ():  # known only at the end
            printer.file(answer, f)
        printer.end(answer)
    except BrokenPipeError:  # `grep x | head -1`: the reader has what it wanted; exit as rg does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        raise SystemExit(0 if printer.printed else 1) from None
    # rg: "No files were searched" is exit 2 when it searched its own folder, 1 for a PATH given
    unsearched = answer.nothing_selected and not paths
    note = answer.note(words)
    if quiet:
        raise SystemExit(0 if answer.matched_lines else 2 if answer.timed_out or unsearched
                         or answer.missing_paths else 1)
    if note and not as_json:
        echo(f"Note: {note}", err=True)
    if answer.missing_paths:  # rg: a path that is not there is an error, whatever the others held
        raise SystemExit(2)
    if without_match:  # rg: success when a file was printed
        raise SystemExit(0 if answer.files else 2 if answer.timed_out or unsearched else 1)
    if not answer.matched_lines:
        # Files the pattern timed out on may hold a match: "none" would be a guess (rg exits 2 on errors);
        # filters that leave no file to search are no answer either (rg: "No files were searched", 2).
        raise SystemExit(2 if answer.timed_out or unsearched else 1)


def _folder(path: str) -> str:
    """``path`` if a folder, else the folder it lies in (grep also takes files)."""
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


class _Printer:
    """Prints a grep answer file by file as the service adds them, in the form rg's flags ask: ``lines``
    (``path:line:text``), ``only`` (``-o``), ``vim`` (``--vimgrep``: each match, with ``only`` its text
    alone), ``count`` (``-c``), ``files`` (``-l``), ``json`` (``--json``) or ``quiet`` (``-q``), each
    path named as rg names it (:func:`_rg_names`); ``column`` and ``byte_offset`` add rg's ``--column``
    (1-based) and ``-b`` (0-based bytes in the file: a line's start, or with ``-o`` a match's)."""

    def __init__(self, mode: str, *, numbers: bool, with_context: bool, with_filename: bool, count_matches: bool,
                 paths: tuple[str, ...], column: bool = False, byte_offset: bool = False, only: bool = False) -> None:
        self.mode, self.numbers, self.with_context, self.with_filename = mode, numbers, with_context, with_filename
        self.count_matches, self.paths, self.column, self.byte_offset = count_matches, paths, column, byte_offset
        self.only = only
        self.printed = False
        self._matches = 0  # submatches printed (--json's summary)
        self._name = None
        self._last = None  # (path, line) last printed, for "--" between context groups

    def file(self, answer, f) -> None:
        """Print ``f`` (a GrepFile of ``answer``) now: a reader such as ``head -1`` has its line at once."""
        if self.mode == "quiet":
            self.printed = True
            return
        if self._name is None:
            self._name = _rg_names(answer.codebase, self.paths)
        path = shown(self._name(f.path))
        if self.mode == "json":
            text = "".join(json_text(o) + "\n" for o in _json_file(f, self._name(f.path)))
        elif self.mode == "count":  # the count says whether the file matched too (with -o: of matches)
            n = sum(len(g.spans) for g in f.lines) if self.count_matches else f.matches
            text = f"{path}:{n}\n" if self.with_filename else f"{n}\n"
        elif self.mode == "files":
            text = path + "\n"
        elif self.mode in ("only", "vim"):
            text = "".join(self._matches_alone(f, path))
        else:
            text = "".join(self._lines(f, path))
        _write(text)
        self.printed = True
        self._matches += sum(len(g.spans) for g in f.lines)

    def end(self, answer) -> None:
        """What follows the files: ``--json``'s summary."""
        if self.mode == "json":
            _write(json_text(_json_summary(answer, self._matches)) + "\n")

    def _lines(self, f, path: str):
        """rg's ``path:line:text`` (``path-line-text`` for context lines, ``--`` between groups; without the
        path when ``with_filename`` is false)."""
        if not self.with_filename:
            path = ""
        if not (self.with_context or self.column or self.byte_offset) and not has_controls(
                "".join(g.text for g in f.lines)):
            # A file's lines at once, none needing an escape: a call per line was most of printing
            # Django's 99k `self` lines (docs/benchmarks.md "Grep", fifth round).
            head = f"{path}:" if self.with_filename else ""
            yield "".join([f"{head}{g.line}:{g.text}\n" for g in f.lines] if self.numbers
                          else [f"{head}{g.text}\n" for g in f.lines])
            return
        for g in f.lines:
            if self.with_context and self._last is not None and self._last != (f.path, g.line - 1):
                yield "--\n"
            self._last = (f.path, g.line)
            mark = ":" if g.matched else "-"
            column = g.spans[0][0] + 1 if self.column and g.matched and g.spans else None
            yield self._head(path, mark, g.line, column, g.offset) + _raw_cr(g.text) + "\n"

    def _matches_alone(self, f, path: str):
        """rg's ``-o`` (each match's text alone on a line) and ``--vimgrep`` (each match, on its line's
        text unless ``-o``), after the path, line number, column and offset asked for."""
        vim = self.mode == "vim"
        for g in f.lines:
            if not g.matched:
                continue
            raw = g.text.encode("utf-8", "surrogateescape")
            for start, end in g.spans:
                text = _raw_cr(raw[start:end].decode("utf-8", "replace")) if self.only else _raw_cr(g.text)
                offset = None if g.offset is None else g.offset + start
                yield self._head(path, ":", g.line, start + 1 if self.column or vim else None, offset,
                                 numbers=self.numbers or vim) + text + "\n"

    def _head(self, path: str, mark: str, line: int, column: int | None, offset: int | None, *,
              numbers: bool | None = None) -> str:
        """``path:line:column:offset:`` as far as asked (``-`` after each for a context line)."""
        out = f"{path}{mark}" if self.with_filename and path else ""
        if self.numbers if numbers is None else numbers:
            out += f"{line}{mark}"
        if column is not None:
            out += f"{column}{mark}"
        if self.byte_offset and offset is not None:
            out += f"{offset}{mark}"
        return out


def _write(text: str) -> None:
    """``text`` to stdout now, a byte of a line that is not UTF-8 (a lone surrogate,
    :func:`~codii_sql.text.decode_kept`) as that byte, as rg prints it."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:  # the whole text is encoded before any of it is written
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode(sys.stdout.encoding or "utf-8", "surrogateescape"))
    sys.stdout.flush()


def _raw_cr(text: str) -> str:
    """``text`` safe for a terminal (:func:`shown`), a CRLF line's last CR kept as the byte rg prints."""
    return shown(text[:-1]) + "\r" if text.endswith("\r") else shown(text)


def _rg_names(codebase: str, paths: tuple[str, ...]) -> Callable[[str], str]:
    """How rg names a file of the answer (whose path is relative to the codebase root): below the PATH it
    was found under, as typed (``./src/a.py``, ``../b.py``; an absolute PATH gives absolute names), or,
    with no PATH, relative to the working folder (a grep from ``src/`` prints ``a.py``), so the name
    opens from where the grep ran. An index alone (``codebase`` is its file) names its files as it
    stores them."""
    if not os.path.isdir(codebase):
        return lambda path: path
    root = os.path.realpath(codebase)
    if not paths:
        here = os.path.relpath(os.path.realpath(os.getcwd()), root)
        if here == "." or here.startswith(os.pardir):
            return lambda path: path
        return lambda path: os.path.relpath(path, here)
    scopes = []
    for typed in paths:
        rel = os.path.relpath(os.path.realpath(typed), root).replace(os.sep, "/")
        if not rel.startswith(os.pardir):
            scopes.append(("" if rel == "." else rel, typed))
    scopes.sort(key=lambda s: -len(s[0]))

    def name(path: str) -> str:
        for scope, typed in scopes:
            if path == scope:
                return typed
            if not scope or path.startswith(scope + "/"):
                rest = path[len(scope) + 1:] if scope else path
                return typed + rest if typed.endswith("/") else f"{typed}/{rest}"
        return path

    return name


def _json_file(f, name: str) -> list[dict]:
    """One file's JSON lines as ``rg --json`` prints them: ``begin``, ``match``/``context``, ``end``."""
    path = {"text": name}
    out = [{"type": "begin", "data": {"path": path}}]
    for g in f.lines:
        raw = g.text.encode("utf-8", "surrogateescape")
        subs = [{"match": {"text": raw[s:e].decode("utf-8", "replace")}, "start": s, "end": e} for s, e in g.spans]
        line = g.text + ("" if g.unended else "\n")
        out.append({"type": "match" if g.matched else "context",
                    "data": {"path": path, "lines": _json_data(line),
                             "line_number": g.line,
                             "absolute_offset": g.offset, "submatches": subs}})
    out.append({"type": "end", "data": {"path": path, "binary_offset": None,
                                        "stats": {"searches": 1, "searches_with_match": 1, "matched_lines": f.matches,
                                                  "matches": sum(len(g.spans) for g in f.lines)}}})
    return out


def _json_data(text: str) -> dict:
    """rg's JSON for some text: ``{"text": ...}``, or ``{"bytes": base64}`` when it is not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return {"bytes": base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")}
    return {"text": text}


def _json_summary(answer, matches: int) -> dict:
    """``rg --json``'s last line (``matches``: the submatches printed), whose ``codii`` member tells how the
    candidates were found and the notes."""
    seconds = answer.seconds
    elapsed = {"secs": int(seconds), "nanos": int((seconds % 1) * 1e9), "human": f"{seconds:.6f}s"}
    return {"type": "summary", "data": {
        "elapsed_total": elapsed,
        "stats": {"elapsed": elapsed, "searches": answer.files_read, "searches_with_match": answer.matched_files,
                  "matched_lines": answer.matched_lines,
                  "matches": matches},
        "codii": {k: v for k, v in answer.to_dict(words).items() if k not in ("files", "patterns")}}}
