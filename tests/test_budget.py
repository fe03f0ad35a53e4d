"""Token budgets: fitting answers into max_tokens (the fitting rules, and real searches over a real index)."""

from __future__ import annotations

import dataclasses

import pytest
from support.trees import write_tree

from codii_sql import service
from codii_sql.errors import UsageError
from codii_sql.search.budget import fit, json_tokens, result_overhead, tokens
from codii_sql.search.results import Result, SearchOptions
from codii_sql.text import content_lines


def _r(path: str, start: int, lines: list[str], score: float = 1.0) -> Result:
    return Result(path, start, start + len(lines) - 1, score, "python", "function", None, "\n".join(lines), False, 1,
                  "source")


def test_fit_merges_a_files_overlapping_chunks_trims_around_matches_and_drops_the_lowest():
    body = [f"    step_{i} = compute({i})" for i in range(60)]
    body[40] = "    retry_count = backoff(retry_count)"
    results = [_r("a.py", 1, ["def a():"] + body), _r("a.py", 50, body[48:58]), _r("b.py", 1, ["x = 1"] * 80),
               _r("c.py", 1, ["y = 2"] * 80, 0.1), _r("d.py", 1, ["z = 3"] * 80, 0.05)]
    out, report = fit(results, ["retry_count"], 250)
    assert report.merged == 1 and [r.path for r in out][:2] == ["a.py", "b.py"]
    assert "retry_count" in out[0].content and out[0].start_line > 1  # the lines around the match
    assert sum(tokens(r.content) + result_overhead(r) for r in out) <= 250 == report.max_tokens
    assert report.trimmed >= 1 and report.dropped >= 1 and "dropped" in report.note()
    first = content_lines(out[0].content)
    assert first == ["def a():", *body][out[0].start_line - 1:out[0].end_line]  # its lines, numbered right
    long_line, _ = fit([_r("l.py", 1, ["x = '" + "a" * 5000 + "'"])], [], 100)
    assert long_line[0].content.endswith("…[cut]\n") and len(long_line[0].content) <= 100 * 4
    whole, nothing = fit(results[2:3], [], 10_000)
    assert whole[0].content == results[2].content and nothing.note() is None


def test_a_trimmed_chunk_without_a_query_word_starts_where_it_tells_something():
    """A helper's trimmed result was `  /**` alone: a chunk holding no query word kept its first lines."""
    doc = ["  /**", "   *", "   * Set the directory for searching executables.", "   */"]
    code = ["  executableDir(path) {", *[f"    this.v{i} = compute({i});" for i in range(30)], "  }"]
    named = dataclasses.replace(_r("c.js", 10, doc + code), symbol="Command.executableDir")
    out, _ = fit([named, _r("z.py", 1, ["x = 1"] * 80)], ["unrelated"], 180)
    assert content_lines(out[0].content)[0] == "  executableDir(path) {" and out[0].start_line == 14, out[0]
    bare = _r("c.js", 10, doc + ["  }"] * 40)  # no symbol line: its first line that is more than punctuation
    out, _ = fit([bare, _r("z.py", 1, ["x = 1"] * 80)], ["unrelated"], 150)
    assert content_lines(out[0].content)[0] == "   * Set the directory for searching executables.", out[0]


def test_a_results_best_line_is_whole_where_the_budget_holds_it_and_a_lower_one_is_not_cut_to_a_part():
    """A helper's first result was cut to columns 2-78 of its 89 while two weaker one-line results were kept,
    and a lower one was cut by 7 of its 80 characters, starting mid-word."""
    long = "    raise ValueError('Maximum file multiparts in content reached: %d parts' % count_of_parts)"
    first = _r("a.py", 1, [f"    step_{i} = compute({i})" for i in range(20)] + [long])
    weak = [_r(f"w{i}.py", 1, [f"    other_{i} = value()"], 0.3) for i in range(3)]
    wide = _r("t.ts", 1, ["   * t the directory for searching executables of this command, it is here"], 0.2)
    for budget in range(120, 260, 10):
        out, report = fit([first, wide, *weak], ["maximum", "multiparts"], budget)
        assert long in content_lines(out[0].content), (budget, out[0].content)
        assert all(r.start_column is None for r in out), (budget, out)  # no line of any result cut


def test_a_trim_starts_at_the_line_holding_most_query_terms_not_most_spellings_of_one():
    """A helper's "Untrusted Host" (symfony's Request.getHost) kept `if (\\in_array($host, self::$trustedHosts))`
    (host, Hosts: one term twice) and never showed the line raising 'Untrusted Host "%s".'."""
    body = ["    public function getHost(): string", "    {", "        $host = $this->headers->get('HOST');",
            "        if (\\in_array($host, self::$trustedHosts)) {", "            return $host;", "        }",
            *[f"        $step{i} = $this->compute({i});" for i in range(20)],
            "        throw new SuspiciousOperationException(sprintf('Untrusted Host \"%s\".', $host));", "    }"]
    out, _ = fit([_r("Request.php", 1227, body), _r("z.py", 1, ["x = 1"] * 80)], ["untrusted", "host"], 200)
    assert any("Untrusted Host" in line for line in content_lines(out[0].content)), out[0].content


def test_of_lines_holding_as_many_terms_a_trim_starts_at_the_one_whose_terms_fewer_lines_hold():
    """An agent's stand-in: "panic when the same flag is defined twice" trimmed pflag's AddFlag to its first line
    naming a flag (`if flag.Shorthand == ""`, one of six), not to `panic(msg)` (one of two)."""
    body = ['\tif flag.Shorthand == "" {', "\t\treturn", "\t}", "\tif len(flag.Shorthand) > 1 {",
            '\t\tmsg := fmt.Sprintf("%q shorthand is more than one ASCII character", flag.Shorthand)',
            *[f"\t\tstep{i} := compute({i})" for i in range(12)], "\t\tpanic(msg)", "\t}",
            "\tf.shorthands[c] = flag"]
    out, _ = fit([_r("flag.go", 865, body), _r("z.go", 1, ["x := 1"] * 80)], ["panic", "flag", "defined"], 160)
    assert any("panic(msg)" in line for line in content_lines(out[0].content)), out[0].content


def test_a_lower_result_whose_matching_line_does_not_fit_whole_is_cut_around_its_match_not_dropped():
    """A helper's monolog "could not be opened in append mode" at 400 lost #2, StreamHandler.write, whose line
    raising that message did not fit whole, while #3 was kept."""
    first = _r("a.php", 1, [f"    $step{i} = compute({i});" for i in range(30)])
    raising = "            throw new \\UnexpectedValueException(sprintf('The stream or file \"%s\" could not be " \
              "opened in append mode: ' . $this->errorMessage, $this->url) . Utils::getRecordMessageForException($record));"
    second = _r("StreamHandler.php", 144, ["        if (!is_resource($this->stream)) {", raising, "        }"], 0.9)
    third = _r("c.php", 1, ["    $other = append();"], 0.5)
    for budget in (160, 170, 180, 200, 230, 260):  # cut around its match below ~190, whole above
        out, report = fit([first, second, third], ["opened", "append", "mode"], budget)
        assert [r.path for r in out][:2] == ["a.php", "StreamHandler.php"], (budget, [r.path for r in out])
        assert "append mode" in out[1].content and report.used_tokens <= budget, (budget, out[1].content)
        assert (out[1].start_column is not None) == (budget < 190), (budget, out[1])
        assert "(lower-ranked)" in (report.note() or "dropped (lower-ranked)")


def test_max_tokens_on_a_real_search_and_get_content(tmp_path, codii_home):
    files = {f"pkg/m{i}.py": "".join(f"def handler_{i}_{j}(request):\n    \"\"\"Retry request {i}.{j} with backoff.\"\"\"\n"
                                     f"    return request.retry({j})\n\n\n" for j in range(12)) for i in range(6)}
    repo = write_tree(tmp_path / "b", files)
    cb = service.open_codebase(repo)
    service.build(cb)
    def ask(query, opts):
        return service.search(service.SearchRequest(query, opts, [str(repo)], update=False))

    full = ask("retry the request with backoff", SearchOptions(limit=10))
    small = ask("retry the request with backoff", SearchOptions(limit=10, max_tokens=400))
    assert sum(tokens(r.content) + result_overhead(r) for r in small.results) <= 400 < \
        sum(tokens(r.content) + result_overhead(r) for r in full.results)
    assert small.results[0].path == full.results[0].path and small.budget.dropped > 0
    assert "max_tokens=400" in small.note(lambda hint: None) and "budget" in [n.kind for n in small.notes]
    # The least budget taken is one the whole answer keeps (two helpers' answers at 100 used 243-352).
    assert small.budget.used_tokens <= 400 and json_tokens(small.to_dict(lambda hint: None)) <= 400
    for refused_budget in (5, 100, 399):
        with pytest.raises(UsageError, match=r"must be between 400 and") as refused:
            ask("retry", SearchOptions(max_tokens=refused_budget))
    assert refused.value.field == "max_tokens"
    session = service.Session()
    part = session.content(cb, "pkg/m0.py", None, None, max_tokens=100)
    assert len(part["content"]) <= 400 and part["next_start_line"] > 1
    # As the agent reads it, numbered (a new user's 8,000-token page of short lines was 9,083 tokens).
    from codii_sql.mcp.app import numbered
    page = session.content(cb, "pkg/m0.py", None, None, max_tokens=200)
    assert 150 < tokens(numbered(page["content"], page["start_line"], page["end_line"])) <= 200


def test_a_trimmed_or_merged_span_ending_in_a_blank_line_keeps_one_line_per_number():
    """A span whose last kept line was blank lost it ('a\\n\\n' read as one line and a final newline):
    29 of 60 budgeted searches of a new user numbered every line with the first one's number."""
    from codii_sql.text import numbered_lines

    body = ["def handler(request):", "    retry = request.retry", "", "    return retry", "", "", "x = 1" * 200]
    r = _r("a.py", 10, body)
    for budget in (40, 60, 90):
        out, _ = fit([r], ["retry"], budget)
        got = numbered_lines(out[0].content, out[0].start_line, out[0].end_line)
        assert [n for n, _ in got] == list(range(out[0].start_line, out[0].end_line + 1)), (budget, out[0])
        assert all(text == body[n - 10] or text.endswith("…[cut]") for n, text in got), (budget, got)
    blank_last = Result("b.py", 1, 3, 1.0, "python", "function", None, "one\ntwo\n\n", False, 1, "source")
    blank_first = Result("b.py", 3, 4, 0.5, "python", "function", None, "\nfour\n", False, 2, "source")
    joined, report = fit([blank_last, blank_first], [], 100)  # both whole would pass 100
    assert report.merged == 1 and numbered_lines(joined[0].content, 1, joined[0].end_line) == \
        [(1, "one"), (2, "two"), (3, ""), (4, "four")]


def test_lines_that_fit_are_never_cut_into_a_mark_longer_than_the_line():
    """A new user's result ended in `      …[cut]` where the file's line was `        if (`: lines were
    measured without the newline each ends in, so two that passed were then cut into the second."""
    from codii_sql.search.budget import CUT_MARK, _focus, _trim, tokens
    from codii_sql.search.results import Result

    for n in range(40, 200):
        content = "x" * n + "\n        if (\n"
        budget = tokens(content.rstrip("\n"))  # fits without the last newline, not with it
        result = Result("a.py", 1, 2, 1.0, "python", "function", None, content, False, 1, "source")
        out = _trim(result, [], budget, _focus(result, [], None, None))
        assert CUT_MARK not in out.content and tokens(out.content) <= budget, (n, out.content)


def test_a_trimmed_result_keeps_the_lines_whose_identifiers_hold_the_query_words():
    """A new user's `keepalive expiry` at max_tokens 400 showed `def __init__(self, *,` and `def __repr__`:
    word boundaries did not see the words inside `keepalive_expiry`, which BM25 matched by its parts."""
    from codii_sql.search.budget import fit
    from codii_sql.search.results import Result

    body = "".join(f"        self.option_{i} = option_{i}\n" for i in range(30))
    content = ("    def __init__(self, *, max_connections=None,\n" + body +
               "        self.keepalive_expiry = keepalive_expiry\n" + body + "        self.keepAliveLimit = 5\n")
    hit = Result("_config.py", 170, 232, 1.0, "python", "function", "Limits.__init__", content, False, 1, "source")
    other = Result("_api.py", 1, 63, 0.5, "python", "function", "request", body * 2, False, 2, "source")
    fitted, report = fit([hit, other], ["keepalive", "expiry"], 300)
    assert report.trimmed and "self.keepalive_expiry = keepalive_expiry" in fitted[0].content, fitted[0].content
    assert fitted[0].start_line <= 201 <= fitted[0].end_line
    camel, _ = fit([hit], ["alive", "limit"], 60)
    assert "keepAliveLimit" in camel[0].content  # a camelCase identifier's parts too
    # From the line holding the most of the words (helper 3: `max_keepalive_connections` above `keepalive_expiry`).
    first = "    def __init__(self, max_keepalive_connections=None):\n" + body * 2
    both = Result("_config.py", 1, 122, 1.0, "python", "function", "Limits.__init__",
                  first + "        self.keepalive_expiry = keepalive_expiry\n" + body, False, 1, "source")
    most, _ = fit([both, other], ["keepalive", "expiry"], 200)
    assert "self.keepalive_expiry = keepalive_expiry" in most[0].content, most[0].content
    # A search's --grep: the lines it matched are the ones kept (a new user's line 182 was cut for 175-180).
    import re

    grepped, _ = fit([hit, other], ["keepalive", "expiry"], 200, lines_of=re.compile(r"self\.option_25 = "))
    assert "self.option_25 = option_25" in grepped[0].content and "keepalive" not in grepped[0].content


@pytest.mark.parametrize("max_tokens", [400, 1000, 6000])
def test_a_window_of_a_long_line_is_never_united_with_the_chunk_below_it(tmp_path, codii_home, max_tokens):
    """A new user's 200,000-character line above `def tail()`: under a budget the window of its end was
    united with the function, and the result claimed line 2 as `tail` with the window's own columns (3,177-
    3,449 of 3,449), or lines 2-4 with no columns and text from the middle of line 2."""
    line = 'BLOB = "' + "QUJD" * 50_000 + '"; marker = compute_checksum(BLOB)'
    repo = write_tree(tmp_path / "b", {"blob.py": f"x = 1\n{line}\ndef tail():\n    return marker\n"})
    service.build(service.open_codebase(repo))
    lines = (repo / "blob.py").read_text().split("\n")
    found = service.search(service.SearchRequest("marker tail", SearchOptions(limit=5, mode="bm25", max_tokens=max_tokens),
                                                 [str(repo)], update=False))
    assert {(r.start_line, r.symbol) for r in found.results} >= {(3, "tail")}
    for r in found.results:
        text = r.content.removesuffix("\n").removesuffix(" …[cut]")
        if r.start_column is None:
            assert text == "\n".join(lines[r.start_line - 1:r.end_line])
        else:
            assert r.start_line == r.end_line == 2 and r.line_chars == len(line)
            assert text == line[r.start_column - 1:r.end_column]


def test_references_and_similar_code_keep_their_whole_answer_within_the_budget(tmp_path, codii_home):
    """An agent's stand-in: find_references at max_tokens 400 came to 517 tokens of JSON, find_similar_code to
    456 while its note said ~376: their budgets counted the lines or results, not the answer's other fields."""
    files = {f"pkg/m{i}.py": "".join(f"def handler_{i}_{j}(request):\n    return request.retry({j}, request)\n\n"
                                     for j in range(15)) for i in range(8)}
    repo = write_tree(tmp_path / "b", files)
    cb = service.open_codebase(repo)
    service.build(cb)
    for budget in (400, 800, 2000):
        refs = service.find_references(cb, "request", max_tokens=budget)
        assert refs["truncated"] and json_tokens(refs) <= budget, (budget, json_tokens(refs))
        data, _ = service.Session().similar(cb, "pkg/m0.py", None, None, 10, max_tokens=budget)
        assert json_tokens(data) <= budget, (budget, json_tokens(data))
