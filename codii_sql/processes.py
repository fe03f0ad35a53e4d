"""Whether a process another one recorded (a build's, a watcher's, a scratch folder's) still runs."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (signal 0: nothing is sent). Another user's process
    counts as alive: it exists, though this one may not signal it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
