"""The vector phase's progress as every face tells it: chunks with a vector, its state, and the time left."""

from __future__ import annotations

import time

from ..ingest.report import VECTOR_BATCH


def vector_progress(meta: dict, counts: dict, *, running: bool, lexical: bool = False) -> dict:
    """``{"done", "total", "state", ["eta_seconds"], ["error"]}``: chunks with a vector of all chunks.

    ``state``: ``complete``; ``running`` (a vector phase holds the vector lock; ``eta_seconds``
    from its measured rate); ``waiting`` (a lexical phase runs, ``lexical``: the vector phase
    follows it); ``off`` (built with vectors off: BM25 and symbols only); else ``pending``
    (the phase stopped or was left to a later build: ``error`` says why if it failed).

    The time left is the queued text (``vectors_pending_chars``) at the phase's rate in characters a second,
    less the seconds since its last commit (at most a batch's worth): a helper saw "11 s left" for 50 s, then a
    minute more, as the count of chunks moves only at a commit (512 chunks) and a window's shortest chunks go first.
    An index of an older phase has only the rate in chunks.
    """
    pending, total = counts["pending"], counts["chunks"]
    off = meta.get("vectors_enabled") is False
    state = ("running" if running and pending else "waiting" if lexical and not off
             else "complete" if not pending else "off" if off else "pending")
    out = {"done": total - pending, "total": total, "state": state}
    rate, char_rate, left = meta.get("vectors_rate"), meta.get("vectors_char_rate"), meta.get("vectors_pending_chars")
    if state == "running" and char_rate and left is not None:
        since = max(0.0, time.time() - (meta.get("vectors_updated_at") or time.time()))
        whole = left / char_rate
        # At most one batch's time is taken as done since the commit: the phase slowing down (a busy machine) made
        # an agent read "eta 1" with 2,335 chunks (70 s) left
        batch = whole * min(1.0, VECTOR_BATCH / pending)
        out["eta_seconds"] = max(1, round(whole - min(since, batch)))
    elif state == "running" and rate:
        out["eta_seconds"] = round(pending / rate)
    if state in ("running", "pending") and meta.get("vectors_error"):
        out["error"] = meta["vectors_error"]
    return out
