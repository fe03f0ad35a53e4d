"""Kill loop: SIGKILL ``codii-sql build`` at random points and check that nothing is lost.

Each run changes a few files of a small repository (new content, deleted files, every
fifth run ``--force``), starts ``python -m codii_sql.cli build`` as a real process and kills
it with SIGKILL after a random delay: half the runs measured from process start (import,
model load, scan), half from the moment the snapshot says this process is indexing (the
write transactions). After every kill:

* the index opens and ``doctor`` (check only) reports it consistent;
* every indexed file is complete: its chunks are exactly the chunks of one version of that
  file that was on disk at some point (never a mix, never a partial file);
* a hybrid search returns only chunks of such complete files.

At the end an unkilled build must converge to exactly the state of a clean build of the
same tree into another ``--db``: the same (path, hash) files, the same (path, start_line,
end_line, content) chunks, and vectors with cosine > 0.9999.

The builds run with ``codii_sql.ingest.lexical.BATCH_FILES`` set to 2 (through ``python -c``, no
product hook), so a 30-file build commits in many transactions and a kill can land between
any two of them.

Usage::

    python tests/support/torture.py --runs 200 [--seed 0] [--workdir DIR]

Prints one line per run and ``runs: N, failures: F``; exits 1 when F > 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

#: Files in the tortured repository: enough for many commits at two files per batch, few
#: enough that a build takes well under a second once the embedding cache is warm.
N_FILES = 30
#: Contents each file cycles through (variant v holds v + 1 functions), so chunk counts change.
N_VARIANTS = 3
#: Files per write transaction in the killed builds (the product default is 256).
BATCH_FILES = 2

_BUILD = ("import sys, codii_sql.ingest.lexical as ix; ix.BATCH_FILES = int(sys.argv[1]); "
          "from codii_sql.cli import cli; cli(sys.argv[2:], prog_name='codii-sql')")


def file_path(i: int) -> str:
    """Relative path of file ``i`` (three directories, so Merkle directory nodes come and go)."""
    return f"pkg{i % 3}/mod_{i}.py"


def file_text(i: int, variant: int) -> str:
    """Content of file ``i`` in ``variant`` (0-based): its first ``variant + 1`` functions.

    A function's text depends only on ``(i, j)``, so the whole loop embeds at most
    ``N_FILES * N_VARIANTS`` distinct chunks and the embedding cache serves every rebuild.
    """
    return "\n\n".join(
        f'def handler_{i}_{j}(request):\n    """Handle request kind {i}.{j}."""\n'
        f"    return request.get('key_{i}') + {j * 7}\n"
        for j in range(variant + 1))


class KillLoop:
    """One tortured repository, its index and the bookkeeping of every version ever written.

    Args:
        workdir: an empty directory; holds ``repo/``, the kill-loop index and ``clean.db``.
        home: ``$CODII_SQL_HOME`` for the builds (its embedding cache makes rebuilds cheap).
        seed: seeds the file changes and the kill delays.
    """

    def __init__(self, workdir: Path, home: Path, seed: int = 0):
        from codii_sql.codebase import Codebase

        self.repo = workdir / "repo"
        self.repo.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.clean_db = workdir / "clean.db"
        self.rng = random.Random(seed)
        self.state: dict[int, int | None] = {i: 0 for i in range(N_FILES)}
        self.versions: dict[str, bytes] = {}  # sha256 hex -> content of every version written
        self._write(range(N_FILES))
        self.codebase = Codebase.open(self.repo)
        self.process_seconds = 1.0  # measured by warm_up
        self.landed: list[str] = []

    # -- the repository ---------------------------------------------------------------

    def _write(self, indexes) -> None:
        import hashlib

        for i in indexes:
            p = self.repo / file_path(i)
            if self.state[i] is None:
                p.unlink(missing_ok=True)
                continue
            data = file_text(i, self.state[i]).encode()
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            self.versions[hashlib.sha256(data).hexdigest()] = data

    def mutate(self) -> None:
        """Change 4 to 12 files: a new variant, or (one time in five) delete the file."""
        picked = self.rng.sample(range(N_FILES), self.rng.randint(4, 12))
        for i in picked:
            if self.rng.random() < 0.2:
                self.state[i] = None
            else:
                self.state[i] = self.rng.choice([v for v in range(N_VARIANTS) if v != self.state[i]])
        self._write(picked)

    # -- processes --------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """Environment of a build process: this checkout on the path, one ONNX thread."""
        return {**os.environ, "CODII_SQL_HOME": str(self.home), "PYTHONPATH": str(REPO_ROOT),
                "CODII_SQL_THREADS": "1"}

    def command(self, *extra: str) -> list[str]:
        """``codii-sql build REPO --json EXTRA...`` with :data:`BATCH_FILES` files per transaction."""
        return [sys.executable, "-c", _BUILD, str(BATCH_FILES), "build", str(self.repo), "--json", *extra]

    def build(self, *extra: str) -> dict:
        """Run one build to completion; its JSON report.

        Raises:
            RuntimeError: the build exited non-zero.
        """
        done = subprocess.run(self.command(*extra), env=self.env(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"build {extra} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])  # after the progress lines

    def _snapshot(self) -> dict:
        """``pid``, ``status``, ``phase``, ``files_done``, ``files_total`` from the index, read-only."""
        try:
            conn = apsw.Connection(str(self.codebase.db_path), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                rows = conn.execute("SELECT key, value FROM meta WHERE key IN "
                                    "('pid', 'status', 'phase', 'files_done', 'files_total')").fetchall()
            finally:
                conn.close()
        except apsw.Error:
            return {}
        return {k: json.loads(v) for k, v in rows}

    def kill_run(self, n: int) -> str:
        """Run ``n``: change files, start a build, SIGKILL it; returns where the kill landed.

        Even runs die after a delay drawn over a whole build process (import, model, scan,
        writes, exit); odd runs as soon as the snapshot shows a drawn share of the files
        committed, i.e. inside the next write batch or the removals after the last one.
        """
        self.mutate()
        extra = ("--force",) if n % 5 == 4 else ()
        proc = subprocess.Popen(self.command(*extra), env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        if n % 2 == 0:
            deadline = time.monotonic() + self.rng.uniform(0, self.process_seconds)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
        else:
            self._wait_for_share(proc, self.rng.random())
        if proc.poll() is not None:
            where = "completed"
        else:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            snap = self._snapshot()
            if snap.get("pid") != proc.pid:
                where = "before the build started"
            elif snap.get("status") != "indexing":
                where = f"after the build ({snap.get('status')})"
            else:
                where = f"{snap.get('phase')} {snap.get('files_done', '-')}/{snap.get('files_total', '-')}"
        self.landed.append(where)
        return where

    def _wait_for_share(self, proc: subprocess.Popen, share: float) -> None:
        """Until ``proc``'s snapshot shows at least ``share`` of its files committed (or it exits)."""
        limit = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < limit:
            snap = self._snapshot()
            if (snap.get("pid") == proc.pid and snap.get("status") == "indexing" and snap.get("phase") == "embed"
                    and snap.get("files_done", 0) >= share * snap.get("files_total", 0)):
                return
            time.sleep(0.001)

    def warm_up(self) -> None:
        """Two unkilled builds: the last variant (it holds every function text, so the embedding
        cache then serves every later build), then the first; measures a build process."""
        for variant in (N_VARIANTS - 1, 0):
            self.state = dict.fromkeys(range(N_FILES), variant)
            self._write(range(N_FILES))
            t = time.monotonic()
            self.build()
        self.process_seconds = time.monotonic() - t

    # -- checks -----------------------------------------------------------------------

    def check(self) -> list[str]:
        """Problems of the index as a kill left it (empty list: none)."""
        from codii_sql import service as api
        from codii_sql.search.results import SearchOptions

        problems = []
        doctor = api.doctor(self.codebase, repair=False, rebuild=False)
        if not doctor["consistent"]:
            problems.append(f"doctor: {[c for c in doctor['checks'] if not c['ok']]}")
        complete = self.complete_chunks(problems)
        resp = api.search(api.SearchRequest("handle request kind", SearchOptions(limit=20), [str(self.codebase.root)],
                                            db=str(self.codebase.db_path), update=False))
        for r in resp.results:
            if (r.path, r.start_line, r.end_line, r.content) not in complete:
                problems.append(f"search returned a chunk of an incomplete file: {r.path}:{r.start_line}")
        return problems

    def complete_chunks(self, problems: list[str]) -> set[tuple]:
        """(path, start_line, end_line, content) of every indexed file whose chunks are exactly
        those of a version written to disk; files that are not are added to ``problems``."""
        from codii_sql.ingest.chunking.chunker import chunk_text
        from codii_sql.languages import detect_language
        from codii_sql.text import decode_source

        indexed = self.rows("SELECT f.path, f.hash, c.start_line, c.end_line, c.content "
                            "FROM files f LEFT JOIN chunks c ON c.file_id = f.id ORDER BY f.path, c.start_byte",
                            self.codebase.db_path)
        by_file: dict[tuple[str, str], list[tuple]] = {}
        for path, digest, start, end, content in indexed:
            by_file.setdefault((path, digest), [])
            if content is not None:
                by_file[(path, digest)].append((path, start, end, content))
        complete = set()
        for (path, digest), chunks in by_file.items():
            data = self.versions.get(digest)
            want = None if data is None else [
                (path, c.start_line, c.end_line, c.content)
                for c in chunk_text(decode_source(data), detect_language(path))]
            if want != chunks:
                problems.append(f"{path}: indexed chunks are not those of any version written")
            else:
                complete.update(chunks)
        return complete

    @staticmethod
    def rows(sql: str, db: Path) -> list[tuple]:
        """All rows of ``sql`` on ``db``, read-only (sqlite-vec loaded for ``chunks_vec``)."""
        from codii_sql.storage.store import Store

        with Store(db, create=False) as store:
            return store.conn.execute(sql).fetchall()

    def converge(self) -> list[str]:
        """Run an unkilled build, then compare with a clean build into ``clean.db``."""
        self.build()
        problems = self.check()
        self.clean_db.unlink(missing_ok=True)
        self.build("--db", str(self.clean_db))
        for what, sql in (("files", "SELECT path, hash FROM files"),
                          ("chunks", "SELECT path, start_line, end_line, content FROM chunks"),
                          ("merkle nodes", "SELECT path, hash FROM merkle_nodes")):
            got = sorted(self.rows(sql, self.codebase.db_path))
            want = sorted(self.rows(sql, self.clean_db))
            if got != want:
                problems.append(f"{what} differ from a clean build: {len(got)} vs {len(want)} rows")
        problems += self._compare_vectors()
        return problems

    def _compare_vectors(self) -> list[str]:
        sql = ("SELECT c.path, c.start_line, c.end_line, c.content, v.embedding "
               "FROM chunks c JOIN chunks_vec v ON v.rowid = c.id")
        got = {r[:4]: np.frombuffer(r[4], np.float32) for r in self.rows(sql, self.codebase.db_path)}
        want = {r[:4]: np.frombuffer(r[4], np.float32) for r in self.rows(sql, self.clean_db)}
        if got.keys() != want.keys():
            return [f"vectors differ: {len(got)} vs {len(want)} chunks with a vector"]
        worst = min((float(got[k] @ want[k]) / float(np.linalg.norm(got[k]) * np.linalg.norm(want[k]))
                     for k in got), default=1.0)
        return [] if worst > 0.9999 else [f"vectors differ: lowest cosine {worst:.6f}"]


def run(workdir: Path, home: Path, runs: int, seed: int, log=print) -> tuple[int, list[str]]:
    """``runs`` kills then a convergence check; returns (runs, failures as messages)."""
    loop = KillLoop(workdir, home, seed)
    loop.warm_up()
    failures = []
    for n in range(runs):
        where = loop.kill_run(n)
        problems = loop.check()
        log(f"run {n + 1}/{runs}: killed {where}: {'ok' if not problems else problems}")
        failures += [f"run {n + 1} ({where}): {p}" for p in problems]
    problems = loop.converge()
    log(f"converged: {'ok' if not problems else problems}")
    return runs, failures + problems


def main() -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary directory")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="codii-torture-"))
    home = workdir / "home"
    os.environ["CODII_SQL_HOME"] = str(home)
    t = time.monotonic()
    runs, failures = run(workdir, home, args.runs, args.seed)
    print(f"runs: {runs}, failures: {len(failures)} ({time.monotonic() - t:.0f} s, {workdir})")
    for f in failures:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
