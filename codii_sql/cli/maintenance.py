"""``clear`` and ``doctor``: delete indexes, check and repair them."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import service
from ..codebase import Codebase
from ..errors import CodiiError, IndexBusyError, UsageError
from ..paths import in_indexes_dir
from .output import db_option, echo, emit, json_option, print_export


@click.command()
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
        targets = [Codebase(Path(r.get("root") or "."), Path(r["db"])) for r in service.list_codebases()]
        busy = [c for c in targets if service.is_locked(c)]
        if busy:  # all or nothing: a half-done --all would leave the user guessing what is left
            raise IndexBusyError(f"{busy[0].root} is being indexed: nothing was deleted; try again when it finishes")
    else:
        targets = [service.clear_target(path, db)]
    if not yes and targets:
        if as_json:
            raise UsageError("clear --json does not prompt: add --yes to delete the index")
        if not sys.stdin.isatty():  # click.confirm would print a bare "Aborted!"
            raise UsageError("clear asks before it deletes, and there is no terminal to ask: add --yes to delete "
                             "the index")
        names = ", ".join(str(c.db_path) for c in targets[:3]) + (f" and {len(targets) - 3} more" if len(targets) > 3 else "")
        click.confirm(f"Delete {names}?", abort=True, err=True)
    watched = {str(c.db_path): service.followed_note(c) for c in targets}  # before the files beside go
    removed, failed = [], {}
    for c in targets:
        try:
            if service.clear(c):
                removed.append(str(c.db_path))
        except CodiiError as err:
            if not all_:
                raise
            failed[str(c.db_path)] = str(err)
    # From a subfolder, "nothing to remove" reads as "no index": name the one it lies in.
    outer = targets[0].enclosing() if not (removed or all_ or db is not None) and targets else None
    note = (f"{targets[0].root} has no index of its own; it lies inside the indexed codebase {outer.root}: "
            f"`codii-sql clear {outer.root}` deletes that one") if outer else None
    note = "; ".join(filter(None, [note, *(watched[name] for name in removed)])) or None
    if as_json:
        emit({"removed": removed, **({"failed": failed} if failed else {}), **({"note": note} if note else {})})
    else:
        echo(f"Removed {len(removed)} index file(s)." if removed else note or "Nothing to remove.")
        if removed and note:
            echo(f"Note: {note}", err=True)
        for name, why in failed.items():
            echo(f"Not removed: {name}: {why}", err=True)
    if failed:
        sys.exit(1)


def _replace_damaged(codebase: Codebase, db) -> str:
    """How to replace a damaged index: build --force replaces files of $CODII_SQL_HOME/indexes
    only (service.build); another --db file may not be ours, so it is deleted by hand; an index alone (an
    export) is exported again from its source."""
    at = f" --db {codebase.db_path}" if db is not None else ""
    if codebase.alone:  # an export: no source here to build from (a new user was told to build a folder not here)
        return f"build its codebase where the source is, and export it again to {codebase.db_path}"
    if in_indexes_dir(codebase.db_path):
        return f"`codii-sql build {codebase.root}{at} --force` replaces the index"
    return f"delete {codebase.db_path} by hand, then `codii-sql build {codebase.root}{at}` makes a new one"


@click.command()
@click.argument("path", required=False, default=None)
@click.option("--check-only", is_flag=True, help="Report problems without repairing them.")
@db_option
@json_option
def doctor(path, check_only, db, as_json):
    """Check the index (SQLite, FTS5, vec0 rows, Merkle tree) and repair what it can."""
    codebase = service.open_codebase(path, db)
    out = service.doctor(codebase, repair=not check_only)
    if as_json:
        emit(out)
    else:
        for c in out["checks"]:
            mark = "ok" if c["ok"] else ("REPAIRED" if c["repaired"] else "PROBLEM")
            echo(f"{mark:>8}  {c['name']}: {c['detail']}")
        if out.get("embedder"):
            e = out["embedder"]
            echo(f"{'ok' if e['answers'] else 'PROBLEM':>8}  embedder {e['name']} ({e['where']}): {e['detail']}")
        if out.get("rebuild"):
            echo(f"re-indexed {len(out['forgotten'])} file(s) whose rows were incomplete")
        echo("consistent" if out["consistent"] else
                   f"damaged: SQLite pages are broken; {_replace_damaged(codebase, db)}"
                   if out["damaged"] else
                   f"inconsistent: an index alone is only read; {_replace_damaged(codebase, db)}" if codebase.alone else
                   "inconsistent (run doctor without --check-only to repair)" if check_only else
                   "was inconsistent (repaired)")
    embedder_down = bool(out.get("embedder")) and not out["embedder"]["answers"]
    if out["damaged"] or (check_only and not out["consistent"]) or embedder_down:
        sys.exit(1)  # a problem remains: a script sees it in the status (an embedder that does not answer too)


@click.command(name="export")
@click.argument("path", required=False, default=None)
@click.option("--to", "target", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The file to write (written beside it, then renamed into place).")
@db_option
@json_option
def export(path, target, db, as_json):
    """Write the index of PATH as one compact file to search alone: a CI artifact, a shard to serve
    (`serve --shards DIR`), a file to share. Its write-ahead log is folded in, it carries no absolute
    path of this machine, and its manifest (`inspect --manifest`) says what it holds."""
    out = service.export(service.open_codebase(path, db), target)
    if as_json:
        return emit(out)
    print_export(out)
