"""The web page of the HTTP face: search, read and navigate code in a browser.

Everything is rendered on the server (Jinja2 templates, Pygments colours), so the page works with
scripts off; the one small script adds keys (``/``, ``j``/``k``, Enter). Every state is a URL
(``/?q=...&mode=...``, ``/file/<codebase>/<path>?hl=120-140#L120``): a result can be pasted into a
chat. The page reads what the JSON API reads (the same search use case, the same served
codebases, through the same file boundary), and writes nothing.
"""

from __future__ import annotations

import hashlib
import threading
import time
import urllib.parse
from collections import OrderedDict
from pathlib import Path

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from .. import service
from ..errors import CodiiError, UsageError
from ..text import numbered_lines
from . import code
from .handler import SearchHandler
from .words import what, words


class _AnyPath(Convertor):
    """Starlette's ``path`` convertor, newlines included: its ``.*`` stops at one, so a file whose
    name holds a newline (Git allows it) was linked from the results and then not found."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", _AnyPath())

HERE = Path(__file__).parent
#: No inline script or style, nothing from elsewhere, no framing: a file's text cannot run.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
}
#: How long a browser keeps an asset (a day; a new version has a new URL).
ASSET_CACHE = "public, max-age=86400, immutable"
#: The search form's fields, as the JSON API's /search takes them.
FORM_FIELDS = ("q", "mode", "limit", "workspace", "codebase", "language", "glob", "role", "ext", "group_by")
#: Matching lines the page's grep mode shows at most.
GREP_LINES = 500
#: Members whose state the status line reads (each opens its index once per page).
STATUS_MEMBERS = 50
#: The coloured files kept, in bytes of HTML (a 5,000-line Python file is about 1.5 MB).
COLOURED_BYTES = 32 * 2**20
#: Lines a file view shows at once: a longer file is shown this many at a time, from a little above its
#: marked lines (a 50,000-line file was one 11.9 MB page; docs/web.md measures the view of 5,000).
VIEW_LINES = 5_000


class Pages:
    """The page's routes over ``handler``'s served codebases."""

    def __init__(self, handler: SearchHandler):
        self.handler = handler
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters.update(visible=code.visible, path_url=code.path_url)
        self._css = code.css()
        versions = {p.name: _digest(p.read_bytes()) for p in (HERE / "static").iterdir()}
        versions["code.css"] = _digest(self._css.encode())
        # Each asset's URL carries its content's digest, so a browser keeps it without asking again.
        self.templates.env.globals["roles"] = service.ROLES
        self.templates.env.globals["asset"] = lambda name: f"/static/{name}?v={versions[name]}"
        self._recent: OrderedDict[tuple, tuple[list, int]] = OrderedDict()
        self._recent_bytes = 0
        self._lock = threading.Lock()

    def routes(self) -> list:
        return [Route("/", self.search, methods=["GET", "HEAD"]),
                Route("/file/{name}/{path:anypath}", self.file, methods=["GET", "HEAD"]),
                Route("/symbol", self.symbol, methods=["GET", "HEAD"]),
                Route("/refs", self.refs, methods=["GET", "HEAD"]),
                Route("/static/code.css", self.code_css, methods=["GET", "HEAD"]),
                Mount("/static", _Assets(directory=str(HERE / "static")), name="static")]

    def search(self, request: Request) -> Response:
        """``/``: the search form, and with ``q`` its answer grouped by file (``mode=grep``: the lines
        matching ``q`` as a regular expression, :meth:`grep`)."""
        params = {k: v for k, v in _params(request).items() if k in FORM_FIELDS and any(x.strip() for x in v)}
        context = {"form": {k: v[-1] for k, v in params.items()}, "answer": None, "groups": [], "error": None}
        if params.get("q") and context["form"].get("mode") == "grep":
            return self.grep(request, params, context)
        if context["form"].get("mode", "hybrid") not in service.MODES:  # the page offers grep too (a new user)
            context["error"] = f"mode {context['form']['mode']!r} is not one of {', '.join((*service.MODES, 'grep'))}"
        elif params.get("q"):
            started = time.perf_counter()
            try:
                # the form's one ext box takes several, as grep mode reads it (`.py,.js` matched no file)
                asked = {**params, "ext": [e.strip() for v in params.get("ext", []) for e in v.split(",") if e.strip()]}
                answer = self.handler.search(self.handler.request_of(asked))
                context.update(answer=answer, groups=self._groups(answer), note=answer.note(words),
                               ms=round((time.perf_counter() - started) * 1000))
            except CodiiError as err:
                context["error"] = f"{what(err)}: {words(err.hint)}" if err.hint else what(err)
        return self._page(request, "search.html", context, 400 if context["error"] else 200)

    def grep(self, request: Request, params: dict[str, list[str]], context: dict) -> Response:
        """The grep answer of ``q`` in the form's codebase, at most :data:`GREP_LINES` lines, each
        linking to its line in the file view, the matches marked."""
        form = context["form"]
        exts = [e.strip() for e in form.get("ext", "").split(",") if e.strip()]
        asked = {"q": params["q"], "limit": [str(GREP_LINES)], **{k: params[k] for k in ("codebase", "role") if k in params},
                 # the form's other filters, as grep's options: a language is rg's -t, an extension a glob
                 "glob": params.get("glob", []) + ["*" + (e if e.startswith(".") else "." + e) for e in exts],
                 **({"type": [form["language"]]} if form.get("language") else {})}
        served = self.handler.served()
        if not asked.get("codebase", [""])[-1] and len(served) > 1:
            # The form's "every one" is its default; grep reads one index, and the page's words say where to pick it.
            context["error"] = f"grep reads one codebase: choose it under filters ({', '.join(served)})"
            return self._page(request, "search.html", context, 400)
        started = time.perf_counter()
        try:
            found = self.handler.grep(self.handler.grep_request_of(asked))
        except CodiiError as err:
            context["error"] = f"{what(err)}: {words(err.hint)}" if err.hint else what(err)
            return self._page(request, "search.html", context, 400)
        names = {cb.shown: name for name, cb in served.items()}
        files = [{"path": f.path, "lines": [(g.line, code.marked_spans(g.shown, g.spans)) for g in f.lines]}
                 for f in found.files]
        shown = sum(len(f["lines"]) for f in files)
        return self._page(request, "grep.html", {**context, "found": found, "files": files, "shown": shown,
                                                 "name": names.get(found.codebase, ""), "note": found.note(words),
                                                 "ms": round((time.perf_counter() - started) * 1000)})

    def file(self, request: Request) -> Response:
        """``/file/<codebase>/<path>?hl=A-B``: the file, coloured, each line an anchor, the lines
        ``A``-``B`` marked; an index alone shows what its chunks store and says which lines not."""
        name = request.path_params["name"]
        try:
            codebase = self._codebase(name)
            read = service.file_text(codebase, request.path_params["path"],
                                     None if codebase.alone else self.handler.indexes.fileset(codebase))
        except CodiiError as err:
            return self._page(request, "error.html", {"error": what(err), "hint": words(err.hint)}, _status(err))
        hl = request.query_params.get("hl", "")
        first, last = _span(hl)
        start = request.query_params.get("from", "")
        total = len(read.lines)
        start, end = _window(total, first, int(start) if start.isdigit() and len(start) < 10 else None)
        missing = {n for a, b in read.not_stored for n in range(a, b + 1)}
        rows = [{"n": n, "html": html, "hit": first <= n <= last, "missing": n in missing}
                for n, html in enumerate(self._coloured(name, read, start, end), start)]
        pages = {"start": start, "end": end, "total": total,
                 "earlier": _view_from(max(1, start - VIEW_LINES), hl) if start > 1 else None,
                 "later": _view_from(end + 1, hl) if end < total else None}
        return self._page(request, "file.html", {"name": name, "read": read, "rows": rows, "hl": (first, last),
                                                 "digits": len(str(total)), "pages": pages})

    def _coloured(self, name: str, read: service.FileText, start: int, end: int) -> list:
        """Lines ``start``-``end`` of ``read`` (1-based, inclusive) as HTML, kept while the text stays the
        same (reopening a long file at another line does not colour it again; docs/web.md). A window of a
        longer file is coloured alone: a comment or string open above it may be coloured as code."""
        key = (name, read.path, hash(tuple(read.lines)), start, end)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key][0]
        prefix = f"/symbol?{urllib.parse.urlencode({'codebase': name})}&name="
        lines = code.highlighted(read.path, read.lines[start - 1:end], lambda n: prefix + urllib.parse.quote(n))
        size = sum(map(len, lines))
        with self._lock:
            if key not in self._recent:
                self._recent[key] = (lines, size)
                self._recent_bytes += size
            while self._recent_bytes > COLOURED_BYTES and len(self._recent) > 1:
                self._recent_bytes -= self._recent.popitem(last=False)[1][1]
        return lines

    def symbol(self, request: Request) -> Response:
        """``/symbol?codebase=&name=``: where ``name`` is defined (and a link to its uses)."""
        return self._names(request, "definitions")

    def refs(self, request: Request) -> Response:
        """``/refs?codebase=&name=``: where the identifier ``name`` is used, line by line."""
        return self._names(request, "uses")

    def _names(self, request: Request, kind: str) -> Response:
        name, ident = request.query_params.get("codebase", ""), request.query_params.get("name", "")
        try:
            codebase = self._codebase(name)
        except CodiiError as err:
            return self._page(request, "error.html", {"error": what(err), "hint": words(err.hint)},
                              _status(err) if name else 400)
        try:
            offset = _offset(request.query_params.get("offset", "0"))
            found = (service.find_symbol(codebase, ident, limit=50, offset=offset) if kind == "definitions" else
                     service.find_references(codebase, ident, limit=200, offset=offset))
        except CodiiError as err:  # a bad name is a bad request, not a missing page
            return self._page(request, "error.html", {"error": what(err), "hint": words(err.hint)},
                              400 if isinstance(err, UsageError) else _status(err))
        return self._page(request, "names.html", {"kind": kind, "name": name, "ident": ident, "found": found,
                                                   "offset": offset, "page": request.url.path})

    def code_css(self, request: Request) -> Response:
        return Response(self._css, media_type="text/css", headers={"Cache-Control": ASSET_CACHE})

    def _codebase(self, name: str) -> service.Codebase:
        """The served codebase called ``name``. Raises UsageError: none is (nothing else is readable)."""
        served = self.handler.served()
        if not name:  # a new user's /symbol?name=url_for read "no codebase '' is served here"
            raise UsageError("the codebase parameter is missing", "the search page's links carry it")
        if name not in served:
            raise UsageError(f"no codebase {name!r} is served here", "the search page lists the ones that are")
        return served[name]

    def _groups(self, answer: service.Answer) -> list[dict]:
        """The answer's results by file, in the order files first rank; each chunk's lines numbered
        as the file's, the query's words marked."""
        slugs = {cb.shown: name for name, cb in self.handler.served().items()}
        groups: dict[tuple, dict] = {}
        for rank, r in enumerate(answer.results, 1):
            where = r.codebase or answer.codebase or ""
            group = groups.setdefault((where, r.path), {"name": slugs.get(where), "codebase": where, "path": r.path,
                                                         "chunks": []})
            group["chunks"].append({"rank": rank, "r": r, "lines": [
                (n, code.marked(text.removesuffix("\r"), answer.terms))
                for n, text in numbered_lines(r.content, r.start_line, r.end_line)]})
        return list(groups.values())

    def _page(self, request: Request, template: str, context: dict, status: int = 200) -> HTMLResponse:
        response = self.templates.TemplateResponse(request, template, {**context, "status": self._status()},
                                                   status_code=status)
        response.headers.update(SECURITY_HEADERS)
        return response

    def _status(self) -> dict:
        """The status line: codebases served, vectors done/total, the last build, how many are watched."""
        served = self.handler.served()
        done = total = watched = 0
        last = None
        for cb in list(served.values())[:STATUS_MEMBERS]:
            try:
                st = service.status(cb, check_stale=False)
            except CodiiError:
                continue
            vectors = st.get("vectors") or {}
            done, total = done + vectors.get("done", 0), total + vectors.get("total", 0)
            last = max(filter(None, (last, st.get("last_indexed_at"))), default=None)
            watched += bool(st.get("watched_by"))
        return {"codebases": len(served), "names": sorted(served), "done": done, "total": total,
                "last": service.iso(last) if last else None, "watched": watched,
                "workspaces": self.handler.workspaces + ([self.handler.shards.name] if self.handler.shards else [])}


class _Assets(StaticFiles):
    """The page's CSS and script, kept by browsers (their URLs change with their content)."""

    def file_response(self, *args, **kwargs) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = ASSET_CACHE
        return response


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def _params(request: Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out


def _span(text: str) -> tuple[int, int]:
    """``A-B`` (or ``A``) as lines to mark; (0, -1) for none or a malformed one."""
    first, _, last = text.partition("-")
    if not first.isdigit() or (last and not last.isdigit()):
        return 0, -1
    return int(first), int(last or first)


def _window(total: int, first: int, start: int | None) -> tuple[int, int]:
    """The lines (1-based, inclusive) the view of a ``total``-line file shows: at most :data:`VIEW_LINES`,
    from ``start`` when given, else from a little above the first marked line ``first`` (0: none)."""
    if total <= VIEW_LINES:
        return 1, total
    if start is None:
        start = first - VIEW_LINES // 10 if first else 1
    start = max(1, min(start, total - VIEW_LINES + 1))
    return start, start + VIEW_LINES - 1


def _view_from(line: int, hl: str) -> str:
    """The query string of the file view from ``line``, the same lines (``hl``) marked."""
    return "?" + urllib.parse.urlencode({"from": line, **({"hl": hl} if hl else {})})


def _status(err: CodiiError) -> int:
    return 404 if isinstance(err, UsageError) else 503


def _offset(text: str) -> int:
    """The ``offset`` of a names page (where the next page goes on), a whole number from 0.

    Raises:
        UsageError: anything else.
    """
    if not text.isdigit() or len(text) > 18:
        raise UsageError(f"must be a whole number from 0, got {text[:40]!r}", field="offset")
    return int(text)
