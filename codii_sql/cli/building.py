"""``build``: index a codebase (lexical phase, then vectors), in the background, or only say what it would do."""

from __future__ import annotations

from dataclasses import dataclass

import click

from .. import service
from ..errors import CodiiError, UsageError
from .distributed import build_on_ray, summary
from .output import (
    db_option,
    echo,
    describe_filters,
    emit,
    json_option,
    print_dry_run,
    print_export,
)
from .progress import json_lines, progress_bar, stderr_is_terminal
from .words import message


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--workspace", default=None, help="Build every codebase of this workspace (see `codii-sql workspace`).")
@click.option("--force", is_flag=True, help="Re-read and re-chunk every file; searches keep working meanwhile (after a model change the index is emptied first).")
@click.option("--ignore", "ignore_patterns", multiple=True, help="Extra gitignore-style pattern (repeatable).")
@click.option("--ext", "extensions", multiple=True, help="Index only these extensions, e.g. --ext .py (repeatable).")
@click.option("--reset-filters", is_flag=True,
              help="Forget --ext/--ignore options that earlier builds (CLI or MCP) recorded; a plain build keeps them.")
@click.option("--no-cache", is_flag=True,
              help="Do not use the shared embedding cache; with --force, embed every chunk again.")
@click.option("--embedder", default=None,
              help="local (the bundled model, default), local:fast (its quantised variant: ~1.3x faster, slightly "
                   "other vectors) [default: .codii.yaml's embedder:, else $CODII_SQL_EMBEDDER, else the index's].")
@click.option("--vectors/--no-vectors", default=None,
              help="--no-vectors: BM25 and symbols only, no model time (kept for later builds until --vectors, "
                   "which embeds what is missing) [default: as the last build, else .codii.yaml's vectors:].")
@click.option("--history", "history", default=None, metavar="N|DATE",
              help="Index the newest N commits of the branch, or those since DATE (2024-01-31), with their diff "
                   "hunks, for `codii-sql history` [default: as the last build, else .codii.yaml's history:, else "
                   "5,000 commits or the 2 years before HEAD's commit, whichever is fewer].")
@click.option("--no-history", is_flag=True, help="Index no history (kept for later builds until --history).")
@click.option("--daemon", is_flag=True,
              help="Return at once and build in the background (`status` follows it; log under $CODII_SQL_HOME/logs).")
@click.option("--dry-run", is_flag=True,
              help="Say what a build would index (files, chunks, skips, largest folders) and about how long the "
                   "model would take; writes nothing.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Build as Ray tasks across a cluster: local (start a Ray here), auto ($RAY_ADDRESS), or host:6379. "
                   "Each codebase is a task that builds in a scratch folder in its node's temp dir (its chunks "
                   "embedded by tasks of 256) and publishes the index whole to its usual path. Needs codii-sql[ray].")
@click.option("--ray-cpus", type=click.IntRange(1, 1024), default=None,
              help="CPUs of the Ray that --ray local starts [default: all of this machine's].")
@click.option("--export", "export_to", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Then write the index as one compact file to search alone (see `codii-sql export`).")
@click.option("--detached", is_flag=True, hidden=True, help="Run as the background process of --daemon.")
@db_option
@json_option
def build(paths, workspace, force, ignore_patterns, extensions, reset_filters, no_cache, embedder, vectors, history,
          no_history, daemon, dry_run, ray_address, ray_cpus, export_to, detached, db, as_json):
    """Build or update the index of the codebase at each PATH (default: the current directory).

    Every file is searchable by BM25, symbol and path as soon as the lexical phase commits it;
    the vector phase then embeds the chunks, source files first. Several PATHs (or --workspace)
    build one after the other in this process, with one model load and one summary. With --json,
    each progress event is one JSON line ({"event": "progress", "phase", "unit", "done", "total",
    "per_second", "eta_seconds", ...}) and the report is the last line.
    """
    if export_to is not None and (workspace or len(paths) > 1 or daemon or dry_run or ray_address or ray_cpus):
        raise UsageError("--export writes one codebase's index when its build ends here",
                         "build one PATH without --daemon, --dry-run or --ray, or run `codii-sql export` after")
    if history is not None and no_history:
        raise UsageError("pass either --history or --no-history, not both")
    job = Job(force=force, ignore=list(ignore_patterns), exts=service.extension_filter(extensions),
              reset_filters=reset_filters, no_cache=no_cache, embedder=embedder, vectors=vectors, daemon=daemon,
              dry_run=dry_run, as_json=as_json, export_to=export_to,
              history=False if no_history else history)
    if ray_address is not None or ray_cpus is not None:
        return build_on_ray(paths, workspace, db, job, ray_address, ray_cpus)
    if workspace or len(paths) > 1:
        if db is not None or detached:
            raise UsageError("--db names one index: build several codebases without it")
        _, found = service.member_paths(workspace, list(paths))
        return _build_many(found, job)
    codebase = service.open_codebase(paths[0] if paths else None, db)
    if detached:
        with service.detached(codebase):
            return _emit(job, job.run(codebase))
    if service.is_locked(codebase) and not (dry_run or daemon):
        echo(f"Waiting for another process that is indexing {codebase.root} ...", err=True)
    _emit(job, job.run(codebase))


@dataclass
class Job:
    """One ``build`` command's options, applied to each codebase it names."""

    force: bool
    ignore: list[str]
    exts: list[str]
    reset_filters: bool
    no_cache: bool
    embedder: str | None
    vectors: bool | None
    daemon: bool
    dry_run: bool
    as_json: bool
    export_to: str | None = None
    #: ``--history``'s value, False for ``--no-history``, None for neither.
    history: str | bool | None = None

    def run(self, codebase) -> dict:
        """Build (or survey, or start in the background) ``codebase``; its JSON, printed as text unless ``as_json``."""
        ignore = self.ignore if self.ignore or self.reset_filters else None
        exts = self.exts if self.exts or self.reset_filters else None
        if self.dry_run:
            survey = service.dry_run(codebase, ignore_patterns=ignore, extensions=exts, vectors=self.vectors,
                                     embedder_name=self.embedder)
            return survey if self.as_json else print_dry_run(survey) or survey
        if self.daemon:
            return self._start_daemon(codebase)
        return self._build(codebase, ignore, exts)

    def _build(self, codebase, ignore, exts) -> dict:
        if self.export_to is not None:
            service.export_target(codebase, self.export_to)  # a bad target is said before the build, not after
        warnings: list[str] = []

        def warn(message: str) -> None:
            warnings.append(message)
            echo(f"Warning: {message}", err=True)

        with progress_bar(not self.as_json and stderr_is_terminal()) as bar:
            shown = json_lines(lambda event: emit(event, one_line=True)) if self.as_json else bar
            report = service.build(codebase, force=self.force, progress=_saying_waits(codebase, shown),
                                   use_cache=not self.no_cache, warn=warn,
                                   ignore_patterns=ignore, extensions=exts, embedder_name=self.embedder,
                                   vectors=self.vectors, history=self.history)
        filters = service.recorded_filters(codebase)
        out = {"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict(), "filters": filters,
               **({"warnings": warnings} if warnings else {})}
        if not self.as_json:
            _print_report(codebase, report, filters)
        if self.export_to is not None:
            out["export"] = service.export(codebase, self.export_to)
            if not self.as_json:
                print_export(out["export"])
        return out

    def _start_daemon(self, codebase) -> dict:
        """``build --daemon``: the same build, with the same options, in a detached process."""
        options = [*(["--force"] if self.force else []), *(f"--ignore={p}" for p in self.ignore),
                   *(f"--ext={e}" for e in self.exts), *(["--reset-filters"] if self.reset_filters else []),
                   *(["--no-cache"] if self.no_cache else []),
                   *([f"--embedder={self.embedder}"] if self.embedder else []),
                   *([] if self.vectors is None else ["--vectors" if self.vectors else "--no-vectors"]),
                   *([] if self.history is None else
                     ["--no-history"] if self.history is False else [f"--history={self.history}"])]
        info = service.build_in_background(codebase, options)
        if not self.as_json and info.get("finished") and not info.get("log"):
            echo(f"{codebase.root} is up to date: no background build was needed")
        elif not self.as_json and info.get("finished"):
            echo(f"The background build of {codebase.root} already finished (nothing left to do, or a "
                       f"quick update); log: {info.get('log')}")
        elif not self.as_json:
            pid = f" (pid {info['pid']})" if info.get("pid") else ""
            echo(f"Building {codebase.root} in the background{pid}: `codii-sql status {codebase.root}` "
                       f"follows it; log: {info.get('log')}")
        return {"codebase": str(codebase.root), "db": str(codebase.db_path), "daemon": info}


def _saying_waits(codebase, bar):
    """The progress callback, which also says once on stderr when the build waits for another
    process's vector phase (it can last minutes; the lexical phase is done by then)."""
    said = []

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "waiting" and not said:
            said.append(True)
            pid = service.inspect(codebase)["snapshot"].get("vectors_pid")
            who = f" (pid {pid})" if pid else ""
            echo(f"Every file is searchable; waiting for another process{who} that is embedding the chunks "
                       f"of {codebase.root} ({done:,} of {total:,} done; `codii-sql status {codebase.root}` "
                       "follows it) ...", err=True)
        if bar is not None:
            bar(phase, done, total)

    return progress


def _emit(job: Job, out: dict) -> None:
    """A build's ``--json`` answer: one line, the last after its progress lines; a survey's and a started
    daemon's too, so `tail -n 1` reads every build's (a new user's script broke on --dry-run's indented one)."""
    if job.as_json:
        emit(out, one_line=True)


def _build_many(found: list[str], job: Job) -> None:
    """Each codebase in turn, as ``build`` does one (one process: one model load); then one summary.
    A member that is missing or fails is reported and the others still build; exit status 1 then."""
    rows, failed = [], []
    for path in found:
        try:
            codebase = service.open_codebase(path)
            if codebase.alone:  # an export or a shard in the workspace: read only, by design, not a failure
                rows.append({"codebase": path, "ok": True, "skipped": "an index file read alone: never built"})
                echo(f"Skipped {path}: an index file read alone is never built", err=True)
                continue
            rows.append({"ok": True, **job.run(codebase)})
        except CodiiError as err:
            failed.append(path)
            said = message(err)
            rows.append({"codebase": path, "ok": False, "error": said})
            echo(f"Error: {said}" if said.startswith(path) else f"Error: {path}: {said}", err=True)
    if job.as_json:
        skipped = sum(1 for r in rows if r.get("skipped"))
        emit({"codebases": rows, "built": len(rows) - len(failed) - skipped, "skipped": skipped, "failed": len(failed)},
             one_line=not (job.dry_run or job.daemon))
    else:
        echo(summary(rows, failed, "surveyed" if job.dry_run else "started" if job.daemon else "built"))
    if failed:
        raise SystemExit(1)


#: Folders the text report names that the defaults (not the user's ignore rules) left out; status --skipped lists all.
FOLDERS_SHOWN = 8


def _print_report(codebase, report, filters) -> None:
    echo(f"Indexed {codebase.root} -> {codebase.db_path}")
    echo(f"  files: {report.files} ({report.added} added, {report.modified} modified, {report.removed} removed, "
               f"{report.reindexed} re-indexed, {report.unchanged} unchanged)")
    shared = (f"{report.vectors_deduplicated} identical to another chunk's text: embedded once, "
              if report.vectors_deduplicated else "")
    echo(f"  chunks: {report.chunks} ({report.chunks_written} written, {report.chunks_embedded} embedded, "
         f"{shared}{report.vectors_reused} vectors reused)")
    if report.vectors_pending:
        why = "vectors are off (--vectors embeds them)" if not report.vectors_enabled else \
            "another process is embedding them"
        echo(f"  vectors: {report.chunks - report.vectors_pending} of {report.chunks} chunks ({why})")
    if report.skipped:
        echo("  skipped: " + ", ".join(f"{k} {v}" for k, v in report.skipped.most_common()))
    if report.hidden_by:
        rules = ", ".join(f"{h['where']} `{h['rule']}` ({h['paths']:,} paths)" for h in report.hidden_by)
        echo(f"  nothing to index: the ignore rules leave every path out, most by {rules}")
    folders = [f"{path} ({why})" for path, why in sorted(report.skipped_files)
               if path.endswith("/") and why not in ("ignored", "codii-ignored")]
    if folders:
        more = f" and {len(folders) - FOLDERS_SHOWN:,} more" if len(folders) > FOLDERS_SHOWN else ""
        echo(f"  skipped folders: {', '.join(folders[:FOLDERS_SHOWN])}{more} (`codii-sql status --skipped` lists them)")
    for p, why in sorted(report.failed.items()):
        echo(f"  failed: {p}: {why} (retried on the next build)")
    if report.history is not None:
        h = report.history
        commits, hunks = h.get("commits", 0), h.get("hunks", 0)
        counts = (f"{commits:,} commit{'' if commits == 1 else 's'}, {hunks:,} hunk{'' if hunks == 1 else 's'} "
                  f"({h.get('added', 0):,} added, {h.get('removed', 0):,} removed)")
        # A note beside indexed commits (older ones outside the bound) adds to the counts; without commits it is all.
        echo(f"  history: {counts}; {h['note']}" if h.get("note") and h.get("commits") else
             f"  history: {h.get('note') or counts}")
    echo(f"  time: {report.seconds:.2f} s")
    if filters["extensions"] or filters["ignore_patterns"]:
        echo(f"  filters kept for later builds: {describe_filters(filters)} (--reset-filters drops them)")
