"""The history phase of a build: the branch's commits and their hunks into the index, incrementally.

Which commits: ``git rev-list`` of HEAD within the bound (:class:`~.config.HistoryBound`), merges
left out (their diffs repeat their parents'). The index then holds exactly that list: commits
it lacks are read with their patches (``git log --no-walk --stdin -p``) and written in batches,
each batch one transaction, and commits it holds that the list lacks (a rewritten history, an
amended or reset commit, or commits that fell out of the bound) are deleted after the new ones
commit. A kill leaves every batch committed so far, and the commits not yet deleted: searchable
as it is, and the next build resumes from the difference. HEAD and the bound are recorded, so
an update with neither changed costs one ``rev-parse``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from ..gitrepo import GitRefused, git, work_tree
from ..storage.store import Store
from ..text import identifier_subtokens
from .config import DEFAULT_HISTORY, DEFAULT_HISTORY_SECONDS, HistoryBound
from .gitdiff import CommitDiff, Hunk, read_commits
from .history_rules import HistoryRules
from .report import Progress

#: Commits per transaction: readers see progress at each commit, and a kill loses at most one batch.
HISTORY_BATCH = 200
#: Paths new to the index whose earlier commits a build asks git for at most, in one rev-list call (a
#: relaxed ignore rule takes a few files back; a first build's thousands have no history stored yet).
MAX_REREAD_PATHS = 500
#: Hunks kept of one commit, in diff order: a sweeping commit (a reformat, a vendored import)
#: would otherwise fill the index with thousands of hunks that say one thing.
MAX_HUNKS_PER_COMMIT = 40
#: Lines kept of one hunk (its @@ line included); longer hunks end with :data:`CUT_LINE`.
MAX_HUNK_LINES = 120
#: Characters kept of one hunk line (a minified line can be megabytes).
MAX_LINE_CHARS = 400
CUT_LINE = "… [hunk cut]"
#: Characters of a commit body kept (a pasted log can be megabytes).
MAX_BODY_CHARS = 8000


def update_history(store: Store, root: Path, bound: HistoryBound, rules: HistoryRules,
                   progress: Progress | None = None, *, keep_subjects: bool = True,
                   left_out: list[str] | None = None, taken_in: list[str] | None = None) -> dict:
    """Bring the history tables of ``store`` to the commits ``bound`` selects from HEAD of the
    work tree at ``root``; the caller holds the writer lock.

    ``left_out``: paths the code index lost in this build. Those the rules no longer keep (a file
    newly ignored, say a settings file with a password) take their commits with them, read again
    under the rules now: hunks stored before the rule was written must not stay searchable.
    ``taken_in``: paths it gained; the commits that touched one while a rule left it out are read
    again, so that relaxing the rule brings its history back.

    ``keep_subjects`` false stores every subject empty (``benchmarks/history.py``: a subject used
    as the query must be found from the body and the hunks alone).

    Returns:
        ``{"state", "note", "commits", "hunks", "added", "removed", "seconds", "head"}``; ``state`` is
        ``indexed``, ``unchanged`` (HEAD and the bound as recorded), ``off`` (every commit deleted),
        ``no_git`` (not in a git work tree), ``refused`` (git refuses it as another user's: what was read
        before is kept), ``shallow`` (a shallow clone: not read) or ``empty``
        (no commit yet); ``note`` says in one line why there is no history, else None.
    Raises:
        UsageError: no git command.
        StorageError: the index cannot be written.
    """
    started = time.perf_counter()
    progress = progress or (lambda phase, done, total: None)
    out = {"state": "indexed", "note": None, "added": 0, "removed": 0, "head": None}
    try:
        tree, refused = None if bound.off else work_tree(root), False
    except GitRefused:
        tree, refused = None, True
    if bound.off:
        out["state"] = "off"
    elif refused:  # what was read before stays: trusted again, the next build goes on from it
        out.update(state="refused", note="git refuses this repository as another user's, so no history is read: "
                                         "if you trust it, `git config --global --add safe.directory FOLDER` and "
                                         "build again")
    elif tree is None:
        # Notes name no folder: they are stored in the index, and an export carries no path of this machine.
        out.update(state="no_git", note="the codebase is not in a git work tree: no history is indexed")
    elif tree.shallow:
        out.update(state="shallow", note="the codebase is a shallow clone: its history is not indexed (git fetch "
                                         "--unshallow there, then build again)")
    elif tree.head is None:
        out.update(state="empty", note="the repository has no commit yet: no history to index")
    recorded = store.meta().get("history") or {}
    setting = {**bound.to_dict(), "keep_subjects": keep_subjects}
    reread = 0 if tree is None or tree.shallow or tree.head is None else \
        _reread(store, root, bound, rules, left_out, taken_in)
    if tree is None or tree.shallow or tree.head is None:
        out["removed"] = _delete(store, [r["id"] for r in store.rows("history_shas")]) if bound.off else 0
    elif recorded.get("head") == tree.head and recorded.get("bound") == setting and not reread:
        out.update(state="unchanged", head=tree.head, note=recorded.get("note"))
    else:
        out["head"] = tree.head
        wanted = _wanted(root, bound, bool(tree.prefix))
        if not wanted:  # a new user's dormant repository: "No commits found." and no word why
            out["note"] = (f"no commit lies within the history's bound ({bound_words(bound)}): build with --history N "
                           "(commits) or --history YYYY-MM-DD to read older ones")
        elif older := _older(root, bound, bool(tree.prefix), len(wanted)):
            # A new user's right commit was 2024's, and the answer ranked two unrelated ones with no word of it.
            out["note"] = (f"{older:,} older commit{'s lie' if older > 1 else ' lies'} outside the history's bound "
                           f"({bound_words(bound)}): build with --history N (commits) or --history YYYY-MM-DD to read them")
        have = {r["sha"]: r["id"] for r in store.rows("history_shas")}
        missing = [s for s in wanted if s not in have]
        out["added"] = _add(store, root, missing, rules, bool(tree.prefix), keep_subjects, progress)
        keep = set(wanted)
        out["removed"] = _delete(store, [i for s, i in have.items() if s not in keep])
    counts = store.row("history_counts")
    out.update(commits=counts["commits"], hunks=counts["hunks"], seconds=round(time.perf_counter() - started, 3))
    record = {"state": out["state"] if out["state"] != "unchanged" else recorded.get("state"), "note": out["note"],
              "head": out["head"], "bound": setting, "branch": tree.branch if tree else None}
    if any(recorded.get(k) != v for k, v in record.items()) or out["added"] or out["removed"]:
        # Written only when something changed: an idle watcher's update writes nothing.
        with store.transaction():
            store.set_meta(history={**record, "updated_at": time.time(), "seconds": out["seconds"]})
    return out


def _reread(store: Store, root: Path, bound: HistoryBound, rules: HistoryRules, left_out: list[str] | None,
            taken_in: list[str] | None) -> int:
    """Delete the commits the rules now judge otherwise, how many (the caller adds them again, filtered
    by the rules as they are now): those holding a hunk of a path in ``left_out`` that the rules no
    longer keep, and those touching a path in ``taken_in`` (new to the index) that they stored no hunk
    of, the path having been left out when they were read (a rule relaxed: its history comes back).
    At most :data:`MAX_REREAD_PATHS` of the second kind are asked of git, in one call."""
    gone = [p for p in left_out or () if not rules.keeps(p)]
    ids = {r["commit_id"] for r in store.rows("history_commits_of_paths", {"paths": json.dumps(gone)})} if gone else set()
    back = [p for p in taken_in or () if rules.keeps(p)][:MAX_REREAD_PATHS]
    have = {r["sha"]: r["id"] for r in store.rows("history_shas")} if back else {}
    if have:
        touched = {have[s] for s in _wanted(root, bound, False, back) if s in have}
        holding = {r["commit_id"] for r in store.rows("history_commits_of_paths", {"paths": json.dumps(back)})}
        ids |= touched - holding
    return _delete(store, ids) if ids else 0


def _wanted(root: Path, bound: HistoryBound, relative: bool, paths: list[str] | None = None) -> list[str]:
    """The shas of the non-merge commits ``bound`` selects, newest first (under ``root`` only, for a
    codebase that is a subfolder of its work tree; touching ``paths`` only, when given)."""
    args = ["rev-list", "--no-merges"]
    if bound.max_commits is not None:
        args.append(f"--max-count={bound.max_commits}")
    if bound.since is not None:
        args.append(f"--since={_since(root, bound)}")
    spec = ["--", *paths] if paths else ["--", "."] if relative else []
    done = git(root, *args, "HEAD", *spec)
    return done.stdout.decode().split() if done.returncode == 0 else []


def bound_words(bound: HistoryBound) -> str:
    """The history's bound in words, as a note names it (a new user given ``--history 1500`` was told the default)."""
    if bound == DEFAULT_HISTORY:
        return "by default the 2 years before HEAD's commit or 5,000 commits, whichever is fewer"
    parts = ([f"the newest {bound.max_commits:,} commit{'s' if bound.max_commits != 1 else ''}"]
             if bound.max_commits is not None else [])
    parts += [f"commits since {bound.since}"] if bound.since is not None else []
    return " and ".join(parts)


def _since(root: Path, bound: HistoryBound) -> str:
    """``bound``'s date as ``git rev-list --since`` reads it. The default's 2 years count back from HEAD's
    commit, not from today: a dormant repository's last two years (a new user's redis snapshot, last commit
    2024-10-18, had no history at all). A bare date starts at midnight, local time (git would take the
    current time of day)."""
    if bound.since == DEFAULT_HISTORY.since:
        head = git(root, "log", "-1", "--format=%ct", "HEAD").stdout.strip()
        if head.isdigit():
            return f"@{int(head) - DEFAULT_HISTORY_SECONDS}"
    return f"{bound.since}T00:00:00" if bound.since[:1].isdigit() else bound.since


def _older(root: Path, bound: HistoryBound, relative: bool, wanted: int) -> int:
    """How many non-merge commits of HEAD (under ``root`` only, when ``relative``) ``bound`` leaves out, of which
    it takes ``wanted`` (one `rev-list --count`: ~0.2 s for Django's 33k commits)."""
    if bound.max_commits is None and bound.since is None:
        return 0
    done = git(root, "rev-list", "--no-merges", "--count", "HEAD", *(["--", "."] if relative else []))
    total = int(done.stdout.strip() or 0) if done.returncode == 0 else 0
    return max(total - wanted, 0)


def _add(store: Store, root: Path, shas: list[str], rules: HistoryRules, relative: bool, keep_subjects: bool,
         progress: Progress) -> int:
    """Read ``shas`` with their patches and write them, :data:`HISTORY_BATCH` per transaction,
    oldest first (a resumed build has the older ones); returns how many were written."""
    if not shas:  # git log --stdin with no sha reads HEAD
        return 0
    total, written, batch = len(shas), 0, []
    progress("history", 0, total)
    for commit in read_commits(root, reversed(shas), relative=relative):
        batch.append(commit)
        if len(batch) == HISTORY_BATCH:
            written += _write(store, batch, rules, keep_subjects)
            batch = []
            progress("history", written, total)
    if batch:
        written += _write(store, batch, rules, keep_subjects)
    progress("history", written, total)
    return written


def _write(store: Store, commits: list[CommitDiff], rules: HistoryRules, keep_subjects: bool) -> int:
    """One transaction: each commit, its kept hunks, their FTS5 rows, and its place in the vector queue."""
    with store.transaction():
        for commit in commits:
            files = [f for f in commit.files if rules.keeps(f)]
            hunks = [h for h in commit.hunks if rules.keeps(h.path) and rules.content_kept(h.content)]
            hunks = hunks[:MAX_HUNKS_PER_COMMIT]
            subject = commit.subject if keep_subjects else ""
            body = commit.body[:MAX_BODY_CHARS]
            cid = store.row("history_commit_insert", {
                "sha": commit.sha, "author": commit.author, "email": commit.email, "date": commit.date,
                "subject": subject, "body": body, "files": json.dumps(files), "hunk_count": len(hunks),
                "subtokens": identifier_subtokens(f"{subject}\n{body}")})["id"]
            store.many("history_hunk_insert", (_hunk_row(cid, h) for h in hunks))
            for name in ("history_commit_fts_insert", "history_hunks_fts_insert", "history_queue_insert"):
                store.run(name, {"id": cid})
    return len(commits)


def _hunk_row(commit_id: int, hunk: Hunk) -> dict:
    content = bounded_hunk(hunk.content)
    return {"commit_id": commit_id, "path": hunk.path, "old_path": hunk.old_path, "old_start": hunk.old_start,
            "old_lines": hunk.old_lines, "new_start": hunk.new_start, "new_lines": hunk.new_lines,
            "content": content, "subtokens": identifier_subtokens(f"{hunk.path}\n{content}")}


def bounded_hunk(content: str) -> str:
    """``content`` cut to :data:`MAX_HUNK_LINES` lines of at most :data:`MAX_LINE_CHARS` characters."""
    lines = content.split("\n")
    cut = len(lines) > MAX_HUNK_LINES
    lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …" for line in lines[:MAX_HUNK_LINES]]
    return "\n".join(lines + ([CUT_LINE] if cut else []))


def _delete(store: Store, ids: Iterable[int]) -> int:
    """Delete these commits with their hunks, FTS5 rows, vectors and queue rows, in batches."""
    ids = list(ids)
    has_vectors = bool(store.value("history_vec_sql"))
    for start in range(0, len(ids), HISTORY_BATCH):
        with store.transaction():
            for cid in ids[start:start + HISTORY_BATCH]:
                store.run("history_commit_delete", {"id": cid})
                if has_vectors:
                    store.run("history_vec_delete", {"id": cid})
    return len(ids)
