"""The Ray tasks of a distributed build: one per codebase, and one per batch of chunks to embed.

Imported only once Ray is (see :func:`.connection.require_ray`). Both are retried when their
worker dies (``max_retries``: Ray re-runs a task whose process or node was lost); a retried
codebase task starts again from the index in place and finds the batches already embedded in
the embedding cache, so no text is embedded twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import ray

from ..codebase import Codebase
from ..service.aside import build_aside, embed_texts
from .connection import environment

#: Times Ray re-runs a task whose worker died (a killed process, a lost node).
RETRIES = 3
#: Embedding tasks a codebase task keeps in flight: enough to fill the cluster's CPUs, few enough
#: that a codebase of 100k chunks does not put all of its texts in the object store at once.
IN_FLIGHT = 32


@ray.remote(max_retries=RETRIES, num_cpus=1)
def build_codebase(root: str, db: str, options: dict, env: dict[str, str], batch: int) -> dict:
    """Build the codebase at ``root`` into the index ``db`` (:func:`build_aside`), its chunks embedded
    by :func:`embed_batch` tasks of ``batch`` texts; its report (:meth:`AsideReport.to_dict`)."""
    with environment(env):
        codebase = Codebase(Path(root), Path(db))
        return build_aside(codebase, embed_elsewhere=lambda name, texts: _fan_out(name, texts, env, batch),
                           **options).to_dict()


@ray.remote(max_retries=RETRIES, num_cpus=1)
def embed_batch(embedder_name: str, texts: list[str], env: dict[str, str]) -> np.ndarray:
    """``float32[len(texts), dims]`` (:func:`embed_texts`), the model on one thread: one task a CPU."""
    with environment({**env, "CODII_SQL_THREADS": "1"}):
        return embed_texts(embedder_name, texts)


def _fan_out(embedder_name: str, texts: dict[str, str], env: dict[str, str], batch: int
             ) -> Iterator[dict[str, np.ndarray]]:
    """``{text key: float32[dims]}`` per finished :func:`embed_batch` task, as they finish. Texts are
    sorted by length first, so each batch pads little (as the local vector phase does)."""
    keys = sorted(texts, key=lambda k: len(texts[k]))
    batches = [keys[i:i + batch] for i in range(0, len(keys), batch)]
    running: dict[ray.ObjectRef, list[str]] = {}
    while batches or running:
        while batches and len(running) < IN_FLIGHT:
            chunk = batches.pop()
            running[embed_batch.remote(embedder_name, [texts[k] for k in chunk], env)] = chunk
        done, _ = ray.wait(list(running), num_returns=1)
        chunk = running.pop(done[0])
        yield dict(zip(chunk, ray.get(done[0]), strict=True))
