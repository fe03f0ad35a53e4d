"""The ``codii-sql`` command line: a thin click layer over :mod:`codii_sql.service` (every command has ``--json``)."""

from __future__ import annotations

import errno
import gc
import importlib
import json
import os
import signal
import sys
import threading

import click

from .. import paths
from ..errors import CodiiError, Remedy, UsageError
from .output import echo
from .serving import serve_http
from .words import what, words


#: Each command by the module that holds it (``module:function``). A command's module
#: is imported when that command runs, so ``symbol`` does not load what ``build`` or ``eval`` need
#: (docs/benchmarks.md, "CLI start-up").
COMMANDS = {
    "build": "building:build", "search": "searching:search", "grep": "grep:grep", "symbol": "symbols:symbol",
    "refs": "symbols:refs", "outline": "symbols:outline", "history": "history:history", "why": "history:why",
    "status": "info:status", "list": "info:list_", "stats": "info:stats", "inspect": "info:inspect",
    "clear": "maintenance:clear", "export": "maintenance:export", "doctor": "maintenance:doctor",
    "serve": "main:serve", "watch": "watching:watch", "workspace": "workspace:workspace", "models": "models:models",
    "eval": "evaluation:eval_",
}


class CodiiGroup(click.Group):
    """Turns every :class:`CodiiError` and bad option into one line on stderr and its exit code, never a
    traceback; loads a command's module when it is asked for (:data:`COMMANDS`)."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(f".{module}", __package__), attr)

    def invoke(self, ctx):
        as_json = bool({"--json", "--jsonl"} & set(ctx.args))
        # SIGTERM (a supervisor's, `kill`) stops a command as Ctrl-C does: a killed `build --json` left no last
        # line and leaked its workers' semaphores. A command with its own handler (watch, serve) sets it after.
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().invoke(ctx)
        except CodiiError as err:
            where = " ".join(filter(None, ["codii-sql", ctx.invoked_subcommand]))
            # grep's 1 means "no line matched", as rg's: any error of a grep is 2, as rg's (a damaged index
            # exited 1, read by a script as no match).
            code = max(err.exit_code, 2) if ctx.invoked_subcommand == "grep" else err.exit_code
            _fail(what(err), words(err.hint), code, as_json, where)
        except click.exceptions.NoArgsIsHelpError as err:  # `codii-sql models`: its help, as asked
            echo(err.ctx.get_help() if err.ctx else err.format_message())
            ctx.exit(0)
        except click.UsageError as err:  # one line too, for a bad option or argument
            sub = err.ctx.command_path.split(" ", 1)[1:] if err.ctx else []  # without the program's own name
            where = " ".join(["codii-sql", *sub])
            message = err.format_message().replace("is not a valid integer range", "is not a whole number in range")
            _fail(message, None, 2, as_json, where, usage=True)
        except KeyboardInterrupt as err:  # what a build left, only when one ran (a grep's Ctrl-C was told to build)
            from .. import service

            how, code = ("terminated", 143) if isinstance(err, Terminated) else ("interrupted", 130)
            error, hint = ((f"{how}: the index keeps every file committed so far", "run build again to finish")
                           if service.building() else (how, None))
            echo(error.capitalize() + (f"; {hint}." if hint else "."), err=True)
            if as_json:  # a script reads an error object under --json, a Ctrl-C's too (a new user's had none)
                click.echo(json.dumps({"error": error, "hint": hint, "exit_code": code}, ensure_ascii=False))
            ctx.exit(code)
        except BrokenPipeError:  # `symbol x | head -1`: the reader has what it wanted (grep decides its own)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            ctx.exit(0)
        except OSError as err:
            if err.errno not in _UNWRITABLE:
                raise
            _unwritable(err)  # `grep self >/dev/full`, a full disk or quota: a traceback of 45 lines (a new user's)
            ctx.exit(2)


#: Errors of writing the output (no space, over quota, too large a file, a device's I/O error): one line, exit 2
#: (rg's status for them).
_UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _unwritable(err: OSError) -> None:
    """Say in one line that the output could not be written; stdout goes to /dev/null (no second error at exit)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    echo(f"Error: cannot write the output: {err.strerror}: make room where it goes, or send it elsewhere.", err=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, read as Ctrl-C is read (exit status 143, as the signal's default gives)."""


def _terminated(signum, frame) -> None:
    raise Terminated


def _fail(error: str, hint: str | None, code: int, as_json: bool, where: str = "codii-sql", *,
          usage: bool = False) -> None:
    """``Error: error[: hint]`` on stderr (a bad option: ``(see `where --help`)``); under
    ``--json``/``--jsonl`` also ``{"error", "hint", "exit_code"}`` on stdout, which a script parses
    (``hint`` then defaults to the command's usage)."""
    usage_hint = words(Remedy("help", {"command": where}))
    echo(f"Error: {error} ({usage_hint})" if usage else f"Error: {error}: {hint}" if hint else f"Error: {error}",
         err=True)
    if as_json:
        click.echo(json.dumps({"error": error, "hint": hint or usage_hint, "exit_code": code}, ensure_ascii=False))
    raise SystemExit(code)


@click.group(cls=CodiiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="codii-sql")
def cli():
    """Local hybrid code search: BM25 (FTS5) + vectors (sqlite-vec) fused by RRF, one .db per codebase."""
    home = paths.home()
    blocker = next((p for p in (home, *home.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None and not {"-h", "--help"} & set(sys.argv[1:]):  # help is still given
        # else each command told its own story: "workspaces.json cannot be read", "not indexed", "free disk space"
        where = "is a file" if blocker == home else f"lies under {blocker}, a file"
        raise UsageError(f"CODII_SQL_HOME ({home}) {where}, not a folder",
                         "set CODII_SQL_HOME to a folder (or unset it for ~/.codii-sql), or move that file")


@click.command()
@click.option("--no-watch", is_flag=True,
              help="Do not keep the codebases it indexed, searched or serves fresh on file changes (also "
                   "$CODII_SQL_WATCH=0).")
@click.option("--http", "port", type=click.IntRange(1, 65535), default=None,
              help="Serve GET /search and /healthz over HTTP on this port instead of MCP on stdio.")
@click.option("--workspace", "workspaces", multiple=True,
              help="With --http: a workspace to serve (repeatable; the first is /search's default).")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="With --http: serve from Ray Serve replicas on a cluster (local, auto or host:6379).")
@click.option("--replicas", type=click.IntRange(1, 256), default=None,
              help="With --ray: Ray Serve replicas, each holding every shard read-only [default: 1].")
@click.option("--shards", default=None, metavar="DIR",
              help="Serve the index files (.db) of this folder, each searched alone: files added, removed or "
                   "replaced by rename are picked up without a restart.")
@click.option("--token", default=None, metavar="TOKEN",
              help="With --http: require this bearer token on every page and API call (a login form sets a cookie); "
                   "default $CODII_SQL_HTTP_TOKEN.")
def serve(no_watch, port, workspaces, host, ray_address, replicas, shards, token):
    """Run the MCP server on stdio (for Claude Code, Cursor and other MCP clients), or with --http an
    HTTP search server over a workspace's indexes (one process, or Ray Serve replicas with --ray)."""
    if port is None:
        given = [o for o, v in (("--workspace", workspaces), ("--ray", ray_address), ("--replicas", replicas),
                                ("--token", token)) if v]
        if given:
            raise UsageError(f"{given[0]} goes with --http PORT (without it, serve runs the MCP server on stdio)")
        from ..mcp import main as serve_main

        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as codii-sql-server's: stdin's reader thread outlived a stop
        serve_main([*(["--no-watch"] if no_watch else []), *(["--shards", shards] if shards else [])])
        return
    serve_http(list(workspaces), host, port, ray_address, replicas, shards, token, watch=not no_watch)


def main() -> None:
    """Console-script entry point."""
    # One BLAS thread unless the user says otherwise: OpenBLAS starts a thread per core as numpy loads, ~55 ms of
    # each search's ~280 (A/B, load 4-6); what it would speed up here is small products (a query's vector against
    # its candidates) and the IVF's k-means, a small part of a vector phase's model time.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if sys.argv[1:2] == ["grep"]:
        # A process for one answer: a common pattern's is ~100k small objects in no cycle (`self` over Django),
        # and the collector's passes over them once the service turns it back on (~20 ms) free nothing before exit.
        gc.disable()
    try:
        cli(prog_name="codii-sql")
    except OSError as err:  # --help, --version: click writes them before a command's invoke
        if err.errno not in _UNWRITABLE:
            raise
        _unwritable(err)
        raise SystemExit(2) from None


if __name__ == "__main__":
    sys.exit(main())
