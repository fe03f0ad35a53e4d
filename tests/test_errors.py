"""Errors as data: what happened and a remedy, worded by each face in its own terms."""

from __future__ import annotations

import pickle

import pytest

from codii_sql.cli import words as cli_words
from codii_sql.errors import REMEDIES, IndexMismatchError, Remedy, UsageError
from codii_sql.http import words as http_words
from codii_sql.mcp import words as mcp_words

FACES = {"cli": cli_words, "mcp": mcp_words, "http": http_words}


@pytest.mark.parametrize("face", FACES)
def test_every_face_words_every_remedy(face):
    assert set(FACES[face].SENTENCES) == set(REMEDIES)
    for kind in REMEDIES:
        said = FACES[face].words(Remedy(kind, {"root": "/src/app", "db": "/i/app.db", "command": "codii-sql x",
                                               "asked": "local", "recorded": "ollama:m"}))
        assert said and "{" not in said and "\n" not in said, (face, kind, said)


def test_one_remedy_three_wordings_and_no_advice_parsed_from_a_message():
    err = IndexMismatchError("index a.db was built with model_id='x', this version uses 'y'",
                             Remedy("force_build", {"root": "/src/app"}))
    assert cli_words.message(err).endswith(": `codii-sql build /src/app --force` rebuilds it")
    assert mcp_words.message(err).endswith(": call index_codebase with path='/src/app' and force=true")
    assert "on the server" in http_words.words(err.hint)
    assert str(err) == "index a.db was built with model_id='x', this version uses 'y': rebuild the index with a forced build"


def test_a_field_is_named_as_each_face_names_it():
    err = UsageError("must be between 100 and 1,000,000", field="max_tokens")
    assert cli_words.message(err) == "--max-tokens must be between 100 and 1,000,000"
    assert mcp_words.message(err) == "max_tokens must be between 100 and 1,000,000"
    assert http_words.what(err) == "max_tokens must be between 100 and 1,000,000"


def test_errors_keep_their_remedy_across_processes():
    """Ray tasks and the build daemon send errors between processes: the remedy must survive."""
    err = pickle.loads(pickle.dumps(UsageError("bad glob", Remedy("retry"), field="glob")))
    assert isinstance(err, UsageError) and err.hint == Remedy("retry") and err.field == "glob"
    with pytest.raises(ValueError, match="unknown remedy"):
        Remedy("make_coffee")


def test_the_cli_quotes_the_paths_of_the_commands_it_suggests():
    """A fresh user's hint read `codii-sql build /tmp/My Projects/app --vectors`: two arguments to a shell."""
    assert cli_words.words(Remedy("embed_vectors", {"root": "/tmp/My Projects/app"})) == \
        "`codii-sql build '/tmp/My Projects/app' --vectors` embeds them"
    assert cli_words.words(Remedy("force_build", {"root": "/r", "db": None})) == "`codii-sql build /r --force` rebuilds it"
    # An agent pastes the command an MCP or HTTP hint holds: quoted there too ('`x`' would have run x).
    for face in (mcp_words, http_words):
        hint = face.words(Remedy("embed_vectors", {"root": "/tmp/q'uote $HOME `x`"}))
        assert "codii-sql build '/tmp/q'\"'\"'uote $HOME `x`' --vectors" in hint, hint


def test_a_line_break_without_multiline_is_refused_in_each_face_s_own_words():
    """helper 54: HTTP's /grep?q=foo%5Cnbar was told "the CLI's -U, grep_code's multiline", naming neither of its
    own parameters."""
    from codii_sql.search.pattern import GrepPattern

    with pytest.raises(UsageError) as refused:
        GrepPattern([r"foo\nbar"])
    hint = refused.value.hint
    assert cli_words.words(hint) == "pass -U (--multiline)"
    assert mcp_words.words(hint) == "call grep_code with multiline=true"
    assert http_words.words(hint) == "add multiline=true"
    with pytest.raises(UsageError) as real:  # a real line break in the pattern (helper 57: a two-line error)
        GrepPattern(["foo\nbar"])
    assert "\n" not in real.value.what and "'foo\\nbar'" in real.value.what, real.value.what


def test_a_tool_s_internal_error_reaches_the_agent_as_one_line():
    """A bug (a 500-deep file's RecursionError) reached an agent as the SDK's bare "Error executing tool
    get_file_outline", with no reason; the agent now gets its type and message in one line."""
    from mcp.server.mcpserver.exceptions import ToolError

    from codii_sql.mcp.app import agent_errors

    @agent_errors
    def get_file_outline():
        raise RecursionError("maximum recursion depth exceeded")

    with pytest.raises(ToolError) as caught:
        get_file_outline()
    said = str(caught.value)
    assert "get_file_outline" in said and "RecursionError: maximum recursion depth exceeded" in said, said
    assert "\n" not in said and "bug" in said
    # a tool's own refusal passes as it is
    @agent_errors
    def get_indexing_status():
        raise ToolError("path is empty: pass the codebase's absolute path")

    with pytest.raises(ToolError) as caught:
        get_indexing_status()
    assert str(caught.value) == "path is empty: pass the codebase's absolute path"
