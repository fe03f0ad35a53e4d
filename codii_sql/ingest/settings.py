"""What an index and a build (or a search) must agree on: the snapshot keys of the schema, the model and the chunker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import IndexMismatchError, Remedy
from ..storage.schema import SCHEMA_VERSION
from .chunking.version import CHUNKER_VERSION

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..storage.store import Store


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


def check_compatible(store: Store, expected: Mapping[str, Any]) -> None:
    """Raise if the index was built with other settings than ``expected``.

    ``expected`` maps snapshot keys (schema_version, model_id, dims, model_sha256,
    chunker_version) to the values of this build. An empty index is always compatible, and one
    without ``dims`` (its provider's server never answered) with any width.

    Raises:
        IndexMismatchError: a key differs; the message names it and says to rebuild.
    """
    meta = store.meta()
    if "schema_version" not in meta:
        return
    for key, want in expected.items():
        have = meta.get(key)
        if key == "dims" and have is None:  # its provider never answered yet: no vector, any width fits
            continue
        if have != want:
            raise IndexMismatchError(f"index {store.path.name} was built with {key}={have!r}, this version uses "
                                     f"{want!r}", Remedy("force_build"))
