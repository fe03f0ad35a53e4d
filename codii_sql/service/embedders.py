"""Which embedder a build or a search uses: the one asked for, else the one the index records.

A build takes ``--embedder`` (or MCP ``embedder``), else ``embedder:`` in ``.codii.yaml``, else
``$CODII_SQL_EMBEDDER``, else the index's own, else ``local`` (the bundled model). An index
built by another embedder than the one asked for is refused unless the build is forced (its
vectors would not share a space). A search always embeds its query with the index's embedder,
whatever the environment says.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..codebase import Codebase
from ..errors import EmbeddingFailedError, IndexMismatchError, Remedy, UsageError
from ..ingest.config import CONFIG_FILE_NAME, load_config
from ..models.names import DEFAULT_EMBEDDER, MODEL_ID, canonical
from ..storage.store import Store

if TYPE_CHECKING:
    from ..models.embedder import Embedder

ENV_EMBEDDER = "CODII_SQL_EMBEDDER"


def get_embedder(name: str) -> Embedder:
    """The embedder named ``name`` (:func:`~codii_sql.models.registry.get_embedder`; UsageError for an
    unknown one). The registry, and with it numpy and the model's code, loads on the first call, not
    for every status or symbol that only reads an index's embedder name (docs/benchmarks.md, "CLI start-up")."""
    from ..models.registry import get_embedder as from_registry

    return from_registry(name)


def recorded_embedder(meta: dict) -> str | None:
    """The embedder name an index's snapshot records; indexes from before names were recorded
    hold the bundled model's vectors (``local``). None for an index without a build yet."""
    if meta.get("embedder"):
        return meta["embedder"]
    return DEFAULT_EMBEDDER if meta.get("model_id") == MODEL_ID else None


def requested_embedder(codebase: Codebase, explicit: str | None) -> str | None:
    """The name asked for: ``explicit``, else ``.codii.yaml``'s ``embedder``, else ``$CODII_SQL_EMBEDDER``.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    if explicit:
        return explicit.strip()
    try:
        configured = load_config(codebase.root).embedder
    except ValueError as err:
        raise UsageError(str(err)) from None
    return configured or os.environ.get(ENV_EMBEDDER, "").strip() or None


def embedder_for_build(codebase: Codebase, explicit: str | None, *, force: bool) -> Embedder:
    """The embedder a build of ``codebase`` uses (see the module docstring).

    Raises:
        IndexMismatchError: the index holds another embedder's vectors and ``force`` is false.
        UsageError: an unknown embedder name, or a malformed ``.codii.yaml``.
    """
    asked = requested_embedder(codebase, explicit)
    if asked:
        try:
            asked = get_embedder(asked).name  # an unknown name is refused before any advice about it
        except UsageError as err:  # .codii.yaml's: named as its other keys' errors are (a new user's `banana`)
            if explicit or load_config(codebase.root).embedder != asked:
                raise
            raise UsageError(f"{codebase.root / CONFIG_FILE_NAME}: {err.what}", err.hint) from None
    recorded = _recorded(codebase)
    if asked and recorded and asked != canonical(recorded) and not force:
        raise IndexMismatchError(f"the index of {codebase.root} holds vectors of the embedder {recorded!r}, and this "
                                 f"build asks for {asked!r}", Remedy("change_embedder", {
                                     "root": str(codebase.root), "asked": asked, "recorded": recorded}))
    return get_embedder(asked or recorded or DEFAULT_EMBEDDER)


def embedder_for_search(meta: dict) -> Embedder:
    """The embedder that made an index's vectors (its queries must be embedded the same way).

    Raises:
        UsageError: the recorded name is unknown here (e.g. a provider this version lacks).
    """
    return get_embedder(recorded_embedder(meta) or DEFAULT_EMBEDDER)


def _recorded(codebase: Codebase) -> str | None:
    if not codebase.db_path.is_file():
        return None
    with Store(codebase.db_path, create=False) as store:
        return recorded_embedder(store.meta())


def embedder_health(name: str) -> dict:
    """``{"name", "model_id", "where", "answers", "detail"}`` for the embedder ``name``: whether it
    answers now (a server: one small request; the bundled model: always)."""
    try:
        embedder = get_embedder(name)
    except UsageError as err:
        return {"name": name, "model_id": None, "where": None, "answers": False, "detail": str(err)}
    try:
        embedder.ping()
        answers, detail = True, "answers"
    except EmbeddingFailedError as err:
        answers, detail = False, str(err)
    return {"name": name, "model_id": embedder.model_id, "where": embedder.where(), "answers": answers,
            "detail": detail}


def embedders_in_use(rows: list[dict]) -> list[str]:
    """The default embedder (``$CODII_SQL_EMBEDDER`` or ``local``) and those the indexes ``rows`` record."""
    names = [os.environ.get(ENV_EMBEDDER, "").strip() or DEFAULT_EMBEDDER]
    names += [row["embedder"] for row in rows if row.get("embedder")]
    return list(dict.fromkeys(names))
