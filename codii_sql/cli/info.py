"""``status``, ``list``, ``stats`` and ``inspect``: what the indexes hold."""

from __future__ import annotations

import click

from .. import service
from .output import db_option, emit, fmt_value, json_option


@click.command()
@click.argument("path", required=False, default=None)
@db_option
@json_option
def status(path, db, as_json):
    """Show whether PATH is indexed, being indexed, failed or stale."""
    st = service.status(service.open_codebase(path, db))
    if as_json:
        return emit(st)
    for key, value in st.items():
        if value not in (None, {}, []):
            click.echo(f"{key}: {fmt_value(key, value)}")


@click.command(name="list")
@json_option
def list_(as_json):
    """List every index under $CODII_SQL_HOME."""
    rows = service.list_codebases()
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


@click.command()
@click.argument("path", required=False, default=None)
@db_option
@json_option
def stats(path, db, as_json):
    """Files and chunks by language, chunk kind and file role."""
    st = service.stats(service.open_codebase(path, db))
    if as_json:
        return emit(st)
    click.echo(f"{st['codebase']}: {st['files']} files, {st['chunks']} chunks")
    for title, key in (("language", "languages"), ("kind", "kinds"), ("role", "roles")):
        click.echo(f"by {title}:")
        for row in st[key]:
            click.echo("  " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


@click.command()
@click.argument("path", required=False, default=None)
@click.option("--file", "file_", default=None, help="Also list the chunks of this file (relative path).")
@db_option
@json_option
def inspect(path, file_, db, as_json):
    """Show the index's snapshot (model, chunker, Merkle root, counts) and optionally one file's chunks."""
    codebase = service.open_codebase(path, db)
    info = service.inspect(codebase, file_)
    if as_json:
        return emit(info)
    for key, value in info["snapshot"].items():
        click.echo(f"{key}: {fmt_value(key, value)}")
    for c in info.get("chunks", []):
        click.echo(f"  {c['start_line']:>5}-{c['end_line']:<5} {c['kind']:<9} {c['symbol'] or ''}  (id {c['id']})")
