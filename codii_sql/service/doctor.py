"""``doctor``: check an index's consistency, repair it, and re-index the files it had to forget."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..codebase import Codebase
from ..ingest import scan_stats
from ..ingest.doctor import Check, DoctorReport, examine
from ..storage.lock import writer_lock
from ..storage.copies import snapshot
from ..storage.store import Store
from .builds import build, reword_disk_full
from .embedders import embedder_health, recorded_embedder
from ..errors import DamagedIndexError, UsageError
from .status import not_indexed


def doctor(codebase: Codebase, *, repair: bool = True, rebuild: bool = True) -> dict:
    """Check (and with ``repair``, fix) the index's consistency; see :func:`codii_sql.ingest.doctor.examine`.

    With ``rebuild``, files whose rows were incomplete are re-indexed right away. ``embedder``
    says whether the index's embedder answers now (a provider's server may be down).

    Raises:
        NotIndexedError: no index file.
        StorageError: the index folder is read-only (the writer lock cannot be taken).
    """
    if not codebase.db_path.is_file():
        raise not_indexed(codebase)
    if codebase.alone:  # a copy, an export: never written, so checked on a scratch copy of its own
        if repair:
            raise UsageError(f"{codebase.db_path} is an index file searched alone, and is never written",
                             "check it with doctor --check-only; repair happens by building and exporting it again")
        with tempfile.TemporaryDirectory(prefix="codii-sql-doctor-") as scratch:
            copy = Path(scratch) / codebase.db_path.name  # FTS5's own check is a write, even when it finds nothing
            snapshot(codebase.db_path, copy)
            with Store(copy, create=False) as store:
                report = examine(store, repair=False)
                embedder = None if report.damaged else recorded_embedder(store.meta())
        return {"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict(),
                **({"embedder": embedder_health(embedder)} if embedder else {})}
    try:
        with reword_disk_full(codebase), writer_lock(codebase), Store(codebase.db_path, create=False) as store:
            report = examine(store, repair=repair)
            embedder = None if report.damaged else recorded_embedder(store.meta())
    except DamagedIndexError as err:  # too broken to open: the check's finding, not doctor's failure
        report, embedder = DoctorReport([Check("sqlite integrity_check", False, getattr(err, "sqlite", err.what))],
                                        damaged=True), None
    out = {"codebase": str(codebase.root), "db": str(codebase.db_path), **report.to_dict()}
    if embedder:
        out["embedder"] = embedder_health(embedder)
    if repair and not report.consistent:
        # The stats the last build's scan saw vouched for an unchanged tree, so every update skipped the
        # files whose rows the repair dropped (a new user's 39 files stayed missing, status "indexed").
        scan_stats.sidecar(codebase.db_path).unlink(missing_ok=True)
    if repair and rebuild and (report.forgotten or not report.consistent and not report.damaged):
        out["rebuild"] = build(codebase).to_dict()
    return out
