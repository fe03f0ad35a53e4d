"""The floor of a lexical build: what its C parts cost alone, on a tree and the index a build made of it.

Prints numbers; not run in CI. CPU seconds of tree-sitter parses of a sample of the files, of the chunks' FTS5
rows (every 9th chunk) inserted as a build inserts them (4,096 a transaction, automerge 16), and of every 9th
file's text into the trigram table (150 a transaction), each scaled to the whole index. What a build spends
beyond their sum is Python's (docs/benchmarks.md, issue 25's fifteenth round).

  python benchmarks/kernel_floor.py TREE INDEX.db [--sample 4000] [--work DIR]
"""

from __future__ import annotations

import argparse
import random
import time
import zlib
from pathlib import Path

import apsw
from tree_sitter_language_pack import get_parser

#: Languages parsed in the sample (the kernel's other files are text, chunked without a parse).
PARSED = ("c", "cpp", "python", "rust", "bash", "make", "json", "yaml", "perl", "asm", "javascript", "go")


def _inserted(dst: apsw.Connection, name: str, columns: list[str], options: str, rows: list[tuple],
              per_transaction: int) -> float:
    """CPU seconds to insert ``rows`` into a new FTS5 table ``name`` of ``columns`` (``options``: its tokenizer
    and the rest) as a build does: ``per_transaction`` rows a transaction, segments merged 16 at a time."""
    dst.execute(f"DROP TABLE IF EXISTS {name}; CREATE VIRTUAL TABLE {name} USING fts5({', '.join(columns)}, {options})")
    dst.execute(f"INSERT INTO {name}({name}, rank) VALUES('automerge', 16)")
    insert = f"INSERT INTO {name}(rowid, {', '.join(columns)}) VALUES({', '.join('?' * (len(columns) + 1))})"
    t = time.process_time()
    for i in range(0, len(rows), per_transaction):
        with dst:
            dst.executemany(insert, ((i + j, *r) for j, r in enumerate(rows[i:i + per_transaction])))
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("index", type=Path, help="the index a build made of TREE (read only)")
    ap.add_argument("--sample", type=int, default=4000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/kernel-floor"))
    args = ap.parse_args()
    src = apsw.Connection(f"file:{args.index}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    files = src.execute("SELECT id, path, language FROM files").fetchall()
    random.seed(11)
    parsers: dict = {}
    t = time.process_time()
    sample = random.sample(files, min(args.sample, len(files)))
    for _, path, lang in sample:
        if lang in PARSED:
            parser = parsers.get(lang) or parsers.setdefault(lang, get_parser(lang))
            parser.parse((args.tree / path).read_bytes())
    parse = (time.process_time() - t) / len(sample) * len(files)
    print(f"parse: {parse / len(files) * 1000:.2f} ms a file -> {parse:.0f} s for {len(files):,} files", flush=True)

    args.work.mkdir(parents=True, exist_ok=True)
    dst = apsw.Connection(str(args.work / "floor.db"))
    dst.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    nchunks = src.execute("SELECT count(*) FROM chunks").fetchone()[0]
    rows = src.execute("SELECT c.content, c.subtokens, coalesce(c.symbol, ''), f.path FROM chunks c "
                       "JOIN files f ON f.id = c.file_id WHERE c.id % 9 = 0").fetchall()
    t = _inserted(dst, "f", ["content", "subtokens", "symbol", "path"],
                  "content='', tokenize=\"porter unicode61 remove_diacritics 2 tokenchars '_'\"", rows, 4096)
    fts = t * nchunks / len(rows)
    print(f"chunks_fts: {len(rows):,} rows -> {fts:.0f} s for {nchunks:,} chunks", flush=True)

    texts = [zlib.decompress(r[0]).decode("utf-8", "surrogateescape")
             for r in src.execute("SELECT text FROM file_texts WHERE rowid % 9 = 0")]
    t = _inserted(dst, "g", ["text"], "content='', tokenize='trigram', detail='none', columnsize=0",
                  [(x,) for x in texts], 150)
    trigrams = t * len(files) / len(texts)
    print(f"file_trigrams: {len(texts):,} files -> {trigrams:.0f} s for {len(files):,} files", flush=True)
    total = parse + fts + trigrams
    print(f"floor of the C parts: {total:.0f} s of CPU, {total / 2:.0f} s on 2 cores; "
          f"load {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
