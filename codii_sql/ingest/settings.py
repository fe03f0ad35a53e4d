"""What an index and a build (or a search) must agree on: the snapshot keys of the schema, the model and the chunker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..storage.schema import SCHEMA_VERSION
from .chunking.version import CHUNKER_VERSION

if TYPE_CHECKING:
    from ..models.embedder import Embedder


def index_settings(embedder: Embedder) -> dict:
    """The snapshot keys that must match between an index and this build (else rebuild); ``dims``
    only once known (an HTTP provider's width comes with its first response)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model_id": embedder.model_id,
        **({"dims": embedder.dims} if embedder.dims is not None else {}),
        "model_sha256": embedder.sha256,
        "chunker_version": CHUNKER_VERSION,
    }
