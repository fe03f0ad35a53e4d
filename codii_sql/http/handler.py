"""What the HTTP face answers, independent of the server that carries it: ``(status code, JSON body)``.

``GET /search?q=&limit=&mode=&workspace=`` (also ``ext`` (repeatable), ``glob``, ``language`` and
``group_by``) answers with the CLI's ``search --workspace NAME --json`` object, merged across the
workspace's shards (its codebases' indexes) exactly as that search merges. The shards are read
only: each is searched at its last committed state (a build elsewhere publishes new states), over
one connection per index kept open between requests. ``GET /healthz`` says what is served.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from .. import service
from ..errors import CodiiError, UsageError

#: The query parameters ``/search`` knows; any other is refused, so a typo is not silently ignored.
SEARCH_PARAMS = frozenset({"q", "limit", "mode", "workspace", "ext", "glob", "language", "group_by"})


class SearchHandler:
    """Answers for the workspaces ``names`` (the first is the default of ``/search``).

    Raises:
        UsageError: no workspace, or an unknown or empty one (checked at start, so a server never
            starts serving nothing).
    """

    def __init__(self, names: Sequence[str]):
        if not names:
            raise UsageError("serve --http needs a workspace to serve: --workspace NAME (see `codii-sql workspace`)")
        self.workspaces = [service.get_workspace(name).name for name in names]
        self.indexes = service.OpenIndexes()
        self.started = time.time()

    def answer(self, path: str, params: Mapping[str, Sequence[str]], method: str = "GET") -> tuple[int, dict]:
        """The status code and JSON body for ``method path?params`` (each parameter's values in order)."""
        if method not in ("GET", "HEAD"):
            return 405, _error(f"{method} is not answered here", "use GET /search?q=... or GET /healthz")
        if path in ("/healthz", "/healthz/"):
            return 200, self.health()
        if path not in ("/search", "/search/"):
            return 404, _error(f"no such endpoint {path!r}", "use GET /search?q=... or GET /healthz")
        try:
            workspace, query, opts = self._request(params)
            resp = service.search_workspace(query, opts, workspace=workspace, update=False,
                                            provide=self.indexes.searcher)
        except UsageError as err:
            return 400, _error(str(err), "GET /search?q=QUERY[&limit=10][&mode=hybrid|bm25|vector][&workspace=NAME]; "
                                         "GET /healthz lists the workspaces served")
        except CodiiError as err:
            return 503, _error(str(err), "the shards could not be searched; try again")
        return 200, resp.to_dict()

    def health(self) -> dict:
        """``{"status": "ok", "workspaces": [{"name", "codebases", "indexed"}], "started_at"}``."""
        rows = []
        for name in self.workspaces:
            paths = service.get_workspace(name).paths
            codebases, _, _ = service.members_of(list(paths))
            rows.append({"name": name, "codebases": len(paths), "indexed": len(codebases)})
        return {"status": "ok", "workspaces": rows, "started_at": service.iso(self.started)}

    def _request(self, params: Mapping[str, Sequence[str]]) -> tuple[str, str, service.SearchOptions]:
        """The workspace, query and options of a ``/search`` request.

        Raises:
            UsageError: a missing query, an unknown parameter, workspace or mode, a bad limit.
        """
        unknown = sorted(set(params) - SEARCH_PARAMS)
        if unknown:
            raise UsageError(f"unknown parameter {unknown[0]!r}: /search takes {', '.join(sorted(SEARCH_PARAMS))}")
        repeated = sorted(k for k, v in params.items() if len(v) > 1 and k != "ext")
        if repeated:
            raise UsageError(f"{repeated[0]} is given {len(params[repeated[0]])} times: give it once (only ext repeats)")
        one = {k: v[-1] for k, v in params.items() if v}
        query = one.get("q", "")
        if not query.strip():
            raise UsageError("missing query: GET /search?q=where+are+retries+handled")
        workspace = (one.get("workspace") or self.workspaces[0]).lower()
        if workspace not in self.workspaces:
            raise UsageError(f"workspace {workspace!r} is not served here (served: {', '.join(self.workspaces)})")
        mode = one.get("mode", "hybrid")
        if mode not in service.MODES:
            raise UsageError(f"mode {mode!r} is not one of {', '.join(service.MODES)}")
        group_by = one.get("group_by", "chunk")
        if group_by not in ("chunk", "file"):
            raise UsageError(f"group_by {group_by!r} is not chunk or file")
        opts = service.SearchOptions(limit=_limit(one.get("limit", "10")), mode=mode, exts=list(params.get("ext", [])),
                                     glob=one.get("glob"), language=one.get("language"),
                                     group_by_file=group_by == "file")
        return workspace, query, opts


def _limit(text: str) -> int:
    """``limit`` as an int in 1..MAX_LIMIT. Raises UsageError otherwise."""
    limit = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= limit <= service.MAX_LIMIT:
        raise UsageError(f"limit should be a whole number from 1 to {service.MAX_LIMIT} (got {text!r})")
    return limit


def _error(message: str, hint: str) -> dict:
    return {"error": message, "hint": hint}
