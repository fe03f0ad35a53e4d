"""Reading a file of a codebase back, for a face that shows it: from disk through the file boundary,
or, for an index alone, as its stored chunks hold it."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from ..codebase import Codebase
from ..ingest.config import size_cap
from ..ingest.read import read_file
from ..ingest.scanned import SourceFile
from ..languages import detect_language
from ..text import decode_source
from . import boundary
from .status import open_store, scan_rules
from .stored import not_stored, stored_lines, stored_path, stored_text


@dataclass
class FileText:
    """A file's text as a face shows it: ``path`` relative to the root, ``language``, ``lines``
    (1-based: ``lines[0]`` is line 1, each with its newline, the last one's if the file has it),
    and ``not_stored``: the ranges ``[first, last]`` an index alone does not hold (shown empty);
    ``changed``: the file on disk is not the version the index holds (edited since), so line numbers
    an answer gave may point elsewhere now; ``unindexed``: why the index holds no version of it
    (``minified``, ``not indexed yet``...), else None."""

    path: str
    language: str | None
    lines: list[str]
    not_stored: list[list[int]] = field(default_factory=list)
    alone: bool = False
    changed: bool = False
    unindexed: str | None = None


def file_text(codebase: Codebase, path: str, fileset: boundary.FileSet | None = None) -> FileText:
    """The text of ``path`` in ``codebase``: read now through ``fileset`` (default: one under the
    codebase's current rules), or for an index alone from its stored chunks.

    Raises:
        UsageError: the boundary refuses the file (outside the root, ignored, binary, too big...), or
            an index alone holds no such file.
    """
    if codebase.alone:
        path = stored_path(path)
        whole = stored_text(codebase, path)
        if whole is not None:  # the file's own text, kept for grep: its blank lines are no gap
            lines = whole.split("\n")
            return FileText(path, detect_language(path), [line + "\n" for line in lines[:-1]] + (
                [lines[-1]] if lines[-1] else []), alone=True)
        stored = stored_lines(codebase, path)
        last = max(stored)
        return FileText(path, detect_language(path), [stored.get(n, "") + "\n" for n in range(1, last + 1)],
                        not_stored(stored, 1, last), alone=True)
    files = fileset or boundary.FileSet(codebase.root, scan_rules(codebase))
    f = files.check(path)
    raw = boundary.read_bytes(f, size_cap(f.rel, files.rules["max_file_bytes"]))  # a notebook as the index took it
    lines = decode_source(raw).split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    with open_store(codebase) as store:
        indexed = store.row("file_by_path", {"path": f.rel})
    unindexed = None
    if indexed is None:  # read as a build reads it: a minified file was shown as "changed since indexed"
        data = read_file(codebase.root, SourceFile(f.rel, 0, 0), max_file_bytes=files.rules["max_file_bytes"])
        unindexed = data.replace("-", " ") if isinstance(data, str) else "not indexed yet"
        if unindexed == "not indexed yet" and files.unlisted(f.rel) == "symlink-folder":  # never will be: said why
            real = os.path.relpath(os.path.realpath(codebase.root / f.rel), os.path.realpath(codebase.root))
            unindexed = f"reached through a symlinked folder, it is indexed as {real.replace(os.sep, '/')}"
    changed = indexed is not None and indexed["hash"] != hashlib.sha256(raw).hexdigest()
    return FileText(f.rel, detect_language(f.rel, lines[0] if lines else ""), lines, changed=changed,
                    unindexed=unindexed)
