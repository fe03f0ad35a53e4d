"""Processes: whether one another recorded (a build's, a watcher's, a scratch folder's) still runs, and the CPUs this one may use."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (signal 0: nothing is sent). Another user's process
    counts as alive: it exists, though this one may not signal it. A zombie does not: it was killed or
    exited, and only waits for its parent to read its status (a Ray worker killed mid-task stays one
    until the raylet reaps it, while the task's retry already sweeps its scratch folder)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not _zombie(pid)


def cpus() -> list[int]:
    """The CPUs this process may run on: its affinity (``taskset``, a container's cpuset), not every CPU of the machine."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _zombie(pid: int) -> bool:
    """Whether ``/proc`` says ``pid`` is a zombie (``Z``) or dead (``X``); False where there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The state follows the command's name in parentheses, which may itself hold ") ".
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] in (b"Z", b"X")
