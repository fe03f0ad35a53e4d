"""The Embedder interface every embedding model implements."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Sequence

import numpy as np


class Embedder(abc.ABC):
    """A text embedding model: texts in, one unit vector per text out.

    Attributes:
        name: the registry name it was made under (``local``, ``local:fast``, ``ollama:MODEL``...);
            recorded in each index, so searches embed queries with the same embedder.
        model_id: stable id recorded in each index and in the cache keys; two embedders with
            one id must give interchangeable vectors.
        dims: the vector width; None until an HTTP provider's first response says it.
        max_tokens: the longest input, in the model's own tokens; longer texts are cut.
        sha256: sha256 hex of the model's weights when they are a local file, else None;
            recorded in the index beside ``model_id``.
    """

    name: str = "local"
    model_id: str
    dims: int | None
    max_tokens: int
    sha256: str | None = None

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32[len(texts), dims], each row L2-normalised, in input order."""

    def embed_query(self, text: str) -> np.ndarray:
        """float32[dims] for a search query (models trained with query prefixes add theirs)."""
        return self.embed([text])[0]

    def where(self) -> str:
        """Where the model runs, for people: ``bundled, offline`` or the server's address."""
        return "bundled, offline"

    def ping(self) -> None:
        """Check that the model can answer, cheaply (a server: one small request).

        Raises:
            EmbeddingFailedError: it cannot; the message says what to do.
        """

    def quick(self) -> contextlib.AbstractContextManager:
        """Within it, this thread's calls answer or fail as soon as a query's would: a search's own few
        edited chunks must not wait out a server that hangs (a model here answers as fast anyway)."""
        return contextlib.nullcontext()

    def load(self) -> None:
        """Get ready now (load weights, open a session) instead of on the first :meth:`embed`."""

    @property
    def loaded(self) -> bool:
        """True when :meth:`embed` will not pay a start-up cost."""
        return True
