"""Embedders behind an HTTP API: Ollama's ``/api/embed`` and any OpenAI-compatible ``/v1/embeddings``.

The code leaves the machine for the server named by ``OLLAMA_HOST`` or ``OPENAI_BASE_URL``.
Texts go in requests of at most :data:`MAX_BATCH_TEXTS` texts and :data:`MAX_BATCH_CHARS`
characters, :data:`IN_FLIGHT` requests at a time. A request that meets 429, a 5xx, a timeout or
a refused connection is retried with exponential backoff and full jitter (AWS Architecture Blog,
"Exponential Backoff And Jitter", 2015), waiting at least what ``Retry-After`` asks. The width
of the vectors is learned from the first response, never assumed. The API key travels only in
the ``Authorization`` header: it is never printed, logged, or written to an index or the cache.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import email.utils
import hashlib
import json
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import EmbeddingFailedError, Remedy, UsageError
from ..paths import home
from .embedder import Embedder

#: Texts per request: OpenAI accepts 2,048 and Ollama any number, but smaller requests retry cheaply.
MAX_BATCH_TEXTS = 64
#: Characters per request (about 15k tokens of code): far below OpenAI's 300k-token request limit.
MAX_BATCH_CHARS = 60_000
#: Longest text sent, in characters; longer ones are cut there and counted (chunks are far shorter;
#: a pasted issue used as a query is not). About 4k tokens of code, below the usual 8k limits.
MAX_INPUT_CHARS = 16_000
#: Requests in flight at once.
IN_FLIGHT = 4
#: Backoff: the n-th retry waits a random time up to min(BACKOFF_MAX, BACKOFF_BASE * 2**n) seconds.
BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
#: ``$CODII_SQL_HTTP_TIMEOUT`` (seconds per request, default 60) and ``$CODII_SQL_HTTP_RETRIES``
#: (attempts per request, default 6) tune the client.
ENV_TIMEOUT, ENV_RETRIES = "CODII_SQL_HTTP_TIMEOUT", "CODII_SQL_HTTP_RETRIES"
#: Attempts and seconds for a search's query: a search falls back to BM25 at once rather than
#: wait out a server that is down.
QUERY_ATTEMPTS, QUERY_TIMEOUT = 2, 10.0
#: Seconds a query embedding that failed keeps every process from asking the server again: the failure is
#: written beside the indexes (``providers/``), since each CLI search is a fresh process (a new user's waited
#: 21 s every time on a server that accepted and never answered, each told "not asked again for 60 s").
QUERY_RETRY_SECONDS = 60.0
#: HTTP statuses worth another attempt: rate limits and server trouble.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

#: Prefixes some embedding models were trained with, from their model cards: (query, document).
KNOWN_PREFIXES = {
    "nomic-embed-text": ("search_query: ", "search_document: "),
    "mxbai-embed-large": ("Represent this sentence for searching relevant passages: ", ""),
    "snowflake-arctic-embed": ("Represent this sentence for searching relevant passages: ", ""),
}


@dataclass(frozen=True)
class Endpoint:
    """Where and how one provider is called: ``who`` names it in messages, ``hint_*`` say what to check."""

    provider: str
    url: str
    who: str
    refused_hint: str
    auth_hint: str
    missing_model_hint: str


class HttpEmbedder(Embedder):
    """An embedding model served over HTTP (see the module docstring).

    Attributes:
        dims: None until the first response says it (:meth:`load` asks with a one-text request).
        truncated: texts cut at :data:`MAX_INPUT_CHARS` so far.
    """

    max_tokens = 8192

    def __init__(self, endpoint: Endpoint, model: str, *, api_key: str = "", dimensions: int | None = None):
        import httpx  # only when a provider is used: the bundled model needs no HTTP client

        self.endpoint, self.model, self.dimensions = endpoint, model, dimensions
        self.model_id = f"{endpoint.provider}:{model}" + (f"@{dimensions}" if dimensions else "")
        self.dims = None
        self.truncated = 0
        self.timeout = float(os.environ.get(ENV_TIMEOUT) or 60)
        self.attempts = max(1, int(os.environ.get(ENV_RETRIES) or 6))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=min(5.0, self.timeout)),
                                    headers=headers)
        self._httpx = httpx
        self._lock = threading.Lock()
        self._budget = threading.local()  # quick(): a search's budget, for its thread alone
        self._query_failed: tuple[float, EmbeddingFailedError] | None = None  # (when, what) of the last failure
        base = model.split(":")[0]
        self.query_prefix, self.document_prefix = KNOWN_PREFIXES.get(base, ("", ""))

    @property
    def loaded(self) -> bool:
        return self.dims is not None

    def where(self) -> str:
        return self.endpoint.url

    def ping(self) -> None:
        """One GET of the provider's model list (Ollama ``/api/tags``, OpenAI ``/models``), 3 s at most.

        Raises:
            EmbeddingFailedError: refused, timed out, or an error status (401: the key).
        """
        url = self.endpoint.url.rsplit("/", 1)[0] + ("/tags" if self.endpoint.provider == "ollama" else "/models")
        try:
            response = self._client.get(url, timeout=3.0)
        except self._httpx.ConnectError:
            raise EmbeddingFailedError(f"{self.endpoint.who} refused the connection: "
                                       f"{self.endpoint.refused_hint}") from None
        except self._httpx.HTTPError as err:
            raise EmbeddingFailedError(f"{self.endpoint.who} did not answer ({type(err).__name__})") from None
        if response.status_code >= 400 and response.status_code != 404:  # some servers list no models
            raise EmbeddingFailedError(self._refusal(response))

    def load(self) -> None:
        """Learn the vectors' width with a one-text request (and so check the server, model and key).

        Raises:
            EmbeddingFailedError: the server refused, failed or answered something unusable.
        """
        if self.dims is None:
            self.embed(["dimension probe"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32[len(texts), dims], rows L2-normalised, documents' prefix added (:data:`KNOWN_PREFIXES`).

        Raises:
            EmbeddingFailedError: a request still failed after its retries, or the server answered
                vectors of another width than before (the message says which and what to do).
        """
        return self._embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """float32[dims] for a search query (with the model's query prefix): :data:`QUERY_ATTEMPTS`
        attempts of at most :data:`QUERY_TIMEOUT` seconds, so a search falls back quickly; after a failure
        the server is not asked again for :data:`QUERY_RETRY_SECONDS` (a server's every search waited 20 s
        on a provider that hung, a workspace of two 40 s: a new user).

        Raises:
            EmbeddingFailedError: as :meth:`embed`, or the last failure within the pause.
        """
        failed = max(filter(None, (self._query_failed, self._recorded_failure())), key=lambda f: f[0], default=None)
        if failed is not None and 0 <= time.time() - failed[0] < QUERY_RETRY_SECONDS:
            raise failed[1]
        try:
            vector = self._embed([self.query_prefix + text], QUERY_ATTEMPTS, min(QUERY_TIMEOUT, self.timeout))[0]
        except EmbeddingFailedError as err:
            self._query_failed = (time.time(), EmbeddingFailedError(
                f"{err.what} (not asked again for {QUERY_RETRY_SECONDS:g} s)", err.hint))
            self._record_failure(err)
            raise self._query_failed[1] from None
        if failed is not None:
            self._query_failed = None
            with contextlib.suppress(OSError):
                self._failure_file().unlink()
        return vector

    def _failure_file(self) -> Path:
        """Where a failed query embedding of this server and model is remembered for other processes."""
        key = hashlib.sha256(f"{self.endpoint.url}\0{self.model}".encode()).hexdigest()[:16]
        return home() / "providers" / f"{key}.failed.json"

    def _record_failure(self, err: EmbeddingFailedError) -> None:
        # Best effort: a home that cannot be written only loses the pause for other processes.
        path = self._failure_file()
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"at": time.time(), "what": err.what,
                                       "hint": err.hint if isinstance(err.hint, str) else None}))
            os.replace(tmp, path)

    def _recorded_failure(self) -> tuple[float, EmbeddingFailedError] | None:
        """Another process's failure of :meth:`embed_query` on this server and model, if recorded."""
        try:
            got = json.loads(self._failure_file().read_text())
            return float(got["at"]), EmbeddingFailedError(
                f"{got['what']} (not asked again for {QUERY_RETRY_SECONDS:g} s)", got.get("hint"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def close(self) -> None:
        self._client.close()

    @contextlib.contextmanager
    def quick(self) -> Iterator[None]:
        """This thread's requests get a query's budget (:data:`QUERY_ATTEMPTS` of :data:`QUERY_TIMEOUT` s):
        a search embedding an edit waited 6 minutes on a server that accepted and never answered (6
        attempts of 60 s), where its query embedding gives up after 20 s (a new user)."""
        before = getattr(self._budget, "value", None)
        self._budget.value = (QUERY_ATTEMPTS, min(QUERY_TIMEOUT, self.timeout))
        try:
            yield
        finally:
            self._budget.value = before

    def _embed(self, texts: list[str], attempts: int | None = None, timeout: float | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims or 0), np.float32)
        budget = getattr(self._budget, "value", None)
        attempts, timeout = (attempts or budget[0], timeout or budget[1]) if budget else (attempts, timeout)
        cut = [t[:MAX_INPUT_CHARS] for t in texts]
        with self._lock:
            self.truncated += sum(len(t) > MAX_INPUT_CHARS for t in texts)
        batches = _batches(cut)
        with cf.ThreadPoolExecutor(max_workers=min(IN_FLIGHT, len(batches))) as pool:
            parts = list(pool.map(lambda batch: self._request(batch, attempts or self.attempts,
                                                              timeout or self.timeout), batches))
        for part in parts:  # each request's vectors are of one width; two requests' may differ
            self._check_width(part.shape[1])
        vectors = np.concatenate(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def _check_width(self, width: int) -> None:
        with self._lock:
            if self.dims is None:
                self.dims = width
            elif width != self.dims:
                raise EmbeddingFailedError(
                    f'model "{self.model}" returned {width}-dim vectors where it returned {self.dims}-dim ones before: '
                    f"{self.endpoint.who} changed model under the same name", Remedy("force_build"))

    def _request(self, texts: list[str], attempts: int, timeout: float) -> np.ndarray:
        """One request's vectors, retried as the module docstring says."""
        body = _body(self.endpoint.provider, self.model, texts, self.dimensions)
        last = ""
        for attempt in range(attempts):
            try:
                response = self._client.post(self.endpoint.url, json=body, timeout=timeout)
            except self._httpx.ConnectError:
                last, wait = "connection refused", None
                if attempt == attempts - 1:
                    raise EmbeddingFailedError(f"{self.endpoint.who} refused the connection: "
                                               f"{self.endpoint.refused_hint}") from None
            except self._httpx.TimeoutException:
                last, wait = f"no answer within {timeout:g} s", None
            except self._httpx.HTTPError as err:
                last, wait = f"{type(err).__name__}: {err}", None
            else:
                if response.status_code == 200:
                    return _vectors(self.endpoint, response, len(texts))
                if response.status_code not in RETRY_STATUSES:
                    raise EmbeddingFailedError(self._refusal(response)) from None
                last, wait = f"HTTP {response.status_code}", _retry_after(response)
            if attempt < attempts - 1:
                backoff = random.uniform(0, min(BACKOFF_MAX, BACKOFF_BASE * 2 ** attempt))
                time.sleep(max(backoff, min(wait or 0.0, 2 * BACKOFF_MAX)))
        raise EmbeddingFailedError(f"{self.endpoint.who} did not take a batch of {len(texts)} texts after "
                                   f"{attempts} attempts (last: {last})")

    def _refusal(self, response) -> str:
        """The one line for a status that retrying cannot fix."""
        code, detail = response.status_code, _error_text(response)
        if code in (401, 403):
            return f"{self.endpoint.who} answered {code}: {self.endpoint.auth_hint}"
        if code == 404 or (code == 400 and "not found" in detail.lower()):
            return f"{self.endpoint.who} answered {code} ({detail}): {self.endpoint.missing_model_hint}"
        return f"{self.endpoint.who} answered {code}: {detail}"


def ollama_factory(model: str) -> HttpEmbedder:
    """The registry's ``ollama`` provider: ``ollama:MODEL`` at ``$OLLAMA_HOST`` (default 127.0.0.1:11434).

    Raises:
        UsageError: no model name.
    """
    if not model:
        raise UsageError("name the Ollama model: --embedder ollama:nomic-embed-text")
    host = _with_scheme(os.environ.get("OLLAMA_HOST", "").strip() or "http://127.0.0.1:11434")
    return HttpEmbedder(Endpoint(
        "ollama", f"{host}/api/embed", f"Ollama at {host}",
        'is "ollama serve" running? (OLLAMA_HOST names another address)', "check the server's access rules",
        f'run `ollama pull {model}`'), model)


def openai_factory(model: str) -> HttpEmbedder:
    """The registry's ``openai`` provider: ``openai:MODEL`` or ``openai:MODEL@DIMENSIONS`` at
    ``$OPENAI_BASE_URL`` (default the OpenAI API), with ``$OPENAI_API_KEY``.

    Raises:
        UsageError: no model name, or DIMENSIONS is not a positive integer.
    """
    name, _, dims = model.rpartition("@") if "@" in model else (model, "", "")
    if not name:
        raise UsageError("name the model: --embedder openai:text-embedding-3-small")
    if dims and (not dims.isdigit() or int(dims) < 1):
        raise UsageError(f"openai:{model}: the part after @ is the number of dimensions, e.g. "
                         "openai:text-embedding-3-small@512")
    base = _with_scheme(os.environ.get("OPENAI_BASE_URL", "").strip() or "https://api.openai.com/v1")
    if base.count("/") == 2:  # a bare host: OpenAI-compatible servers serve under /v1
        base += "/v1"
    # Without a key (and offline) a new user read 'is it running?' of OpenAI's own API.
    keyless = not os.environ.get("OPENAI_API_KEY", "").strip() and base.startswith("https://api.openai.com")
    refused = ("OPENAI_API_KEY is not set, which the OpenAI API needs: set it, or OPENAI_BASE_URL to a server of "
               "your own") if keyless else "is it running? (OPENAI_BASE_URL names it)"
    return HttpEmbedder(Endpoint(
        "openai", f"{base}/embeddings", f"the OpenAI-compatible server at {base}", refused, "check OPENAI_API_KEY",
        "check the model name and OPENAI_BASE_URL (it usually ends in /v1)"),
        name, api_key=os.environ.get("OPENAI_API_KEY", ""), dimensions=int(dims) if dims else None)


def _with_scheme(url: str) -> str:
    url = url.rstrip("/")
    return url if "://" in url else f"http://{url}"


def _batches(texts: list[str]) -> list[list[str]]:
    """``texts`` in order, cut into requests of at most :data:`MAX_BATCH_TEXTS` texts and :data:`MAX_BATCH_CHARS` chars."""
    out: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if out[-1] and (len(out[-1]) == MAX_BATCH_TEXTS or size + len(text) > MAX_BATCH_CHARS):
            out.append([])
            size = 0
        out[-1].append(text)
        size += len(text)
    return out


def _body(provider: str, model: str, texts: list[str], dimensions: int | None) -> dict:
    if provider == "ollama":
        return {"model": model, "input": texts, "truncate": True}
    return {"model": model, "input": texts, "encoding_format": "float",
            **({"dimensions": dimensions} if dimensions else {})}


def _vectors(endpoint: Endpoint, response, n: int) -> np.ndarray:
    """The vectors of a 200 response, in input order: float32[n, width].

    Raises:
        EmbeddingFailedError: the body is not the provider's format, holds another number of vectors, vectors of
            several widths, or a NaN or an infinity.
    """
    try:
        data = response.json()
        if endpoint.provider == "ollama":
            vectors = data["embeddings"]
        else:
            vectors = [item["embedding"] for item in sorted(data["data"], key=lambda item: item["index"])]
    except (ValueError, KeyError, TypeError):
        raise EmbeddingFailedError(f"{endpoint.who} answered 200 without embeddings in its format: is "
                                   f"{endpoint.url} an {endpoint.provider} embedding endpoint?") from None
    if len(vectors) != n or not all(isinstance(v, list) and v for v in vectors):
        raise EmbeddingFailedError(f"{endpoint.who} answered {len(vectors)} vectors for {n} texts")
    try:  # a NaN vector was stored, cached and matched every query (a helper's server)
        matrix = np.asarray(vectors, dtype=np.float32)
    except (ValueError, TypeError):
        raise EmbeddingFailedError(f"{endpoint.who} answered vectors of different widths, or not of numbers, for one "
                                   "request: is its model an embedding model?") from None
    if not np.isfinite(matrix).all():
        raise EmbeddingFailedError(f"{endpoint.who} answered vectors holding NaN or infinity: its model or "
                                   "server is broken; none of them is stored")
    return matrix


def _retry_after(response) -> float | None:
    """Seconds ``Retry-After`` asks for (a number or an HTTP date; RFC 9110 section 10.2.3), or None."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(response) -> str:
    """The server's own error message, on one line, at most 200 characters (OpenAI ``{"error": {"message"}}``,
    Ollama ``{"error"}``, an HTML page's text: a new user's note held a web server's whole 501 page)."""
    try:
        data = response.json()
        error = data.get("error", data) if isinstance(data, dict) else data
        text = error.get("message", error) if isinstance(error, dict) else error
    except ValueError:
        text = response.text
        if text.lstrip()[:1] == "<":  # an HTML error page (a proxy's, a plain web server's): its words, not its tags
            text = re.sub(r"(?s)<(script|style|head)\b.*?</\1>|<[^>]*>", " ", text)
    return " ".join(str(text).split())[:200] or response.reason_phrase
