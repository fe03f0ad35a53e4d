"""The HTTP face in one process: the JSON API and the web page, a Starlette app served by uvicorn."""

from __future__ import annotations

import errno
import ipaddress
import socket

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..errors import UsageError
from .auth import TokenGate, login_routes
from .handler import SearchHandler
from .pages import SECURITY_HEADERS, Pages

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
#: The names a browser uses for this machine. A server bound to loopback answers only requests
#: addressed to one of them: a web page elsewhere can point its own DNS name at 127.0.0.1 (DNS
#: rebinding) and read a server without a token, but its requests carry its name as Host.
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def allowed_hosts(host: str) -> list[str]:
    """The Host header values a server listening on ``host`` answers: the loopback names when it
    listens on loopback only, else any (who may reach it is the network's and ``--token``'s call)."""
    if host == "localhost":
        return LOOPBACK_NAMES
    try:
        return LOOPBACK_NAMES if ipaddress.ip_address(host).is_loopback else ["*"]
    except ValueError:  # a name of this machine's other interfaces
        return ["*"]


def app(handler: SearchHandler, token: str | None = None, host: str = "127.0.0.1") -> Starlette:
    """An ASGI app: the web page (:class:`.pages.Pages`), and the JSON API for every other path
    (``handler``'s answers; unknown paths: its 404). With ``token``, every request but the login
    page's needs it (:mod:`.auth`). Listening on ``host``, it answers the Host names of
    :func:`allowed_hosts` (others get 400)."""
    def endpoint(request: Request) -> JSONResponse:
        # A plain function: Starlette runs it in its thread pool, so SQLite never blocks the event loop.
        status, body = handler.answer(request.url.path, query_params(request), request.method)
        return JSONResponse(body, status_code=status)

    pages = Pages(handler)
    routes = pages.routes()
    if token is not None:
        routes.append(Route("/login", login_routes(token, pages.templates, SECURITY_HEADERS), methods=["GET", "POST"]))
    # Every other method and path reaches the handler, so a POST gets its JSON 405 rather than Starlette's text.
    routes.append(Route("/{path:path}", endpoint, methods=list(METHODS)))
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host))]
    if token is not None:
        middleware.append(Middleware(TokenGate, token=token))
    return Starlette(routes=routes, middleware=middleware)


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


def run(handler: SearchHandler, host: str, port: int, token: str | None = None) -> None:
    """Serve ``handler`` (and its web page) on ``host:port`` until interrupted, behind ``token`` if given."""
    import uvicorn

    uvicorn.run(app(handler, token, host), host=host, port=port, log_level="warning")


def query_params(request: Request) -> dict[str, list[str]]:
    """Each query parameter's values in order (``ext`` may repeat), as :meth:`SearchHandler.answer` takes them."""
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out
