"""Indexed grep against ripgrep: the index's size cost, parity on patterns drawn from the trees, and speed.

Prints numbers; not run in CI. Each tree is indexed without vectors into a scratch $CODII_SQL_HOME
(``--home``, kept between runs so a second run is warm).

  python benchmarks/grep.py size TREE...             # index size with and without the grep tables
  python benchmarks/grep.py parity TREE... [-n 1000]  # same files, lines and match counts as rg
  python benchmarks/grep.py speed TREE [--runs 5] [-p PATTERN...] [--rg-files]  # warm: selective, common vs rg

Parity compares ``rg -n --no-heading`` (and ``rg --count-matches`` per file, and the matching lines per file
that ``-c`` counts without building them) over exactly the files the
index holds (passed to rg by name, so rg's own ignore rules add nothing), with ``codii-sql grep``'s
answer for the same pattern and flags: a difference is printed with its pattern.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

#: Pattern kinds drawn for parity, in rotation: (name, rg flags) -> a pattern made from a line.
KINDS = ("identifier", "literal", "class", "alternation", "anchor", "word", "ignore_case", "word_ignore_case")
#: Python and Rust agree on these classes for ASCII identifiers (both are Unicode-aware for \\w and \\d).
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
#: Selective and common patterns for the speed runs (Django's text; any tree works, counts differ).
SELECTIVE = ["SuspiciousFileOperation", "get_redirect_target", r"def get_urls\(", "CSRF_COOKIE_HTTPONLY",
             r"class \w+Mixin\b", "TODO\\(", "ImproperlyConfigured\\(\"", "_get_FIELD_display"]
COMMON = ["self", "return", "import", r"def \w+\(", "None", "if "]


def _index(tree: Path, home: Path) -> Path:
    """The index of ``tree`` under ``home`` (built without vectors when missing or stale)."""
    env = {**os.environ, "CODII_SQL_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "codii_sql.cli", "build", str(tree), "--no-vectors"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ["CODII_SQL_HOME"] = str(home)
    from codii_sql.codebase import Codebase

    return Codebase.open(tree).db_path


def _files(db: Path) -> list[str]:
    conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    return [p for (p,) in conn.execute("SELECT path FROM files ORDER BY path")]


def size(trees: list[Path], home: Path) -> None:
    """Per tree: files, the index file, the same without file_texts and file_trigrams (VACUUMed), and the cost."""
    print(f"{'tree':32} {'files':>6} {'index MB':>9} {'no grep MB':>10} {'texts MB':>8} {'trigrams MB':>11} {'cost':>6}")
    for tree in trees:
        db = _index(tree, home)
        with tempfile.TemporaryDirectory() as scratch:
            full, bare = Path(scratch) / "full.db", Path(scratch) / "bare.db"
            conn = apsw.Connection(str(db))
            conn.execute(f"VACUUM INTO '{full}'")
            parts = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
            conn.close()
            shutil.copy(full, bare)
            conn = apsw.Connection(str(bare))
            conn.execute("DROP TABLE file_trigrams; DROP TABLE file_texts; VACUUM")
            conn.close()
            a, b = full.stat().st_size, bare.stat().st_size
        trig = sum(v for k, v in parts.items() if k.startswith("file_trigrams"))
        print(f"{tree.name:32} {len(_files(db)):6} {a / 1e6:9.1f} {b / 1e6:10.1f} {parts.get('file_texts', 0) / 1e6:8.1f} "
              f"{trig / 1e6:11.1f} {100 * (a - b) / b:+5.0f}%")


def draw(root: Path, files: list[str], n: int, seed: int = 27) -> list[tuple[str, list[str]]]:
    """``n`` (pattern, rg flags) pairs made from the tree's own lines, kinds in rotation."""
    rng = random.Random(seed)
    out: list[tuple[str, list[str]]] = []
    while len(out) < n:
        path = rng.choice(files)
        try:
            lines = [ln for ln in (root / path).read_text(encoding="utf-8").split("\n") if ln.strip()]
        except (OSError, UnicodeDecodeError):
            continue
        if not lines:
            continue
        line = rng.choice(lines)
        made = _pattern(KINDS[len(out) % len(KINDS)], line, rng)
        if made is not None:
            out.append(made)
    return out


def _pattern(kind: str, line: str, rng: random.Random) -> tuple[str, list[str]] | None:
    idents = _IDENT.findall(line)
    if kind == "literal":
        text = line.strip()
        if len(text) < 6 or not re.search(r"[^\w\s]", text):
            return None
        start = rng.randrange(0, max(1, len(text) - 6))
        return text[start:start + rng.randint(6, 20)], ["-F"]
    if not idents:
        return None
    ident = rng.choice(idents)
    if kind == "identifier":
        return ident, []
    if kind == "class":
        cut = rng.randint(2, max(2, len(ident) - 1))
        return rng.choice([f"{ident[:cut]}\\w+", f"{ident}\\s*[(=:]", f"[A-Z]\\w*{ident[cut:]}", f"{ident[:cut]}[0-9_]"]), []
    if kind == "alternation":
        other = rng.choice(idents)
        return f"{ident}|{other}_[a-z]+" if rng.random() < 0.5 else f"({ident}|{other})\\(", []
    if kind == "anchor":
        first = line.split()[0] if line.split() else ""
        if not _IDENT.fullmatch(first):
            return f"{ident}$", []
        return f"^\\s*{first}\\b", []
    if kind == "word":
        return ident, ["-w"]
    if kind == "ignore_case":
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in ident), ["-i"]
    return ident.lower(), ["-w", "-i"]


#: File names passed to one rg process at most (bytes): the kernel's 86k paths exceed the OS's
#: argument limit (2 MiB here), so they go in batches, one after the other, as xargs would.
ARG_BYTES = 1 << 20


def _rg(root: Path, files: list[str], pattern: str, flags: list[str], *extra: str) -> subprocess.CompletedProcess:
    """rg over ``files`` (in batches of :data:`ARG_BYTES`), its outputs joined."""
    batches, batch, size = [], [], 0
    for f in files:
        if size + len(f) + 1 > ARG_BYTES and batch:
            batches.append(batch)
            batch, size = [], 0
        batch.append(f)
        size += len(f) + 1
    batches.append(batch)
    runs = [subprocess.run(["rg", "--no-config", "-H", *extra, *flags, "-e", pattern, "--", *b], cwd=root,
                           capture_output=True, text=True, errors="replace") for b in batches]
    code = 0 if any(r.returncode == 0 for r in runs) else max(r.returncode for r in runs)
    return subprocess.CompletedProcess(runs[0].args, code, "".join(r.stdout for r in runs),
                                       "".join(r.stderr for r in runs))


def _theirs(root: Path, files: list[str], pattern: str, flags: list[str]) -> tuple[set, dict]:
    listed = _rg(root, files, pattern, flags, "-n", "--no-heading")
    counted = _rg(root, files, pattern, flags, "--count-matches")
    lines = {(p, int(n)) for p, n, _ in (ln.split(":", 2) for ln in listed.stdout.splitlines())}
    counts = {p: int(c) for p, c in (ln.rsplit(":", 1) for ln in counted.stdout.splitlines())}
    return lines, counts


def parity(trees: list[Path], home: Path, n: int) -> None:
    """``n`` patterns over the trees (split evenly), each compared with rg; prints the differences."""
    from codii_sql import service

    total = same = 0
    for tree in trees:
        db = _index(tree, home)
        files = _files(db)
        patterns = draw(tree, files, n // len(trees))
        ok = 0
        started = time.perf_counter()
        for pattern, flags in patterns:
            answer = service.grep(service.GrepRequest([pattern], fixed="-F" in flags, ignore_case="-i" in flags,
                                                      word="-w" in flags, paths=[str(tree)], update=False))
            ours = {(f.path, g.line) for f in answer.files for g in f.lines}
            counts = {f.path: sum(len(g.spans) for g in f.lines) for f in answer.files}
            counted = service.grep(service.GrepRequest([pattern], fixed="-F" in flags, ignore_case="-i" in flags,
                                                       word="-w" in flags, paths=[str(tree)], update=False,
                                                       counts_only=True))  # -c and -l: no lines built
            theirs, their_counts = _theirs(tree, files, pattern, flags)
            per_file = collections.Counter(p for p, _ in theirs)
            if ours == theirs and counts == their_counts and not answer.timed_out and \
                    {f.path: f.matches for f in counted.files} == per_file and not counted.timed_out:
                ok += 1
            else:
                print(f"  differs: {tree.name} {flags} {pattern!r}: ours {len(ours)} lines / {sum(counts.values())} "
                      f"matches, rg {len(theirs)} / {sum(their_counts.values())}; only ours "
                      f"{sorted(ours - theirs)[:3]}, only rg {sorted(theirs - ours)[:3]}")
        total += len(patterns)
        same += ok
        print(f"{tree.name}: {ok}/{len(patterns)} patterns equal to rg ({len(files)} files, "
              f"{time.perf_counter() - started:.0f} s)")
    print(f"all: {same}/{total} equal; load {_load()}")


def speed(tree: Path, home: Path, runs: int, patterns: list[str], files_too: bool,
          processes: int | None = None) -> None:
    """Warm medians per pattern, the runs interleaved (grep, rg, grep, rg...) so a load change hits
    both: in-process grep (wall and CPU seconds, all threads and a forked child; ``procs``: the
    processes the last run used, ``processes`` as grep's ``-j``), rg over the tree by its own walk
    (wall, and CPU from the child's rusage), the CLI (``grep --no-update``, a fresh process) and, with
    ``files_too``, rg over the indexed files by name."""
    from codii_sql import service

    db = _index(tree, home)
    files = _files(db) if files_too else []
    env = {**os.environ, "CODII_SQL_HOME": str(home)}
    print(f"load before: {_load()}")
    print(f"{'pattern':28} {'lines':>7} {'read':>6} {'grep ms':>8} {'cpu ms':>7} {'rg ms':>7} {'rg cpu':>7} "
          f"{'cli ms':>7}{' rg files':>9} {'rg/grep':>7} {'cpu ratio':>9} {'procs':>5}")
    for pattern in patterns:
        request = service.GrepRequest([pattern], paths=[str(tree)], update=False, processes=processes)
        answer = service.grep(request)
        rg = ["rg", "--no-config", "-n", "--no-heading", "-e", pattern]
        subprocess.run(rg, cwd=tree, stdout=subprocess.DEVNULL)  # warm: the page cache, the index's pages
        ours, ours_cpu, theirs, theirs_cpu, last = [], [], [], [], []
        for _ in range(runs):
            wall, cpu = _timed(lambda: last.append(service.grep(request)))
            ours.append(wall)
            ours_cpu.append(cpu)
            wall, cpu = _timed_child(lambda: subprocess.run(rg, cwd=tree, stdout=subprocess.DEVNULL))
            theirs.append(wall)
            theirs_cpu.append(cpu)
        jobs = ["-j", str(processes)] if processes else []
        cli = _median(min(runs, 3), lambda: subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update",
                                                            *jobs, pattern, str(tree)], env=env, stdout=subprocess.DEVNULL))
        by_name = _median(runs, lambda: _rg(tree, files, pattern, [], "-n", "--no-heading")) if files_too else None
        m = statistics.median
        print(f"{pattern[:28]:28} {answer.matched_lines:7} {answer.files_read:6} {m(ours) * 1000:8.1f} "
              f"{m(ours_cpu) * 1000:7.1f} {m(theirs) * 1000:7.1f} {m(theirs_cpu) * 1000:7.1f} {cli * 1000:7.0f}"
              f"{'' if by_name is None else f'{by_name * 1000:9.1f}':>9} {m(theirs) / m(ours):7.2f} "
              f"{m(theirs_cpu) / m(ours_cpu):9.2f} {last[-1].processes:5}")
    print(f"load after: {_load()}")


def _timed(fn) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``fn()`` in this process (CPU of every thread, and of the child a long
    grep forks to match half of the files)."""
    wall, cpu = time.perf_counter(), time.process_time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - wall, time.process_time() - cpu + children


def _timed_child(fn) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``fn()``, which runs one child process to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    fn()
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _median(runs: int, fn) -> float:
    fn()  # warm: the page cache, the index's pages, the process's imports
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average: ")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["size", "parity", "speed"])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--home", type=Path, default=Path(tempfile.gettempdir()) / "codii-grep-bench")
    parser.add_argument("-n", type=int, default=1000, help="parity: patterns in all")
    parser.add_argument("--runs", type=int, default=5, help="speed: timed runs per pattern (median)")
    parser.add_argument("-p", "--pattern", action="append", help="speed: a pattern (repeatable; default: Django's "
                                                                 "selective and common ones)")
    parser.add_argument("--rg-files", action="store_true", help="speed: also time rg over the indexed files by name")
    parser.add_argument("-j", type=int, default=None, help="speed: grep's -j (default: its own choice)")
    args = parser.parse_args()
    if shutil.which("rg") is None:
        sys.exit("rg is not installed (apt-get install ripgrep)")
    trees = [t.resolve() for t in args.trees]
    if args.what == "size":
        size(trees, args.home)
    elif args.what == "parity":
        parity(trees, args.home, args.n)
    else:
        speed(trees[0], args.home, args.runs, args.pattern or SELECTIVE + COMMON, args.rg_files, args.j)


if __name__ == "__main__":
    main()
