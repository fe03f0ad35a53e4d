"""The HTTP search face (serve --http): the CLI's workspace JSON over GET /search, and GET /healthz."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner
from support import servers
from support.trees import SAMPLE, SHOP, write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.errors import UsageError
from codii_sql.http import SearchHandler


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def team(tmp_path):
    """A workspace ``team`` of the sample repository and the shop, both built with the real model."""
    http, shop = write_tree(tmp_path / "http", SAMPLE), write_tree(tmp_path / "shop", SHOP)
    assert run("build", http, shop).exit_code == 0
    assert run("workspace", "add", "team", http, shop).exit_code == 0
    return http.resolve(), shop.resolve()


def _cli_json(query: str, *extra) -> dict:
    result = run("search", query, "--workspace", "team", "--json", "--no-update", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _same(a: dict, b: dict) -> None:
    """Equal answers but for the time each took and the words of their notes' hints (each face names its own
    way to act: `--path ROOT` on the command line, `codebase=ROOT` over HTTP); the notes' kinds are equal."""
    assert {k: v for k, v in a.items() if k not in ("seconds", "note")} == \
        {k: v for k, v in b.items() if k not in ("seconds", "note")}
    assert ("note" in a) == ("note" in b)


def test_the_handler_answers_as_the_cli_does(team):
    handler = SearchHandler(["TEAM"])
    status, body = handler.answer("/search", {"q": ["retry with exponential backoff"], "limit": ["4"]})
    assert status == 200
    _same(body, _cli_json("retry with exponential backoff", "-n", "4"))
    assert body["results"][0]["symbol"] == "retry_with_backoff"
    assert {r["codebase"] for r in body["codebases"]} == {str(p) for p in team}
    status, body = handler.answer("/search", {"q": ["ReserveStock"], "mode": ["bm25"], "ext": [".go"]})
    assert status == 200 and [r["path"] for r in body["results"]] == ["inventory/stock.go"]
    _same(body, _cli_json("ReserveStock", "--mode", "bm25", "--ext", ".go"))
    assert handler.answer("/healthz", {}) == (200, {"status": "ok", "started_at": service.iso(handler.started),
                                                   "workspaces": [{"name": "team", "codebases": 2, "indexed": 2}]})
    # A member whose index cannot be read is left out of every search: health says so (it said "ok", new users).
    db = service.open_codebase(team[1]).db_path
    db.write_bytes(db.read_bytes()[:5000])
    status, health = handler.answer("/healthz", {})
    assert status == 200 and health["status"] == "degraded"
    assert health["workspaces"] == [{"name": "team", "codebases": 2, "indexed": 1, "left_out": {"damaged": 1}}]


@pytest.mark.parametrize(("params", "status", "says"), [
    ({}, 400, "missing query"),
    ({"q": ["  "]}, 400, "missing query"),
    ({"q": ["x"], "limit": ["0"]}, 400, "limit should be a whole number from 1 to 200 (got '0')"),
    ({"q": ["x"], "limit": ["ten"]}, 400, "limit should be a whole number"),
    ({"q": ["x"], "mode": ["fuzzy"]}, 400, "mode 'fuzzy' is not one of hybrid, bm25, vector"),
    ({"q": ["x"], "workspace": ["other"]}, 400, "workspace 'other' is not served here"),
    ({"q": ["x"], "lmit": ["3"]}, 400, "unknown parameter 'lmit'"),
    ({"q": ["x"], "glob": ["src/[a-"]}, 400, "glob"),
    ({"q": ["x"], "ext": ["*.go"]}, 400, "is not a file-name ending"),
])
def test_bad_requests_are_one_line_errors_with_a_hint(team, params, status, says):
    code, body = SearchHandler(["team"]).answer("/search", params)
    assert code == status and says in body["error"] and body["hint"] and "\n" not in body["error"]


def test_unknown_paths_and_workspaces(team):
    assert SearchHandler(["team"]).answer("/metrics", {})[0] == 404
    # a codebase not served is refused naming the members (/healthz, where a new user was sent, counts them)
    status, body = SearchHandler(["team"]).answer("/search", {"q": ["x"], "codebase": ["/tmp/nope"]})
    assert status == 400 and all(str(m) in body["hint"] for m in team), body
    with pytest.raises(UsageError, match="unknown workspace|no workspace"):
        SearchHandler(["nope"])
    with pytest.raises(UsageError, match="--workspace NAME"):
        SearchHandler([])
    result = CliRunner().invoke(cli, ["serve", "--workspace", "team"])
    assert result.exit_code == 2 and "--workspace goes with --http PORT" in result.output
    result = CliRunner().invoke(cli, ["serve", "--http", "8080", "--workspace", "team", "--replicas", "2"])
    assert result.exit_code == 2 and "--replicas counts Ray Serve replicas: pass --ray too" in result.output


def test_a_member_whose_index_was_cleared_is_named_as_not_indexed_by_its_short_name(team):
    """A new user cleared one member's index, then asked /search and /grep for it by the short name the page
    links use: 'is no member of workspace' (with a hint that listed it) and 'not served here'."""
    _, shop = team
    handler = SearchHandler(["team"])
    assert run("clear", shop, "--yes").exit_code == 0
    for path, params in (("/search", {"q": ["ReserveStock"], "codebase": ["shop"]}),
                         ("/grep", {"q": ["ReserveStock"], "codebase": ["shop"]})):
        status, body = handler.answer(path, params)
        assert status >= 400 and "not indexed" in body["error"] and "no member" not in body["error"], (path, body)


def test_ray_missing_is_a_usage_error(team, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as on a machine without the extra
    result = CliRunner().invoke(cli, ["build", str(team[0]), "--ray", "local"])
    assert result.exit_code == 2 and 'pip install "codii-sql[ray]"' in result.output


@pytest.mark.slow
def test_a_real_server_answers_over_http_and_stops_on_ctrl_c(team):
    port = servers.free_port()
    proc = servers.start(["--workspace", "team"], port)
    try:
        url = f"http://127.0.0.1:{port}"
        got = httpx.get(f"{url}/search", params={"q": "follow HTTP redirects", "limit": 3}, timeout=30)
        assert got.status_code == 200 and got.headers["content-type"] == "application/json"
        _same(got.json(), _cli_json("follow HTTP redirects", "-n", "3"))
        assert got.json()["results"][0]["path"] == "app/http.py"
        post = httpx.post(f"{url}/search", params={"q": "x"}, timeout=30)
        assert post.status_code == 405 and post.json()["error"] == "POST is not answered here"
        bad = httpx.get(f"{url}/search", params={"q": "x", "mode": "fuzzy"}, timeout=30)
        assert bad.status_code == 400 and "mode 'fuzzy'" in bad.json()["error"]
        assert httpx.get(f"{url}/nowhere", timeout=30).status_code == 404
        # DNS rebinding: a page of evil.example resolving its name to 127.0.0.1 sends its own Host.
        rebound = httpx.get(f"{url}/search", params={"q": "redirects"}, headers={"Host": "evil.example"}, timeout=30)
        assert rebound.status_code == 400 and "results" not in rebound.text
        assert httpx.get(f"{url}/healthz", headers={"Host": f"localhost:{port}"}, timeout=30).status_code == 200
        # The server's one URL answers for both codebases: each path printed under its root (a new user's
        # text listing mixed lib/utils.js and tests/test_requests.py of two projects, unnamed)
        both = run("search", "order total with tax, or retry with backoff", "--path", url, "-n", "10")
        named = {str(p) for p in team if any(f"{p}/" in line for line in both.stdout.splitlines())}
        assert both.exit_code == 0 and named == {str(p) for p in team}, both.stdout
    finally:
        code, err = servers.stop(proc)
    assert code == 0 and "Serving team on http://127.0.0.1:" in err and "Traceback" not in err
    assert "Warning" not in err  # loopback only: nothing to warn of


def test_a_real_server_answers_from_the_files_as_they_are_now(team):
    """A new user appended a function to a served file: /grep and /search said it was not there (the server
    read the last build's state) while /file showed it. The server's watchers keep its codebases fresh."""
    http_root, _ = team
    with servers.serving(["--workspace", "team"]) as (_, url):
        def grepped() -> int:
            got = httpx.get(f"{url}/grep", params={"q": "http_fresh_marker_fn", "codebase": "http"}, timeout=60)
            assert got.status_code == 200, got.text
            return got.json()["matched_lines"]

        assert grepped() == 0
        with open(http_root / "app" / "http.py", "a") as source:
            source.write("\n\ndef http_fresh_marker_fn():\n    return 1\n")
        deadline = time.monotonic() + 30  # no rebuild: the server's watcher commits it within ~2 s
        while grepped() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert grepped() == 1
        found = httpx.get(f"{url}/search", params={"q": "http_fresh_marker_fn", "mode": "bm25"}, timeout=60).json()
        assert found["results"][0]["symbol"] == "http_fresh_marker_fn", found
        assert {w["by"] for w in service.status(service.open_codebase(str(http_root)))["watched_by"]} == {"http"}


def test_other_methods_repeated_parameters_and_odd_limits_are_refused(team):
    handler = SearchHandler(["team"])
    status, body = handler.answer("/search", {"q": ["retry"]}, "POST")
    assert status == 405 and body["error"] == "POST is not answered here"
    status, body = handler.answer("/search", {"q": ["retry", "render"]})
    assert status == 400 and body == {"error": "q is given 2 times", "hint": "give it once (only ext repeats)"}
    for odd in ("３", "+3", "2.5", ""):
        assert handler.answer("/search", {"q": ["retry"], "limit": [odd]})[0] == 400
    status, body = handler.answer("/search", {"q": ["retry"], "ext": [".py", ".go"]})
    assert status == 200 and body["results"]


def test_a_port_in_use_is_one_line_before_anything_starts(team):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--http", str(port), "--workspace", "team"])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use): pick another --http PORT" in result.output
    for host in ("999.1.1.1", "10.255.255.1"):  # no such address, not this machine's: the host is wrong
        result = CliRunner().invoke(cli, ["serve", "--http", str(port), "--host", host, "--workspace", "team"])
        assert result.exit_code == 2 and f"cannot listen on {host}: not an address of this machine" in result.output


def test_unreachable_or_malformed_ray_addresses_are_one_line_at_once(team):
    pytest.importorskip("ray")

    def build(address: str) -> subprocess.CompletedProcess:  # its own process: never a Ray this one joined
        return subprocess.run([sys.executable, "-m", "codii_sql.cli", "build", str(team[0]), "--ray", address],
                              capture_output=True, text=True, timeout=120)

    started = time.monotonic()
    result = build(f"127.0.0.1:{servers.free_port()}")
    assert result.returncode == 2 and "cannot reach the Ray cluster at 127.0.0.1:" in result.stderr
    assert time.monotonic() - started < 30  # Ray alone retries an absent head for minutes
    for bad in ("nonsense", "127.0.0.1:99999", "ray://:10001"):
        result = build(bad)
        assert result.returncode == 2 and "is not a Ray address: use host:port" in result.stderr, result.stderr


def test_the_page_marks_the_query_words_in_identifiers_and_escapes_every_line():
    from codii_sql.http import code

    shown = code.marked('def parse_header(retries): raise HTTPError("<b>")  # retry', ["header", "retry", "http"])
    assert shown == ('def parse_<mark>header</mark>(<mark>retries</mark>): raise <mark>HTTP</mark>Error('
                     '&quot;&lt;b&gt;&quot;)  # <mark>retry</mark>')
    assert "<mark>" not in code.marked("parser of pars", ["par"])  # too short to stand for a word
    lines = ['x = "<script>alert(1)</script>"\n', "def handle(request):\n", "    return request\u202e\n"]
    html = code.highlighted("a.py", lines, lambda name: f"/symbol?name={name}")
    assert len(html) == 3 and "<script>" not in "".join(html) and "\\u202e" in html[2]
    assert '<a class="nf name" href="/symbol?name=handle">handle</a>' in html[1]
    assert '<a class="name" href="/symbol?name=request">request</a>' in html[2]  # plain names: no span


def test_the_pages_grep_over_every_codebase_says_to_choose_one_in_its_own_words(team):
    """The page's codebase filter defaults to "every one"; grep there answered the API's "pass
    codebase=", a query parameter a person on the page never sees."""
    from starlette.testclient import TestClient

    from codii_sql.http.server import app

    client = TestClient(app(SearchHandler(["team"])), base_url="http://127.0.0.1")
    page = client.get("/", params={"q": "def retry_with_backoff", "mode": "grep"})
    assert page.status_code == 400 and "grep reads one codebase: choose it under filters (http, shop)" in page.text
    assert "codebase=" not in page.text.split('role="alert">')[1].split("<")[0]
    page = client.get("/", params={"q": "def retry_with_backoff", "mode": "grep", "codebase": "http"})
    assert page.status_code == 200 and "1 matching line" in page.text


def test_the_pages_grep_applies_the_forms_filters_and_says_how_many_it_shows(team, monkeypatch):
    """A new user's language, ext and role were ignored in grep mode, and a cut answer said "the first
    shown" without a number."""
    from starlette.testclient import TestClient

    from codii_sql.http import pages
    from codii_sql.http.server import app

    client = TestClient(app(SearchHandler(["team"])), base_url="http://127.0.0.1")

    def files(**form) -> set[str]:
        page = client.get("/", params={"q": "retry|backoff", "mode": "grep", "codebase": "http", **form})
        assert page.status_code == 200, page.text
        return set(re.findall(r'<h2><a href="/file/http/([^"]+)">', page.text))
    everything = files()
    assert {"app/http.py", "docs/guide.md"} <= everything
    assert files(ext=".md") == files(language="markdown") == files(role="docs") == {"docs/guide.md"}
    assert files(role="Docs") == {"docs/guide.md"}  # as language=Python is taken (role=Source was a 400)
    assert files(ext="py") == {p for p in everything if p.endswith(".py")}
    assert client.get("/", params={"q": "x", "mode": "grep", "codebase": "http", "role": "nonsense"}).status_code == 400
    # the search modes read the one ext box as grep mode does: several, by commas (`.py,.js` matched no file)
    searched = client.get("/", params={"q": "retry with backoff", "codebase": "http", "ext": ".py, .md",
                                       "role": "Source"})
    paths = set(re.findall(r'href="/file/http/([^"?#]+)', searched.text))
    assert searched.status_code == 200 and paths and all(p.endswith((".py", ".md")) for p in paths), searched.text[-500:]
    monkeypatch.setattr(pages, "GREP_LINES", 1)
    cut = client.get("/", params={"q": "retry|backoff", "mode": "grep", "codebase": "http"})
    assert "; the first 1 shown" in cut.text
    assert re.search(r"at least \d+ matching lines? in at least \d+ files?", cut.text)  # counts of what was read


def test_a_bad_name_on_the_symbol_pages_is_a_bad_request_and_an_unknown_codebase_is_not_found(team):
    from starlette.testclient import TestClient

    from codii_sql.http.server import app

    client = TestClient(app(SearchHandler(["team"])), base_url="http://127.0.0.1")
    assert client.get("/symbol", params={"codebase": "http", "name": ""}).status_code == 400
    assert client.get("/refs", params={"codebase": "http", "name": "<b>"}).status_code == 400
    assert client.get("/symbol", params={"codebase": "nowhere", "name": "x"}).status_code == 404
    # A new user's /symbol?name=url_for read "no codebase '' is served here"
    missing = client.get("/symbol", params={"name": "url_for"})
    assert missing.status_code == 400 and "the codebase parameter is missing" in missing.text, missing.text


def test_page_links_encode_a_codebase_named_with_url_characters(tmp_path):
    """A new user's codebase folder `c#sharp` linked /file/c#sharp/s.py: a fragment, not the file."""
    import html
    import re

    from starlette.testclient import TestClient

    from codii_sql.http.server import app

    odd = write_tree(tmp_path / "c#sharp %x?", {"s.py": "def odd_marker():\n    return 1\n"})
    assert run("build", odd, "--no-vectors").exit_code == 0
    assert run("workspace", "add", "odd", odd).exit_code == 0
    client = TestClient(app(SearchHandler(["odd"])), base_url="http://127.0.0.1")
    name = "c#sharp %x?"
    for page in (client.get("/", params={"q": "odd_marker", "mode": "grep", "codebase": name}),
                 client.get("/symbol", params={"codebase": name, "name": "odd_marker"})):
        assert page.status_code == 200, page.text
        links = {html.unescape(h) for h in re.findall(r'href="(/file/[^"]*)"', page.text)}
        assert links and all(h.startswith("/file/c%23sharp%20%25x%3F/s.py") for h in links), links
        assert all(client.get(h.split("#")[0]).status_code == 200 for h in links)


def test_the_names_pages_go_on_to_the_next_page(tmp_path):
    """A new user's /refs said "200 of 983 ... the rest from offset=200", and offset=200 was ignored."""
    import re

    from starlette.testclient import TestClient

    from codii_sql.http.server import app

    repo = write_tree(tmp_path / "many", {"uses.py": "def target():\n    return 1\n\n" + "".join(
        f"v{i} = target()\n" for i in range(250))})
    assert run("build", repo, "--no-vectors").exit_code == 0
    assert run("workspace", "add", "many", repo).exit_code == 0
    client = TestClient(app(SearchHandler(["many"])), base_url="http://127.0.0.1")
    first = client.get("/refs", params={"codebase": "many", "name": "target"})
    assert first.status_code == 200 and first.text.count('class="result"') == 200
    [nxt] = re.findall(r'<a rel="next" href="([^"]+)"', first.text)
    second = client.get(nxt.replace("&amp;", "&"))
    assert second.status_code == 200 and second.text.count('class="result"') == 50 and 'rel="next"' not in second.text
    assert ">250<" in second.text and "first page" in second.text
    assert client.get("/refs", params={"codebase": "many", "name": "target", "offset": "-1"}).status_code == 400


def test_a_member_cleared_and_built_again_by_another_process_keeps_the_server_quick(team):
    """A new user cleared a served member (`codii-sql clear`, which removes the watchers' notes) and built it
    again: every request of the server, for every member, then waited 5 s for a note its watcher never wrote
    again, until the server restarted, and status said nobody watched. The server now asks its watcher, and
    the watcher writes its note again."""
    http_root, _ = team
    with servers.serving(["--workspace", "team"]) as (proc, url):
        def ask() -> float:
            started = time.monotonic()
            got = httpx.get(f"{url}/search", params={"q": "ReserveStock", "mode": "bm25", "limit": 1}, timeout=60)
            assert got.status_code == 200, got.text
            return time.monotonic() - started

        ask()
        page = httpx.get(f"{url}/", params={"q": "ReserveStock", "mode": "bogus"}, timeout=60)
        assert page.status_code == 400 and "hybrid, bm25, vector, grep" in page.text  # the page offers grep too
        cleared = run("clear", http_root, "--yes")
        assert cleared.exit_code == 0
        assert f"is followed by pid {proc.pid} (an HTTP server): it builds no index by itself" in cleared.output
        assert run("build", http_root, "--no-vectors").exit_code == 0
        assert [ask() for _ in range(3)][-1] < 2.5  # the wait was 5.0 s for each, forever
        deadline = time.monotonic() + 10
        while not service.status(service.open_codebase(str(http_root)))["watched_by"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert {w["by"] for w in service.status(service.open_codebase(str(http_root)))["watched_by"]} == {"http"}
