"""Cross-encoder models on disk for ``--rerank``: pull one from Hugging Face, list the cached ones."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError, first_line
from ..models.cross_encoder import ENV_MODEL
from ..paths import models_dir

#: A Hugging Face repository id: ``name`` or ``owner/name``.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
#: Only the files :mod:`codii_sql.models.cross_encoder` reads (no PyTorch .bin, no TF/Flax weights).
PULL_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
              "vocab.txt", "special_tokens_map.json"]

__all__ = ["ENV_MODEL", "PULL_FILES", "cached_models", "check_reranker", "models_dir", "pull_model"]


def pull_model(name: str, target_dir: str | None = None) -> Path:
    """Download the Hugging Face cross-encoder ``name`` (its :data:`PULL_FILES`) and return its folder
    (``target_dir``, default ``$CODII_SQL_HOME/models/hf/NAME``), resolved.

    Raises:
        UsageError: ``name`` is not a repository id, huggingface_hub is missing, or the download failed.
    """
    if not _REPO_ID.match(name) or ".." in name:
        raise UsageError(f"{name!r} is not a Hugging Face model id", "pass one like cross-encoder/ms-marco-MiniLM-L-6-v2")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise UsageError("huggingface_hub is not installed", "install it and ensure network access, or download "
                         "the folder yourself and pass --rerank-model PATH") from None
    target = Path(target_dir) if target_dir else models_dir() / "hf" / name
    try:
        snapshot_download(repo_id=name, local_dir=str(target), allow_patterns=PULL_FILES)
    except Exception as err:  # noqa: BLE001 - network, auth and missing-repo errors all end here
        raise UsageError(f"could not download {name}: {first_line(err)}") from None
    return target.resolve()


def cached_models() -> list[dict]:
    """``[{kind: "pulled" | "onnx", path, bytes}]`` under :func:`models_dir`, sorted by path.

    A pulled folder is one holding ``config.json`` under ``hf/``; ``bytes`` sums its files.
    """
    root = models_dir()
    entries = [{"kind": "onnx", "path": str(p), "bytes": p.stat().st_size} for p in root.glob("*.onnx")]
    for config in (root / "hf").glob("**/config.json"):
        folder = config.parent
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        entries.append({"kind": "pulled", "path": str(folder), "bytes": size})
    return sorted(entries, key=lambda e: e["path"])


def check_reranker(model_path: str | None) -> None:
    """Load the cross-encoder now, so a missing model fails before any indexing and its load
    time stays out of the query latency.

    Raises:
        UsageError: ``codii_sql.rerank`` cannot be imported, or it has no usable model.
    """
    try:
        from ..search.rerank import rerank
    except ImportError as err:
        raise UsageError(f"the re-rank module cannot be imported ({err})", "reinstall codii-sql") from None
    rerank("model check", [], model_path=model_path)
