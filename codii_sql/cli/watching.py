"""``watch``: keep indexes fresh by themselves, updating on file-system events until stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import click

from .. import service
from ..errors import CodiiError, UsageError
from .output import echo, json_text, shown


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--workspace", default=None, help="Watch every codebase of this workspace (see `codii-sql workspace`).")
@click.option("--poll", is_flag=True,
              help="Walk the trees every second instead of waiting for file-system events: for network mounts and "
                   "volumes that send none (slow on big trees; also $CODII_SQL_WATCH_POLL=1).")
@click.option("--jsonl", "--json", "as_jsonl", is_flag=True,
              help="Print one JSON object per update (JSON lines; --json is the same, as every command takes it).")
def watch(paths, workspace, poll, as_jsonl):
    """Keep the index of each PATH (default: the current directory) fresh by itself.

    Builds or updates each index first, then follows file changes: every group of changes (a
    save, a branch switch) becomes one incremental update, searchable about a second later.
    Ignored trees (.git, node_modules, .gitignore'd) cause no work; an idle watcher writes
    nothing. Ctrl-C or SIGTERM stops it at the next commit; the index stays consistent.
    """
    _, found = service.member_paths(workspace, list(paths)) if workspace or paths else (None, [os.getcwd()])
    codebases, missing = [], []
    for path in found:
        try:
            codebases.append(service.open_codebase(path))
        except CodiiError as err:
            missing.append(str(err))
    if not codebases:
        raise UsageError("nothing to watch: " + "; ".join(missing))
    for note in missing:  # a workspace member that is gone: the others are still watched
        echo(f"Warning: not watching {note}", err=True)
    stop = threading.Event()
    say = _jsonl if as_jsonl else _text
    with _stopping_on_signals(stop), contextlib.ExitStack() as stack:
        for cb in codebases:
            stack.enter_context(service.registered(cb, "cli"))
        watcher = service.Watcher(codebases, stop=stop, on_update=say, poll=True if poll else None,
                                  on_notice=lambda message: echo(f"Warning: {message}", err=True))
        try:
            watcher.run(ready=lambda: _ready(codebases, as_jsonl))
        except FileNotFoundError as err:
            raise UsageError(f"a watched folder is gone ({err}): start `codii-sql watch` again without it") from None
    echo("Stopped watching; every index is as of its last commit.", err=True)
    for cb in codebases:  # the vectors of a long queue are a background build's, which goes on
        info = service.daemon_info(cb)
        if info:
            echo(f"Vectors of {shown(str(cb.root))} are still being embedded in the background (pid "
                       f"{info['pid']}): `codii-sql status {cb.root}` follows it", err=True)


@contextlib.contextmanager
def _stopping_on_signals(stop: threading.Event):
    """SIGINT and SIGTERM set ``stop`` (the build in progress ends at its next batch commit); a
    second signal interrupts at once."""
    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _ready(codebases, as_jsonl: bool) -> None:
    if as_jsonl:
        click.echo(json.dumps({"event": "watching", "codebases": [str(cb.root) for cb in codebases]}), nl=True)
        return
    names = ", ".join(shown(str(cb.root)) for cb in codebases)
    echo(f"Watching {names} (Ctrl-C stops).", err=True)


def _text(update: service.Update) -> None:
    when = time.strftime("%H:%M:%S")
    root = shown(str(update.codebase.root))
    if update.error:
        echo(f"{when} {root}: update failed: {update.error}", err=True)
        return
    r = update.report
    echo(f"{when} {root}: {r.added} added, {r.modified} modified, {r.removed} removed files; "
               f"{r.chunks} chunks; {update.seconds:.2f} s")
    for warning in update.warnings:
        echo(f"{when} {root}: warning: {warning}", err=True)


def _jsonl(update: service.Update) -> None:
    out = {"event": "update", "codebase": str(update.codebase.root), "seconds": round(update.seconds, 3)}
    if update.error:
        out["error"] = update.error
    else:
        out.update(added=update.report.added, modified=update.report.modified, removed=update.report.removed,
                   chunks=update.report.chunks, warnings=update.warnings)
    click.echo(json_text(out))
