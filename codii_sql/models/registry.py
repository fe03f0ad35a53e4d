"""The registry of embedders by name (``provider`` or ``provider:MODEL``), with the bundled model as ``local``."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import UsageError
from . import minilm
from .embedder import Embedder

#: The embedder of a build or search that names none: the bundled model, offline.
DEFAULT_EMBEDDER = "local"

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
    return sorted(_factories)


def get_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """The process-wide embedder called ``name`` (``provider`` or ``provider:MODEL``), made once.

    Cheap: the bundled model loads its weights on the first embedding, not here.

    Raises:
        UsageError: no provider of that name (never a silent fall-back to another model), or
            the provider refuses the model name.
    """
    provider, _, model = name.partition(":")
    with _lock:
        if name not in _instances:
            factory = _factories.get(provider)
            if factory is None:
                raise UsageError(f"unknown embedder {name!r}: use one of {', '.join(sorted(_factories))}")
            embedder = factory(model)
            embedder.name = name
            _instances[name] = embedder
        return _instances[name]


register(DEFAULT_EMBEDDER, minilm.local_factory)
