"""``status``, ``list``, ``stats`` and ``inspect``: what the indexes hold."""

from __future__ import annotations

from pathlib import Path

import click

from .. import service
from ..errors import Remedy, UsageError
from .output import db_option, echo, emit, fmt_value, json_option, shown
from .words import words


@click.command()
@click.argument("path", required=False, default=None)
@click.option("--workspace", default=None, help="The state of every member of this workspace instead.")
@click.option("--skipped", "list_skipped", is_flag=True,
              help="Also list the files the last build skipped, each with its reason (secret, minified, too-large...).")
@db_option
@json_option
def status(path, workspace, list_skipped, db, as_json):
    """Show whether PATH is indexed, being indexed, failed or stale, and how far its vectors are."""
    if workspace:
        described = service.describe(service.get_workspace(workspace))
        if as_json:
            return emit(described)
        echo(f"{described['name']} ({described['source']}): {len(described['members'])} member(s)")
        for m in described["members"]:
            vectors = m.get("vectors")
            more = f"  files={m['files']} chunks={m['chunks']}" if "files" in m else ""
            more += f" vectors={vectors['done']}/{vectors['total']}" if vectors and vectors["state"] != "complete" else ""
            echo(f"  {m['status']:<11} {m['codebase']}{more}" + (f"  ({m['note']})" if m.get("note") else ""))
        return None
    # As search, grep and symbol do from a subfolder: the index of the codebase it lies in.
    codebase, scope = service.find_codebase(path, db)
    st = service.status(codebase)
    if scope:
        st["scope"] = scope
    skipped = st.pop("skipped_files", None)
    if as_json:
        return emit({**st, "skipped_files": skipped} if list_skipped else st)
    for key, value in st.items():
        if key in ("files_done", "files_total"):  # a build's progress: read beside "files" it looked like a count
            if key == "files_done" and st["status"] == "indexing" and value is not None:
                echo(f"progress: {value} of {st.get('files_total') or '?'} files of this build")
        elif key == "watched_by":
            echo("watched_by: " + ", ".join(f"pid {w['pid']} ({w.get('by', '?')})" for w in value))
        elif key == "skipped" and value and not list_skipped:
            echo(f"skipped: {fmt_value(key, value)} (`status --skipped` lists them)")
        elif value not in (None, {}, []):
            echo(f"{key}: {fmt_value(key, value)}")
    if list_skipped and skipped is not None:
        _print_skipped(skipped)


def _print_skipped(skipped: dict) -> None:
    echo("skipped files:" if skipped["files"] or skipped["more"] else "skipped files: none")
    for f in skipped["files"]:
        echo(f"  {f['reason']:<20} {shown(f['path'])}")
    if skipped["more"]:
        by_reason = ", ".join(f"{reason} {n:,}" for reason, n in (skipped.get("more_by_reason") or {}).items())
        echo(f"  and {skipped['more']:,} more" + (f" ({by_reason})" if by_reason else ""))


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array, an object per index.")
def list_(as_json):
    """List every index under $CODII_SQL_HOME."""
    rows = service.list_codebases()
    groups = {ws.name: set(ws.paths) for ws in service.workspaces().values()}
    for r in rows:
        r["workspaces"] = sorted(name for name, members in groups.items() if r.get("root") in members)
    if as_json:
        return emit(rows)
    if not rows:
        echo("No indexes yet: run `codii-sql build PATH`.")
    # Grouped: each workspace's indexes under its name, then the indexes of no workspace.
    order = [(name, [r for r in rows if name in r["workspaces"]]) for name in groups]
    order = [(name, members) for name, members in order if members] + [(None, [r for r in rows if not r["workspaces"]])]
    for name, members in order:
        if name is not None:
            echo(f"[workspace {name}]")
        for r in members:
            _list_row(r, "  " if name is not None else "")


def _list_row(r: dict, indent: str) -> None:
    size = f"size={r['size_bytes'] / 1e6:.1f} MB"
    if "files" not in r:  # damaged or unreadable: counts are unknown, say what to do instead
        hint = words(Remedy("clear", {"db": r["db"]})) if r["status"] == "damaged" else r.get("error")
        echo(f"{indent}{r['db']}  {r['status']}  {size}  ({hint})")
        return
    echo(f"{indent}{r.get('root') or r['db']}  {r.get('status')}  files={r['files']} chunks={r['chunks']} {size}")


@click.command()
@click.argument("path", required=False, default=None)
@db_option
@json_option
def stats(path, db, as_json):
    """Files and chunks by language, chunk kind and file role."""
    st = service.stats(service.open_codebase(path, db))
    if as_json:
        return emit(st)
    echo(f"{st['codebase']}: {st['files']} files, {st['chunks']} chunks")
    for title, key in (("language", "languages"), ("kind", "kinds"), ("role", "roles")):
        echo(f"by {title}:")
        for row in st[key]:
            echo("  " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


@click.command()
@click.argument("args", nargs=-1, metavar="[QUERY] [PATH]")
@click.option("--file", "file_", default=None, help="List the chunks of this file (relative path) with the snapshot.")
@click.option("--raw", is_flag=True, help="With QUERY: print each chunk's whole stored text, not its first line.")
@click.option("--limit", type=click.IntRange(1, service.MAX_LIMIT), default=None,
              help="With QUERY: chunks listed [default: 10].")
@click.option("--manifest", "show_manifest", is_flag=True,
              help="Print the manifest an export wrote into the index (what it holds, from where, when).")
@db_option
@json_option
def inspect(args, file_, raw, limit, show_manifest, db, as_json):
    """Show the index's snapshot (model, chunker, Merkle root, counts) and optionally one file's chunks;
    with QUERY, the chunks a search for it matches, each with its BM25 and KNN rank (nothing is updated).

    `inspect PATH` and `inspect PATH --file F` show the snapshot; `inspect QUERY [PATH]` a query's chunks
    (a single argument that is a folder or an index file is the PATH, unless --raw or --limit is given).
    """
    query, path = _query_and_path(args, file_, raw or limit is not None)
    codebase = service.open_codebase(path, db)
    if show_manifest:
        manifest = service.manifest(codebase)
        if manifest is None:
            raise UsageError(f"{codebase.db_path} holds no manifest: it was never exported",
                             "`codii-sql export PATH --to FILE` writes a file that has one")
        if as_json:
            return emit(manifest)
        for key, value in manifest.items():
            echo(f"{key}: {fmt_value(key, value)}")
        return None
    if query is not None:
        return _print_query(service.inspect_query(codebase, query, limit=limit or 10, raw=raw), raw, as_json)
    info = service.inspect(codebase, file_)
    if as_json:
        return emit(info)
    for key, value in info["snapshot"].items():
        if key == "skipped_files":  # up to 200 paths: status --skipped lists them one a line
            echo(f"{key}: {len(value['files']) + value['more']} (`codii-sql status --skipped` lists them)")
        else:
            echo(f"{key}: {fmt_value(key, value)}")
    if "file" in info:
        echo("file: " + "  ".join(f"{k}={fmt_value(k, v)}" for k, v in info["file"].items()))
    for c in info.get("chunks", []):
        echo(f"  {c['start_line']:>5}-{c['end_line']:<5} {c['kind']:<9} {c['symbol'] or ''}  (id {c['id']})")


def _query_and_path(args: tuple[str, ...], file_: str | None, query_options: bool) -> tuple[str | None, str | None]:
    """``(query, path)`` from inspect's arguments (see its help)."""
    if len(args) > 2 or (file_ is not None and (len(args) > 1 or query_options)):
        raise UsageError("inspect takes [PATH] with --file, or QUERY [PATH] (with --raw, --limit)",
                         Remedy("help", {"command": "codii-sql inspect"}))
    if file_ is not None or not args:
        return None, args[0] if args else None
    if len(args) == 1 and not query_options and (Path(args[0]).expanduser().is_dir() or service.is_index_file(args[0])):
        return None, args[0]  # a folder or an index file (`inspect x.db` was a query over the current folder)
    if len(args) == 1 and args[0].startswith(("/", "~", "./", "../")) and not Path(args[0]).expanduser().exists():
        # A path, not a query: `inspect /nonexistent` said the current folder was not indexed (a new user).
        raise UsageError(f"{args[0]}: no such folder", "pass an indexed codebase's folder, or QUERY [PATH]")
    return args[0], args[1] if len(args) == 2 else None


def _print_query(info: dict, raw: bool, as_json: bool) -> None:
    if as_json:
        return emit(info)
    echo(f"{len(info['chunks'])} chunk(s) for {info['query']!r} in {info['codebase']} "
         f"(FTS5 terms: {' '.join(info['fts_terms']) or 'none'})")
    if info.get("note"):
        echo(f"note: {info['note']}")
    for c in info["chunks"]:
        ranks = (f"bm25 #{c['bm25_rank'] or '-'}  knn #{c['knn_rank'] or '-'}"
                 + (f"  cos {c['cosine']:.3f}" if c["cosine"] is not None else "")
                 + ("" if c["has_vector"] else "  (no vector yet)") + (f"  tier {c['tier']}" if c["tier"] else ""))
        echo(f"{c['pos']:>3}. {shown(c['path'])}:{c['start_line']}-{c['end_line']}  {c['kind']} {c['symbol'] or ''}"
             f"  score={c['score']:.4f}  {ranks}  (id {c['id']})")
        if raw:
            for line in c["content"].rstrip("\n").split("\n"):
                echo(f"       | {shown(line)}")
        else:
            echo(f"       {shown(c['first_line'])[:160]}")
    return None
