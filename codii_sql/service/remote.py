"""A remote shard: another codii-sql server's ``GET /search`` (a team server), searched as one shard.

The server answers with its own merged answer over its workspace (or one member of it); its results
carry the server's codebase paths, shown here after the server's address. It embeds the query
itself, with its own model: its answer merges with local shards by similarity when the models
match (each member says its ``model_id``), else by rank.
"""

from __future__ import annotations

import os
import urllib.parse

import numpy as np

from ..errors import Remedy, StorageError, UsageError
from ..search.answer import Note
from ..search.results import Result, SearchOptions
from ..search.searcher import Hits
from .shards import ShardAnswer

#: Seconds a remote server has to answer one search (its own fan-out and model included).
TIMEOUT = float(os.environ.get("CODII_SQL_REMOTE_TIMEOUT", "30"))
#: The result keys a server's answer carries that :class:`Result` takes.
_RESULT_KEYS = frozenset(Result.__dataclass_fields__)


class RemoteShard:
    """The search API of a codii-sql server at ``url`` (``http://host:port``, optionally with
    ``?workspace=NAME`` or ``?codebase=PATH`` to ask for one of what it serves).

    Raises:
        UsageError: ``url`` is not an http(s) URL with a host.
    """

    scope = ""
    embedder = None  # the server embeds the query with its own model

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"{url!r} is not a server address", "pass one such as http://127.0.0.1:8080")
        self.name = url.rstrip("/")
        self.host = parts.netloc
        self.base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        self.fixed = dict(urllib.parse.parse_qsl(parts.query))
        self._client = None

    def prepare(self) -> Note | None:
        """Nothing to prepare: the server keeps its own indexes fresh."""
        return None

    def probe(self, vector: np.ndarray) -> float | None:
        """Unknown: the server embeds the query itself, so it is always asked."""
        return None

    def search(self, query: str, opts: SearchOptions, vector: np.ndarray | None,
               embedder_failed: str | None = None) -> ShardAnswer:
        """The server's answer, its results named after the server.

        Raises:
            UsageError: the server refused the request (400: a bad query or option).
            StorageError: the server cannot be reached, or answered an error.
        """
        import httpx  # only when a remote shard is searched

        params = {"q": query, "limit": opts.limit, "mode": opts.mode, **self.fixed}
        params.update({k: v for k, v in (("glob", opts.glob), ("language", opts.language), ("grep", opts.grep)) if v})
        if opts.group_by_file:
            params["group_by"] = "file"
        if opts.rerank:
            params["rerank"] = "true"
        query_string = list(params.items()) + [("ext", e) for e in opts.exts]
        try:
            if self._client is None:
                self._client = httpx.Client(timeout=TIMEOUT)
            got = self._client.get(f"{self.base}/search", params=query_string)
        except httpx.HTTPError as err:
            raise StorageError(f"the server {self.name} did not answer ({type(err).__name__})",
                               Remedy("retry")) from None
        body = _json(got)
        if got.status_code == 400:
            raise UsageError(f"the server {self.name} refused the search: {body.get('error')}", body.get("hint"))
        if got.status_code != 200:
            raise StorageError(f"the server {self.name} answered {got.status_code}: {body.get('error', got.text[:200])}",
                               body.get("hint"))
        return self._answer(body)

    def _answer(self, body: dict) -> ShardAnswer:
        """The server's JSON answer as one shard's answer."""
        matches = {m["codebase"]: m.get("match") for m in body.get("codebases", [])}
        models = {m.get("model_id") for m in body.get("codebases", []) if m.get("status") == "searched"}
        results = []
        for r in body.get("results", []):
            where = r.get("codebase") or body.get("codebase")
            fields = {k: v for k, v in r.items() if k in _RESULT_KEYS}
            # host:port:/path, as scp and git name a folder on another machine (a URL would be a
            # page the server does not serve).
            fields.update(codebase=f"{self.host}:{where}" if where else self.name, knn_match=matches.get(where))
            results.append(Result(**fields))
        hits = Hits(results, None, body.get("best_cosine"), bool(body.get("no_good_match")))
        notes = [Note("member", body["note"], codebase=self.name)] if body.get("note") else []
        return ShardAnswer(hits, notes, models.pop() if len(models) == 1 else None)

    def owns(self, result: Result) -> bool:
        return result.codebase == self.name or (result.codebase or "").startswith(self.host + ":")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _json(response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
