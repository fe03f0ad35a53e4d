"""Starting ``codii-sql serve --http`` as a real process and waiting for it to answer."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(args: list[str], port: int, *, timeout: float = 60.0, token: str | None = None) -> subprocess.Popen:
    """``codii-sql serve --http PORT ARGS`` in a new process, once ``/healthz`` answers 200 (asked with
    ``token``, the server's ``--token``, when it has one)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--http", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited {proc.returncode}: {proc.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2, headers=headers).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop(proc)
    raise AssertionError(f"the server did not answer /healthz in {timeout} s")


@contextlib.contextmanager
def serving(args: list[str]):
    """``codii-sql serve --http PORT ARGS`` for the ``with`` block, which gets ``(proc, url)``; then Ctrl-C,
    and it must have exited 0 without a traceback."""
    port = free_port()
    proc = start(args, port)
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        code, err = stop(proc)
    assert code == 0 and "Traceback" not in err, err


def stop(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[int, str]:
    """SIGINT (Ctrl-C), then the exit code and stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err
