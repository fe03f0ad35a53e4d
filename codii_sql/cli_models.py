"""``codii-sql models``: fetch a cross-encoder for ``--rerank`` and list the models cached locally.

Registered by ``cli.py`` (``cli.add_command(models)``); errors are :class:`UsageError`, which
the top-level group prints as one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from .paths import models_dir
from .errors import UsageError
from .models.cross_encoder import ENV_MODEL

#: A Hugging Face repository id: ``name`` or ``owner/name``.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
#: Only the files :mod:`codii_sql.rerank` reads (no PyTorch .bin, no TF/Flax weights).
PULL_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
              "vocab.txt", "special_tokens_map.json"]


@click.group()
def models():
    """Cross-encoder models for --rerank: pull one from Hugging Face, list cached ones."""


@models.command()
@click.argument("name")
@click.option("--dir", "target_dir", type=click.Path(file_okay=False), default=None,
              help="Folder to download into instead of $CODII_SQL_HOME/models/hf/NAME.")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object {"model", "path"}.')
def pull(name: str, target_dir: str | None, as_json: bool) -> None:
    """Download the Hugging Face cross-encoder NAME, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2."""
    if not _REPO_ID.match(name) or ".." in name:
        raise UsageError(f"{name!r} is not a Hugging Face model id like cross-encoder/ms-marco-MiniLM-L-6-v2")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise UsageError("install huggingface_hub and ensure network access, or download the folder "
                         "yourself and pass --rerank-model PATH") from None
    target = Path(target_dir) if target_dir else models_dir() / "hf" / name
    try:
        snapshot_download(repo_id=name, local_dir=str(target), allow_patterns=PULL_FILES)
    except Exception as err:  # noqa: BLE001 - network, auth and missing-repo errors all end here
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"could not download {name}: {first}") from None
    if as_json:
        click.echo(json.dumps({"model": name, "path": str(target.resolve())}))
        return
    click.echo(str(target.resolve()))
    click.echo(f"use it with: --rerank-model {target.resolve()}  (or export {ENV_MODEL}={target.resolve()})",
               err=True)


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_models(as_json: bool) -> None:
    """Show the pulled model folders and converted ONNX graphs under $CODII_SQL_HOME/models."""
    entries = cached_models()
    if as_json:
        click.echo(json.dumps({"models": entries}, indent=2))
        return
    if not entries:
        click.echo(f"no models under {models_dir()}")
    for e in entries:
        click.echo(f"{e['kind']:<6} {e['bytes'] / 1e6:8.1f} MB  {e['path']}")


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
