"""One line's history from git: ``git blame`` names the commit that last made it, ``git log -L`` follows it back."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..gitrepo import git
from .gitdiff import CommitDiff, log_command, stream

#: The sha git blame gives a line the work tree changed since HEAD.
UNCOMMITTED = "0" * 40
#: Commits a repository asks blame to look through (reformatting sweeps): the file GitHub's blame
#: view reads by convention; ``git blame`` itself reads it only when configured.
IGNORE_REVS_FILE = ".git-blame-ignore-revs"
_SHA = re.compile(r"^[0-9a-f]{40}$")


def ignored_revisions(root: Path) -> set[str]:
    """The full shas listed in ``root``'s :data:`IGNORE_REVS_FILE` (none when it has none)."""
    try:
        text = (Path(root) / IGNORE_REVS_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {line.strip() for line in text.splitlines() if _SHA.match(line.strip())}


@dataclass(frozen=True)
class Blamed:
    """Where a line of the work tree comes from: the ``sha`` of the commit that last changed it
    (:data:`UNCOMMITTED` for an edit not committed yet), and its ``path`` and 1-based ``line``
    in that commit (a rename or moved lines make them differ from the work tree's)."""

    sha: str
    path: str
    line: int


def blame(root: Path, path: str, line: int) -> Blamed:
    """Blame line ``line`` (1-based) of ``path`` (relative to ``root``) as the work tree holds it.

    Raises:
        UsageError: git cannot blame it: the file is not tracked, the line is past its end, no git.
    """
    ignore = ["--ignore-revs-file", IGNORE_REVS_FILE] if ignored_revisions(root) else []
    done = git(root, "blame", "--porcelain", *ignore, "-L", f"{line},{line}", "--", path)
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"git blame cannot read {path}:{line} ({why[-1] if why else 'no reason given'})",
                         "pass a line of a file git tracks")
    lines = done.stdout.decode("utf-8", "replace").split("\n")
    sha, orig_line = lines[0].split()[:2]
    orig_path = next((ln[len("filename "):] for ln in lines if ln.startswith("filename ")), path)
    return Blamed(sha, orig_path, int(orig_line))


def line_history(root: Path, blamed: Blamed, limit: int) -> list[CommitDiff]:
    """The commits that changed the line ``blamed`` names, newest first from its commit, at most
    ``limit``, each with the hunks of that line as ``git log -L`` cuts them (renames followed);
    the commits of :data:`IGNORE_REVS_FILE` left out, as blame leaves them out.

    Raises:
        UsageError: no git command.
    """
    ignored = ignored_revisions(root)
    cmd = log_command(root, f"-L{blamed.line},{blamed.line}:{blamed.path}", f"--max-count={limit + len(ignored)}",
                      blamed.sha)
    # log_command's -p/-M/--no-merges apply; -L prints only the diff of the line's range.
    return [c for c in stream(cmd) if c.sha not in ignored][:limit]
