"""search_history and explain_line through the SDK's own client over stdio, on a real git repository."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.history_repo import commit, make_history
from test_mcp import call, refused, server, wait_indexed

pytestmark = pytest.mark.slow


def test_search_history_and_explain_line_over_stdio(codii_home, tmp_path):
    root = tmp_path / "repo"
    shas = make_history(root)
    commit(root, {"deploy_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAsecretbody\n"},
           "Add the deploy key", 4)  # a private key by its content alone
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            msg = await refused(s, "search_history", path=str(root), query="Retry-After")
            assert "not indexed" in msg and "index_codebase" in msg
            await call(s, "index_codebase", path=str(root))
            await wait_indexed(s, root)
            found = await call(s, "search_history", path=str(root), query="Retry-After header", limit=2)
            assert found["results"][0]["sha"] == shas["retry"]
            assert found["results"][0]["hunks"][0]["path"] == "src/session.py" and found["history"]["commits"] == 5
            small = await call(s, "search_history", path=str(root), query="session", max_tokens=100)
            # The answer's own fields are over 100 tokens: the best commit stays, and used_tokens says what it costs.
            assert small["budget"]["max_tokens"] == 100 and len(small["results"]) == 1
            assert small["budget"]["used_tokens"] >= len(json.dumps(small)) / 4 * 0.8
            listed = await s.call_tool("search_history", {"path": str(root), "query": "Retry-After", "limit": 1})
            assert shas["retry"][:12] in listed.content[1].text and "+def retry_after_seconds" in listed.content[1].text

            told = await call(s, "explain_line", path=str(root), file="src/http_session.py", line=1)
            assert told["results"][0]["sha"] == shas["retry"] and "Honour Retry-After" in told["results"][0]["subject"]
            assert "not in a git work tree" in await refused(s, "explain_line", path=str(plain), file="a.py", line=1)
            assert "usually holds credentials" in await refused(s, "explain_line", path=str(root), file=".env", line=1)
            # A line's hunks show the file: explain_line reads only what get_content may (a new user read an
            # ignored file, a private key found by content, and files outside the codebase through it).
            assert "ignore rules" in await refused(s, "explain_line", path=str(root), file="vendor/lib.py", line=1)
            assert "private key" in await refused(s, "explain_line", path=str(root), file="deploy_key", line=2)
            for outside in ("../plain/a.py", str(plain / "a.py")):
                msg = await refused(s, "explain_line", path=str(root), file=outside, line=1)
                assert "outside" in msg or "escape" in msg or ".." in msg, msg
            assert "line" in await refused(s, "explain_line", path=str(root), file="a.py", line=0)

    asyncio.run(run())


def test_search_history_at_its_largest_fits_an_agents_limit(codii_home, tmp_path):
    """Commits of many hunks full of what JSON escapes (quotes, backslashes, tabs): at limit 50 and
    max_tokens 8000 the whole answer (text and structured) stays under 20,000 tokens (a new user's
    search_history over zod came to ~25k, the budget having counted plain text)."""
    root = tmp_path / "big"
    make_history(root)
    line = '    s = "\\"quoted\\" \\\\ back\\tslash\\t"  # fix fix fix\n'
    for day in range(6):
        commit(root, {f"pkg/m{day}_{i}.py": line * (120 + day + i) for i in range(12)}, f"fix the quoting {day}", 5 + day)

    async def run():
        async with server(codii_home, CODII_SQL_WATCH="0") as s:
            await call(s, "index_codebase", path=str(root))
            await wait_indexed(s, root)
            res = await s.call_tool("search_history", {"path": str(root), "query": "fix quoted", "limit": 50,
                                                        "max_tokens": 8000})
            size = sum(len(c.text) for c in res.content) + len(json.dumps(res.structured_content))
            assert not res.is_error and size / 4 < 20_000, size
            trace = "".join(f'  File "pkg/m{i}.py", line {i}, in fix_quoted\n    s = quoted()\n' for i in range(900))
            res = await s.call_tool("search_history", {"path": str(root), "query": trace, "limit": 50,
                                                        "max_tokens": 8000})  # a 50 KB stack trace as the query
            size = sum(len(c.text) for c in res.content) + len(json.dumps(res.structured_content))
            assert not res.is_error and size / 4 < 20_000 and len(res.structured_content["query"]) <= 201, size

    asyncio.run(run())
