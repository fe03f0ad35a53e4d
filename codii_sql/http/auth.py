"""A bearer token for a team server: ``--token`` or ``$CODII_SQL_HTTP_TOKEN`` closes every page and
the JSON API to requests without it (``Authorization: Bearer TOKEN``, or the cookie the login page
sets). Without a token the server is open to whoever can reach it: it binds 127.0.0.1 by default."""

from __future__ import annotations

import hashlib
import hmac
import os
import urllib.parse

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

ENV_TOKEN = "CODII_SQL_HTTP_TOKEN"
COOKIE = "codii_sql_token"
#: Reached without the token: the login page and what it needs to look right.
OPEN_PATHS = ("/login", "/static/style.css")
#: The JSON API: refused with 401 and a JSON error, where a page would send a person to log in.
API_PATHS = ("/search", "/healthz", "/grep")
#: The most a login form may send (bytes): a token and a path.
MAX_FORM_BYTES = 8192


def token_from(option: str | None) -> str | None:
    """The token to require: ``option`` (``--token``), else ``$CODII_SQL_HTTP_TOKEN``, else None (open)."""
    value = option if option is not None else os.environ.get(ENV_TOKEN)
    return value.strip() if value and value.strip() else None


class TokenGate:
    """ASGI middleware requiring ``token`` on every request but :data:`OPEN_PATHS`."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._carries(Request(scope)):
            return await self.app(scope, receive, send)
        if scope["path"].rstrip("/") in API_PATHS:
            response: Response = JSONResponse({"error": "this server needs its token",
                                               "hint": "send Authorization: Bearer TOKEN"}, status_code=401,
                                              headers={"WWW-Authenticate": "Bearer"})
        else:
            target = scope["path"] + (f"?{scope['query_string'].decode('latin-1')}" if scope["query_string"] else "")
            response = RedirectResponse("/login?" + urllib.parse.urlencode({"next": target}), status_code=303)
        await response(scope, receive, send)

    def _carries(self, request: Request) -> bool:
        given = request.headers.get("authorization", "")
        if given.lower().startswith("bearer "):
            return hmac.compare_digest(given[7:].encode(), self.token.encode())
        cookie = request.cookies.get(COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie.encode(), cookie_value(self.token).encode())


def cookie_value(token: str) -> str:
    """What the login cookie holds: an HMAC of the token, never the token itself (a cookie read off a
    browser must not be the bearer token scripts use, which a new user found stored as it is)."""
    return hmac.new(token.encode(), b"codii-sql login cookie", hashlib.sha256).hexdigest()


def login_routes(token: str, templates: Jinja2Templates, headers: dict[str, str]):
    """``GET /login`` (the form) and ``POST /login`` (the token in, a cookie out, back to ``next``)."""
    async def login(request: Request) -> Response:
        nxt = _local(request.query_params.get("next", "/"))
        if request.method == "GET":
            response = templates.TemplateResponse(request, "login.html", {"next": nxt, "refused": False})
        else:
            body = (await request.body())[:MAX_FORM_BYTES].decode("utf-8", "replace")
            form = urllib.parse.parse_qs(body)
            offered, nxt = (form.get("token") or [""])[0], _local((form.get("next") or ["/"])[0])
            if offered and hmac.compare_digest(offered.encode(), token.encode()):
                response = RedirectResponse(nxt, status_code=303)
                response.set_cookie(COOKIE, cookie_value(token), httponly=True, samesite="strict", path="/")
            else:
                response = templates.TemplateResponse(request, "login.html", {"next": nxt, "refused": True},
                                                      status_code=401)
        response.headers.update(headers)
        return response

    return login


def _local(target: str) -> str:
    """``target`` if it is a path of this server (``/file/...``), else ``/``: a login never sends elsewhere."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
