"""What a grep did not read: the files the index leaves out, named in the request or anywhere it searched."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..codebase import Codebase
from ..ingest.read import read_file
from ..ingest.scanned import SourceFile
from ..search.answer import Note
from ..storage.store import Store
from . import boundary
from .status import scan_rules

#: Why the index leaves out a path that rg would read (rg skips what git ignores, hidden and binary
#: files too): said when nothing matched, as the match may be there. Not "ignored": rg skips what a
#: .gitignore (in a repository), .ignore or .rgignore leaves out; "codii-ignored" is a .codiiignore's or
#: .codii.yaml's, which rg reads.
RG_READS = ("too-large", "minified", "lock-file", "secret", "default-excluded", "build-output", "extension-filter",
            "nested-repository", "undecodable-name", "codii-ignored")


def named(store: Store, codebase: Codebase, scopes: list[str]) -> list[Note]:
    """A note naming the files and folders the request names that the index leaves out (a lock file, a
    minified, binary or too large one, an excluded folder: its rules'), which grep therefore did not
    read (a new user's `grep func_59999 big.py` answered "no match", silently, where rg found it);
    none for an index alone."""
    if codebase.alone:
        return []
    missing = []
    for s in scopes:
        full = os.path.join(codebase.root, s)
        if os.path.isfile(full) and store.row("file_by_path", {"path": s}) is None:
            missing.append((s, False))
        elif os.path.isdir(full) and not store.value("has_files_under", {"under": s}):
            missing.append((s, True))
    if not missing:
        return []
    rules = scan_rules(codebase)
    files = boundary.FileSet(codebase.root, rules)
    # A folder's reason is that of a plain file in it ("missing" when the folder itself is not left out).
    reasons = [(files.unlisted(f"{s}/a") if folder else files.unlisted(s) or _unread(codebase, s, rules))
               for s, folder in missing[:5]]
    said = ["no indexed file" if r in (None, "missing") else r.replace("-", " ") for r in reasons]
    why = ", ".join(f"{s} ({reason})" for (s, _), reason in zip(missing, said))
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return [Note("grep", f"not searched, as the index leaves them out: {why}{more}",
                 "; ".join(["rg reads them", *_ways_in(set(reasons))]))]


def _unread(codebase: Codebase, rel: str, rules: dict) -> str:
    """Why a file the index's rules list is not in it, as the build reads it (binary, minified, too
    large, a private key...), else not yet read."""
    data = read_file(codebase.root, SourceFile(rel, 0, 0), max_file_bytes=rules["max_file_bytes"])
    return data if isinstance(data, str) else "not indexed yet"


def unread(meta: dict, codebase: Codebase, scopes: list[str], matched: bool = False,
           keep: Callable[[str], bool] | None = None) -> list[Note]:
    """A note for a grep: how many paths under ``scopes`` (relative; [] the whole) the index leaves out
    that rg would read, by reason, its first folders named, from the paths the snapshot ``meta`` lists (its
    first 200, those rg reads first: "at least" past them); a new user's `grep -c over_marker` exited 1
    without a word where rg found 61,690 lines in a 1 MB file, and another's `grep -l -w cacache` listed
    6 files without a word where rg listed 23, 17 under a skipped `node_modules/` (``matched``: the grep
    found lines, so more may be there). None for an index alone or when it leaves out none rg reads: not
    a hidden one, as rg's default (`.git/` was counted "default excluded"). ``keep(path)``: whether the
    request's globs and types would read that file."""
    if codebase.alone:
        return []
    listed = meta.get("skipped_files") or {}
    counts: dict[str, int] = {}
    folders: list[str] = []
    for f in listed.get("files", []):
        path = f["path"].rstrip("/")
        if f["reason"] not in RG_READS or any(part.startswith(".") for part in path.split("/")):
            continue
        if keep is not None and not f["path"].endswith("/") and not keep(path):  # a folder may hold what they take
            continue
        if not scopes or any(path == s or path.startswith(s + "/") for s in scopes):
            counts[f["reason"]] = counts.get(f["reason"], 0) + 1
            if f["path"].endswith("/"):
                folders.append(f["path"])
    if not counts:
        return []
    reasons = sorted(counts.items(), key=lambda kv: -kv[1])
    said = ", ".join(f"{reason.replace('-', ' ')} {n:,}" for reason, n in reasons[:4])
    if folders:
        said += "; folders " + ", ".join(folders[:2]) + (" ..." if len(folders) > 2 else "")
    n = sum(counts.values())
    at_least = "at least " if listed.get("more") else ""
    left_out = f"the index leaves out {at_least}{n:,} path{'s' * (n != 1)} rg would read ({said}), not searched"
    if matched:  # said after every such grep: the ways in only when they may hold the answer
        return [Note("grep", f"{left_out}: rg may find more there", "`codii-sql status --skipped` lists them")]
    return [Note("grep", f"no match in the indexed files; {left_out}",
                 "; ".join(["`codii-sql status --skipped` lists them", *_ways_in(counts.keys())]))]


def _ways_in(reasons) -> list[str]:
    """What takes paths left out for ``reasons`` back in (:data:`_TAKEN_IN`), each way once."""
    return [way for taken, way in _TAKEN_IN if taken & set(reasons)]


#: What takes a path the index leaves out back in, by its reasons (README, "What is indexed"); a minified
#: file has no way in (a new user was told a negation or max_file_bytes would take one in).
_TAKEN_IN = (({"too-large"}, "a larger max_file_bytes in .codii.yaml takes a large file in"),
             ({"default-excluded", "lock-file", "secret", "build-output"}, "a .codiiignore negation (!path) takes "
                                                                           "an excluded one in"),
             ({"codii-ignored"}, "a .codiiignore or .codii.yaml ignore_patterns rule leaves those out: drop it to "
                                 "take them in"),
             ({"nested-repository"}, "a repository of its own is grepped by its own path"),
             ({"extension-filter"}, "`build --reset-filters` drops the index's extension filter"),
             ({"minified"}, "minified files are never indexed"))
