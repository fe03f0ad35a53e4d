"""What the HTTP face answers, independent of the server that carries it: ``(status code, JSON body)``.

``GET /search?q=&limit=&mode=&workspace=`` (also ``ext`` (repeatable), ``glob``, ``language``,
``group_by``, ``max_tokens``, ``rerank`` and ``codebase``, one member searched alone) answers with the
search answer every face gives (:class:`codii_sql.service.Answer`, the CLI's ``search --json``),
merged across the workspace's shards (its codebases' indexes) as that search merges. The shards are
read only: each is searched at its last committed state (a build elsewhere publishes new states),
over one connection per index kept open between requests. ``GET /grep?q=PATTERN&codebase=NAME`` (also
``literal``, ``ignore_case``, ``word``, ``multiline``, ``glob`` and ``type`` (repeatable), ``context``, ``sort``,
``limit``, ``max_tokens``) answers with the grep answer every face gives (``codii_sql.service.grep``), one
codebase at a time. ``GET /healthz`` says what is served.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import time
from collections.abc import Mapping, Sequence

from .. import service
from ..errors import CodiiError, UsageError
from .words import what, words

#: The query parameters ``/search`` knows; any other is refused, so a typo is not silently ignored.
SEARCH_PARAMS = frozenset({"q", "limit", "mode", "workspace", "ext", "glob", "language", "group_by", "max_tokens",
                           "rerank", "codebase", "role", "grep"})
#: How to ask, told with a refused request.
USAGE = ("GET /search?q=QUERY[&limit=10][&mode=hybrid|bm25|vector][&workspace=NAME][&codebase=PATH][&max_tokens=N]; "
         "GET /grep?q=PATTERN&codebase=NAME; GET /healthz lists the workspaces served")
#: The query parameters ``/grep`` knows; ``glob`` and ``type`` may repeat.
GREP_PARAMS = frozenset({"q", "codebase", "literal", "ignore_case", "word", "glob", "type", "role", "context", "sort",
                         "limit", "max_tokens", "multiline"})
#: Matching lines a ``/grep`` answer shows by default and at most.
GREP_LIMIT, MAX_GREP_LIMIT = 200, 10_000


class SearchHandler:
    """Answers for the workspaces ``names`` (the first is the default of ``/search``) and the folder
    of index files ``shards`` (served as a workspace named after the folder; the default when no
    workspace is served); with ``watch``, its own watchers keep the members with a source fresh.

    Raises:
        UsageError: nothing to serve, an unknown or empty workspace, or a shard folder that is none
            (checked at start, so a server never starts serving nothing).
    """

    def __init__(self, names: Sequence[str], shards: str | None = None, *, watch: bool = True):
        if not names and shards is None:
            raise UsageError("serve --http needs something to serve",
                             "pass --workspace NAME (see `codii-sql workspace`) or --shards DIR (a folder of .db files)")
        self.workspaces = [service.get_workspace(name).name for name in names]
        self.shards = service.ShardFolder(shards) if shards is not None else None
        if self.shards is not None and self.shards.name.lower() in self.workspaces:
            raise UsageError(f"the shard folder {self.shards.folder} has a served workspace's name",
                             "rename the folder, or serve the workspace from another server")
        # Its own watchers keep the served codebases fresh, as the MCP server's do: a new user's edit was
        # "not there" for /grep and /search until someone rebuilt ($CODII_SQL_WATCH=0 or --no-watch: off).
        self.session = service.Session(by="http")
        self.session.following.enabled = self.session.following.enabled and watch
        self.indexes = self.session.indexes
        self.started = time.time()

    def search(self, request: service.SearchRequest) -> service.Answer:
        """``request`` answered from the served indexes, each brought up to date first (see :meth:`fresh`)."""
        self.fresh()
        return service.search(request, indexes=self.indexes)

    def grep(self, request: service.GrepRequest) -> service.GrepAnswer:
        """``request`` answered as :meth:`search` answers."""
        self.fresh()
        return service.grep(request)

    def fresh(self) -> None:
        """Bring each served codebase with a source up to date: the first time by a lexical update, then
        followed by a watcher, the changes it has heard of committed before this answer (at most
        :data:`~codii_sql.service.following.SETTLE_SECONDS`; one made within a wake, ~0.1 s, before
        may be missed: waiting for that wake cost every request 50-75 ms); nothing when watching is off."""
        self.session.following.catch_up(*self.served().values(), events=False)

    def answer(self, path: str, params: Mapping[str, Sequence[str]], method: str = "GET") -> tuple[int, dict]:
        """The status code and JSON body for ``method path?params`` (each parameter's values in order)."""
        if method not in ("GET", "HEAD"):
            return 405, _error(f"{method} is not answered here", "use GET /search?q=... or GET /healthz")
        if path in ("/healthz", "/healthz/"):
            return 200, self.health()
        if path not in ("/search", "/search/", "/grep", "/grep/"):
            return 404, _error(f"no such endpoint {path!r}", "use GET /search?q=..., /grep?q=... or GET /healthz")
        try:
            if path.startswith("/grep"):
                return 200, self.grep(self.grep_request_of(params)).to_dict(words)
            answer = self.search(self.request_of(params))
        except UsageError as err:
            return 400, _error(what(err), words(err.hint) or USAGE)
        except CodiiError as err:
            return 503, _error(what(err), words(err.hint) or "the shards could not be searched; try again")
        return 200, answer.to_dict(words)

    def health(self) -> dict:
        """``{"status": "ok" | "degraded", "workspaces": [{"name", "codebases", "indexed", ["left_out": {status:
        count}]}], ["shards": {"name", "folder", "files": [names], ["failed": {name: why}]}], "started_at"}``: a
        member that is failed (its index cannot be read), missing or not indexed is left out of every search, and
        so is a shard file that cannot be read; the status is then ``degraded`` (it said "ok" of a workspace whose
        one index was cut short while /search answered 503, and of 3 of 7 shards failing every search)."""
        rows = []
        for name in self.workspaces:
            ws = service.get_workspace(name)
            states = collections.Counter(m["status"] for m in service.describe(ws, check_stale=False)["members"])
            left_out = {k: n for k, n in sorted(states.items()) if k not in _SEARCHABLE}
            searchable = sum(states.values()) - sum(left_out.values())
            rows.append({"name": name, "codebases": len(ws.paths), "indexed": searchable,
                         **({"left_out": left_out} if left_out else {})})
        unreadable = self.shards.unreadable(self.indexes) if self.shards is not None else {}
        out = {"status": "degraded" if unreadable or any("left_out" in r for r in rows) else "ok", "workspaces": rows,
               "started_at": service.iso(self.started)}
        if self.shards is not None:
            out["shards"] = {"name": self.shards.name, "folder": str(self.shards.folder),
                             "files": [p.name for p in self.shards.files()],
                             **({"failed": unreadable} if unreadable else {})}
        return out

    def request_of(self, params: Mapping[str, Sequence[str]]) -> service.SearchRequest:
        """The search request of a ``/search`` query string.

        Raises:
            UsageError: a missing query, an unknown parameter, workspace, member or mode, a bad number.
        """
        unknown = sorted(set(params) - SEARCH_PARAMS)
        if unknown:
            raise UsageError(f"unknown parameter {unknown[0]!r}", f"/search takes {', '.join(sorted(SEARCH_PARAMS))}")
        repeated = sorted(k for k, v in params.items() if len(v) > 1 and k != "ext")
        if repeated:
            raise UsageError(f"{repeated[0]} is given {len(params[repeated[0]])} times", "give it once (only ext repeats)")
        one = {k: v[-1] for k, v in params.items() if v}
        query = one.get("q", "")
        if not query.strip():
            raise UsageError("missing query", "GET /search?q=where+are+retries+handled")
        served = self.workspaces + ([self.shards.name.lower()] if self.shards is not None else [])
        workspace = (one.get("workspace") or served[0]).lower()
        if workspace not in served:
            raise UsageError(f"workspace {workspace!r} is not served here", f"served: {', '.join(served)}")
        mode = one.get("mode", "hybrid")
        if mode not in service.MODES:
            raise UsageError(f"mode {mode!r} is not one of {', '.join(service.MODES)}")
        group_by = one.get("group_by", "chunk")
        if group_by not in ("chunk", "file"):
            raise UsageError(f"group_by {group_by!r} is not chunk or file")
        rerank = one.get("rerank", "false")
        if rerank not in ("true", "false", "1", "0"):
            raise UsageError(f"rerank {rerank!r} is not true or false")
        opts = service.SearchOptions(limit=_number(one.get("limit", "10"), "limit", 1, service.MAX_LIMIT), mode=mode,
                                     exts=[e for e in params.get("ext", []) if e.strip()], glob=one.get("glob"),
                                     language=one.get("language"), role=(one.get("role") or "").lower() or None,
                                     grep=one.get("grep"),
                                     group_by_file=group_by == "file",
                                     rerank=rerank in ("true", "1"),
                                     max_tokens=_number(one["max_tokens"], "max_tokens", service.MIN_TOKENS,
                                                        service.MAX_TOKENS) if "max_tokens" in one else None)
        codebase = _named_in(self.served(), one["codebase"]) if one.get("codebase") else None
        if codebase is not None:  # a codebase by its short name (the page's links) or as answers name it
            return service.SearchRequest(query, opts, [codebase.shown],
                                         update=False)
        if workspace not in self.workspaces:  # the shard folder: a shard by its name, or every one
            return service.SearchRequest(query, opts, [one["codebase"]] if one.get("codebase") else [],
                                         shards=str(self.shards.folder), update=False)
        if one.get("codebase"):
            return service.SearchRequest(query, opts, [self._member(workspace, self._named(workspace, one["codebase"]))],
                                         update=False)
        return service.SearchRequest(query, opts, workspace=workspace, update=False)

    def grep_request_of(self, params: Mapping[str, Sequence[str]]) -> service.GrepRequest:
        """The grep request of a ``/grep`` query string, over one served codebase (``codebase``: its short
        name, or a path inside a member; may be left out when one codebase is served).

        Raises:
            UsageError: a missing pattern, an unknown or repeated parameter, an unknown codebase, a bad number.
        """
        unknown = sorted(set(params) - GREP_PARAMS)
        if unknown:
            raise UsageError(f"unknown parameter {unknown[0]!r}", f"/grep takes {', '.join(sorted(GREP_PARAMS))}")
        repeated = sorted(k for k, v in params.items() if len(v) > 1 and k not in ("glob", "type", "role"))
        if repeated:
            raise UsageError(f"{repeated[0]} is given {len(params[repeated[0]])} times", "give it once (only glob, "
                                                                                          "type and role repeat)")
        one = {k: v[-1] for k, v in params.items() if v}
        if not one.get("q"):
            raise UsageError("missing pattern", "GET /grep?q=def+parse_&codebase=NAME")
        served = self.served()
        name = one.get("codebase") or (next(iter(served)) if len(served) == 1 else "")
        if (named := _named_in(served, name)) is not None:
            where = named.shown
        else:
            where = self._any_member(name, served)
        flag = {k: _flag(one.get(k, "false"), k) for k in ("literal", "ignore_case", "word", "multiline")}
        context = _number(one.get("context", "0"), "context", 0, service.MAX_CONTEXT)
        return service.GrepRequest([one["q"]], fixed=flag["literal"], ignore_case=flag["ignore_case"],
                                   word=flag["word"], paths=[where], globs=list(params.get("glob", [])),
                                   multiline=flag["multiline"], multiline_dotall=flag["multiline"],
                                   types=list(params.get("type", [])), roles=[r.lower() for r in params.get("role", [])],
                                   before=context, after=context, max_columns=service.SHOWN_LINE_CHARS,
                                   sort=one.get("sort", "path"),
                                   limit=_number(one.get("limit", str(GREP_LIMIT)), "limit", 1, MAX_GREP_LIMIT),
                                   max_tokens=_number(one["max_tokens"], "max_tokens", service.MIN_TOKENS,
                                                      service.MAX_TOKENS) if "max_tokens" in one else None,
                                   update=False)

    def _any_member(self, name: str, served: dict) -> str:
        """``name`` when it is a path inside a member of a served workspace.

        Raises:
            UsageError: it is none (or no name was given while several codebases are served).
        """
        for workspace in self.workspaces if name else []:
            with contextlib.suppress(UsageError):
                return self._member(workspace, self._named(workspace, name))
        raise UsageError(f"codebase {name!r} is not served here" if name else "several codebases are served",
                         f"pass codebase=, one of: {', '.join(served)}")

    def served(self) -> dict[str, service.Codebase]:
        """Every codebase served, by a short name for links (its folder's or file's name; the same
        name twice gets its path's hash): the workspaces' members that are here, and the shards."""
        found: list[service.Codebase] = []
        for name in self.workspaces:
            codebases, *_ = service.members_of(list(service.get_workspace(name).paths))
            found += codebases
        if self.shards is not None:
            found += [service.Codebase.index_alone(p, p.stem) for p in self.shards.files()]
        names = [cb.db_path.stem if cb.alone else cb.root.name for cb in found]
        return {(n if names.count(n) == 1 else f"{n}-{hashlib.sha1(str(cb.db_path).encode()).hexdigest()[:6]}"): cb
                for n, cb in zip(names, found)}

    def _named(self, workspace: str, name: str) -> str:
        """The member of ``workspace`` whose folder is called ``name`` (its short name, as links give it) when
        it is not served, its index gone (cleared meanwhile: a new user was told it was no member, with a hint
        that listed it); else ``name``."""
        return next((m for m in service.get_workspace(workspace).paths if os.path.basename(m.rstrip("/")) == name),
                    name)

    def _member(self, workspace: str, codebase: str) -> str:
        """``codebase`` when it names a member of ``workspace`` (its folder, or a folder inside one):
        nothing outside the served codebases is searched.

        Raises:
            UsageError: it names no member.
        """
        wanted = os.path.realpath(codebase)
        members = service.get_workspace(workspace).paths
        for member in members:
            root = os.path.realpath(member)
            if wanted == root or wanted.startswith(root.rstrip(os.sep) + os.sep):
                return wanted
        # the members named here: /healthz, which a new user was sent to, counts them only
        listed = ", ".join(members[:5]) + (f" and {len(members) - 5} more" if len(members) > 5 else "")
        raise UsageError(f"codebase {codebase!r} is no member of workspace {workspace!r}",
                         f"pass one of its members or a folder inside one: {listed}")


def _number(text: str, name: str, low: int, high: int) -> int:
    """``text`` as a whole number in ``low..high``. Raises UsageError otherwise."""
    value = int(text) if text.isascii() and text.isdigit() else low - 1
    if not low <= value <= high:
        raise UsageError(f"{name} should be a whole number from {low} to {high} (got {text!r})")
    return value


def _flag(text: str, name: str) -> bool:
    """``text`` as a boolean parameter. Raises UsageError unless true, false, 1 or 0."""
    if text not in ("true", "false", "1", "0"):
        raise UsageError(f"{name} {text!r} is not true or false")
    return text in ("true", "1")


def _error(message: str, hint: str) -> dict:
    return {"error": message, "hint": hint}


#: Member states a search reads (:func:`~codii_sql.service.describe`): the others leave the member out.
_SEARCHABLE = frozenset({"indexed", "stale", "indexing", "remote"})


def _named_in(served: dict[str, service.Codebase], name: str) -> service.Codebase | None:
    """The served codebase ``name`` names: by its short name, or as answers name it (its root, a shard's file
    path: /grep refused the path /search took and its own answers gave, a new user), or a shard by its file name."""
    return served.get(name) or next((cb for cb in served.values()
                                     if name == cb.shown or cb.alone and name == cb.db_path.name), None)
