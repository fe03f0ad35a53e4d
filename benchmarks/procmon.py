"""Peak resident memory of a process tree, sampled from /proc (Linux)."""

from __future__ import annotations

import os
import subprocess
import threading
import time


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def tree_rss(pid: int) -> int:
    """Sum of resident bytes of ``pid`` and all its descendants (forkserver workers included)."""
    kids = _children()
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += _rss_bytes(p)
        stack.extend(kids.get(p, []))
    return total


def run(cmd: list[str], *, env: dict | None = None, interval: float = 0.1) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``cmd`` to completion: ``(completed, wall seconds, peak tree RSS bytes)``.

    RSS is sampled every ``interval`` seconds, so a peak shorter than that can be missed.
    Raises ``subprocess.CalledProcessError`` (with stderr) when the command fails.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss(proc.pid))
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    return done, wall, peak
