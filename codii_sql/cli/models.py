"""``codii-sql models``: fetch a cross-encoder for ``--rerank`` and list the models cached locally.

Registered by :mod:`.main`; errors are :class:`UsageError`, which the top-level group prints as one line.
"""

from __future__ import annotations

import json

import click

from .. import service
from .output import echo


@click.group()
def models():
    """Embedders in use and whether they answer; cross-encoders for --rerank: pull one, list cached ones."""


@models.command()
@click.argument("name")
@click.option("--dir", "target_dir", type=click.Path(file_okay=False), default=None,
              help="Folder to download into instead of $CODII_SQL_HOME/models/hf/NAME.")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object {"model", "path"}.')
def pull(name: str, target_dir: str | None, as_json: bool) -> None:
    """Download the Hugging Face cross-encoder NAME, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2."""
    target = service.pull_model(name, target_dir)
    if as_json:
        click.echo(json.dumps({"model": name, "path": str(target)}))
        return
    echo(str(target))
    echo(f"use it with: --rerank-model {target}  (or export {service.ENV_MODEL}={target})",
               err=True)


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_models(as_json: bool) -> None:
    """Show the embedders in use (the default and those indexes record) and whether each answers now,
    then the pulled model folders and converted ONNX graphs under $CODII_SQL_HOME/models."""
    embedders = [service.embedder_health(name) for name in service.embedders_in_use(service.list_codebases())]
    entries = service.cached_models()
    if as_json:
        click.echo(json.dumps({"embedders": embedders, "models": entries}, indent=2))
        return
    for e in embedders:
        echo(f"embedder {e['name']:<28} {e['where'] or '-'}  {'answers' if e['answers'] else e['detail']}")
    if not entries:
        echo(f"no models under {service.models_dir()}")
    for e in entries:
        echo(f"{e['kind']:<6} {e['bytes'] / 1e6:8.1f} MB  {e['path']}")
