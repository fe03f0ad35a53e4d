"""``outline`` and ``symbol``: a file's definitions, nested, and where a symbol is defined."""

from __future__ import annotations

import os

import click

from .. import service
from .output import db_option, echo, emit, json_option, say_pending_build, shown


@click.command()
@click.argument("file")
@click.option("--path", "root", default=None, help="The codebase (default: the indexed one holding FILE, or the current directory).")
@click.option("--no-update", is_flag=True, help="Taken as search, symbol and refs take it (a script passes it to "
                                                "each): outline never updates the index, it reads FILE as it is now.")
@db_option
@json_option
def outline(file, root, no_update, db, as_json):  # noqa: ARG001 - no_update: see its help
    """The definitions of FILE (classes, functions, methods...) nested as in the source, with their
    lines (1-based, inclusive) and first line of code; FILE is a path from here, from the --path folder,
    relative to the codebase root, or absolute."""
    codebase = service.find_codebase(root, db)[0] if db is not None else None
    # A path from the shell, relative to here; an index alone's paths are its root's wherever it is read from (a
    # new user's `outline token/ERC20/ERC20.sol --db oz.db` inside the checkout was made absolute and not found).
    if not (codebase is not None and codebase.alone) and not os.path.isabs(file):
        if root is not None and os.path.isfile(os.path.join(root, file)):  # from the folder given (`--path pt`)
            file = os.path.abspath(os.path.join(root, file))
        elif os.path.exists(file):
            file = os.path.abspath(file)
    if codebase is None:
        start = root if root is not None else (os.path.dirname(file) if os.path.isabs(file) else None)
        codebase, _ = service.find_codebase(start, db)
    data = service.outline(codebase, file)
    if as_json:
        return emit(data)
    echo(f"{shown(data['path'])} ({data['language'] or 'text'})")
    _print_nodes(data["symbols"], 1)
    if data.get("note"):
        echo(f"Note: {data['note']}", err=True)


def _print_nodes(nodes: list[dict], depth: int) -> None:
    for n in nodes:
        span = f"{n['start_line']}-{n['end_line']}"
        echo(f"{'  ' * depth}{span:<11} {n['kind']:<9} {shown(n['symbol'])}  {shown(n['signature'])}")
        _print_nodes(n["children"], depth + 1)


@click.command()
@click.argument("name")
@click.option("--path", "root", default=None, help="The codebase (default: the current directory's); a subfolder of an indexed one keeps to its files.")
@click.option("--kind", default=None, help="Only this kind: function, method, class, type (any type: classes, structs, interfaces, aliases), macro, constant, variable, section (Markdown).")
@click.option("--prefix", is_flag=True, help="Also symbols that start with NAME.")
@click.option("-n", "--limit", type=int, default=20, show_default=True, help="Definitions at most (1-100).")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip this many definitions first (a cut answer's next offset).")
@click.option("--no-update", is_flag=True, help="Answer from the index as it is, without updating it first.")
@db_option
@json_option
def symbol(name, root, kind, prefix, limit, offset, no_update, db, as_json):
    """Where NAME is defined: a symbol (parse_header), a qualified one (Session.send, Type::method;
    generics such as <'a> ignored) or, with --prefix, its start. Exact matches first, source first."""
    codebase, scope = service.find_codebase(root, db)
    _say_first_build(root, db, no_update or as_json)
    data = service.find_symbol(codebase, name, kind=kind, prefix=prefix, limit=limit, offset=offset,
                               update=not no_update, under=scope or None)
    if as_json:
        emit(data)
    else:
        for d in data["definitions"]:
            echo(f"{shown(d['path'])}:{d['start_line']}-{d['end_line']}  {d['kind']} {shown(d['symbol'])}  "
                 f"{shown(d['signature'])}" + ("  [stale]" if d["stale"] else ""))
        if data.get("note"):
            echo(f"Note: {data['note']}", err=True)
    if not (data["definitions"] or data.get("total")):  # as grep: a script's `if codii-sql symbol X` reads 1 as none
        raise SystemExit(1)


@click.command()
@click.argument("name")
@click.option("--path", "root", default=None, help="The codebase (default: the current directory's); a subfolder of an indexed one keeps to its files.")
@click.option("-n", "--limit", type=int, default=200, show_default=True, help="Lines at most (1-2000).")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip this many lines first (a cut answer's next offset).")
@click.option("--no-update", is_flag=True, help="Answer from the index as it is, without updating it first.")
@db_option
@json_option
def refs(name, root, limit, offset, no_update, db, as_json):
    """Where the identifier NAME is used (the last part of Session.send: send), each occurrence on
    its own line, grouped by file, NAME's definitions left out. Lexical: exact on word boundaries."""
    codebase, scope = service.find_codebase(root, db)
    _say_first_build(root, db, no_update or as_json)
    data = service.find_references(codebase, name, limit=limit, offset=offset, update=not no_update,
                                   under=scope or None)
    if as_json:
        emit(data)
    else:
        for f in data["files"]:
            for ln in f["lines"]:
                echo(f"{shown(f['path'])}:{ln['line']}: {shown(ln['text'])}")
        shown_lines = sum(len(f["lines"]) for f in data["files"])
        echo(f"({shown_lines} of {data['total']} lines, in {data['total_files']} files; {data['note']})", err=True)
    if not data["total"]:  # as grep: no use found is exit status 1
        raise SystemExit(1)


def _say_first_build(root: str | None, db: str | None, quiet: bool) -> None:
    """As search and grep do: say so on stderr when the update about to run builds at length."""
    if not quiet:
        say_pending_build(root, db, "symbol", "calls", embeds=False)
