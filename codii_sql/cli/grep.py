"""``grep``: exact and regular-expression search of the indexed files, with ripgrep's options and output."""

from __future__ import annotations

import os
import select
import stat
import sys

import click

from .. import service
from .grep_print import Printer, wants_color
from .output import db_option, echo, say_pending_build
from .words import words

_CONTEXT = click.IntRange(0, service.MAX_CONTEXT)


def _case(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Note which of -s, -i and -S came last: click calls these in the order they were given."""
    if value:
        ctx.meta["codii_case"] = param.name
    return value


def _type_list(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        click.echo("".join(f"{name}: {', '.join(globs)}\n" for name, globs in service.rg_types().items()), nl=False)
        ctx.exit()


@click.command("grep")
@click.argument("pattern", required=False)
@click.argument("paths", nargs=-1)
@click.option("-e", "--regexp", "patterns", multiple=True, metavar="PATTERN",
              help="A pattern (repeatable: a line matches when any does); PATTERN is then a PATH.")
@click.option("-f", "--file", "pattern_files", multiple=True, metavar="FILE",
              type=click.File("r", encoding="utf-8", errors="surrogateescape"),
              help="Patterns from FILE, one a line ('-': standard input; repeatable); PATTERN is then a PATH.")
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
@click.option("-T", "--type-not", "types_not", multiple=True, help="Leave out files of this type (repeatable).")
@click.option("-x", "--line-regexp", "line_regexp", is_flag=True, help="Only matches that are a whole line.")
@click.option("-U", "--multiline", is_flag=True, help="Matches may span lines (\\n, \\s, [^x] take a line break; . "
                                                      "does with --multiline-dotall): every line a match spans is shown.")
@click.option("--multiline-dotall", "dotall", is_flag=True, help="With -U, . matches a line break too.")
@click.option("-P", "--pcre2", is_flag=True, expose_value=False,
              help="Taken as rg takes it, for lookaround and backreferences, which every pattern here has "
                   "(the regex module reads them as PCRE2 does).")
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
@click.option("-t", "--type", "types", multiple=True,
              help="Only files of this type: rg's (py, c, h, css...: --type-list) by file name, or a language such "
                   "as python by content (repeatable).")
@click.option("--type-list", is_flag=True, expose_value=False, is_eager=True, callback=_type_list,
              help="Print rg's file types and their globs, as rg --type-list, and exit.")
@click.option("--sort", type=click.Choice(["path", "role"]), default="path", show_default=True,
              help="File order: by path, or source files first, then tests, docs, config, the rest.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Stop after this many matching lines.")
@click.option("-j", "--threads", "processes", type=click.IntRange(1), default=None,
              help="Processes reading and matching files (1 or 2) [default: two for a long grep while a CPU is idle].")
@click.option("-0", "--null", "null", is_flag=True, help="A NUL byte after each path printed, in place of ':' "
                                                        "or a line break (for xargs -0).")
@click.option("-M", "--max-columns", "max_columns", type=click.IntRange(1), default=None,
              help="A line longer than NUM bytes is printed as '[Omitted long matching line]'.")
@click.option("--max-columns-preview", "preview", is_flag=True,
              help="With -M, the line's first NUM characters instead.")
@click.option("--trim", is_flag=True, help="Lines printed without their leading whitespace.")
@click.option("--color", "--colour", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour paths, line numbers and matches (auto: on a terminal, unless NO_COLOR).")
@click.option("--heading/--no-heading", default=None,
              help="Each file's path once above its lines [default: on a terminal, as rg].")
@click.option("--no-update", is_flag=True, help="Search the index as it is, without updating it first.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="JSON lines in rg --json's shape (begin, match, context, "
                                                       "end, summary).")
def grep(pattern, paths, patterns, fixed, ignore_case, word, smart_case, case_sensitive, quiet, column, vimgrep,
         byte_offset, types_not, line_regexp, invert, only_matching, max_count, hidden, files_only, without_match,
         count, count_matches, numbers, with_filename, after, before, context, globs, types, sort, limit, processes,
         null, max_columns, preview, trim, color, heading, no_update, db, as_json, pattern_files, multiline, dotall):
    """Lines matching PATTERN (Python regex syntax) in the indexed files under PATH (default: the current
    folder's codebase), in path and line order, as rg prints them: `rg -n --no-heading` into a pipe or
    file, by file and in colour on a terminal. Candidate files come from the index's trigrams; every one
    is read and matched exactly. Exit status 1 when nothing matched, 2 on an error or when nothing matched
    but some files timed out (their answer is unknown)."""
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
    if pattern_files:
        patterns += tuple(p for f in pattern_files for p in _lines_of(f.read()))
        if not patterns:  # only empty files: no pattern, so no match (rg)
            raise SystemExit(1)
    if patterns:
        paths = ((pattern,) if pattern is not None else ()) + tuple(paths)
    elif pattern is not None:
        patterns = (pattern,)
    colored = wants_color(color)
    mode = ("quiet" if quiet else "json" if as_json else "count" if count else "files" if files_only or without_match
            else "vim" if vimgrep and not invert else "only" if only_matching and not invert else "lines")
    stdin = None
    if "-" in paths:  # rg's name for standard input
        if len(paths) > 1:
            raise click.UsageError("'-' (standard input) is grepped alone: pass it without other paths")
        stdin, paths = sys.stdin.buffer.read(), ()
    elif not paths and db is None and _piped_input():  # `git diff | codii-sql grep x`, as rg reads it
        stdin = sys.stdin.buffer.read()
    # first_match: a plain line needs no match but its first (colour marks them all)
    request = service.GrepRequest(list(patterns), fixed=fixed, ignore_case=ignore_case, word=word, paths=list(paths),
                                  db=db, globs=list(globs), types=list(types),
                                  before=context if before is None else before,
                                  after=context if after is None else after, limit=limit, sort=sort,
                                  update=not no_update,
                                  counts_only=(files_only or count or without_match) and not (as_json or only_matching),
                                  glob_base=os.getcwd(), smart_case=smart_case, max_count=max_count, invert=invert,
                                  hidden=hidden, line_regexp=line_regexp, without_match=without_match,
                                  processes=processes, offsets=as_json or byte_offset, types_not=list(types_not),
                                  text=stdin, multiline=multiline, multiline_dotall=dotall,
                                  first_match=mode == "lines" and not colored
                                  and not (column and max_columns))  # rg counts an omitted line's matches
    if not (as_json or no_update or stdin is not None) and all(os.path.lexists(p) for p in paths[:1]):
        say_pending_build(_folder(paths[0]) if paths and not service.is_index_file(paths[0])
                          else paths[0] if paths else None, db, "grep", "greps", embeds=False)
    if with_filename is None:  # rg leaves the path out when it searches one file it was given (not an index's)
        with_filename = stdin is None and not (len(paths) == 1 and os.path.isfile(paths[0])
                                               and not service.is_index_file(paths[0]))
    printer = Printer(mode, numbers=numbers, with_context=bool(request.before or request.after),
                      with_filename=with_filename or vimgrep, count_matches=only_matching and not invert, paths=paths,
                      column=column or vimgrep, byte_offset=byte_offset, only=only_matching and not invert,
                      color=colored, heading=sys.stdout.isatty() if heading is None else heading, null=null,
                      max_columns=max_columns, preview=preview, trim=trim, escape=sys.stdout.isatty())
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


#: Seconds an idle pipe on standard input is waited for before the index is grepped instead: a harness that runs
#: commands with a pipe it never writes or closes would otherwise hang the grep, as it hangs rg.
PIPE_WAIT_SECONDS = 1.0


def _piped_input() -> bool:
    """Whether standard input is what a grep without a PATH reads, as rg decides (its ``is_readable_stdin``): a
    file, pipe or socket, not a terminal; a pipe or socket only once it holds something or is closed within
    :data:`PIPE_WAIT_SECONDS` (``-`` waits as long as it takes)."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # none, or a test runner's stream (io.UnsupportedOperation)
        return False
    if os.isatty(fd) or not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    if stat.S_ISREG(mode):
        return True
    ready = select.select([fd], [], [], PIPE_WAIT_SECONDS)[0]
    if not ready:
        echo(f"Note: standard input is a pipe with nothing to read after {PIPE_WAIT_SECONDS:g} s: grepping the "
             "index instead (pass '-' to grep standard input)", err=True)
    return bool(ready)


def _lines_of(text: str) -> list[str]:
    """A pattern file's patterns, as rg reads them: a line each (an empty one matches every line), the last
    line break ending the last, a CRLF's CR dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _folder(path: str) -> str:
    """``path`` if a folder, else the folder it lies in (grep also takes files)."""
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
