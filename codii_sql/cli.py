"""The ``codii-sql`` command line: a thin click layer over :mod:`codii_sql.api` (every command has ``--json``)."""

from __future__ import annotations

import contextlib
import datetime
import json
import sys
from pathlib import Path

import apsw
import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import api
from .cli_models import models
from .codebase import Codebase
from .paths import in_indexes_dir
from .service.codebases import find_codebase, open_codebase
from .errors import CodiiError, IndexBusyError, UsageError
from .search.results import MAX_LIMIT, MODES, SearchOptions

err_console = Console(stderr=True)


class CodiiGroup(click.Group):
    """Turns every :class:`CodiiError` and bad option into one line on stderr and its exit code, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CodiiError as err:
            click.echo(f"Error: {err}", err=True)
            ctx.exit(err.exit_code)
        except click.UsageError as err:  # one line too, for a bad option or argument
            where = f"codii-sql {err.ctx.info_name}" if err.ctx and err.ctx.info_name != ctx.info_name else "codii-sql"
            click.echo(f"Error: {err.format_message()} (see `{where} --help`)", err=True)
            ctx.exit(2)
        except apsw.ReadOnlyError as err:
            click.echo(f"Error: the index file is read-only ({err}): make it writable, or copy it and pass --db",
                       err=True)
            ctx.exit(1)
        except apsw.Error as err:  # broken pages found while reading rows, not when opening
            if api.disk_was_full(err):  # a write outside api.build (which names the file): not a damaged index
                click.echo("Error: the disk is full (SQLite could not write): free some space, then run the "
                           "command again (the index keeps its last committed state)", err=True)
                ctx.exit(1)
            click.echo(f"Error: reading the index failed ({err}): `codii-sql doctor` checks it and "
                       "`codii-sql build --force` replaces a damaged index", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("Interrupted: the index keeps every file committed so far; run build again to finish.", err=True)
            ctx.exit(130)


def db_option(f):
    return click.option("--db", type=click.Path(dir_okay=False), default=None,
                        help="Index file to use instead of $CODII_SQL_HOME/indexes/<name>-<hash>.db.")(f)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(f)


def emit(obj) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2, default=str))


@contextlib.contextmanager
def progress_bar(enabled: bool):
    """A rich progress bar by phase on stderr, or a no-op callback when output is not a terminal."""
    if not enabled:
        yield None
        return
    with Progress(TextColumn("{task.description:<6}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update


@click.group(cls=CodiiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="codii-sql")
def cli():
    """Local hybrid code search: BM25 (FTS5) + vectors (sqlite-vec) fused by RRF, one .db per codebase."""


@cli.command()
@click.argument("path", required=False, default=None)
@click.option("--force", is_flag=True, help="Re-read and re-chunk every file; searches keep working meanwhile (after a model change the index is emptied first).")
@click.option("--ignore", "ignore_patterns", multiple=True, help="Extra gitignore-style pattern (repeatable).")
@click.option("--ext", "extensions", multiple=True, help="Index only these extensions, e.g. --ext .py (repeatable).")
@click.option("--reset-filters", is_flag=True,
              help="Forget --ext/--ignore options that earlier builds (CLI or MCP) recorded; a plain build keeps them.")
@click.option("--no-cache", is_flag=True,
              help="Do not use the shared embedding cache; with --force, embed every chunk again.")
@db_option
@json_option
def build(path, force, ignore_patterns, extensions, reset_filters, no_cache, db, as_json):
    """Build or update the index of the codebase at PATH (default: current directory)."""
    codebase = open_codebase(path, db)
    if api.is_locked(codebase):
        click.echo(f"Waiting for another process that is indexing {codebase.root} ...", err=True)
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        click.echo(f"Warning: {message}", err=True)

    with progress_bar(not as_json and err_console.is_terminal) as bar:
        report = api.build(codebase, force=force, progress=bar, use_cache=not no_cache, warn=warn,
                           ignore_patterns=list(ignore_patterns) if ignore_patterns or reset_filters else None,
                           extensions=list(extensions) if extensions or reset_filters else None)
    filters = api.recorded_filters(codebase)
    if as_json:
        emit({"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict(), "filters": filters,
              **({"warnings": warnings} if warnings else {})})
        return
    click.echo(f"Indexed {codebase.root} -> {codebase.db_path}")
    click.echo(f"  files: {report.files} ({report.added} added, {report.modified} modified, {report.removed} removed, "
               f"{report.reindexed} re-indexed, {report.unchanged} unchanged)")
    click.echo(f"  chunks: {report.chunks} ({report.chunks_written} written, {report.chunks_embedded} embedded, "
               f"{report.vectors_reused} vectors reused)")
    if report.skipped:
        click.echo("  skipped: " + ", ".join(f"{k} {v}" for k, v in report.skipped.most_common()))
    for p, why in sorted(report.failed.items()):
        click.echo(f"  failed: {p}: {why} (retried on the next build)")
    click.echo(f"  time: {report.seconds:.2f} s")
    if filters["extensions"] or filters["ignore_patterns"]:
        click.echo(f"  filters kept for later builds: {_describe_filters(filters)} (--reset-filters drops them)")


def _describe_filters(filters: dict) -> str:
    parts = [f"only {' '.join(filters['extensions'])}"] if filters["extensions"] else []
    parts += [f"ignore {' '.join(filters['ignore_patterns'])}"] if filters["ignore_patterns"] else []
    return "; ".join(parts)


def _search_options(limit, mode, exts, glob, language, no_prior, group_by, rerank, rerank_model) -> SearchOptions:
    return SearchOptions(limit=limit, mode=mode, exts=list(exts), glob=glob, language=language,
                         role_prior=not no_prior, group_by_file=group_by == "file",
                         rerank=rerank or rerank_model is not None, rerank_model=rerank_model)


@cli.command()
@click.argument("query", required=False)
@click.option("--path", "path", default=None,
              help="Codebase root (default: the root recorded in --db, else the current directory); a subfolder "
                   "of an indexed codebase searches that index, keeping files under the subfolder.")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True)
@click.option("--ext", "exts", multiple=True, help="Only files ending in this extension (repeatable), e.g. --ext .py")
@click.option("--glob", default=None, help="Only paths matching this glob, e.g. 'src/*.py' (* also matches /).")
@click.option("--language", default=None, help="Only chunks of this language, e.g. python.")
@click.option("--group-by", type=click.Choice(["chunk", "file"]), default="chunk", show_default=True,
              help="file: one result per file, ranked by its best chunk.")
@click.option("--no-prior", is_flag=True, help="Turn off the soft source-over-tests/docs ranking prior.")
@click.option("--rerank", is_flag=True, help="Re-score the top 30 with a cross-encoder ($CODII_SQL_RERANK_MODEL).")
@click.option("--rerank-model", type=click.Path(exists=True), default=None,
              help="Cross-encoder for --rerank: an ONNX file/folder or a Hugging Face BERT folder (implies --rerank).")
@click.option("--no-update", is_flag=True, help="Search the index as it is, without updating it first.")
@click.option("--queries-file", type=click.File("r", encoding="utf-8"), default=None,
              help='Batch mode: JSONL lines {"id", "query"}; prints {"id", "results"} lines.')
@db_option
@json_option
@click.option("--jsonl", is_flag=True, help="Print one JSON result per line.")
def search(query, path, limit, mode, exts, glob, language, group_by, no_prior, rerank, rerank_model, no_update,
           queries_file, db, as_json, jsonl):
    """Search the codebase for QUERY (natural language or an identifier).

    Builds the index first if it is missing, and updates it if files changed.
    A QUERY that starts with "-" goes after "--": codii-sql search --path . -- "-v flag".
    """
    if as_json and jsonl:
        raise UsageError("pass either --json (one object) or --jsonl (one result per line), not both")
    codebase, scope = find_codebase(path, db)
    opts = _search_options(limit, mode, exts, glob, language, no_prior, group_by, rerank, rerank_model)
    opts.under = scope or None
    if queries_file is not None:
        if query is not None:
            raise UsageError("pass either QUERY or --queries-file, not both")
        return _batch_search(codebase, opts, queries_file, no_update, as_json)
    if query is None:
        raise UsageError("missing QUERY: codii-sql search \"where are retries handled\" --path REPO")
    if not (as_json or jsonl or no_update) and query.strip() and not codebase.db_path.is_file():
        click.echo(f"Indexing {codebase.root} first: the model embeds every chunk once (minutes for a large "
                   "codebase); later searches update only changed files.", err=True)
    with progress_bar(not (as_json or jsonl) and err_console.is_terminal) as bar:
        resp = api.search(codebase, query, opts, update=not no_update, progress=bar)
    if scope and not (as_json or jsonl):
        click.echo(f"Note: searching the index of {codebase.root}, files under {scope}/ only", err=True)
    if resp.note:
        click.echo(f"Note: {resp.note}", err=True)
    if as_json:
        emit(resp.to_dict())
    elif jsonl:
        for r in resp.results:
            click.echo(json.dumps(r.to_dict(), ensure_ascii=False))
    else:
        _print_results(resp)


def _batch_search(codebase, opts, lines, no_update, as_json):
    """One answer line per query line (streamed); with ``as_json`` one array of them at the end."""
    api.ensure_index(codebase, update=not no_update)
    searcher = api.open_searcher(codebase)
    answers: list[dict] = []
    out = answers.append if as_json else (lambda answer: click.echo(json.dumps(answer, ensure_ascii=False)))
    failed = 0
    try:
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            item: dict = {}
            try:
                item = json.loads(line)
                if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                    raise UsageError('each line must be a JSON object with a "query" string')
                out({"id": item.get("id"), "results": [r.to_dict() for r in searcher.search(item["query"], opts)]})
            except (ValueError, CodiiError) as err:
                qid = item.get("id") if isinstance(item, dict) else None
                out({"id": qid, "line": n, "error": f"line {n}: {err}"})
                failed += 1
    finally:
        searcher.store.close()
    if as_json:
        emit(answers)
    if failed:
        # Every line was answered; the exit status tells a script that some answers are errors.
        click.echo(f"Error: {failed} queries failed (their lines carry an \"error\" key)", err=True)
        raise SystemExit(1)


def _print_results(resp) -> None:
    if not resp.results:
        click.echo("No results.")
    for i, r in enumerate(resp.results, 1):
        where = f"{r.path}:{r.start_line}-{r.end_line}"
        label = f"{r.kind} {r.symbol}" if r.symbol else r.kind
        click.secho(f"{i}. {where}  {label}  score={r.score:.4f}{'  [stale]' if r.stale else ''}", bold=True)
        lines = r.content.splitlines()
        for n, text in enumerate(lines[:12], r.start_line):
            click.echo(f"  {n:>5}  {text}")
        if len(lines) > 12:
            click.echo(f"         ... {len(lines) - 12} more lines")
    n = len(resp.results)
    click.echo(f"({n} result{'' if n == 1 else 's'} in {resp.seconds * 1000:.0f} ms)", err=True)


@cli.command()
@click.argument("path", required=False, default=None)
@db_option
@json_option
def status(path, db, as_json):
    """Show whether PATH is indexed, being indexed, failed or stale."""
    st = api.status(open_codebase(path, db))
    if as_json:
        return emit(st)
    for key, value in st.items():
        if value not in (None, {}, []):
            click.echo(f"{key}: {_fmt(key, value)}")


def _fmt(key: str, value):
    if key.endswith("_at") and isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(value).astimezone().isoformat(timespec="seconds")
    return json.dumps(value) if isinstance(value, (dict, list)) else value


@cli.command(name="list")
@json_option
def list_(as_json):
    """List every index under $CODII_SQL_HOME."""
    rows = api.list_codebases()
    if as_json:
        return emit(rows)
    if not rows:
        click.echo("No indexes yet: run `codii-sql build PATH`.")
    for r in rows:
        size = f"size={r['size_bytes'] / 1e6:.1f} MB"
        if "files" not in r:  # damaged or unreadable: counts are unknown, say what to do instead
            hint = f"`codii-sql clear --db {r['db']} --yes` deletes it" if r["status"] == "damaged" else r.get("error")
            click.echo(f"{r['db']}  {r['status']}  {size}  ({hint})")
            continue
        click.echo(f"{r.get('root') or r['db']}  {r.get('status')}  files={r['files']} chunks={r['chunks']} {size}")


@cli.command()
@click.argument("path", required=False, default=None)
@db_option
@json_option
def stats(path, db, as_json):
    """Files and chunks by language, chunk kind and file role."""
    st = api.stats(open_codebase(path, db))
    if as_json:
        return emit(st)
    click.echo(f"{st['codebase']}: {st['files']} files, {st['chunks']} chunks")
    for title, key in (("language", "languages"), ("kind", "kinds"), ("role", "roles")):
        click.echo(f"by {title}:")
        for row in st[key]:
            click.echo("  " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


@cli.command()
@click.argument("path", required=False, default=None)
@click.option("--all", "all_", is_flag=True, help="Delete every index under $CODII_SQL_HOME.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (required with --json, which never prompts).")
@db_option
@json_option
def clear(path, all_, yes, db, as_json):
    """Delete the index of PATH (the files of the codebase are never touched)."""
    if all_ and (path is not None or db is not None):
        raise UsageError("pass PATH (or --db) to delete one index, or --all for every index, not both")
    if all_:
        targets = [Codebase(Path(r.get("root") or "."), Path(r["db"])) for r in api.list_codebases()]
        busy = [c for c in targets if api.is_locked(c)]
        if busy:  # all or nothing: a half-done --all would leave the user guessing what is left
            raise IndexBusyError(f"{busy[0].root} is being indexed: nothing was deleted; try again when it finishes")
    else:
        targets = [_clear_target(path, db)]
    if not yes and targets:
        if as_json:
            raise UsageError("clear --json does not prompt: add --yes to delete the index")
        names = ", ".join(str(c.db_path) for c in targets[:3]) + (f" and {len(targets) - 3} more" if len(targets) > 3 else "")
        click.confirm(f"Delete {names}?", abort=True, err=True)
    removed, failed = [], {}
    for c in targets:
        try:
            if api.clear(c):
                removed.append(str(c.db_path))
        except CodiiError as err:
            if not all_:
                raise
            failed[str(c.db_path)] = str(err)
    # From a subfolder, "nothing to remove" reads as "no index": name the one it lies in.
    outer = targets[0].enclosing() if not (removed or all_ or db is not None) and targets else None
    note = (f"{targets[0].root} has no index of its own; it lies inside the indexed codebase {outer.root}: "
            f"`codii-sql clear {outer.root}` deletes that one") if outer else None
    if as_json:
        emit({"removed": removed, **({"failed": failed} if failed else {}), **({"note": note} if note else {})})
    else:
        click.echo(f"Removed {len(removed)} index file(s)." if removed else note or "Nothing to remove.")
        for name, why in failed.items():
            click.echo(f"Not removed: {name}: {why}", err=True)
    if failed:
        sys.exit(1)


def _clear_target(path, db) -> Codebase:
    """The codebase to clear. Only its index file matters, so an index whose folder is gone is
    found by ``--db`` alone or by the root that ``codii-sql list`` shows."""
    if db is not None and path is None:
        return Codebase(Path("."), Path(db).expanduser().absolute())
    try:
        return open_codebase(path, db)
    except UsageError:
        wanted = str(Path(path or ".").expanduser().absolute())
        for r in api.list_codebases():
            if r.get("root") == wanted:
                return Codebase(Path(wanted), Path(r["db"]))
        raise


@cli.command()
@click.argument("path", required=False, default=None)
@click.option("--file", "file_", default=None, help="Also list the chunks of this file (relative path).")
@db_option
@json_option
def inspect(path, file_, db, as_json):
    """Show the index's snapshot (model, chunker, Merkle root, counts) and optionally one file's chunks."""
    codebase = open_codebase(path, db)
    info = api.inspect(codebase, file_)
    if as_json:
        return emit(info)
    for key, value in info["snapshot"].items():
        click.echo(f"{key}: {_fmt(key, value)}")
    for c in info.get("chunks", []):
        click.echo(f"  {c['start_line']:>5}-{c['end_line']:<5} {c['kind']:<9} {c['symbol'] or ''}  (id {c['id']})")


def _replace_damaged(codebase: Codebase, db) -> str:
    """How to replace a damaged index: build --force replaces files of $CODII_SQL_HOME/indexes
    only (api.build); another --db file may not be ours, so it is deleted by hand."""
    at = f" --db {codebase.db_path}" if db is not None else ""
    if in_indexes_dir(codebase.db_path):
        return f"`codii-sql build {codebase.root}{at} --force` replaces the index"
    return f"delete {codebase.db_path} by hand, then `codii-sql build {codebase.root}{at}` makes a new one"


@cli.command()
@click.argument("path", required=False, default=None)
@click.option("--check-only", is_flag=True, help="Report problems without repairing them.")
@db_option
@json_option
def doctor(path, check_only, db, as_json):
    """Check the index (SQLite, FTS5, vec0 rows, Merkle tree) and repair what it can."""
    codebase = open_codebase(path, db)
    out = api.doctor(codebase, repair=not check_only)
    if as_json:
        emit(out)
    else:
        for c in out["checks"]:
            mark = "ok" if c["ok"] else ("REPAIRED" if c["repaired"] else "PROBLEM")
            click.echo(f"{mark:>8}  {c['name']}: {c['detail']}")
        if out.get("rebuild"):
            click.echo(f"re-indexed {len(out['forgotten'])} file(s) whose rows were incomplete")
        click.echo("consistent" if out["consistent"] else
                   f"damaged: SQLite pages are broken; {_replace_damaged(codebase, db)}"
                   if out["damaged"] else
                   "inconsistent (run doctor without --check-only to repair)" if check_only else
                   "was inconsistent (repaired)")
    if out["damaged"] or (check_only and not out["consistent"]):
        sys.exit(1)


@cli.command()
def serve():
    """Run the MCP server on stdio (for Claude Code, Cursor and other MCP clients)."""
    from .mcp_server import main as serve_main

    serve_main()


@cli.command(name="eval")
@click.argument("dataset", required=False)
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True)
@click.option("--rerank", is_flag=True, help="Re-score the top chunks with the cross-encoder, as search --rerank.")
@click.option("--rerank-model", default=None,
              help="Cross-encoder for --rerank (implies it) [default: $CODII_SQL_RERANK_MODEL].")
@click.option("--no-prior", is_flag=True, help="Turn off the soft source-over-tests/docs ranking prior.")
@click.option("--repos", default=None, help="SWE-bench: only these repositories, e.g. requests,flask.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N queries.")
@click.option("--top", type=click.IntRange(1, MAX_LIMIT), default=None,
              help="Results per query [default: 100 for CoSQA, 10 files for SWE-bench].")
@click.option("--bench-dir", envvar="CODII_SQL_BENCH", type=click.Path(file_okay=False), default=None,
              help="Folder with cosqa/ and swebench/ [env CODII_SQL_BENCH; default ../shared/bench].")
@click.option("--work-dir", envvar="CODII_SQL_BENCH_WORK", type=click.Path(file_okay=False),
              default="~/.cache/codii-bench", show_default=True,
              help="Snippets, source trees and saved runs [env CODII_SQL_BENCH_WORK].")
@click.option("--compare", nargs=2, type=click.Path(exists=True, dir_okay=False), default=None,
              help="Print the metric deltas between two saved runs A B (B - A) instead of running.")
@json_option
def eval_(dataset, mode, rerank, rerank_model, no_prior, repos, limit, top, bench_dir, work_dir, compare,
          as_json):
    """Score search on a benchmark: DATASET is cosqa, swebench or a dataset folder (see docs/eval.md)."""
    from . import evaluate

    if compare:
        cmp = evaluate.compare_runs(evaluate.load_run(compare[0]), evaluate.load_run(compare[1]))
        return emit(cmp) if as_json else click.echo(evaluate.format_comparison(cmp))
    if dataset is None:
        raise UsageError("missing DATASET: codii-sql eval cosqa|swebench|DIR (or --compare A.json B.json)")
    cfg = evaluate.EvalConfig(dataset, mode=mode, rerank=rerank or rerank_model is not None,
                              rerank_model=rerank_model, role_prior=not no_prior,
                              repos=repos.split(",") if repos else [], limit=limit, top=top,
                              bench_dir=Path(bench_dir) if bench_dir else None, work_dir=Path(work_dir))
    run = evaluate.evaluate(cfg, log=lambda msg: click.echo(msg, err=True))
    saved = evaluate.save_run(run, cfg.work_dir)
    if as_json:
        return emit({**evaluate.summary(run), "saved": str(saved)})
    click.echo(evaluate.format_run(run))
    click.echo(f"saved: {saved}", err=True)


cli.add_command(models)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="codii-sql")


if __name__ == "__main__":
    sys.exit(main())
