"""``workspace``: define named sets of codebases to build, search and watch together."""

from __future__ import annotations

import os

import click

from .. import service
from .output import echo, emit, json_option


@click.group()
def workspace():
    """Workspaces: WORKSPACE_<NAME>=PATH,PATH (or a JSON array) in the environment, or this registry.

    The environment wins over the registry for one name. Search one with
    `codii-sql search QUERY --workspace NAME`, build it with `codii-sql build --workspace NAME`.
    """


@workspace.command()
@click.argument("name")
@click.argument("paths", nargs=-1, required=True)
@json_option
def add(name, paths, as_json):
    """Add the folders (or index files) PATHS to the workspace NAME (created if new) in the registry."""
    ws = service.add_paths(name, list(paths))
    if as_json:
        return emit({"name": ws.name, "paths": list(ws.paths), "source": ws.source})
    echo(f"workspace {ws.name}: {len(ws.paths)} member(s)")
    for p in ws.paths:
        echo(f"  {p}")
    for p in paths:
        if not os.path.exists(p):
            echo(f"Warning: {p} does not exist (yet): searches will note it as missing", err=True)


@workspace.command()
@click.argument("name")
@click.argument("paths", nargs=-1)
@json_option
def remove(name, paths, as_json):
    """Remove PATHS from the workspace NAME, or the whole workspace when no path is given."""
    left = service.remove(name, list(paths) or None)
    if as_json:
        return emit({"name": name.lower(), "removed": left is None, "paths": list(left.paths) if left else []})
    echo(f"workspace {name.lower()} removed" if left is None else
               f"workspace {left.name}: {len(left.paths)} member(s) left")


@workspace.command("list")
@click.option("--no-stale-check", is_flag=True, help="Skip walking each member to tell stale from indexed.")
@json_option
def list_(no_stale_check, as_json):
    """Every workspace, where it is defined (env or registry), and each member's state."""
    rows = [service.describe(ws, check_stale=not no_stale_check) for ws in service.workspaces().values()]
    if as_json:
        return emit({"workspaces": rows})
    if not rows:
        echo("No workspaces yet: `codii-sql workspace add NAME PATH...` or WORKSPACE_<NAME>=PATH,PATH")
    for ws in rows:
        echo(f"{ws['name']} ({ws['source']}): {len(ws['members'])} member(s)")
        for m in ws["members"]:
            counts = f"  files={m['files']} chunks={m['chunks']}" if "files" in m else ""
            echo(f"  {m['status']:<11} {m['codebase']}{counts}" + (f"  ({m['note']})" if m.get("note") else ""))
        if ws.get("note"):
            echo(f"  note: {ws['note']}")
