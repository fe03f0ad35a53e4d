"""The registry of embedders by name (``provider`` or ``provider:MODEL``), with the bundled model as ``local``."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from ..errors import UsageError
from . import minilm
from .providers import ENV_RETRIES, ENV_TIMEOUT, ollama_factory, openai_factory
from .embedder import Embedder
from .names import DEFAULT_EMBEDDER, canonical


Factory = Callable[[str], Embedder]
"""``factory(model)`` -> an embedder; ``model`` is the part of the name after ``provider:`` ("" if none)."""

_factories: dict[str, tuple[Factory, tuple[str, ...]]] = {}
_instances: dict[tuple, Embedder] = {}
_lock = threading.Lock()


def register(provider: str, factory: Factory, env: tuple[str, ...] = ()) -> None:
    """Make ``provider`` (and ``provider:MODEL``) a name :func:`get_embedder` knows; ``env`` names the
    environment variables the factory reads (another value makes another instance)."""
    with _lock:
        _factories[provider] = (factory, env)


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
    name = canonical(name)
    provider, _, model = name.partition(":")
    with _lock:
        if provider not in _factories:
            raise UsageError(f"unknown embedder {name!r}: use one of local, local:fast, ollama:MODEL, openai:MODEL")
        factory, env = _factories[provider]
        key = (name, *(os.environ.get(var, "") for var in env))
        if key not in _instances:
            embedder = factory(model)
            embedder.name = name
            _instances[key] = embedder
        return _instances[key]


register(DEFAULT_EMBEDDER, minilm.local_factory)
register("ollama", ollama_factory, ("OLLAMA_HOST", ENV_TIMEOUT, ENV_RETRIES))
register("openai", openai_factory, ("OPENAI_BASE_URL", "OPENAI_API_KEY", ENV_TIMEOUT, ENV_RETRIES))
