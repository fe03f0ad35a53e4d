"""The client side of tests/support/embedding_server.py: start one, point the providers at it, script it."""

from __future__ import annotations

import subprocess
import sys

import httpx

from .trees import REPO_ROOT

SERVER = REPO_ROOT / "tests" / "support" / "embedding_server.py"
#: The API key the tests pass: it must never reach a file.
KEY = "sk-test-do-not-store-0123456789"


class Server:
    """One embedding server process; ``env`` points both providers at it."""

    def __init__(self, dims: int = 384):
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--dims", str(dims)], stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        self.env = {"OLLAMA_HOST": self.url, "OPENAI_BASE_URL": f"{self.url}/v1", "OPENAI_API_KEY": KEY}

    def control(self, **state) -> None:
        httpx.post(f"{self.url}/_control", json=state).raise_for_status()

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/_stats").json()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
