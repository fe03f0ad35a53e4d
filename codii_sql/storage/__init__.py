"""One .db per codebase: the apsw connection with sqlite-vec, the named SQL of sql/, the writer lock."""

import apsw


def _memory_statistics_off() -> None:
    """Turn off SQLite's global memory statistics (SQLITE_CONFIG_MEMSTATUS) before any connection opens.

    With them on, every allocation of every connection takes one process-wide mutex, so the
    members of a workspace search, each on its own connection and thread, ran one at a time:
    two Sphinx indexes searched 48 queries in 0.70 s one after the other and 0.59 s on two
    threads; with them off, 0.64 s and 0.33 s (benchmarks/workspace_merge.py has the end-to-end
    figure). Nothing here reads ``apsw.memory_used()``. Skipped when a connection is already open
    (configuration needs SQLite shut down, which would break it).
    """
    if apsw.connections():
        return
    apsw.shutdown()
    apsw.config(apsw.SQLITE_CONFIG_MEMSTATUS, 0)
    apsw.initialize()


_memory_statistics_off()
