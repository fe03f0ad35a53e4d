"""``build --ray``: codebases built as Ray tasks across a cluster, reported as each finishes."""

from __future__ import annotations

import time

from .. import service
from ..errors import CodiiError, UsageError
from .output import echo, emit


def build_on_ray(paths, workspace, db, job, address: str | None, cpus: int | None) -> None:
    """Build the codebases at ``paths`` (and of ``workspace``) on the Ray at ``address`` with ``job``'s
    options; one line per codebase as it finishes, then the summary. Exit status 1 if one failed.

    Raises:
        UsageError: options a distributed build does not take, or no address.
    """
    from .. import cluster  # Ray and its server faces load only for --ray: every other command starts ~0.2 s sooner

    if address is None:
        raise UsageError("--ray-cpus sizes the Ray of --ray local: pass --ray local too")
    refused = [name for name, on in (("--daemon", job.daemon), ("--dry-run", job.dry_run)) if on]
    if refused:
        raise UsageError(f"{refused[0]} does not go with --ray: a distributed build runs on the cluster "
                         "while this command waits")
    if db is not None and (workspace or len(paths) > 1):
        raise UsageError("--db names one index: build several codebases without it")
    missing = []
    if workspace or len(paths) > 1:
        codebases = []
        for path in service.member_paths(workspace, list(paths))[1]:
            try:
                codebases.append(service.open_codebase(path))
            except CodiiError as err:  # a member that is gone: reported, the others still build
                missing.append({"ok": False, "codebase": path, "error": str(err)})
    else:
        codebases = [service.open_codebase(paths[0] if paths else None, db)]
    options = cluster.Options(force=job.force, use_cache=not job.no_cache,
                              ignore_patterns=job.ignore if job.ignore or job.reset_filters else None,
                              extensions=job.exts if job.exts or job.reset_filters else None,
                              embedder_name=job.embedder, vectors=job.vectors)
    if not job.as_json:
        echo(f"Building {len(codebases)} codebase{'s' * (len(codebases) != 1)} as Ray tasks ({address}) ...", err=True)
        for row in missing:
            _print_row(row)
    started = time.perf_counter()
    try:
        rows = missing + cluster.build_on_ray(address, codebases, options, cpus=cpus,
                                              on_done=None if job.as_json else _print_row) if codebases else missing
    except KeyboardInterrupt:
        echo("Interrupted: the Ray build stopped; each index in place is as it was, or as a build that finished "
             "published it whole; run the same build again to finish.", err=True)
        raise SystemExit(130) from None
    failed = [r["codebase"] for r in rows if not r["ok"]]
    if job.as_json:
        emit({"ray": address, "codebases": rows, "built": len(rows) - len(failed), "failed": len(failed)})
    else:
        echo(summary(rows, failed, "built", seconds=time.perf_counter() - started))
    if failed:
        raise SystemExit(1)


def _print_row(row: dict) -> None:
    if not row["ok"]:
        echo(f"Error: {row['codebase']}: {row['error']}", err=True)
        return
    unchanged = "" if row["published"] else "; nothing changed, the index in place is left as it was"
    echo(f"Built {row['codebase']} on {row['host']} -> {row['db']}: {row['files']:,} files, {row['chunks']:,} chunks "
         f"({row['chunks_embedded']:,} embedded, {row['embedded_elsewhere']:,} of them by embedding tasks; "
         f"{row['vectors_deduplicated']:,} identical to another chunk's text; "
         f"{row['vectors_reused']:,} reused) in {row['wall_seconds']:.1f} s{unchanged}")


def summary(rows: list[dict], failed: list[str], done: str, *, seconds: float | None = None) -> str:
    """``2 of 3 codebases built: 1,204 files, 20,311 chunks in 12.3 s; failed: /gone``: ``seconds``
    (wall time, for builds that ran side by side), else the builds' own times added up."""
    built = [r for r in rows if r["ok"] and "files" in r]
    took = sum(r["seconds"] for r in built) if seconds is None else seconds
    totals = (f": {sum(r['files'] for r in built):,} files, {sum(r['chunks'] for r in built):,} chunks in "
              f"{took:.1f} s") if built and done == "built" else ""
    skipped = [r["codebase"] for r in rows if r.get("skipped")]  # index files read alone: never built
    return (f"{len(rows) - len(failed) - len(skipped)} of {len(rows)} codebases {done}{totals}"
            + (f"; skipped (index files read alone): {', '.join(skipped)}" if skipped else "")
            + (f"; failed: {', '.join(failed)}" if failed else ""))
