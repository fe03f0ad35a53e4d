"""The HTTP face in one process: a Starlette app served by uvicorn (both already come with the MCP SDK)."""

from __future__ import annotations

import errno
import socket

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..errors import UsageError
from .handler import SearchHandler

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def app(handler: SearchHandler) -> Starlette:
    """An ASGI app answering every GET with ``handler`` (unknown paths: its 404)."""
    def endpoint(request: Request) -> JSONResponse:
        # A plain function: Starlette runs it in its thread pool, so SQLite never blocks the event loop.
        status, body = handler.answer(request.url.path, query_params(request), request.method)
        return JSONResponse(body, status_code=status)

    # Every method reaches the handler, so a POST gets its JSON 405 rather than Starlette's text.
    return Starlette(routes=[Route("/{path:path}", endpoint, methods=list(METHODS))])


def check_port(host: str, port: int) -> None:
    """Refuse a port this process cannot listen on (in use, or not allowed), before anything starts.

    Raises:
        UsageError: the port cannot be bound.
    """
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as err:
        if isinstance(err, socket.gaierror) or err.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"cannot listen on {host}: not an address of this machine ({err.strerror or err}); "
                             "pass --host 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
        raise UsageError(f"cannot listen on {host}:{port} ({err.strerror or err}): pick another --http PORT, "
                         "or stop what uses it") from None


def run(handler: SearchHandler, host: str, port: int) -> None:
    """Serve ``handler`` on ``host:port`` until interrupted."""
    import uvicorn

    uvicorn.run(app(handler), host=host, port=port, log_level="warning")


def query_params(request: Request) -> dict[str, list[str]]:
    """Each query parameter's values in order (``ext`` may repeat), as :meth:`SearchHandler.answer` takes them."""
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out
