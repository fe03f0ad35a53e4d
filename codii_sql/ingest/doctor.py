"""``codii-sql doctor``: check that an index is consistent (SQLite, FTS5, vec0, Merkle tree) and repair it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DamagedIndexError, StorageError
from ..storage import ann
from ..storage.store import Store
from ..text import unpack_text, unpacked
from . import merkle


@dataclass
class Check:
    """One check: ``ok`` false means a problem was found; ``repaired`` says what was done about it."""

    name: str
    ok: bool
    detail: str = ""
    repaired: str = ""


@dataclass
class DoctorReport:
    """All checks, and the files the next build must re-index (their rows were incomplete).

    ``damaged``: SQLite's integrity_check failed; only ``build --force`` (a new file) mends that.
    """

    checks: list[Check] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    damaged: bool = False

    @property
    def consistent(self) -> bool:
        """True when every check passed (before any repair)."""
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return {"consistent": self.consistent, "damaged": self.damaged,
                "checks": [c.__dict__ for c in self.checks], "forgotten": self.forgotten}


def examine(store: Store, *, repair: bool) -> DoctorReport:
    """Run every check on ``store``; with ``repair``, fix what can be fixed in one transaction.

    Repairs: rebuild FTS5 from ``chunks``; drop vectors and chunks without an owner; empty IVF
    lists that disagree with the vectors (the next build clusters again); mark
    files with missing vectors or chunks so the next build re-indexes them; rewrite the
    Merkle tree from the file rows. Call it while holding the codebase's writer lock.
    """
    report = DoctorReport()
    try:
        integrity = [next(iter(r.values())) for r in store.rows("pragma_integrity_check")]
    except DamagedIndexError as err:  # pages so broken that the check itself stops: report it, as damage
        integrity = [f"integrity_check stopped: {getattr(err, 'sqlite', err)}"]
    lines = "\n".join(integrity).splitlines()
    detail = "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more lines)" if len(lines) > 3 else "")
    report.checks.append(Check("sqlite integrity_check", integrity == ["ok"], detail))
    if integrity != ["ok"]:
        # Broken pages: reading rows may fail or lie, and no row repair mends them.
        report.damaged = True
        return report
    if repair:
        with store.transaction():
            _check_rows(store, report, repair=True)
    else:
        _check_rows(store, report, repair=False)
    return report


def _check_rows(store: Store, report: DoctorReport, *, repair: bool) -> None:
    n_chunks = store.row("counts")["chunks"]
    fts_ok, detail = True, ""
    try:
        store.run("fts_integrity_check")
    except StorageError as err:
        fts_ok, detail = False, str(err)
    n_fts = store.value("fts_row_count")
    fts_ok = fts_ok and n_fts == n_chunks
    report.checks.append(Check("fts5 integrity-check and row count", fts_ok,
                               detail or f"{n_fts} FTS rows for {n_chunks} chunks"))

    orphans = [r["id"] for r in store.rows("vectors_without_chunk")]
    no_file = [r["id"] for r in store.rows("chunks_without_file")]
    missing_vec = store.rows("chunks_without_vector")
    mismatched = store.rows("chunk_count_mismatch")
    queued = store.row("vector_counts")["pending"]
    stale_queue = len(store.rows("queued_with_vector_or_without_chunk"))
    report.checks.append(Check("vec0 rows match chunks", not orphans and not missing_vec and not stale_queue,
                               f"{len(orphans)} vectors without chunk, {len(missing_vec)} chunks without vector "
                               f"and not queued for one, {stale_queue} queued without chunk or with a vector "
                               f"({queued} queued for the vector phase)"))
    report.checks.append(Check("chunks match files", not no_file and not mismatched,
                               f"{len(no_file)} chunks without file, {len(mismatched)} files with missing chunks"))
    forget = sorted({r["path"] for r in missing_vec} | {r["path"] for r in mismatched})
    loose_definitions = store.value("definitions_without_file")
    report.checks.append(Check("definitions match files", not loose_definitions,
                               f"{loose_definitions} definitions without file"))
    lists = ann.lists(store)
    ivf = store.row("ann_unlisted") if lists else {"unlisted": 0, "orphans": 0}
    ivf_ok = not ivf["unlisted"] and not ivf["orphans"]
    if lists:  # an unclustered index has nothing to check: its search is exact
        report.checks.append(Check("IVF lists match vectors", ivf_ok, f"{ivf['unlisted']} vectors in no list, "
                                   f"{ivf['orphans']} list rows without vector ({lists} lists)"))

    unwritten, orphan_texts = _check_texts(store, report)
    forget = sorted(set(forget) | set(unwritten))

    files = {r["path"]: r["hash"] for r in store.rows("file_hashes")}
    stored = store.value("merkle_root")
    tree = merkle.build(files)
    nodes = {r["path"]: r["hash"] for r in store.rows("merkle_all")}
    # A new or just wiped (`build --force`) index has neither files nor a root node yet.
    recomputed = {p: n.hash for p, n in tree.nodes.items()}
    merkle_ok = (not files and not nodes) or (stored == tree.root_hash and nodes == recomputed)
    # the first node that differs, not only the roots (a node altered under an intact root printed two equal roots)
    off = next((p for p in sorted(set(nodes) | set(recomputed)) if nodes.get(p) != recomputed.get(p)), None)
    report.checks.append(Check("merkle tree matches files", merkle_ok, f"stored root {str(stored)[:12]}, "
                               f"recomputed {tree.root_hash[:12]}" + ("" if off is None else
                               f"; node {off!r}: stored {str(nodes.get(off))[:12]}, recomputed "
                               f"{str(recomputed.get(off))[:12]}")))
    if not repair:
        return
    if not ivf_ok:  # exact search until the next build clusters the index again
        ann.clear(store)
    for cid in orphans:
        store.run("vectors_delete", {"id": cid})
    for cid in no_file:
        store.run("chunk_delete_by_id", {"id": cid})
    if loose_definitions:
        store.run("definitions_without_file_delete")
    for path in forget:
        store.run("file_forget", {"path": path})
    for row in orphan_texts:
        store.run("file_text_delete", {"id": row["file_id"], "text": unpack_text(row["text"])})
    if not fts_ok or no_file:
        store.run("fts_rebuild")
    if forget:
        files = {r["path"]: r["hash"] for r in store.rows("file_hashes")}
        tree = merkle.build(files)
    if not merkle_ok or forget:
        store.run("merkle_clear")
        store.many("merkle_upsert", [{"path": n.path, "parent": n.parent, "is_dir": int(n.is_dir), "hash": n.hash}
                                     for n in tree.nodes.values()])
    store.run("queued_with_vector_or_without_chunk_delete")  # also the rows of chunks deleted above
    for check in report.checks:
        if not check.ok:
            check.repaired = "repaired"
    report.forgotten = forget


def _check_texts(store: Store, report: DoctorReport) -> tuple[list[str], list[dict]]:
    """Grep's tables: a text for every file and none for a file that is gone. Returns the paths lacking
    a text (the next build writes them once forgotten) and the orphan text rows. The trigram table's
    own structure is checked by SQLite's integrity_check (3.44 on runs FTS5's check inside it: a
    deleted segment block reads as damaged, measured)."""
    unwritten = [r["path"] for r in store.rows("files_without_text")]
    orphans = store.rows("texts_without_file")
    report.checks.append(Check("grep texts and trigram rows match files", not unwritten and not orphans,
                               f"{len(unwritten)} files without a text (read whole by grep until their next build), "
                               f"{len(orphans)} texts without file"))
    broken = [r["path"] for r in store.rows("texts_with_path") if unpacked(r["text"]) is None]
    report.checks.append(Check("grep texts unpack", not broken, f"{len(broken)} stored texts do not unpack"
                               + (f": {', '.join(broken[:5])}" if broken else "")))
    return unwritten + broken, orphans
