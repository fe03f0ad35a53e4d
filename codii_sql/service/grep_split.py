"""A forked second process that reads and matches the later part of a long grep candidate list, so a common pattern uses two cores as rg does."""

from __future__ import annotations

import mmap
import os
import pickle
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

from ..processes import cpus
from ..search.grep_lines import GrepLine

#: Seconds a grep reads in one process before it weighs a child: most greps end sooner.
FIRST_LOOK_SECONDS = 0.015
#: Seconds a child must save, by the estimate of :func:`_gain`, for it to be forked.
MIN_GAIN_SECONDS = 0.02
#: What a child costs besides its lines: the fork, copy-on-write faults, the join (~10 ms measured).
FORK_SECONDS = 0.01
#: What each matched line left costs a split, in either process: the child pickles its lines, the
#: parent unpickles and builds them again, and both build their lines in memory the fork shares, page
#: by page copied on write (the parent ran 40% slower per file after a fork on a grep of 191k lines).
#: Measured break-even: Django's `return` (6 us of work a line) gained nothing, `self` (2.3 us) and a
#: 191k-line grep (2.1 us) lost 10-100%, the kernel's `return -EINVAL` (11.5 us) gained a third:
#: a child pays when half the work left outweighs 3 us a line left (docs/benchmarks.md "Grep", fifth round).
TRANSFER_SECONDS_PER_LINE = 3e-6
#: Files the child pickles at a time (a batch is the unit a failure loses).
BATCH_FILES = 128

#: One candidate's verification: ``(text, gaps, matched)`` as grepping yields them (text None: unreadable).
Verified = tuple


def verified(verify: Callable[[dict], Verified], rows: list[dict], keep_text: bool,
             forked: Callable[[], None], processes: int | None = None) -> Iterator[tuple]:
    """``(row, text, gaps, matched)`` of each of ``rows`` (candidates in answer order, each with its
    ``size`` in bytes) in order, verified by ``verify`` here, or, once a child promises to save
    :data:`MIN_GAIN_SECONDS` (:func:`_gain`, from the rate so far), by this process and a forked
    :class:`Helper` together (``forked()`` is called then; ``keep_text`` as for it).

    Never forks in a process with other threads (a server's: a fork copies only the calling thread,
    and a lock another holds would stay held in the child), with one CPU, or while the load average
    says every CPU is busy (as ``make -l`` holds back jobs): the two processes then share one core's
    worth, and a child only adds its costs (the kernel's `kmalloc` was 16% slower so, at load 2.4).
    ``processes``: 1 never forks; 2 or more forks when the estimate says so, whatever the load (rg's
    ``-j``); None decides by the load as above."""
    may_fork = hasattr(os, "fork") and threading.active_count() == 1 and (
        processes >= 2 if processes is not None else len(cpus()) >= 2 and _idle_cpu())
    total = sum(r["size"] for r in rows) if may_fork else 0
    started, done, lines = time.perf_counter(), 0, 0
    for i, row in enumerate(rows):
        if may_fork and done and i % 8 == 0 and (spent := time.perf_counter() - started) >= FIRST_LOOK_SECONDS \
                and _gain(spent, done, total, lines) >= MIN_GAIN_SECONDS:
            forked()
            helper = Helper(verify, rows[i:], keep_text)
            try:
                yield from helper.results()
            finally:
                helper.stop()
            return
        text, gaps, matched = verify(row)
        yield row, text, gaps, matched
        done += row["size"]
        lines += len(matched) if isinstance(matched, list) else 0


def _gain(spent: float, done: int, total: int, lines: int) -> float:
    """Seconds a child would save: half the work left (``total - done`` bytes at ``spent`` seconds for
    ``done``), less the fork and what the matched lines left cost a split (at ``lines`` for ``done``)."""
    left = (total - done) / done
    return left * spent / 2 - FORK_SECONDS - TRANSFER_SECONDS_PER_LINE * left * lines


def _idle_cpu() -> bool:
    """Whether the 1-minute load average leaves a CPU free for a child."""
    try:
        return os.getloadavg()[0] < len(cpus()) - 0.5
    except OSError:  # no load average here
        return True


class Helper:
    """A forked child verifying ``rows`` (a row -> :data:`Verified` by ``verify``) from the last one
    backwards while this process verifies them from the first; they meet where the work does, not
    where the bytes do (Django's `self` lines are mostly in tests/, the later paths: a split by bytes
    left the parent waiting 200 ms). Read the answers in order with :meth:`results`; :meth:`stop`
    ends the child (done or not: a consumer that stops early, a limit reached).

    The child spools its answers to an unnamed temporary file and says on a pipe, when it is done, how
    many it spooled: a pipe alone (64 KiB) blocked it at its first batch until the parent read. A
    child that dies or fails leaves its rows to the parent: the answer is the same, only slower.

    ``keep_text``: also send each matched file's text (context lines need it); a file that timed out
    sends its text always (the parent tries it again alone).
    """

    def __init__(self, verify: Callable[[dict], Verified], rows: list[dict], keep_text: bool) -> None:
        import multiprocessing  # only a long grep pays its import

        self._verify, self._rows = verify, rows
        self._spool = tempfile.TemporaryFile()
        context = multiprocessing.get_context("fork")
        # [next row for the parent, one past the next row for the child] in memory the fork shares (an
        # anonymous mapping: multiprocessing's shared arrays leave a file in /tmp); a claim is ~0.3 us.
        self._ends = memoryview(mmap.mmap(-1, 16)).cast("q")
        self._ends[1] = len(rows)
        self._lock = context.Lock()
        self._receive, send = context.Pipe(duplex=False)
        sys.stdout.flush()  # the child flushes the streams it inherits when it ends: nothing twice
        sys.stderr.flush()
        self._process = context.Process(target=_child, args=(self, keep_text, send), daemon=True)
        self._process.start()
        send.close()  # the child holds the only write end: its end reads as EOF here

    def results(self) -> Iterator[tuple]:
        """``(row, text, gaps, matched)`` of every row in order: this process's as it verifies them,
        then the child's once it is done (any it did not spool verified here)."""
        while (i := self._claim(front=True)) is not None:
            yield self._rows[i], *self._verify(self._rows[i])
        meet = self._ends[0]
        try:
            spooled = self._receive.recv()  # answers the child spooled whole (all, or up to its failure)
        except (EOFError, OSError):  # it died: its spool may end mid-batch, so none of it is read
            spooled = 0
        got: dict[int, Verified] = {}
        self._spool.seek(0)
        while len(got) < spooled:
            for i, text, gaps, matched in pickle.load(self._spool):
                got[i] = (text, gaps, _lines(matched))
        for i in range(meet, len(self._rows)):
            row = self._rows[i]
            yield row, *(got.pop(i) if i in got else self._verify(row))

    def stop(self) -> None:
        """End the child (done or not) and release its pipe and spool."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._receive.close()
        self._spool.close()

    def _claim(self, front: bool) -> int | None:
        """The next row to verify from the front (this process) or the back (the child); None once the
        two meet."""
        with self._lock:
            lo, hi = self._ends[0], self._ends[1]
            if lo >= hi:
                return None
            if front:
                self._ends[0] = lo + 1
                return lo
            self._ends[1] = hi - 1
            return hi - 1


def _child(helper: Helper, keep_text: bool, send) -> None:
    """The child's work: rows claimed from the back and verified, spooled in pickled batches of plain
    tuples (a third of pickling GrepLine objects), then the number spooled sent; after a failure, the
    number spooled before it."""
    spooled = 0
    try:
        batch = []
        while (i := helper._claim(front=False)) is not None:
            text, gaps, matched = helper._verify(helper._rows[i])
            if text is not None and matched is not None and not (keep_text and matched):
                text = b""  # readable; the parent needs no more of it
            if isinstance(matched, list):
                matched = [(g.line, g.text, g.spans, g.context, g.block, g.joined) for g in matched]
            batch.append((i, text, gaps, matched))
            if len(batch) >= BATCH_FILES:
                spooled += _spooled(batch, helper._spool)
        spooled += _spooled(batch, helper._spool)
    except BaseException:  # noqa: BLE001 - the parent verifies what is left; no traceback here
        pass
    try:
        send.send(spooled)
    except OSError:  # the parent stopped waiting (a limit reached)
        pass
    finally:
        send.close()


def _spooled(batch: list, spool) -> int:
    """Pickle ``batch`` to ``spool`` whole and empty it; how many answers it held."""
    pickle.dump(batch, spool, protocol=pickle.HIGHEST_PROTOCOL)
    spool.flush()
    n = len(batch)
    batch.clear()
    return n


def _lines(matched):
    """A child's matched lines as GrepLine objects again (a count or None as it came)."""
    if not isinstance(matched, list):
        return matched
    return [GrepLine(line, text, spans, context, block=block, joined=joined)
            for line, text, spans, context, block, joined in matched]


