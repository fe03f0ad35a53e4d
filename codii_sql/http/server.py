"""The HTTP face in one process: a Starlette app served by uvicorn (both already come with the MCP SDK)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .handler import SearchHandler


def app(handler: SearchHandler) -> Starlette:
    """An ASGI app answering every GET with ``handler`` (unknown paths: its 404)."""
    def endpoint(request: Request) -> JSONResponse:
        # A plain function: Starlette runs it in its thread pool, so SQLite never blocks the event loop.
        status, body = handler.answer(request.url.path, _params(request))
        return JSONResponse(body, status_code=status)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET"])])


def run(handler: SearchHandler, host: str, port: int) -> None:
    """Serve ``handler`` on ``host:port`` until interrupted."""
    import uvicorn

    uvicorn.run(app(handler), host=host, port=port, log_level="warning")


def _params(request: Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out
