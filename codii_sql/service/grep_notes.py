"""Why a grep's answer may miss lines or stop early: the notes every face tells with it."""

from __future__ import annotations

from ..codebase import Codebase
from ..search.answer import Note
from ..search.grep import FILE_TIMEOUT_SECONDS
from ..search.grep_answer import GrepAnswer
from ..search.pattern import GrepPattern

#: Files whose matching passes the per-file time bound before a grep stops reading: '(.|..)+!$' took
#: 18.7 s on Flask and hours on the kernel, one bounded second a file at a time.
MAX_SLOW_FILES = 5


def notes(answer: GrepAnswer, pattern: GrepPattern, has_tables: bool, unpacked: int, codebase: Codebase,
          limit: int | None, gaps: bool, unread: bool) -> list[Note]:
    """Why lines may be missing from ``answer``; ``unread``: the ``limit`` stopped the reading with candidate
    files left (else every candidate was read and the counts are whole)."""
    notes = []
    if answer.nothing_selected:
        notes.append(Note("grep", "the globs, types or roles given leave no indexed file to search",
                          "a glob holding '/' is read from the folder grep runs in; `codii-sql status --skipped` "
                          "lists the files the index leaves out"))
    if pattern.scans:
        notes.append(Note("grep", "no pattern has a literal of 3 or more characters that every match holds, so every "
                                  "indexed file is a candidate (no trigram narrowed them)"))
    if not has_tables:
        notes.append(Note("grep", "this index has no trigram table (made before grep existed): its chunks' stored "
                                  "lines were read, and lines no chunk holds were not searched"))
    elif unpacked:
        notes.append(Note("grep", f"{unpacked} files have no trigram row yet (indexed before grep existed) and were "
                                  "read whole; the next build adds their rows"))
    if answer.timed_out:
        shown = ", ".join(answer.timed_out[:5]) + (" ..." if len(answer.timed_out) > 5 else "")
        notes.append(Note("grep", f"the pattern took over {FILE_TIMEOUT_SECONDS:g} s on {len(answer.timed_out)} files, "
                                  f"whose matches are not counted: {shown}",
                          "simplify the pattern: Python's engine backtracks where rg's does not, on nested repeats "
                          "such as (a+)+ and on a repeat before an anchor over a long line (\\w+$)"))
    if gaps or (codebase.alone and not has_tables):
        notes.append(Note("grep", "lines the index does not store were not searched (not_stored lists them)"))
    if len(answer.timed_out) >= MAX_SLOW_FILES:
        notes.append(Note("grep", f"stopped after the pattern passed the time bound on {MAX_SLOW_FILES} files: the "
                                  "counts cover the files read so far", "simplify the pattern"))
    elif answer.truncated and unread:
        notes.append(Note("grep", f"stopped at the limit of {limit:,} matching lines: {answer.matched_lines:,} "
                                  f"counted in the {answer.files_read:,} files read, the rest not read",
                          "ask with a higher limit, or narrow the paths or globs"))
    elif answer.truncated and limit is not None:  # every candidate read: the counts are whole, only the lines cut
        notes.append(Note("grep", f"the limit kept {limit:,} of the {answer.matched_lines:,} matching lines; every "
                                  f"candidate file was read", "ask with a higher limit to see them all"))
    return notes
