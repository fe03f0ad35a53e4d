"""``build``: index a codebase (lexical phase, then vectors), in the background, or only say what it would do."""

from __future__ import annotations

import click

from .. import service
from .output import (
    db_option,
    describe_filters,
    emit,
    err_console,
    json_option,
    print_dry_run,
    progress_bar,
)


@click.command()
@click.argument("path", required=False, default=None)
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
@click.option("--daemon", is_flag=True,
              help="Return at once and build in the background (`status` follows it; log under $CODII_SQL_HOME/logs).")
@click.option("--dry-run", is_flag=True,
              help="Say what a build would index (files, chunks, skips, largest folders) and about how long the "
                   "model would take; writes nothing.")
@click.option("--detached", is_flag=True, hidden=True, help="Run as the background process of --daemon.")
@db_option
@json_option
def build(path, force, ignore_patterns, extensions, reset_filters, no_cache, embedder, vectors, daemon, dry_run,
          detached, db, as_json):
    """Build or update the index of the codebase at PATH (default: current directory).

    Every file is searchable by BM25, symbol and path as soon as the lexical phase commits it;
    the vector phase then embeds the chunks, source files first.
    """
    codebase = service.open_codebase(path, db)
    ignore = list(ignore_patterns) if ignore_patterns or reset_filters else None
    exts = list(extensions) if extensions or reset_filters else None
    if dry_run:
        survey = service.dry_run(codebase, ignore_patterns=ignore, extensions=exts, vectors=vectors,
                                 embedder_name=embedder)
        return emit(survey) if as_json else print_dry_run(survey)
    if daemon:
        return _start_daemon(codebase, as_json, force=force, ignore=ignore_patterns, exts=extensions,
                             reset_filters=reset_filters, no_cache=no_cache, embedder=embedder, vectors=vectors)
    if detached:
        with service.detached(codebase):
            return _build(codebase, force, ignore, exts, no_cache, embedder, vectors, as_json)
    if service.is_locked(codebase):
        click.echo(f"Waiting for another process that is indexing {codebase.root} ...", err=True)
    return _build(codebase, force, ignore, exts, no_cache, embedder, vectors, as_json)


def _build(codebase, force, ignore, exts, no_cache, embedder, vectors, as_json):
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        click.echo(f"Warning: {message}", err=True)

    with progress_bar(not as_json and err_console.is_terminal) as bar:
        report = service.build(codebase, force=force, progress=bar, use_cache=not no_cache, warn=warn,
                               ignore_patterns=ignore, extensions=exts, embedder_name=embedder, vectors=vectors)
    filters = service.recorded_filters(codebase)
    if as_json:
        emit({"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict(), "filters": filters,
              **({"warnings": warnings} if warnings else {})})
        return
    click.echo(f"Indexed {codebase.root} -> {codebase.db_path}")
    click.echo(f"  files: {report.files} ({report.added} added, {report.modified} modified, {report.removed} removed, "
               f"{report.reindexed} re-indexed, {report.unchanged} unchanged)")
    click.echo(f"  chunks: {report.chunks} ({report.chunks_written} written, {report.chunks_embedded} embedded, "
               f"{report.vectors_reused} vectors reused)")
    if report.vectors_pending:
        why = "vectors are off (--vectors embeds them)" if not report.vectors_enabled else \
            "another process is embedding them"
        click.echo(f"  vectors: {report.chunks - report.vectors_pending} of {report.chunks} chunks ({why})")
    if report.skipped:
        click.echo("  skipped: " + ", ".join(f"{k} {v}" for k, v in report.skipped.most_common()))
    for p, why in sorted(report.failed.items()):
        click.echo(f"  failed: {p}: {why} (retried on the next build)")
    click.echo(f"  time: {report.seconds:.2f} s")
    if filters["extensions"] or filters["ignore_patterns"]:
        click.echo(f"  filters kept for later builds: {describe_filters(filters)} (--reset-filters drops them)")


def _start_daemon(codebase, as_json, *, force, ignore, exts, reset_filters, no_cache, embedder, vectors):
    """``build --daemon``: the same build, with the same options, in a detached process."""
    options = [*(["--force"] if force else []), *(f"--ignore={p}" for p in ignore), *(f"--ext={e}" for e in exts),
               *(["--reset-filters"] if reset_filters else []), *(["--no-cache"] if no_cache else []),
               *([f"--embedder={embedder}"] if embedder else []),
               *([] if vectors is None else ["--vectors" if vectors else "--no-vectors"])]
    info = service.start_daemon(codebase, options)
    if as_json:
        return emit({"codebase": str(codebase.root), "db": str(codebase.db_path), "daemon": info})
    pid = f" (pid {info['pid']})" if info.get("pid") else ""
    click.echo(f"Building {codebase.root} in the background{pid}: `codii-sql status {codebase.root}` follows it; "
               f"log: {info.get('log')}")
