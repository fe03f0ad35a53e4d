"""What a build did, by count and by phase, as the CLI, the MCP server and benchmarks report it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

#: Chunks per commit of the vector phase (.embedding): readers see progress at each commit, and a kill loses none
#: of them. Here, not there, so that the faces' status reads it without loading numpy (~45 ms of a CLI grep).
VECTOR_BATCH = 512

#: Skipped paths listed at most (``status --skipped``, ``build --json``, the MCP status); the rest are counted.
SKIPPED_LISTED = 200
#: The order in which skipped paths are listed, by reason: first what a user would not expect
#: to be left out, last what they asked to leave out.
SKIP_ORDER = ("secret", "too-large", "minified", "binary", "undecodable-name", "unreadable", "not-regular-file",
              "vanished", "symlink-outside-root", "symlink-loop", "symlink-dangling", "symlink-folder",
              "symlink-file",
              "binary-extension",
              "lock-file", "nested-repository", "extension-filter", "build-output", "default-excluded", "ignored",
              "codii-ignored")

Progress = Callable[[str, int, int | None], None]
"""``progress(phase, done, total)``: phases scan (files found; total None until the walk ends), hash
(files whose stat changed), chunk (files chunked and written) and vectors (chunks with a vector)."""


@dataclass
class BuildReport:
    """What a build did. Times are wall seconds; ``phase_seconds`` splits them by stage.

    Phases: ``scan`` (directory walk), ``hash`` (reading and hashing changed files, Merkle
    diff), ``chunk_wait`` (the main process blocked on the chunking workers), ``lookup``
    (vectors reused from the index or the cache), ``write`` (the lexical phase's SQL
    transactions), ``lookup_indexes`` (sorting the look-up indexes a first build writes without),
    ``lexical`` (all of the lexical phase: every file searchable by BM25 at its end), ``history`` (the
    commits read from git, their hunks written), ``vectors`` (the
    vector phase: look-ups, the model and its commits).
    ``vectors_pending`` is the number of chunks still without a vector when the build returned
    (vectors off, left to a background worker, or a failed vector phase). A chunk that got its
    vector in this build was embedded (``chunks_embedded``), found in the index or the cache
    (``vectors_reused``), or holds the same text as a chunk embedded in the same batch
    (``vectors_deduplicated``): for a new index, ``chunks_written`` is their sum plus ``vectors_pending``. ``skipped`` counts
    skipped paths by reason and ``skipped_files`` names them: ``(path, reason)``, a folder's path
    ending in ``/``.
    """

    files: int = 0
    chunks: int = 0
    added: int = 0
    modified: int = 0
    removed: int = 0
    reindexed: int = 0
    touched: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    vectors_reused: int = 0
    vectors_deduplicated: int = 0
    skipped: Counter = field(default_factory=Counter)
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    phase_seconds: Counter = field(default_factory=Counter)
    merkle_root: str = ""
    vectors_pending: int = 0
    vectors_enabled: bool = True
    #: The history phase's answer (:func:`~codii_sql.ingest.history.update_history`), None when not run;
    #: commits embedded (not found in the cache) by the history's vector phase.
    history: dict | None = None
    commits_embedded: int = 0
    #: When nothing is left to index but ignore rules left paths out: the rules, most paths first,
    #: ``[{"where": "file:line", "rule", "paths"}]`` (:meth:`~codii_sql.ingest.walk.ScanResult.hiding_rules`).
    hidden_by: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        out = dict(self.__dict__)
        out["skipped"] = dict(self.skipped)
        out["skipped_files"] = skip_listing(self.skipped_files)
        out["phase_seconds"] = {k: round(v, 3) for k, v in self.phase_seconds.items()}
        out["seconds"] = round(self.seconds, 3)
        return out


def skip_listing(skipped: list[tuple[str, str]], limit: int = SKIPPED_LISTED) -> dict:
    """``{"files": [{"path", "reason"}], "more": N, "more_by_reason": {reason: N}}``: at most ``limit``
    of the ``(path, reason)`` pairs, shared among the reasons (each gets a turn in :data:`SKIP_ORDER`
    until its paths or the limit run out: 1,300 binary `.mo` files hid a new user's one FIFO and one
    file turned folder), in that order, then by path; and how many were left out, by reason."""
    rank = {reason: i for i, reason in enumerate(SKIP_ORDER)}
    by_reason: dict[str, list[str]] = {}
    for path, reason in sorted(skipped, key=lambda pr: (rank.get(pr[1], -1), pr[1], pr[0])):
        by_reason.setdefault(reason, []).append(path)
    shown = dict.fromkeys(by_reason, 0)
    left = min(limit, len(skipped))
    while left:
        for reason, paths in by_reason.items():
            if left and shown[reason] < len(paths):
                shown[reason] += 1
                left -= 1
    return {"files": [{"path": path, "reason": reason} for reason, paths in by_reason.items()
                      for path in paths[:shown[reason]]],
            "more": max(0, len(skipped) - limit),
            "more_by_reason": {r: len(paths) - shown[r] for r, paths in by_reason.items() if len(paths) > shown[r]}}
