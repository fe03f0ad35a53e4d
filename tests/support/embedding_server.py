"""A real HTTP embedding server for tests, speaking Ollama's /api/embed and OpenAI's /v1/embeddings.

Backed by the bundled model, so results mean something: a width of ``--dims`` (a multiple of 384)
repeats the 384-dim vector and renormalises it, which keeps every cosine. Faults come from a
control endpoint, so a test can script a server that rate-limits, fails, stalls, changes width or
dies mid-build:

    POST /_control {"fail": [{"status": 429, "retry_after": 1}, ...], "delay": 0.0, "dims": 768,
                    "exit_after": 3}
    GET  /_stats   -> {"requests": N, "texts": N, "authorization": [header values seen]}

Each ``fail`` entry answers one embedding request with that status (then the list moves on);
``delay`` stalls each embedding request that many seconds; ``exit_after`` ends the process after
that many more answered embedding requests. Run: ``python embedding_server.py [--dims N]``; it
prints ``PORT <n>`` on stdout once listening on 127.0.0.1. ``$EMBEDDING_SERVER_THREADS`` (default
1: tests run beside it) sets the model's threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from codii_sql.models.minilm import MiniLM  # noqa: E402

STATE = {"fail": [], "delay": 0.0, "dims": 384, "exit_after": None, "requests": 0, "texts": 0,
         "authorization": []}
LOCK = threading.Lock()
MODEL = MiniLM(threads=int(os.environ.get("EMBEDDING_SERVER_THREADS", "1")))


def vectors(texts: list[str], dims: int) -> list[list[float]]:
    base = MODEL.embed(texts)
    wide = np.tile(base, (1, dims // base.shape[1])) / np.sqrt(dims // base.shape[1])
    return wide.astype(float).tolist()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_stats":
            with LOCK:
                return self._json(200, {k: STATE[k] for k in ("requests", "texts", "authorization")})
        self._json(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/_control":
            with LOCK:
                STATE.update(body)
            return self._json(200, {"ok": True})
        if self.path not in ("/api/embed", "/v1/embeddings"):
            return self._json(404, {"error": f"no route {self.path}"})
        with LOCK:
            STATE["requests"] += 1
            STATE["authorization"].append(self.headers.get("Authorization"))
            fault = STATE["fail"].pop(0) if STATE["fail"] else None
            delay, dims = STATE["delay"], STATE["dims"]
        if delay:
            time.sleep(delay)
        if fault:
            headers = {"Retry-After": fault["retry_after"]} if "retry_after" in fault else {}
            return self._json(fault["status"], {"error": {"message": fault.get("message", "injected fault")}}, headers)
        if body.get("model") == "missing-model":
            return self._json(404, {"error": 'model "missing-model" not found, try pulling it first'})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        embedded = vectors(texts, int(body.get("dimensions") or dims))
        with LOCK:
            STATE["texts"] += len(texts)
        if self.path == "/api/embed":
            self._json(200, {"model": body["model"], "embeddings": embedded})
        else:
            self._json(200, {"object": "list", "model": body["model"],
                             "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(embedded)]})
        self._count_down()

    def _count_down(self) -> None:
        with LOCK:
            if STATE["exit_after"] is None:
                return
            STATE["exit_after"] -= 1
            done = STATE["exit_after"] <= 0
        if done:
            self.wfile.flush()
            os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", type=int, default=384)
    args = ap.parse_args()
    STATE["dims"] = args.dims
    MODEL.load()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
