"""Shared fixtures: an isolated $CODII_SQL_HOME per test, small real repositories, the real model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.trees import SAMPLE, write_tree


@pytest.fixture(autouse=True)
def codii_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own index folder, embedding cache and no workspaces, no search leaves its vector
    phase to a background process (tests of that set CODII_SQL_BACKGROUND themselves), and files alone are
    mapped as a CLI process maps them."""
    home = tmp_path_factory.mktemp("codii-home")
    monkeypatch.setenv("CODII_SQL_HOME", str(home))
    for key in [k for k in os.environ if k.upper().startswith("WORKSPACE_")]:  # the developer's own workspaces
        monkeypatch.delenv(key)
    monkeypatch.setenv("CODII_SQL_BACKGROUND", "0")
    # A server started in this process (serve_http, the MCP main) reads files alone unmapped from then on:
    # every test starts as a CLI process does.
    from codii_sql.storage import store
    monkeypatch.setitem(store._MAP_ALONE, "on", True)
    return home


@pytest.fixture(scope="session")
def embedder():
    """The real ONNX embedder, loaded once for the whole run."""
    from codii_sql.models.registry import get_embedder

    return get_embedder()


@pytest.fixture
def sample_repo(tmp_path) -> Path:
    """A small multi-language repository."""
    return write_tree(tmp_path / "repo", SAMPLE)
