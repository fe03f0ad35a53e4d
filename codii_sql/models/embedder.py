"""The Embedder interface every embedding model implements, and the registry that names them."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import UsageError

#: The embedder of a build or search that names none: the bundled model, offline.
DEFAULT_EMBEDDER = "local"


class Embedder(abc.ABC):
    """A text embedding model: texts in, one unit vector per text out.

    Attributes:
        model_id: stable id recorded in each index and in the cache keys; two embedders with
            one id must give interchangeable vectors.
        dims: the vector width.
        max_tokens: the longest input, in the model's own tokens; longer texts are cut.
        sha256: sha256 hex of the model's weights when they are a local file, else None;
            recorded in the index beside ``model_id``.
    """

    model_id: str
    dims: int
    max_tokens: int
    sha256: str | None = None

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32[len(texts), dims], each row L2-normalised, in input order."""

    def load(self) -> None:
        """Get ready now (load weights, open a session) instead of on the first :meth:`embed`."""

    @property
    def loaded(self) -> bool:
        """True when :meth:`embed` will not pay a start-up cost."""
        return True


Factory = Callable[[str], Embedder]
"""``factory(model)`` -> an embedder; ``model`` is the part of the name after ``provider:`` ("" if none)."""

_factories: dict[str, Factory] = {}
_instances: dict[str, Embedder] = {}
_lock = threading.Lock()


def register(provider: str, factory: Factory) -> None:
    """Make ``provider`` (and ``provider:MODEL``) a name :func:`get_embedder` knows."""
    with _lock:
        _factories[provider] = factory


def providers() -> list[str]:
    """The registered provider names, sorted."""
    _register_builtins()
    return sorted(_factories)


def get_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """The process-wide embedder called ``name`` (``provider`` or ``provider:MODEL``), made once.

    Cheap: the bundled model loads its weights on the first embedding, not here.

    Raises:
        UsageError: no provider of that name (never a silent fall-back to another model), or
            the provider refuses the model name.
    """
    _register_builtins()
    provider, _, model = name.partition(":")
    with _lock:
        if name not in _instances:
            factory = _factories.get(provider)
            if factory is None:
                raise UsageError(f"unknown embedder {name!r}: use one of {', '.join(sorted(_factories))}")
            _instances[name] = factory(model)
        return _instances[name]


def _register_builtins() -> None:
    """The bundled model is imported only when an embedder is first asked for (onnxruntime is slow to import)."""
    if DEFAULT_EMBEDDER in _factories:
        return
    from . import minilm

    register(DEFAULT_EMBEDDER, minilm.local_factory)
