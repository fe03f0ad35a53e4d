"""Builds in a detached background process: ``build --daemon``, and the vector phase a search leaves behind.

The background process is an ordinary ``codii-sql build`` with a hidden ``--detached`` flag: it
holds the daemon lock for its lifetime (one background build per codebase), writes its pid
beside the index, lowers its CPU priority so searches and editors stay responsive, and logs to
``$CODII_SQL_HOME/logs/<index name>.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

from ..codebase import Codebase
from ..errors import BuildFailedError, DaemonRunningError, Remedy
from ..paths import logs_dir
from ..storage.lock import daemon_lock, daemon_running

#: Seconds :func:`start_daemon` waits for the process to take its lock (or fail) before it returns.
START_SECONDS = 10.0
#: ``nice`` increment of the background process: the model then takes only idle CPU time
#: (CFS weights: a nice-10 task gets ~10% of a core against a nice-0 search).
NICE = 10
#: Set (to ``0``) to keep a search's vector phase in its own process instead of a background one.
ENV_BACKGROUND = "CODII_SQL_BACKGROUND"


def background_allowed() -> bool:
    """False when ``$CODII_SQL_BACKGROUND`` is ``0``: builds then never leave work to a detached process."""
    return os.environ.get(ENV_BACKGROUND, "1").strip() != "0"


def daemon_info(codebase: Codebase) -> dict | None:
    """``{"pid", "started_at", "log"}`` of the background build running for ``codebase``, or None."""
    if not daemon_running(codebase):
        return None
    try:
        return json.loads(codebase.daemon_info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"pid": None, "started_at": None, "log": None}  # it is starting


def start_daemon(codebase: Codebase, options: list[str]) -> dict:
    """Start ``codii-sql build ROOT --db DB OPTIONS`` in a detached process; return its :func:`daemon_info`
    (with ``"finished": True`` when it was done before it could be seen running).

    Raises:
        DaemonRunningError: a background build of ``codebase`` is running already.
        BuildFailedError: the process stopped at once (its log's last line says why).
        ReadOnlyIndexError: an index file alone is never built.
    """
    codebase.refuse_writes()
    running = daemon_info(codebase)
    if running is not None:
        raise DaemonRunningError(_running_message(codebase, running), Remedy("poll_status", {"root": str(codebase.root)}))
    log = logs_dir() / f"{codebase.db_path.stem}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # -P: not the folder it starts in first on sys.path. From inside a codebase holding an `inspect.py` or a
    # `logging.py` (Django's django/utils), `python -m` imported those instead of the standard library's, and
    # the background build died at once, or would have run the codebase's own code (a new user).
    cmd = [sys.executable, "-P", "-m", "codii_sql.cli", "build", str(codebase.root), "--db", str(codebase.db_path),
           *options, "--detached", "--json"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        info = daemon_info(codebase)
        if info is not None and info.get("pid") == proc.pid:
            return info
        code = proc.poll()
        if code == DaemonRunningError.exit_code:
            raise DaemonRunningError(_running_message(codebase, daemon_info(codebase) or {}),
                                     Remedy("poll_status", {"root": str(codebase.root)}))
        if code == 0:  # done before we looked (an index already up to date): a success
            return {"pid": proc.pid, "started_at": None, "log": str(log), "finished": True}
        if code is not None:
            raise BuildFailedError(f"the background build stopped at once (exit status {code}): {_last_line(log)}",
                                   f"its log is {log}")
        time.sleep(0.05)
    return {"pid": proc.pid, "started_at": None, "log": str(log)}


@contextlib.contextmanager
def detached(codebase: Codebase) -> Iterator[None]:
    """Inside the background process: hold the daemon lock, publish this process, run at low priority.

    Raises:
        DaemonRunningError: another background build of ``codebase`` holds the lock.
    """
    with daemon_lock(codebase):
        info = {"pid": os.getpid(), "started_at": time.time(),
                "log": str(logs_dir() / f"{codebase.db_path.stem}.log")}
        codebase.daemon_info_path.write_text(json.dumps(info), encoding="utf-8")
        os.nice(NICE)
        try:
            yield
        finally:
            codebase.daemon_info_path.unlink(missing_ok=True)


def _running_message(codebase: Codebase, info: dict) -> str:
    pid = f" (pid {info['pid']})" if info.get("pid") else ""
    return f"a background build of {codebase.root} is already running{pid}"


def _last_line(log) -> str:
    try:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"
