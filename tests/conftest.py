"""Shared fixtures: an isolated $CODII_SQL_HOME per test, small real repositories, the real model."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def codii_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own index folder and embedding cache."""
    home = tmp_path_factory.mktemp("codii-home")
    monkeypatch.setenv("CODII_SQL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def embedder():
    """The real ONNX embedder, loaded once for the whole run."""
    from codii_sql.models.embedder import get_embedder

    return get_embedder()


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` ({relative path: text or bytes}) under ``root``; text is dedented."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


SAMPLE = {
    "app/http.py": '''
        """HTTP helpers."""
        import time


        def retry_with_backoff(fn, attempts=5, base=0.5):
            """Call fn, retrying with exponential backoff when it raises."""
            for attempt in range(attempts):
                try:
                    return fn()
                except IOError:
                    time.sleep(base * 2 ** attempt)
            raise RuntimeError("gave up")


        class Session:
            """A connection session that follows redirects."""

            def resolve_redirects(self, response, max_redirects=30):
                """Follow HTTP redirects until a final response arrives."""
                seen = 0
                while response.is_redirect and seen < max_redirects:
                    response = self.send(response.next_request)
                    seen += 1
                return response

            def send(self, request):
                return request
        ''',
    "app/parse.py": '''
        def parse_header(line):
            """Split one 'Name: value' header line."""
            name, _, value = line.partition(":")
            return name.strip().lower(), value.strip()


        def getUserName(user):
            return user["name"]
        ''',
    "web/util.js": '''
        // Debounce a callback so it fires once after quiet time.
        export function debounce(fn, ms) {
          let timer;
          return (...args) => {
            clearTimeout(timer);
            timer = setTimeout(() => fn(...args), ms);
          };
        }
        ''',
    "docs/guide.md": '''
        # Guide

        ## Retries

        The client retries failed requests with exponential backoff.

        ## Redirects

        Redirects are followed automatically.
        ''',
}


@pytest.fixture
def sample_repo(tmp_path) -> Path:
    """A small multi-language repository."""
    return write_tree(tmp_path / "repo", SAMPLE)
