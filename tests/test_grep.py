"""Indexed grep: the trigram planner, the index kept with each file, exact lines against the real rg binary."""

from __future__ import annotations

import codecs
import json
import os
import re
import shutil
import subprocess
import sys

import apsw
import httpx
import pytest
from click.testing import CliRunner
from support import servers
from support.trees import REPO_ROOT, write_tree

from codii_sql import service
from codii_sql.cli import cli
from codii_sql.codebase import Codebase
from codii_sql.errors import UsageError
from codii_sql.search import trigrams
from codii_sql.search.pattern import GrepPattern
from codii_sql.service import grepping
from codii_sql.storage.store import Store
from codii_sql.text import pack_text

RG = shutil.which("rg")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def grep(root, *patterns, **options):
    options.setdefault("paths", [str(root)])
    return service.grep(service.GrepRequest(list(patterns), update=False, **options))


def lines(answer) -> list[tuple[str, int]]:
    return [(f.path, g.line) for f in answer.files for g in f.lines if g.matched]


def built(root):
    assert run("build", root, "--no-vectors").exit_code == 0
    return root


def plan(pattern: str, flags: int = 0) -> str | None:
    return trigrams.to_fts(trigrams.required([trigrams.parse(pattern, flags)]))


def test_the_planner_keeps_every_alternative_and_every_literal_run():
    assert plan("tcp_retransmit_skb\\(").startswith('"tcp" AND "cp_"')
    assert plan("alpha_one|beta_two") == '("alp" AND "lph" AND "pha" AND "ha_" AND "a_o" AND "_on" AND "one") OR ' \
                                         '("bet" AND "eta" AND "ta_" AND "a_t" AND "_tw" AND "two")'
    assert plan("(get|set)_value") == ('("get" AND "et_" AND "t_v" AND "_va" AND "val" AND "alu" AND "lue") OR '
                                       '("set" AND "et_" AND "t_v" AND "_va" AND "val" AND "alu" AND "lue")')
    assert plan("colou?r") == '("col" AND "olo" AND "lor") OR ("col" AND "olo" AND "lou" AND "our")'
    assert plan("abc.*defg") == '"abc" AND "def" AND "efg"'
    assert plan("FooBar", 2) == plan("foobar") == '"foo" AND "oob" AND "oba" AND "bar"'  # the index folds case
    # What requires nothing: short literals, optional parts, an alternative without a trigram.
    assert plan("ab") is None and plan("(abcdef)*") is None and plan("abcdef|xy") is None
    assert plan("[^a]bcd") == '"bcd"' and plan("\\w+Error") == '"err" AND "rro" AND "ror"'
    assert plan("ÉCOLE") == '"Éco" AND "col" AND "ole"'  # the very letter: FTS5 folds it alike in file and query
    assert plan("ÉCOLE", re.IGNORECASE) == '"col" AND "ole"'  # -i: Python's folding picks, not trusted to be SQLite's


def test_the_literal_runs_checked_in_a_file_s_bytes_are_held_by_every_match():
    def runs(pattern, flags=0):
        return trigrams.required_bytes(trigrams.parse(pattern, flags), flags)

    assert runs(r"struct sk_buff \*\w+_alloc") == (b"struct sk_buff *", b"_alloc")
    assert runs(r"class \w+Mixin\b") == (b"class ", b"Mixin") and runs(r"a(bcd)+efg") == (b"bcd", b"efg")
    assert runs(r"abc\bdef(?=x)ghi") == (b"abcdefghi",)  # zero-width parts keep the run
    # What holds no run: an optional part, an alternation, case-blindness, a case-blind group, non-ASCII.
    assert runs(r"x(bcdef)?y") == runs(r"abcd|efgh") == runs("abcdef", re.IGNORECASE) == runs("(?i)abcdef") == ()
    assert runs("(?i:abc)defg") == (b"defg",) and runs("caf\u00e9s") == (b"caf",)
    # Sound on real text: every match of a pattern drawn from this repository's lines holds each run.
    checked = 0
    for path in sorted((REPO_ROOT / "codii_sql" / "search").glob("*.py")):
        text = path.read_text()
        for pattern in (r"def \w+\(self", r"return \w+\.\w+\(", r"\(\w+: str", r"if not \w+ or \w+",
                        r"import (\w+)", r"self\.\w+ = \w+"):
            for m in re.finditer(pattern, text):
                assert all(n.decode() in m.group() for n in runs(pattern)), (pattern, m.group())
                checked += 1
    assert checked > 100


def test_a_file_holding_a_pattern_s_trigrams_apart_is_read_but_not_matched(tmp_path):
    root = built(write_tree(tmp_path / "repo", {
        "apart.c": "DEFINE_X; IDTENTRY_RAW;\n", "whole.c": "DEFINE_IDTENTRY_RAW(exc)\n",
        "latin1.c": "caf\xe9\nDEFINE_IDTENTRY_RAW(x)\n".encode("latin-1"),
        "utf16.c": codecs.BOM_UTF16_LE + "DEFINE_IDTENTRY_RAW(y)\n".encode("utf-16-le"),
        "crlf.c": b"a\r\nstruct sk_buff *skb_alloc(void)\r\n"}))
    assert lines(grep(root, "DEFINE_IDTENTRY_RAW")) == [("latin1.c", 2), ("utf16.c", 1), ("whole.c", 1)]
    assert lines(grep(root, r"struct sk_buff \*\w+_alloc")) == [("crlf.c", 2)]
    assert lines(grep(root, "DEFINE_IDTENTRY_RAW", invert=True)) == [("apart.c", 1), ("crlf.c", 1), ("crlf.c", 2),
                                                                     ("latin1.c", 1)]


def test_alternatives_and_case_are_found_in_the_files_that_hold_them(tmp_path):
    root = built(write_tree(tmp_path / "repo", {
        "a.py": "x = alpha_one()\n", "b.py": "y = beta_two()\n", "c.py": "z = ALPHA_ONE\n", "d.py": "nothing here\n"}))
    assert lines(grep(root, "alpha_one|beta_two")) == [("a.py", 1), ("b.py", 1)]
    assert lines(grep(root, "ALPHA_one", ignore_case=True)) == [("a.py", 1), ("c.py", 1)]
    assert lines(grep(root, "ALPHA_ONE")) == [("c.py", 1)]
    assert lines(grep(root, "one", "beta", fixed=True)) == [("a.py", 1), ("b.py", 1)]
    answer = grep(root, "alpha_one|beta_two")
    assert answer.files_read == 3 and answer.trigrams.count(" OR ") == 1  # the index folds case; d.py never read


def test_lines_no_chunk_holds_and_windows_of_a_long_line_are_matched(tmp_path):
    long_line = "data = '" + "".join(f"tok{i:05d}_" for i in range(1000)) + "'\n"  # 10 KB: cut into windows
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": ["print(\"notebook_only\")\n"], "metadata": {},
                                      "outputs": [], "execution_count": 1}], "metadata": {}, "nbformat": 4,
                           "nbformat_minor": 5}, indent=1)
    root = built(write_tree(tmp_path / "repo", {
        "blob.py": "import os\n" + long_line, "braces.c": "int f(void) {\n  return 1;\n}\n};\n", "nb.ipynb": notebook}))
    conn = apsw.Connection(str(Codebase.open(root).db_path))  # the chunks do split that line and skip the `};`
    windows = [c for (c,) in conn.execute("SELECT content FROM chunks WHERE path = 'blob.py' AND start_line = 2 "
                                          "ORDER BY start_byte")]
    assert len(windows) > 1 and "".join(windows).rstrip("\n") == long_line.rstrip("\n")
    assert "};" not in "".join(c for (c,) in conn.execute("SELECT content FROM chunks WHERE path = 'braces.c'"))
    across = windows[0][-6:] + windows[1][:6]  # a string no chunk holds whole
    assert lines(grep(root, across, fixed=True)) == [("blob.py", 2)]
    assert lines(grep(root, "^\\};$")) == [("braces.c", 4)]
    assert lines(grep(root, 'print\\(\\\\"notebook_only')) == [("nb.ipynb", 6)]  # the JSON, as rg reads it


def test_an_edited_or_removed_file_is_grepped_as_it_is_now_and_the_trigram_table_stays_whole(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "old_marker = 1\n", "b.py": "keep_marker = 2\n"}))
    (root / "a.py").write_text("new_marker = 1\n")
    (root / "b.py").unlink()
    built(root)
    assert lines(grep(root, "old_marker")) == [] and lines(grep(root, "keep_marker")) == []
    assert lines(grep(root, "new_marker")) == [("a.py", 1)]
    conn = apsw.Connection(str(Codebase.open(root).db_path))
    conn.execute("INSERT INTO file_trigrams(file_trigrams, rank) VALUES ('integrity-check', 1)")
    assert conn.execute("SELECT count(*) FROM file_texts").fetchone()[0] == 1


def test_an_index_of_schema_5_is_upgraded_and_grepped_before_and_after_its_next_build(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "def upgraded_marker():\n    pass\n"}))
    db = Codebase.open(root).db_path
    conn = apsw.Connection(str(db))
    conn.execute("DROP TABLE file_trigrams; DROP TABLE file_texts; UPDATE meta SET value = '5' "
                 "WHERE key = 'schema_version'")
    conn.close()
    before = grep(root, "upgraded_marker")  # tables made, the file read whole since it has no row
    assert lines(before) == [("a.py", 1)] and "no trigram row yet" in before.note(lambda h: None)
    built(root)
    after = grep(root, "upgraded_marker")
    assert lines(after) == [("a.py", 1)] and not after.notes


def test_bad_patterns_say_where_and_exit_2_and_no_match_exits_1(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "x = 1\n"}))
    bad = run("grep", "(unclosed", root)
    assert bad.exit_code == 2 and "at position 0" in bad.stderr and "Traceback" not in bad.output
    assert len(bad.stderr.strip().splitlines()) == 1
    escaped = run("grep", r"a\Kb", root)  # shown as typed, not as repr() doubles it
    assert escaped.exit_code == 2 and r"'a\Kb'" in escaped.stderr, escaped.stderr
    huge = run("grep", "(" + "x" * 10_000, root)  # a 10 KB pattern's error does not echo it whole
    assert huge.exit_code == 2 and len(huge.stderr) < 400, len(huge.stderr)
    assert run("grep", "nothing_like_this", root).exit_code == 1
    huge = run("grep", "a{99999999}", root)  # the regex module compiled it for minutes (a new user's try)
    assert huge.exit_code == 2 and "more than 10,000 times" in huge.stderr
    with pytest.raises(UsageError, match="line break"):
        GrepPattern(["a\\nb"])
    for flagged in ("(?u)x = 1", "(?ui)X = 1"):  # rg's default, and Python's: a traceback and exit 1 ("no match")
        assert run("grep", "--no-update", flagged, root).exit_code == 0


def test_posix_classes_and_unicode_properties_match_as_rg_reads_them(tmp_path):
    """`[[:upper:]]{5}` is rg's ASCII class: Python's parser read it as a set and a ']', planned the
    trigram ']]]' and answered no match (a new user's, on tokio's changelog); `\\p{Greek}` was refused
    as a bad escape though the matcher takes it."""
    root = built(write_tree(tmp_path / "repo", {"a.txt": "EPOLLERR here\nÉCOLE NORMALE\n", "b.txt": "x: 0x1F\n",
                                                "c.txt": "lower only\n", "d.txt": "α = 1\nSpawnX\nSpawnx\n"}))
    assert lines(grep(root, "\\p{Greek}+")) == [("d.txt", 1)]
    assert lines(grep(root, "Spawn\\p{Lu}")) == [("d.txt", 2)] and lines(grep(root, "[\\p{Lu}]{5}")) == \
        [("a.txt", 1), ("a.txt", 2)]
    assert lines(grep(root, "\\\\p{Greek}")) == []  # an escaped backslash, then the letters
    assert lines(grep(root, "[[:upper:]]{5}")) == [("a.txt", 1), ("a.txt", 2)]  # NORMALE; É is not ASCII
    assert lines(grep(root, "0x[[:xdigit:]]{2}")) == [("b.txt", 1)]
    assert lines(grep(root, "^[[:^space:]]+ only")) == [("c.txt", 1)]
    assert lines(grep(root, "[[:upper:]]{5}", ignore_case=True)) == [("a.txt", 1), ("a.txt", 2), ("c.txt", 1),
                                                                     ("d.txt", 2), ("d.txt", 3)]
    for bad, why in (("[[:foo:]]", "unknown POSIX class 'foo' at position 1"),
                     ("[x[:^alpha:]]", "negated POSIX class beside other members at position 2"),
                     ("[[:upper:]", "unterminated character set at position 10:")):
        with pytest.raises(UsageError, match=re.escape(why)):
            GrepPattern([bad])


def test_a_literal_is_found_in_files_of_every_encoding_the_build_reads(tmp_path):
    """A file without a case-sensitive ASCII literal's bytes is skipped undecoded: one in UTF-8, Latin-1,
    UTF-16 (whose bytes never hold the literal as such) or with CRLF line ends is still found."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "utf8.txt").write_bytes("café needle_x\n".encode())
    (root / "latin1.txt").write_bytes("x\ncafé needle_x\n".encode("latin-1"))
    (root / "utf16.txt").write_bytes(codecs.BOM_UTF16_LE + "a\nneedle_x\n".encode("utf-16-le"))
    (root / "crlf.txt").write_bytes("é\r\nneedle_x\r\n".encode())
    (root / "other.txt").write_bytes("café, needle_y\n".encode())
    built(root)
    assert sorted(lines(grep(root, "needle_x"))) == [("crlf.txt", 2), ("latin1.txt", 2), ("utf16.txt", 2),
                                                     ("utf8.txt", 1)]
    assert sorted(lines(grep(root, "needle_x", word=True))) == sorted(lines(grep(root, "needle_x", ignore_case=True)))


def test_a_literal_in_any_script_narrows_by_its_trigrams_and_finds_what_rg_finds(tmp_path):
    """A new user's `Пароль` read every file and said it had no 3-character literal: a case-sensitive
    letter outside ASCII is the same letter in the file, which FTS5 folds as it folds the query."""
    root = built(write_tree(tmp_path / "repo", {
        "ru.py": "Пароль = 1\nпароль = 2\nПАРОЛЬ = 3\n", "fr.txt": "ÉCOLE café\nécole CAFÉ\n",
        "el.md": "Σίσυφος\n", **{f"f{i}.py": f"x_{i} = {i}\n" for i in range(10)}}))
    for pattern, flags in (("Пароль", []), ("ПАРОЛЬ", []), ("ÉCOLE", []), ("café", []), ("Σίσυφος", []),
                           ("[Пп]ароль", []), ("Пароль", ["-i"]), ("école", ["-i"])):
        answer = grep(root, pattern, ignore_case="-i" in flags)
        if "-i" not in flags:  # with -i, Python's folding decides which letters match: those narrow nothing
            assert not answer.scan and answer.files_read <= 2, (pattern, answer.files_read)
        if RG:
            rg = subprocess.run([RG, "-n", "--no-heading", "--no-config", *flags, "-e", pattern], cwd=root,
                                capture_output=True, text=True).stdout
            assert sorted(lines(answer)) == sorted((p, int(n)) for p, n, _ in (x.split(":", 2) for x in rg.splitlines()))


def test_a_limit_stops_lines_and_counts_and_its_note_says_which_number_is_which(tmp_path, monkeypatch):
    """A new user's `grep --limit 3 spawn` said "stopped at 28 matching lines" (the first file's count),
    and `-c`/`-l` with a limit listed every file."""
    root = built(write_tree(tmp_path / "repo", {"a.txt": "x_marker\n" * 5, "b.txt": "x_marker\n" * 2,
                                                "c.txt": "x_marker\n"}))
    shown = grep(root, "x_marker", limit=3)
    assert lines(shown) == [("a.txt", 1), ("a.txt", 2), ("a.txt", 3)] and shown.truncated
    assert "stopped at the limit of 3 matching lines: 5 counted in the 1 files read" in shown.note(lambda h: None)
    counted = grep(root, "x_marker", limit=6, counts_only=True)
    assert [(f.path, f.matches) for f in counted.files] == [("a.txt", 5), ("b.txt", 2)] and counted.truncated
    # The limit reached in the last candidate: every file was read, so the counts are whole (a helper's note
    # said "the rest not read" with nothing left to read).
    two = built(write_tree(tmp_path / "two", {"a.txt": "x_marker\n" * 5, "b.txt": "x_marker\n" * 2}))
    last = grep(two, "x_marker", limit=6)
    assert last.truncated and last.matched_lines == 7 and last.files_read == 2
    said = last.note(lambda h: None)
    assert "the limit kept 6 of the 7 matching lines" in said and "every candidate file was read" in said, said
    assert "not read" not in said
    monkeypatch.chdir(root)
    result = run("grep", "-c", "--limit", "6", "x_marker")
    assert result.exit_code == 0 and result.stdout == "a.txt:5\nb.txt:2\n" and "limit of 6" in result.stderr


def test_max_tokens_holds_the_whole_grep_answer_and_keeps_the_first_line(tmp_path):
    """`self` over MCP at max_tokens 100 answered 420 tokens (a new user): the budget counted the lines alone,
    not the answer's other fields and notes. Both views (the JSON and the path:line:text listing) fit now."""
    from codii_sql.cli.words import words

    root = built(write_tree(tmp_path / "repo", {f"m{i}.py": "".join(f"    self.value_{j} = self.compute({j})\n"
                                                                  for j in range(60)) for i in range(8)}))
    for budget in (300, 1000, 3000):
        answer = grep(root, "self", max_tokens=budget, limit=500)
        text = "\n".join(f"{f.path}:{g.line}:{g.text}" for f in answer.files for g in f.lines)
        both = len(json.dumps(answer.to_dict(words), ensure_ascii=False)) // 4 + len(text) // 4
        assert answer.truncated and both <= budget, (budget, both)
        assert both >= budget // 2 and "cut to fit about" in answer.note(words)
    least = grep(root, "self", max_tokens=100)
    assert lines(least) == [("m0.py", 1)]  # over the budget with the fields alone: the first line stays


def test_a_budget_keeps_only_the_start_of_a_long_trigram_plan(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "def handle_batch(x):\n    return handle(x)\n"}))
    pattern = "function (handleBatch|handleOther|handleThird|handleFourth|handleFifth|handleSixth|handleSeventh)\\("
    whole, cut = grep(root, pattern), grep(root, pattern, max_tokens=400)
    assert len(whole.trigrams) > 200 and cut.trigrams == whole.trigrams[:120] + " …"


def test_a_budget_keeps_context_lines_only_beside_a_match_they_belong_to(tmp_path):
    """A helper's grep_code with context 2 at 300 tokens showed two context lines and none of the 6 matches."""
    body = "".join(f"    line_{j} = compute({j})\n" for j in range(40))
    root = built(write_tree(tmp_path / "repo", {"a.py": body + "    Nothing happens here\n" + body,
                                                "b.py": body + "    Nothing again\n" + body}))
    for budget in (100, 260, 320, 400):
        answer = grep(root, "Nothing", word=True, before=2, after=2, max_tokens=budget)
        assert lines(answer)[:1] == [("a.py", 41)], (budget, [(f.path, [(g.line, g.context) for g in f.lines])
                                                              for f in answer.files])
        for f in answer.files:  # each file's context lines stand beside a match it shows
            shown = [g.line for g in f.lines if g.matched]
            assert shown and all(any(abs(g.line - m) <= 2 for m in shown) for g in f.lines), (budget, f.lines)
    whole = grep(root, "Nothing", word=True, before=2, after=2)
    assert [g.line for g in whole.files[0].lines] == [39, 40, 41, 42, 43]


def test_a_pathological_pattern_is_bounded_per_file_and_said(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.txt": "a" * 40 + "b\n", "b.txt": "aaa\n"}))
    answer = grep(root, "(a|aa)+$")
    assert answer.timed_out == ["a.txt"] and lines(answer) == [("b.txt", 1)]
    assert "took over" in answer.note(lambda h: None)
    # The whole grep is bounded too: it stops after a few slow files (a new user's ran for hours on the kernel).
    many = built(write_tree(tmp_path / "many", {f"f{i}.txt": "a" * 40 + "b\n" for i in range(12)}))
    slow = grep(many, "(a|aa)+$")
    assert len(slow.timed_out) == grepping.MAX_SLOW_FILES and slow.truncated and "simplify the pattern" in \
        slow.note(lambda h: h)
    assert slow.files_read == grepping.MAX_SLOW_FILES  # it stopped there: 7 of the 12 files never read (a count,
    # not a time: each bound is wall-clock seconds, and a loaded machine stretches them)
    unknown = run("grep", "(a|aa)+$", many, "--no-update")  # no match found, but the slow files may hold one
    assert unknown.exit_code == 2 and "took over" in unknown.stderr
    for bad in ("[", "*a" * 12 + "*z"):
        with pytest.raises(UsageError, match="not a glob|more than 10 wildcards"):
            grep(many, "a", globs=[bad])


def test_only_a_pattern_that_can_backtrack_is_bounded_in_time():
    """A pattern with no repeat costs at most its length a starting position, so it runs without the
    time bound (whose clock reads tripled the engine's time over a common pattern's matches); one with
    a repeat, or a very long one, keeps it."""
    from codii_sql.search.grep import FileTimeout, count_lines, matching_lines

    for linear in (["self"], ["return -EINVAL"], ["foo|bar"], ["[Ss]elf\\("]):
        assert GrepPattern(linear).linear and GrepPattern(linear, word=True, ignore_case=True).linear
    for bounded in (["a+"], ["(a|aa)+$"], ["x?"], ["a{2}"], ["x" * 200]):
        assert not GrepPattern(bounded).linear, bounded
    text = "ab " * 400_000 + "\n"
    word_ab = GrepPattern(["ab"], word=True)
    assert len(matching_lines(word_ab, text, timeout=1e-9)[0].spans) == 400_000
    assert count_lines(word_ab, text.encode(), timeout=1e-9) == 1
    with pytest.raises(FileTimeout):  # the 1 ms floor of a bound, against ~100 ms of matching
        matching_lines(GrepPattern(["\\w+b"]), text, timeout=1e-9)


def test_line_numbers_are_exact_across_short_and_long_gaps_between_matches():
    """Line breaks before a match are counted two ways (bytes.count for short gaps, numpy past
    NUMPY_COUNT_BYTES): both must give each line its number, bytes and text alike."""
    import random

    from codii_sql.search.grep import NUMPY_COUNT_BYTES, matching_lines

    rng = random.Random(5)
    lines = ["needle here" if rng.random() < 0.02 else "x" * rng.choice([0, 3, 80, NUMPY_COUNT_BYTES * 3])
             for _ in range(3000)]
    text = "\n".join(lines) + "\n"
    wanted = [n for n, line in enumerate(lines, 1) if "needle" in line]
    pattern = GrepPattern(["needle"])
    assert [g.line for g in matching_lines(pattern, text.encode())] == wanted
    assert [g.line for g in matching_lines(pattern, text)] == wanted


def test_context_globs_types_role_order_and_rg_json_shape(tmp_path):
    root = built(write_tree(tmp_path / "repo", {
        "tests/test_x.py": "import x\nvalue = target_word\n", "src/x.py": "a\nb\ntarget_word\nc\n",
        "docs/x.md": "target_word\n"}))
    assert [f.path for f in grep(root, "target_word", sort="role").files] == ["src/x.py", "tests/test_x.py",
                                                                               "docs/x.md"]
    assert [f.path for f in grep(root, "target_word", globs=["*.py", "!tests/"]).files] == ["src/x.py"]
    assert [f.path for f in grep(root, "target_word", types=["md"]).files] == ["docs/x.md"]
    shown = [(g.line, g.matched) for g in grep(root, "target_word", paths=[str(root / "src")], before=1,
                                                   after=1).files[0].lines]
    assert shown == [(2, False), (3, True), (4, False)]
    out = run("grep", "--json", "-C", "1", "target_word", root / "src")
    kinds = [json.loads(line)["type"] for line in out.stdout.splitlines()]
    assert out.exit_code == 0 and kinds == ["begin", "context", "match", "context", "end", "summary"]
    match = json.loads(out.stdout.splitlines()[2])["data"]
    assert match["line_number"] == 3 and match["submatches"] == [{"match": {"text": "target_word"}, "start": 0,
                                                                    "end": 11}]


def test_an_index_alone_is_grepped_from_its_stored_text(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "first\n};\nshared_marker = 1\n", "b.py": "shared_marker = 2\n"}))
    copy = tmp_path / "alone.db"
    assert run("export", root, "--to", copy).exit_code == 0
    shutil.rmtree(root)
    out = run("grep", "-n", "shared_marker|^\\};", "--db", copy)
    assert out.exit_code == 0 and out.stdout.splitlines() == ["a.py:2:};", "a.py:3:shared_marker = 1",
                                                             "b.py:1:shared_marker = 2"]
    # Its paths are relative to its root; one it does not hold is an error, as rg's missing path (a new
    # user's absolute path to the source gave no line and exit 1, "nothing matches")
    assert run("grep", "-n", "shared_marker", "b.py", "--db", copy).stdout == "b.py:1:shared_marker = 2\n"
    for missing in (str(root), "nosuch", "a.p"):
        refused = run("grep", "shared_marker", missing, "--db", copy)
        assert refused.exit_code == 2 and f"{missing}: no such file or folder in the index" in refused.stderr \
            and refused.stdout == "", refused.output
    # read as a folder's paths are (a new user's ./b.py was refused), a missing one said beside the answer
    for given in ("./b.py", ".//b.py", "/b.py", "sub/../b.py"):
        assert run("grep", "-n", "shared_marker", given, "--db", copy).stdout == "b.py:1:shared_marker = 2\n", given
    partly = run("grep", "-n", "shared_marker", "b.py", "nosuch", "--db", copy)
    assert partly.exit_code == 2 and partly.stdout == "b.py:1:shared_marker = 2\n" and "nosuch" in partly.stderr, \
        partly.output
    assert run("outline", "./a.py", "--db", copy).exit_code == 0
    # The index file as the PATH is no single file: its files are named (a new user's lines came without)
    as_path = run("grep", "-n", "shared_marker", copy)
    assert as_path.stdout.splitlines() == ["a.py:3:shared_marker = 1", "b.py:1:shared_marker = 2"], as_path.output
    # In a folder of its own: a new user was told at every grep that the folder was being indexed first
    (tmp_path / "shards").mkdir()
    alone = shutil.copy(copy, tmp_path / "shards" / "alone.db")
    assert run("grep", "shared_marker", alone).stderr == ""
    # A damaged stored text is that file's, not every grep's (a new user's flipped bytes failed them all, and
    # the remedy named a codebase that is not here); doctor names it. An export's rows are checked against its
    # digest first: altered, it is refused whole, with what makes it anew
    conn = apsw.Connection(str(copy))
    conn.execute("UPDATE file_texts SET text = x'789c00ff00ff' WHERE file_id = (SELECT id FROM files WHERE path = 'a.py')")
    conn.close()
    refused = run("grep", "shared_marker", "--db", copy)
    assert refused.exit_code == 2 and refused.stdout == "" and "export it again" in refused.stderr, refused.output
    conn = apsw.Connection(str(copy))  # an index alone without a digest (a copied index, an older export)
    conn.execute("DELETE FROM meta WHERE key = 'content_digest'")
    conn.close()
    out = run("grep", "shared_marker", "--db", copy)
    assert out.exit_code == 0 and out.stdout == "b.py:1:shared_marker = 2\n" and "Traceback" not in out.output
    assert "stored text of 1 files in this index is damaged" in out.stderr and f"--db {copy}" in out.stderr
    checked = json.loads(run("doctor", "--check-only", "--db", copy, "--json").stdout)
    assert not checked["consistent"] and any(c["name"] == "grep texts unpack" and "a.py" in c["detail"]
                                             for c in checked["checks"]), checked


def test_the_whole_file_prefilter_never_drops_a_line_a_line_by_line_match_finds(tmp_path):
    # Patterns that can match a line break are matched line by line; a file the whole pattern misses
    # is skipped first only when no lookaround or \A/\Z could match a line where the file does not
    # (b.txt: `foo(?!\s*bar)` misses the file as a whole, yet its line 1 matches on its own).
    files = {"a.txt": "foo\nbar\nx = foo  \n  y\tbaz(1)\nend\n", "b.txt": "foo\nbar\n", "c.txt": "bar\n"}
    skippable = {r"foo\s*$": True, r"\s+baz\(": True, r"[^z]\(1": True, r"no\s+such": True,
                 r"foo(?!\s*bar)": False, r"foo\Z": False, r"\Abar": False, r"(?<=\s)y": False}
    root = built(write_tree(tmp_path / "repo", files))
    for pattern, prefilter in skippable.items():
        compiled = GrepPattern([pattern])
        assert not compiled.line_bound and compiled.prefilter == prefilter, pattern
        truth = [(name, n) for name, text in sorted(files.items())
                 for n, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]
        assert lines(grep(root, pattern)) == truth, pattern


def test_an_ascii_file_matched_as_bytes_gives_the_lines_and_columns_of_its_decoded_text():
    from codii_sql.search.grep import matches_bytes, matching_lines
    from codii_sql.text import decode_source
    data = b"int f(void) {\n\treturn -EINVAL; /* EINVAL */\n}\nx\x1cy = 1;\nend"  # no final line break
    for pattern, options in [("return -EINVAL", {}), ("einval", {"ignore_case": True}), ("EINVAL", {"word": True}),
                             ("^}$", {}), ("[a-z]+\\(", {}), ("x.y", {}), ("$", {}), ("d$", {})]:
        compiled = GrepPattern([pattern], **options)
        assert matches_bytes(compiled, data), pattern
        as_bytes = [(g.line, g.text, g.spans) for g in matching_lines(compiled, data)]
        assert as_bytes == [(g.line, g.text, g.spans) for g in matching_lines(compiled, decode_source(data))], pattern
    # str's \s and \S also treat \x1c-\x1f as space, bytes' do not: such a pattern is matched decoded.
    assert GrepPattern(["x\\Sy"]).ascii_regex is None and GrepPattern(["[^\\s]y"]).ascii_regex is None
    assert not matches_bytes(GrepPattern(["x"]), "é x".encode()) and not matches_bytes(GrepPattern(["x"]), b"a\rx\n")
    assert GrepPattern(["é"]).ascii_regex is None


#: Patterns with the same meaning in Python's re and rg's Rust regex: identifiers, punctuation,
#: classes, alternations, anchors, repeats.
PARITY_PATTERNS = [
    ("def ", []), ("return None", []), ("self\\.\\w+\\(", []), ("^import ", []), ("^from .* import", []),
    ("[A-Z][a-z]+Error", []), ("(store|conn)\\.execute", []), ("\\)$", []), ("^\\s*#", []), ("TODO|FIXME", []),
    ("query", ["-i"]), ("store", ["-w"]), ("re", ["-w"]), ("SELECT", ["-i", "-w"]), ("a.b", ["-F"]),
    ("[0-9]{3,}", []), ("\"\"\"", []), ("\\bNone\\b", []), ("x", []), ("(?:get|set)_[a-z]+", []),
    ("-- name:", []), ("\\w+ = \\w+", []), ("\\[\\]", []), ("`[^`]+`", []), ("e{2}", ["-i"]),
    ("[[:upper:]]{4}", []), ("[[:digit:]][[:punct:]]", []), ("[^[:space:]]+\\(", ["-w"]), ("\\p{Lu}\\p{Ll}+Error", []),
    ("[\\p{Greek}\\p{Han}]", []),
]


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
@pytest.mark.parametrize("pattern, flags", PARITY_PATTERNS)
def test_the_same_lines_as_ripgrep_over_the_indexed_files(real_tree, pattern, flags):
    root, db, files = real_tree
    ours = service.grep(service.GrepRequest([pattern], fixed="-F" in flags, ignore_case="-i" in flags,
                                            word="-w" in flags, paths=[str(root)], db=str(db), update=False))
    rg = subprocess.run([RG, "-n", "--no-heading", "-H", "--no-config", *flags, "-e", pattern, "--", *files],
                        cwd=root, capture_output=True, text=True)
    assert rg.returncode in (0, 1), rg.stderr
    theirs = sorted((p, int(n)) for p, n, _ in (line.split(":", 2) for line in rg.stdout.splitlines()))
    assert sorted(lines(ours)) == theirs


@pytest.fixture(scope="module")
def real_tree(tmp_path_factory):
    """This project's own search code, SQL and README (real text of three languages), indexed, and
    the files the index holds."""
    root = tmp_path_factory.mktemp("real") / "tree"
    shutil.copytree(REPO_ROOT / "codii_sql" / "search", root / "search")
    shutil.copytree(REPO_ROOT / "sql", root / "sql")
    shutil.copy(REPO_ROOT / "README.md", root / "README.md")
    home = tmp_path_factory.mktemp("real-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODII_SQL_HOME", str(home))
        built(root)
        db = Codebase.open(root).db_path
        with Store(db) as store:
            files = [r["path"] for r in store.rows("grep_files_all")]
    yield root, db, files


def test_a_real_http_server_greps_behind_its_token_as_the_service_answers(tmp_path):
    normal = "".join(f"# line {i}\n" for i in range(400))  # a long line in a file that is not minified
    web = built(write_tree(tmp_path / "web", {"app.py": "def route_marker(x):\n    return x\n",
                                              "data.py": normal + "BLOB = '" + "ab" * 100_000 + "far_marker'\n"}))
    api = built(write_tree(tmp_path / "api", {"api.py": "route_marker = None\n"}))
    assert run("workspace", "add", "team", web, api).exit_code == 0
    port = servers.free_port()
    proc = servers.start(["--workspace", "team", "--token", "grep-token"], port, token="grep-token")
    try:
        url, auth = f"http://127.0.0.1:{port}/grep", {"Authorization": "Bearer grep-token"}
        assert httpx.get(url, params={"q": "route_marker", "codebase": "web"}, timeout=30).status_code == 401
        got = httpx.get(url, params={"q": "route_marker", "codebase": "web", "context": 1}, headers=auth, timeout=30)
        want = grep(web, "route_marker", before=1, after=1, limit=200, max_columns=300).to_dict(lambda h: h)
        assert got.status_code == 200
        assert {k: v for k, v in got.json().items() if k != "seconds"} == {k: v for k, v in want.items()
                                                                        if k != "seconds"}
        # A 200 KB line is cut around its match, as MCP cuts it: it was sent whole, or dropped whole by a budget
        for extra in ({}, {"max_tokens": "500"}):
            far = httpx.get(url, params={"q": "far_marker", "codebase": "web", **extra}, headers=auth, timeout=30).json()
            [line] = far["files"][0]["lines"]
            assert "far_marker" in line["text"] and len(line["text"]) <= 302 and line["submatches"], (extra, far)
        bad = httpx.get(url, params={"q": "(x", "codebase": "api"}, headers=auth, timeout=30)
        assert bad.status_code == 400 and "at position 0" in bad.json()["error"]
        several = httpx.get(url, params={"q": "x"}, headers=auth, timeout=30)
        assert several.status_code == 400 and "pass codebase=" in several.json()["hint"]
        page = httpx.get(f"http://127.0.0.1:{port}/", params={"q": "route_(marker)", "mode": "grep", "codebase": "web"},
                         headers=auth, timeout=30)
        assert page.status_code == 200 and '<a class="open" href="/file/web/app.py?hl=1#L1">1</a>' in page.text
        assert "def <mark>route_marker</mark>(x):" in page.text
    finally:
        code, err = servers.stop(proc)
    assert code == 0 and "Traceback" not in err


def test_search_grep_keeps_only_the_chunks_holding_a_matching_line(tmp_path):
    root = built(write_tree(tmp_path / "repo", {
        "a.py": "def retry_policy():\n    '''retry retry retry'''\n    return 1\n",
        "b.py": "def retry_once():\n    # TODO(security): check\n    return retry_policy()\n"}))
    plain = json.loads(run("search", "retry", "--path", root, "--mode", "bm25", "--json", "--no-update").stdout)
    assert {r["path"] for r in plain["results"]} == {"a.py", "b.py"}
    kept = run("search", "retry", "--path", root, "--mode", "bm25", "--json", "--no-update", "--grep",
               "TODO\\(security\\)")
    assert kept.exit_code == 0 and [r["path"] for r in json.loads(kept.stdout)["results"]] == ["b.py"]
    assert run("search", "retry", "--path", root, "--grep", "(bad", "--no-update").exit_code == 2


def test_doctor_finds_and_repairs_an_orphan_text_and_a_file_without_one(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.py": "doctor_marker = 1\n", "b.py": "other = 2\n"}))
    db = Codebase.open(root).db_path
    conn = apsw.Connection(str(db))
    conn.execute("INSERT INTO file_texts VALUES (999, ?); INSERT INTO file_trigrams(rowid, text) VALUES (999, 'gone')",
                 (pack_text("gone"),))
    checked = json.loads(run("doctor", root, "--check-only", "--json").stdout)
    assert [c["name"] for c in checked["checks"] if not c["ok"]] == ["grep texts and trigram rows match files"]
    repaired = json.loads(run("doctor", root, "--json").stdout)["checks"]
    assert [c["repaired"] for c in repaired if not c["ok"]] == ["repaired"]
    assert json.loads(run("doctor", root, "--check-only", "--json").stdout)["consistent"]
    # Every build writes each file's text with its row in one transaction, so only a hand edit makes a
    # file without one; grep trusts the build's record (meta grep_complete) and the doctor finds it.
    conn.execute("DELETE FROM file_texts WHERE file_id = (SELECT id FROM files WHERE path = 'a.py')")
    checked = json.loads(run("doctor", root, "--check-only", "--json").stdout)
    assert [c["name"] for c in checked["checks"] if not c["ok"]] == ["grep texts and trigram rows match files"]
    assert json.loads(run("doctor", root, "--json").stdout)["forgotten"] == ["a.py"]  # and written again
    assert json.loads(run("doctor", root, "--check-only", "--json").stdout)["consistent"]
    assert lines(grep(root, "doctor_marker")) == [("a.py", 1)]


def test_an_index_alone_of_schema_5_is_grepped_from_its_chunks_and_says_which_lines_it_lacks(tmp_path):
    root = built(write_tree(tmp_path / "repo", {"a.c": "int f(void) {\n  return old_marker;\n}\n};\n"
                                                        "int g(void) {\n  return 2;\n}\n"}))
    copy = tmp_path / "old.db"
    assert run("export", root, "--to", copy).exit_code == 0
    shutil.rmtree(root)
    conn = apsw.Connection(str(copy))
    conn.execute("DROP TABLE file_trigrams; DROP TABLE file_texts; UPDATE meta SET value = '5' "
                 "WHERE key = 'schema_version'")
    conn.close()
    copy.chmod(0o444)
    found = service.grep(service.GrepRequest(["old_marker|^\\};"], db=str(copy), update=False))
    assert lines(found) == [("a.c", 2)] and found.files[0].not_stored == [[4, 4]]
    assert "no trigram table" in found.note(lambda h: None)
    assert run("grep", "-t", "nosuchlanguage", "x", "--db", copy).exit_code == 2


def test_a_file_turned_into_a_symlink_out_of_the_root_is_not_read(tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("leak_marker = 'from outside the root'\n")
    root = built(write_tree(tmp_path / "repo", {"a.py": "leak_marker = 1\n"}))
    (root / "a.py").unlink()
    (root / "a.py").symlink_to(secret)  # after the build: the index still lists a.py
    found = grep(root, "leak_marker")
    assert lines(found) == [] and "could not be read now" in found.note(lambda h: None)


def test_a_named_link_out_of_the_root_is_an_error_naming_the_argument_as_given(tmp_path):
    (tmp_path / "outside.txt").write_text("leak_marker\n")
    root = built(write_tree(tmp_path / "repo", {"a.py": "leak_marker = 1\n"}))
    (root / "esc.txt").symlink_to(tmp_path / "outside.txt")
    result = run("grep", "leak_marker", root / "esc.txt")
    assert result.exit_code == 2 and "esc.txt leads outside (a link) the codebase" in result.output
    assert "--path" not in result.output and "leak_marker\n" not in result.stdout


def test_paths_of_two_codebases_are_an_error_whichever_comes_first(tmp_path):
    """A new user's `grep beta_only_b pa pb` searched the codebase pa alone and exited 1: a PATH that is a
    codebase's root ended the check before the next PATH was looked at."""
    pa = built(write_tree(tmp_path / "pa", {"a.py": "alpha = 1\n"}))
    pb = built(write_tree(tmp_path / "pb", {"b.py": "beta_only_b = 1\n"}))
    for paths in ((pa, pb), (pb, pa), (pa / "a.py", pb)):
        result = run("grep", "--no-update", "beta_only_b", *paths)
        assert result.exit_code == 2 and "the codebase" in result.output and "grep one codebase at a time" in \
            result.output, (paths, result.output)
    assert run("grep", "--no-update", "alpha", pa, pa / "a.py").exit_code == 0


def test_an_index_file_beside_other_paths_is_refused_in_words_about_them(tmp_path):
    """A new user's `grep x INDEX.db lib` was refused in words about --db, a flag they had not typed."""
    root = built(write_tree(tmp_path / "repo", {"lib/a.py": "x = 1\n"}))
    index = Codebase.open(root).db_path
    refused = run("grep", "--no-update", "x", index, root / "lib")
    assert refused.exit_code == 2 and "given with other paths" in refused.output and "--db" not in refused.output, \
        refused.output
    assert run("grep", "--no-update", "x", index).exit_code == 0


def test_a_file_turned_into_a_link_inside_the_root_is_not_read(tmp_path):
    """A new user swapped `main.py` for a link to `.env` after the build: grep (and so MCP grep_code and
    HTTP /grep, which answer from the index as it is) printed the secret."""
    root = built(write_tree(tmp_path / "repo", {"main.py": "x = 1\n", "sub/b.py": "y = 2\n"}))
    (root / ".env").write_text("SECRET_KEY=hunter2supersecret\n")
    (root / "main.py").unlink()
    (root / "main.py").symlink_to(".env")
    (root / "sub").rename(root / "real_sub")
    (root / "sub").symlink_to("real_sub")  # a folder swapped for a link: sub/b.py now reads through it
    found = grep(root, ".")
    assert lines(found) == [] and "hunter2" not in str(found.to_dict(lambda h: h))


def test_a_grep_of_an_unindexed_folder_says_it_indexes_it_and_embeds_nothing(tmp_path, codii_home):
    """In a fresh process, as a user runs it: a first grep indexes the folder (saying so) without a
    background embedding process, and a path that does not exist is an error (exit 2), not 'no match'."""
    root = write_tree(tmp_path / "repo", {"sub/a.py": "def Context():\n    pass\n"})
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_WATCH": "0", "CODII_SQL_BACKGROUND": "1"}
    cmd = [sys.executable, "-m", "codii_sql.cli"]
    first = subprocess.run([*cmd, "grep", "Context"], cwd=root, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
    assert first.returncode == 0 and first.stdout == "sub/a.py:1:def Context():\n", first
    assert f"Indexing {root} first" in first.stderr
    assert "no chunk is embedded" in first.stderr and "in the background" not in first.stderr  # as it does
    status = json.loads(subprocess.run([*cmd, "status", str(root), "--json"], env=env, capture_output=True,
                                       text=True).stdout)
    assert status["status"] == "indexed" and status["vectors"]["done"] == 0 and status.get("daemon") is None, status
    missing = subprocess.run([*cmd, "grep", "Context", "nonexistent_dir"], cwd=root, env=env, capture_output=True,
                             text=True)
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "Error: nonexistent_dir: no such file or folder: pass a file or folder of an indexed codebase"), missing


def test_a_grep_without_a_path_reads_a_pipe_as_rg_does_and_an_idle_one_not_for_ever(tmp_path, codii_home):
    """A new user's `echo ... | codii-sql grep PAT` in an indexed folder grepped the index, not the pipe, where rg
    reads standard input when no PATH is given and it is a file or pipe. A pipe nobody writes or closes (an
    agent's harness) must not hang the grep: after a second the index is grepped, and it says so."""
    root = write_tree(tmp_path / "repo", {"a.py": "def Context():\n    pass\n"})
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home), "CODII_SQL_WATCH": "0", "CODII_SQL_BACKGROUND": "1"}
    cmd = [sys.executable, "-m", "codii_sql.cli", "grep"]
    assert subprocess.run([*cmd, "Context"], cwd=root, env=env, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL).stdout == "a.py:1:def Context():\n"  # indexes it first
    piped = subprocess.run([*cmd, "Context"], cwd=root, env=env, capture_output=True, text=True, check=False,
                           input="no\nContext piped\n")
    assert piped.returncode == 0 and piped.stdout == "2:Context piped\n", piped
    (tmp_path / "in.txt").write_text("Context from a file\n")
    with open(tmp_path / "in.txt") as redirected:
        assert subprocess.run([*cmd, "-c", "Context"], cwd=root, env=env, capture_output=True, text=True,
                              check=False, stdin=redirected).stdout == "1\n"
    read_end, write_end = os.pipe()  # held open and never written
    try:
        idle = subprocess.run([*cmd, "Context"], cwd=root, env=env, capture_output=True, text=True, stdin=read_end,
                              timeout=60, check=False)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert idle.returncode == 0 and idle.stdout == "a.py:1:def Context():\n", idle
    assert "standard input is a pipe with nothing to read" in idle.stderr


def test_a_file_that_times_out_once_is_matched_again_alone_and_the_collector_rests_meanwhile(tmp_path, monkeypatch):
    """A new user's `grep -c '\\w+'` over Django lost ordinary files as "took over 1 s": the collector's full
    passes over a big answer stalled the matching threads. It is off while a grep runs (on again after), and a
    file that passes the bound is matched once more alone before it is called timed out."""
    import gc

    root = built(write_tree(tmp_path / "repo", {"a.py": "needle = 1\n", "b.py": "needle = 2\n"}))
    real, seen = grepping.matching_lines, []

    def stalled_once(pattern, text):
        seen.append(gc.isenabled())
        if len(seen) == 1:
            raise grepping.FileTimeout()
        return real(pattern, text)

    monkeypatch.setattr(grepping, "matching_lines", stalled_once)
    answer = grep(root, "needle")
    assert lines(answer) == [("a.py", 1), ("b.py", 1)] and answer.timed_out == []
    assert seen == [False, False, False] and gc.isenabled()


def test_counts_and_file_lists_are_counted_without_building_lines_and_equal_the_lines(tmp_path, monkeypatch):
    """`-c` and `-l` built every matching line first (Django's `\\w+`: 576 MB and 8-13 s for a count); they now
    count matching lines alone (search/grep.count_lines), the same numbers, for empty and anchored matches too."""
    root = built(write_tree(tmp_path / "repo", {
        "a.py": "alpha = 1\n\nbeta = alpha\n", "b.txt": "no final break", "c.md": "é café\r\n\ncafé\n",
        "empty.txt": ""}))
    for pattern in (r"\w+", "x*", "^", "$", "alpha", "caf", r"a\s*$", "é"):
        whole = grep(root, pattern)
        counted = grep(root, pattern, counts_only=True)
        assert [(f.path, f.matches) for f in counted.files] == [(f.path, f.matches) for f in whole.files], pattern
        assert all(f.lines == [] for f in counted.files) and counted.matched_lines == whole.matched_lines
    monkeypatch.chdir(root)
    out = run("grep", "-c", "x*", "--no-update")
    assert out.exit_code == 0 and out.stdout.splitlines() == ["a.py:3", "b.txt:1", "c.md:3"], out.stdout
    assert run("grep", "-l", "alpha", "--no-update").stdout.splitlines() == ["a.py"]


def test_a_named_file_the_index_leaves_out_is_said_not_searched(tmp_path):
    """A new user's `grep func_59999 big.py` said nothing and exited 1 where rg found the line."""
    root = built(write_tree(tmp_path / "repo", {"a.py": "def f():\n    return 1\n", "package-lock.json": '{"x": 1}\n',
                                                ".codii.yaml": "max_file_bytes: 1000\n",
                                                "big.py": "func_59999 = 1\n" + "y = 2\n" * 400}))
    answer = grep(root, "func_59999", paths=[str(root / "big.py"), str(root / "package-lock.json"), str(root / "a.py")])
    assert answer.matched_lines == 0
    note = answer.note(lambda h: h)
    assert "big.py (too large)" in note and "package-lock.json (lock file)" in note and "a.py" not in note
    # The whole codebase, nothing matched: how many paths rg would read the index leaves out (a new user's
    # `grep -c over_marker` exited 1 without a word where rg found 61,690 lines in a file over 1 MB).
    whole = grep(root, "func_59999").note(lambda h: h)
    assert "leaves out 2 paths rg would read" in whole and "too large 1" in whole and "lock file 1" in whole, whole
    assert "status --skipped" in whole and "big.py" not in whole
    # A match says so too: a new user's `grep -l -w cacache` listed 6 files where rg listed 23, 17 of them
    # under a skipped node_modules/, and nothing said more could be there.
    matched = grep(root, "return").note(lambda h: h)
    assert "leaves out 2 paths rg would read (too large 1, lock file 1), not searched: rg may find more" in matched
    # ... of those the request's globs and types would read: a helper's `-g '*_test.go'` was told of go.sum.
    globbed = grep(root, "return", globs=["*.py"]).note(lambda h: h)
    assert "leaves out 1 path rg would read (too large 1)" in globbed, globbed
    typed = grep(root, "return", types=["py"]).note(lambda h: h) or ""
    assert "(too large 1)" in typed and "lock file" not in typed, typed
    assert "rg would read" not in (grep(root, "return", globs=["a.*"]).note(lambda h: h) or "")
    folder = built(write_tree(tmp_path / "npm", {"lib/a.js": "cacache\n", "node_modules/x/b.js": "cacache\n"}))
    said = grep(folder, "cacache").note(lambda h: h)
    assert "default excluded 1; folders node_modules/" in said, said
    (folder / os.fsdecode(b"caf\xe9.js")).write_text("cacache_latin1\n")  # a name rg reads and the index cannot hold
    built(folder)
    said = grep(folder, "cacache_latin1").note(lambda h: h)
    assert "undecodable name 1" in said, said
    two = grep(root, "zq").to_dict(lambda h: h)  # a scan and what it left out: two notes of one kind, named once
    assert two["notes"] == ["grep"] and "every indexed file is a candidate" in two["note"] and "leaves out" in two["note"]
    assert "leaves out" not in (grep(root, "func_59999", paths=[str(root / "a.py")]).note(lambda h: h) or "")
    (root / "pkg.egg-info").mkdir()
    (root / "pkg.egg-info" / "PKG-INFO").write_text("func_59999\n")
    (root / "blob.dat").write_bytes(b"func_59999\x00\x01")
    (root / "new.py").write_text("func_59999 = 3\n")
    odd = grep(root, "func_59999", paths=[str(root / "pkg.egg-info"), str(root / "blob.dat"), str(root / "new.py")]
               ).note(lambda h: h)
    assert "pkg.egg-info (default excluded)" in odd and "blob.dat (binary)" in odd and "max_file_bytes" not in odd
    assert "new.py (not indexed yet)" in odd
    # The build's own reason (a new user's 200 KB one-line file was "not indexed yet" here, "minified" in status).
    other = built(write_tree(tmp_path / "other", {"a.py": "x = 1\n", "bundle.py": "func_59999 = [" + "1, " * 9000 + "]\n"}))
    assert "bundle.py (minified)" in grep(other, "func_59999", paths=[str(other / "bundle.py")]).note(lambda h: h)
    minified = grep(other, "func_59999").note(lambda h: h)  # only the ways in that apply (a new user was told two that did not)
    assert "minified 1" in minified and "minified files are never indexed" in minified and "max_file_bytes" not in minified


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
@pytest.mark.parametrize("globs", [["*.{py,rst}"], ["!*.{py,md}"], ["!tests/", "*.py"], ["!tests", "*.py"],
                                   ["*.py", "!tests/"], ["src/**", "!src/deep/"], ["{src,docs}/*"], ["src/"],
                                   ["!src/*"], ["deep"]])
def test_globs_select_the_files_rg_selects(tmp_path, monkeypatch, globs):
    """A new user's -g '*.{py,rst}' listed nothing (rg: 32 files), and -g '!tests/' -g '*.py' kept tests/*.py
    (rg never enters an excluded folder, whatever a later glob says)."""
    root = built(write_tree(tmp_path / "repo", {p: "Blueprint = 1\n" for p in (
        "tests/a.py", "src/b.py", "src/deep/c.py", "docs/d.rst", "docs/e.md", "f.py", "g.txt")}))
    flags = [x for g in globs for x in ("-g", g)]
    rg = subprocess.run([RG, "-l", "--no-config", *flags, "Blueprint"], cwd=root, capture_output=True, text=True)
    monkeypatch.chdir(root)
    ours = run("grep", "-l", *flags, "Blueprint", "--no-update")
    assert sorted(ours.stdout.split()) == sorted(rg.stdout.split()), (globs, ours.stdout, rg.stdout)


def test_globs_given_in_a_subfolder_are_read_from_it_as_rg_reads_them(tmp_path, monkeypatch):
    """From go/ssa, a new user's -g 'ssautil/*' matched nothing (rg: 5 files): anchored globs were read
    from the codebase's root. A glob without a slash before its end matches names at any depth."""
    root = built(write_tree(tmp_path / "repo", {p: "func Marker()\n" for p in (
        "go/ssa/ssautil/load.go", "go/ssa/x.go", "go/ssa/deep/ssautil/y.go", "ssautil/z.go")}))
    monkeypatch.chdir(root / "go" / "ssa")
    for globs, want in ((["ssautil/*"], ["ssautil/load.go"]),
                        (["/ssautil/*"], ["ssautil/load.go"]),
                        (["!ssautil/"], ["x.go"]),  # a folder name, at any depth
                        (["**/ssautil/*.go"], ["deep/ssautil/y.go", "ssautil/load.go"]),
                        (["*.go", "!x.go"], ["deep/ssautil/y.go", "ssautil/load.go"])):
        out = run("grep", "-l", *[x for g in globs for x in ("-g", g)], "Marker", "--no-update")
        assert out.stdout.split() == want, (globs, out.output)
        if RG:
            theirs = subprocess.run([RG, "-l", "--no-config", *[x for g in globs for x in ("-g", g)], "Marker"],
                                    capture_output=True, text=True).stdout.split()
            assert sorted(theirs) == want, (globs, theirs)
    # `**/` is at any depth, not the working folder's: a new user's `-g '**/*.go' ..` from a subfolder kept its files.
    out = run("grep", "-l", "-g", "**/ssautil/*.go", "Marker", "../..", "--no-update")
    assert sorted(out.stdout.split()) == ["../../go/ssa/deep/ssautil/y.go", "../../go/ssa/ssautil/load.go",
                                          "../../ssautil/z.go"], out.output


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_files_are_named_as_rg_names_them_from_where_the_grep_runs(tmp_path, monkeypatch):
    """Paths were printed relative to the codebase root, so from src/ a new user's editor could not open
    `src/sub/a.py`; rg names a file below the PATH as typed, or relative to the working folder."""
    root = built(write_tree(tmp_path / "repo", {"src/sub/a.py": "Marker = 1\n", "b.py": "Marker = 2\n"}))
    for where, args in (("", []), ("", ["src"]), ("", ["src/"]), ("", ["./src"]), ("", ["."]), ("", ["b.py", "src"]),
                        ("src", []), ("src", [".."]), ("src", ["../b.py", "sub"]), ("src", ["sub/a.py", "../b.py"]),
                        ("src/sub", ["../../"]), ("", [str(root / "src")])):
        monkeypatch.chdir(root / where)
        for flags in ([], ["-l"], ["-c"]):
            ours = run("grep", "--no-update", *flags, "Marker", *args)
            theirs = subprocess.run([RG, "-n", "--no-heading", "--no-config", "--sort", "path", *flags, "Marker", *args],
                                    capture_output=True, text=True)
            assert ours.stdout == theirs.stdout, (where, args, flags, ours.output, theirs.stdout)


def test_grep_exits_as_rg_when_its_reader_stops_early_and_on_an_error(tmp_path):
    """`grep needle | head -1` exited 1 (no match, to a script) and a damaged index 1: rg says 0 and 2."""
    root = built(write_tree(tmp_path / "repo", {"many.txt": "".join(f"needle {i}\n" for i in range(20_000))}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    piped = subprocess.run(f"'{sys.executable}' -m codii_sql.cli grep needle --no-update | head -1; "
                           "echo \"${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash", cwd=root, env=env,
                           capture_output=True, text=True)
    assert piped.stdout.splitlines() == ["many.txt:1:needle 0", "0"] and "Error" not in piped.stderr, piped
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage")
    damaged = run("grep", "needle", "--db", bad)
    assert damaged.exit_code == 2 and "damaged" in damaged.output


def test_a_grep_prints_each_file_before_it_reads_the_next(tmp_path):
    """`grep '\\w+' | head -1` waited 9 s on Django for a 770k-line answer built whole; rg prints as it reads.
    The first file's lines fill the pipe, so the grep waits there; a line added to the last file meanwhile
    is in the answer only if that file is read after the first is printed."""
    root = built(write_tree(tmp_path / "repo", {"a.txt": "needle " + "x" * 60 + "\n" * 1 + ("needle\n" * 20_000),
                                                "z.txt": "needle\n"}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "grep", "-j", "1", "--no-update", "needle"], cwd=root,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as grep:
        assert grep.stdout.readline().startswith("a.txt:1:needle")
        with open(root / "z.txt", "a") as later:
            later.write("needle again\n")
        rest, err = grep.communicate(timeout=120)
    assert rest.endswith("z.txt:1:needle\nz.txt:2:needle again\n") and grep.returncode == 0, (rest[-200:], err)


def test_a_crlf_line_is_printed_as_rg_prints_it_and_a_missing_pattern_reads_plainly(tmp_path, monkeypatch):
    root = built(write_tree(tmp_path / "repo", {"crlf.txt": "a needle\r\nb\r\n"}))
    monkeypatch.chdir(root)
    out = run("grep", "needle", "--no-update")
    assert out.stdout_bytes == b"crlf.txt:1:a needle\r\n", out.stdout_bytes  # not an escaped "\\r" (.stdout drops \\r)
    missing = run("grep")
    assert missing.exit_code == 2 and "Error: pattern is missing" in missing.output


def test_inverted_lines_of_a_file_without_the_literal_are_all_its_lines_in_every_encoding(tmp_path):
    """A new user's `grep -v zzz` printed only the plain ASCII files: a CRLF or non-ASCII file without the
    pattern's literal was skipped undecoded, as a normal grep may, so -v lost all its lines."""
    root = built(write_tree(tmp_path / "repo", {"crlf.txt": "aaa\r\nbbb\r\n", "uni.txt": "ünï\nbbb\n", "lf.txt": "aaa\nbbb\n"}))
    assert [(f.path, f.matches) for f in grep(root, "zzz", invert=True).files] == [
        ("crlf.txt", 2), ("lf.txt", 2), ("uni.txt", 2)]
    assert [(f.path, f.matches) for f in grep(root, "zzz", invert=True, counts_only=True).files] == [
        ("crlf.txt", 2), ("lf.txt", 2), ("uni.txt", 2)]


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_a_control_character_is_escaped_on_a_terminal_and_written_as_it_is_into_a_pipe(tmp_path, monkeypatch):
    """A terminal gets a file's escapes as text (they could drive it), a tab as it is; a pipe gets the bytes, as rg
    writes them (a new user's script read `\\x0c` where rg gave the form feed)."""
    root = built(write_tree(tmp_path / "repo", {"a.txt": "needle\tone\nneedle \x1b]0;title\x07\n\x0cneedle\n",
                                                "b.txt": "needle\n"}))
    monkeypatch.chdir(root)
    theirs = subprocess.run([RG, "--no-config", "--sort", "path", "-n", "needle"], capture_output=True).stdout
    assert run("grep", "needle", "--no-update").stdout_bytes == theirs
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm", "NO_COLOR": "1"}
    shown = _on_terminal([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", "--no-heading", "needle"],
                         root, env)
    assert shown == "a.txt:1:needle\tone\na.txt:2:needle \\x1b]0;title\\x07\na.txt:3:\\x0cneedle\nb.txt:1:needle\n", shown


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_the_cli_prints_files_counts_and_filters_as_rg_does(tmp_path, codii_home):
    """A new user diffed codii-sql grep against rg: files came in another order (`open_options.rs` before the
    folder `open_options/`), `-l -c` printed paths, a single FILE kept its path, a glob that selected nothing
    and an unclosed `{` read as "no match" (exit 1), and -S, -m, -o and -v were no options. Later: `-o 'x*'`
    printed an empty match right after each match (Python's rule, not rg's), and `\\z`, `\\x{e9}` were refused."""
    root = built(write_tree(tmp_path / "r", {
        "src/open_options.rs": "fn mode() {}\n", "src/open_options/mock.rs": "fn mode() {}\n",
        "calls-json/a.go": "func mode() {}\n", "calls/b.go": "func mode() {}\nfunc mode2() {}\n",
        "src/open_options-x.rs": "fn mode() {}\n", "src/upper.rs": "fn Mode() {}\nfn mode() { mode(); }\nfn other() {}\n",
        ".hidden/h.rs": "fn mode() {}\n", "src/.dot.rs": "fn mode() {}\n",  # rg skips them unless --hidden or given
    }))
    patterns = tmp_path / "patterns.txt"
    patterns.write_text("Mode\r\nother\n")
    (tmp_path / "none.txt").write_text("")

    def both(*args):
        ours = subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", *args], cwd=root,
                              capture_output=True, text=True, env={**os.environ, "CODII_SQL_HOME": str(codii_home)})
        theirs = subprocess.run([RG, "--no-config", "-n", "--no-heading", "--sort", "path", *args], cwd=root,
                                capture_output=True, text=True)
        return (ours.returncode, ours.stdout), (theirs.returncode, theirs.stdout)

    for args in (["mode"], ["-c", "mode"], ["-l", "-c", "mode"], ["mode", "calls/b.go"], ["-c", "mode", "calls/b.go"],
                 ["-g", "nothing*.zz", "mode"], ["-g", "*.rs", "mode"],
                 # rg's flags an agent sends out of habit: smart case, a count per file, matches alone, inverted
                 ["-S", "mode"], ["-S", "Mode"], ["-m", "1", "mode"], ["-o", "mo\\w+"], ["-c", "-o", "mode"],
                 ["-v", "mode"], ["-v", "-c", "mode"], ["-c", "-m", "1", "mode"],
                 ["--hidden", "-c", "mode"], ["-c", "mode", ".hidden"], ["mode", "src/.dot.rs"],
                 ["-g", ".hidden/*.rs", "mode"], ["-g", "**/.dot.rs", "mode"],
                 # whole lines, files without a match, matches counted (a new user's rg habits)
                 ["-x", "fn mode\\(\\) \\{\\}"], ["-x", "-c", "f\\w+ mode.*"], ["-x", "-F", "fn mode() {}"],
                 ["--files-without-match", "mode\\("], ["--files-without-match", "Mode"], ["--files-without-match", "-c", "Mode"],
                 ["--files-without-match", "-g", "*.go", "func"], ["--count-matches", "mode"], ["--count-matches", "-v", "mode"],
                 ["mode", "nonexist", "calls"], ["-c", "mode", "src", "nonexist/x.rs"],  # rg: the others, then exit 2
                 # empty matches where one ended (Python's re has them, rg not), rg's \\z and \\x{..} escapes
                 ["-o", "o*"], ["--count-matches", "d*"], ["-o", "-N", "\\w*"], ["-c", "\\)\\z"], ["-o", "\\x{6d}o\\x{64}e"],
                 ["-c", "[\\x{41}-\\x{5a}]"],
                 # what scripts and editors call rg with (a new user's `if codii-sql grep -q` always failed)
                 ["-q", "mode"], ["-q", "nothing_like_it"], ["--column", "mode"], ["--vimgrep", "mo"],
                 ["-o", "--column", "mode"], ["--column", "-C", "1", "other"], ["-i", "-s", "MODE"],
                 ["--vimgrep", "-o", "mo\\w*"], ["-b", "mode"], ["-b", "-o", "mode"], ["-b", "--column", "-C", "1", "other"],
                 ["--vimgrep", "-b", "mode"], ["-T", "rust", "-l", "mode"], ["-T", "go", "-T", "rust", "-c", "mode"],
                 ["-g", "nothing*.zz", "mode", "src"],  # a PATH given: rg's exit 1, not its "No files were searched" 2
                 ["-s", "-i", "MODE"], ["-s", "-S", "mode"], ["-S", "-s", "Mode"],  # the last of -s, -i, -S wins
                 ["-m", "0", "mode"],
                 # context lines around matches alone, as rg prints them (they were dropped)
                 ["-o", "-C", "1", "other"], ["--vimgrep", "-A", "1", "Mode"], ["-o", "-b", "-B", "1", "other"],
                 # what scripts pass (a new user's were refused): patterns from a file, NUL after paths, long
                 # lines omitted or cut, leading blanks trimmed
                 ["-f", str(patterns), "src"], ["-c", "-f", str(patterns)], ["-f", str(tmp_path / "none.txt"), "src"],
                 ["-0", "-c", "mode"], ["-0", "-l", "mode"], ["-0", "-C", "1", "other"], ["-M", "8", "mode"],
                 ["-M", "8", "--max-columns-preview", "-C", "1", "other"], ["--trim", "-o", "mode"],
                 ["--trim", "--column", "mode"], ["-o", "-M", "4", "mo\\w+"], ["-M", "12", "mode"],
                 ["--vimgrep", "-M", "8", "--max-columns-preview", "mode"], ["--vimgrep", "-M", "8", "mode"],
                 ["-0", "--heading", "-A", "1", "other"]):
        ours, theirs = both(*args)
        assert ours == theirs, (args, ours, theirs)
    ours, theirs = both("-g", "{a,b", "mode")
    assert ours[0] == theirs[0] == 2 and ours[1] == ""


def test_rg_type_names_select_their_files(tmp_path):
    """A new user's agent passed rg's `-t txt` and `-t docker` and was told they are no file types."""
    root = built(write_tree(tmp_path / "repo", {"notes.txt": "needle\n", "Dockerfile": "RUN needle\n",
                                                "api.proto": "// needle\n", "a.py": "needle = 1\n"}))
    assert [f.path for f in grep(root, "needle", types=["txt"]).files] == ["notes.txt"]
    assert [f.path for f in grep(root, "needle", types=["docker", "protobuf"]).files] == ["Dockerfile", "api.proto"]


def test_a_type_is_rg_s_file_name_globs_and_a_language_its_detected_content(tmp_path):
    """A new user's `-t c` left out a `.h` whose text reads as C++ (rg's c type is `*.[chH]`...), `-t css` the
    `.scss` files, and `-t h` was refused: rg's types are file-name globs, and now read as rg reads them."""
    root = built(write_tree(tmp_path / "repo", {"foo.h": "class Foo { int widget; };\n",
                                                "foo.cpp": "#include \"foo.h\"\nint widget_count;\n",
                                                "w.scss": "$widget: 1;\n", "w.py": "widget = 1\n"}))
    for types, want in ((["c"], ["foo.h"]), (["cpp"], ["foo.cpp", "foo.h"]), (["css"], ["w.scss"]), (["h"], ["foo.h"]),
                        (["python"], ["w.py"]), (["py", "h"], ["foo.h", "w.py"])):
        assert [f.path for f in grep(root, "widget", types=types).files] == want, types
    assert [f.path for f in grep(root, "widget", types_not=["cpp", "css"]).files] == ["w.py"]
    assert len(grep(root, "widget", types=["all"]).files) == 4  # rg's `all`: a file of any of its types
    with pytest.raises(UsageError, match="not a file type known here"):
        grep(root, "widget", types=["nosuch"])
    listed = run("grep", "--type-list")
    assert listed.exit_code == 0 and "c: *.[chH], *.[chH].in, *.cats\n" in listed.stdout
    if RG:
        assert listed.stdout == subprocess.run([RG, "--type-list"], capture_output=True, text=True).stdout


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_json_lines_carry_rg_s_offsets_and_counts(tmp_path, codii_home):
    """A new user's script read rg --json's absolute_offset and end.stats.matches, which were missing; another's
    found a `\\n` added to a last line no line break ends; a third missed end.stats.bytes_searched and
    bytes_printed, and the summary's bytes_searched (every file here holds the pattern's trigrams: all are read)."""
    root = built(write_tree(tmp_path / "r", {"a.txt": "x\nfn a\r\nfn b fn\n", "u.txt": "héllo wörld\nfn ü\n\nz fn\n",
                                              "c.py": "one\ntwo\nfn three\nfour\n", "d.js": "no newline fn",
                                              "e.txt": "fn one\r\nlast fn"}))

    def events(cmd):
        out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env={**os.environ,
                                                                                 "CODII_SQL_HOME": str(codii_home)})
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        keep = ("path", "lines", "line_number", "absolute_offset", "submatches")
        return [(r["type"], {k: r["data"].get(k) for k in keep}) if r["type"] in ("match", "context")
                else (r["type"], {k: r["data"]["stats"][k] for k in ("matched_lines", "matches", "bytes_searched",
                                                                      "bytes_printed")}) if r["type"] == "end"
                else (r["type"], {k: r["data"]["stats"][k] for k in ("bytes_printed", "searches", "bytes_searched")})
                if r["type"] == "summary"
                else (r["type"], r["data"].get("path")) for r in rows]

    for args in (["fn"], ["-C", "1", "fn"], ["-i", "FN"]):
        ours = events([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", "--json", *args])
        theirs = events([RG, "--no-config", "--json", "--sort", "path", *args])
        assert ours == theirs, (args, ours, theirs)
    for flag in ("-c", "-l", "--files-without-match", "--count-matches"):  # refused, as rg refuses them (exit 2)
        res = run("grep", "--no-update", "--json", flag, "fn", root)
        assert res.exit_code == 2 and "cannot be used with --json" in res.output, (flag, res.output)


def test_the_no_match_note_counts_only_what_rg_would_read(tmp_path):
    """A new user's note counted `.git/` as a default-excluded path rg would read; rg skips hidden entries too."""
    from codii_sql.service import grep_left_out

    meta = {"skipped_files": {"files": [{"path": ".git/", "reason": "default-excluded"},
                                        {"path": "node_modules/", "reason": "default-excluded"},
                                        {"path": "src/.cache/x.py", "reason": "too-large"},
                                        {"path": "src/big.py", "reason": "too-large"},
                                        {"path": "src/logo.png", "reason": "binary"}], "more": 3}}
    cb = Codebase(tmp_path, tmp_path / "i.db")
    [note] = grep_left_out.unread(meta, cb, [])
    assert "at least 2 paths rg would read (default excluded 1, too large 1; folders node_modules/)" in note.what, \
        note.what
    [scoped] = grep_left_out.unread(meta, cb, ["src"])
    assert "at least 1 path rg would read (too large 1)" in scoped.what, scoped.what
    assert grep_left_out.unread({"skipped_files": {"files": [{"path": ".git/", "reason": "default-excluded"}]}},
                                cb, []) == []


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_the_no_match_note_counts_what_codii_sqls_own_rules_leave_out(tmp_path):
    """A .codiiignore's or .codii.yaml's paths are read by rg, which knows neither file: a grep that found
    nothing said nothing of them (they were "ignored", as a .gitignore's are), where rg matched there."""
    root = built(write_tree(tmp_path / "repo", {
        "a.py": "x = 1\n", ".codiiignore": "notes/\n", ".codii.yaml": "ignore_patterns: ['gen.py']\n",
        ".ignore": "skip.py\n", "notes/n.py": "zebra_marker = 1\n", "gen.py": "zebra_marker = 2\n",
        "skip.py": "zebra_marker = 3\n"}))
    rg = subprocess.run([RG, "-l", "zebra_marker"], cwd=root, capture_output=True, text=True, check=False)
    assert sorted(rg.stdout.split()) == ["gen.py", "notes/n.py"]  # .ignore is rg's; the other two are not
    answer = grep(root, "zebra_marker")
    assert answer.matched_lines == 0
    note = answer.note(lambda h: h)
    assert "leaves out 2 paths rg would read (codii ignored 2; folders notes/)" in note, note
    assert "ignore_patterns rule leaves those out" in note, note
    skipped = json.loads(run("status", root, "--skipped", "--json").stdout)
    reasons = {f["path"]: f["reason"] for f in skipped["skipped_files"]["files"]}
    assert reasons["notes/"] == reasons["gen.py"] == "codii-ignored" and reasons["skip.py"] == "ignored", reasons
    refused = run("outline", root / "gen.py")
    assert "own ignore rules (.codiiignore, .codii.yaml" in refused.output, refused.output


def test_gnu_word_edges_are_word_edges_not_literal_angles():
    """A new user's `grep '\\<foo'` found nothing, silently: Python's re read `\\<` as a literal `<`. rg 14 and
    GNU grep read `\\<` and `\\>` as a word's start and end; `\\\\<` stays a backslash and an angle."""
    pattern = GrepPattern([r"\<foo\>"])
    assert [bool(pattern.regex.search(t)) for t in ("a foo b", "xfoo", "foox", "<foo>")] == [True, False, False, True]
    assert pattern.fts == '"foo"'
    assert GrepPattern([r"a\\<b"]).regex.search("a\\<b")


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_a_file_that_is_not_utf8_is_matched_and_printed_byte_for_byte_as_rg(tmp_path):
    """A new user's Latin-1 file was read as Latin-1: `café` matched `caf\\xe9` (rg finds no such text), the
    line printed re-encoded, and a stray byte counted 3 bytes (U+FFFD) in columns and offsets. Each byte
    that is not UTF-8 is now kept as it is: no pattern character matches it, and it prints as itself. Run
    as a separate process, as a user's shell runs it (stdout is bytes there)."""
    root = built(write_tree(tmp_path / "repo", {
        "latin.txt": "café au lait\nnaïve line here\nplain ascii line\n".encode("latin-1"),
        "mixed.txt": "utf8 café ok\n".encode() + b"broken \xff byte caf\xc3\xa9\n",
        "dot.txt": b"x\xe9y a.b a\xffb\n"}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    # `[^ ]+ line` over `na\xefve line`: Python's `[^ ]` matches the kept byte, so the match is searched again
    # past it and found from `ve` on, as rg finds it (search/grep.py, _refound).
    # `caf.*` over `caf\xe9 au lait`: rg's `.` stops before the byte, so its match is `caf` (a new user's lines
    # were lost whole: the match through the byte was dropped)
    for pattern in ["caf", "café", "a.b", "line", r"\xe9", "na.ve", "x.y", r"\w+", r"\w+ line", "[^ ]+ line", ".",
                    "caf.*", r"\S+", "broken.*", r"\S*", "[^ ]+"]:
        for flags in (["-n", "--column", "-b"], ["-o", "-n", "-b"], ["-c"], ["--vimgrep"],
                      ["-n", "-M", "9", "--max-columns-preview"]):  # cut in characters, never inside one
            ours = subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", *flags, pattern, "."],
                                  cwd=root, env=env, capture_output=True)
            theirs = subprocess.run([RG, *flags, pattern, "."], cwd=root, capture_output=True)
            assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines()), (pattern, flags, ours.stderr)
        ours = subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", "--json", pattern, "."],
                              cwd=root, env=env, capture_output=True)
        theirs = subprocess.run([RG, "--json", pattern, "."], cwd=root, capture_output=True)
        events = [[(e["type"], e["data"].get("lines"), e["data"].get("submatches"))
                   for e in map(json.loads, out.stdout.splitlines()) if e["type"] in ("match", "context")]
                  for out in (ours, theirs)]
        for e in events:
            for _, _, subs in e:
                for s in subs:
                    s.pop("match")
        assert sorted(map(str, events[0])) == sorted(map(str, events[1])), pattern
    # agents and pages get text any UTF-8 writer takes, the byte shown as U+FFFD, the offsets the file's
    found = grep(root, "line")
    as_json = json.dumps(found.to_dict({}), ensure_ascii=False).encode("utf-8")
    assert "na\ufffdve line here".encode() in as_json and '"submatches": [[6, 10]]' in as_json.decode()


def _on_terminal(cmd, cwd, env, stderr=False) -> str:
    """What ``cmd`` prints with a real terminal (a pty) as its standard output (and error, with ``stderr``)."""
    import pty

    leader, follower = pty.openpty()
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=follower,
                          stderr=follower if stderr else subprocess.DEVNULL) as proc:
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
    os.close(leader)
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_on_a_terminal_lines_come_by_file_in_rg_s_colours_and_plain_into_a_pipe(tmp_path):
    """A person at a terminal got `path:line:text` without colour, where rg prints each path once above its
    lines and marks the matches; a pipe still gets rg's plain `path:line:text`. NO_COLOR turns colour off."""
    root = built(write_tree(tmp_path / "repo", {"a.txt": "one line\nctx a\nctx b\nanother line\n",
                                                "b/c.txt": "x\nlast line\n"}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", "-C1", "line", "."]
    shown = _on_terminal(cmd, root, {**env, "TERM": "xterm"})
    assert shown.startswith("\x1b[35m./a.txt\x1b[0m\n\x1b[32m1\x1b[0m:one \x1b[1;31mline\x1b[0m\n"), shown
    plain = re.sub("\x1b\\[[0-9;]*m", "", shown)
    theirs = subprocess.run([RG, "--no-config", "--sort", "path", "--heading", "-n", "-C1", "line", "."], cwd=root,
                            capture_output=True, text=True).stdout
    assert plain == theirs
    assert _on_terminal(cmd, root, {**env, "TERM": "xterm", "NO_COLOR": "1"}) == theirs
    piped = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True).stdout
    assert piped.startswith("./a.txt:1:one line\n./a.txt-2-ctx a\n") and "\x1b" not in piped
    noted = _on_terminal([*cmd[:-2], "l.", "."], root, {**env, "TERM": "xterm"}, stderr=True)
    assert noted.rstrip("\n").endswith("(no trigram narrowed them)"), noted[-80:]  # no stray reset after a note
    colored = subprocess.run([*cmd[:-2], "--color", "always", "-o", "l.ne", "."], cwd=root, env=env,
                             capture_output=True, text=True).stdout
    assert colored.splitlines()[0] == "\x1b[35m./a.txt\x1b[0m:\x1b[32m1\x1b[0m:\x1b[1;31mline\x1b[0m", colored


def test_a_line_s_first_match_alone_gives_the_same_lines_as_every_match():
    """A CLI printing plain lines asks for each line's first match only (`.` over Django: 10 s of
    one-character matches); the lines, their numbers and first spans are those of the whole search."""
    from codii_sql.search.grep import matching_lines

    texts = ["a.b x.y\n\nxx yy x\nlast x", "é x é\nno\nx\n", "x\r\nyx\r\n", "\n\nx", "", "x",
             "xxxx yy\n\n" * 60 + "é x\nend x", "xx yx\n" * 50 + "\n" * 5000 + "x"]  # past the switch to walking
    for text in texts:
        for source in (".", "x", "x|y", "^", "$", r"\bx", "y*", "é"):
            pattern = GrepPattern([source])
            for given in (text, text.encode("utf-8")) if text.isascii() and "\r" not in text else (text,):
                if isinstance(given, bytes) and pattern.ascii_regex is None:
                    continue
                every = matching_lines(pattern, given)
                first = matching_lines(pattern, given, first_only=True)
                assert [(g.line, g.text, g.spans[:1]) for g in every] == [(g.line, g.text, g.spans) for g in first], \
                    (source, given)


def test_a_long_line_cut_for_an_agent_keeps_its_first_match(tmp_path):
    """MCP's grep_code cuts lines at 300 characters: a match at byte 80,008 came back as the line's head
    and `"submatches": []`, the agent told the line matched without seeing where."""
    normal = "".join(f"# normal line {i}\n" for i in range(400))  # not a minified file, which is not indexed
    root = built(write_tree(tmp_path / "repo", {
        "long.py": normal + "DATA = '" + "ab" * 40_000 + "NEEDLE_IN_LONG'\nNEEDLE_IN_LONG = 1\n"}))
    cut = grep(root, "NEEDLE_IN_LONG", max_columns=300)
    far, near = cut.files[0].lines
    assert far.spans == [(80_008, 80_022)] and "NEEDLE_IN_LONG" in far.text and far.text.startswith("…")
    assert far.text[1 + 80_008 - far.cut_from:][:14] == "NEEDLE_IN_LONG" and len(far.text) == 301  # … and 300
    assert near.spans == [(0, 14)] and near.cut_from == 0 and near.text == "NEEDLE_IN_LONG = 1"
    line = cut.to_dict({})["files"][0]["lines"][0]
    assert line["text_from"] == far.cut_from and line["submatches"] == [[80_008, 80_022]]


def test_a_dash_greps_standard_input_as_rg_does_and_builds_no_index(tmp_path, codii_home):
    """A new user's `git diff | codii-sql grep x -` was an error ("-: no such file"), and an agent piping text
    had no way to grep it; a byte that is not UTF-8 prints as itself, as from a file."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CODII_SQL_HOME": str(codii_home)}
    text = b"hello parse_header\nctx\nparse_header again caf\xe9\n"

    def piped(*args):
        return subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", *args], input=text, cwd=tmp_path,
                              env=env, capture_output=True)

    assert piped("parse_header", "-").stdout == b"1:hello parse_header\n3:parse_header again caf\xe9\n"
    assert piped("-c", "parse_header", "-").stdout == b"2\n"
    assert piped("-N", "-C1", "ctx", "-").stdout == b"hello parse_header\nctx\nparse_header again caf\xe9\n"
    assert piped("nothing", "-").returncode == 1
    both = piped("x", "-", ".")
    assert both.returncode == 2 and b"grepped alone" in both.stderr
    assert not any(codii_home.rglob("*.db"))  # nothing was indexed for it
    if RG:
        assert piped("-n", "-b", "parse_header", "-").stdout == subprocess.run(
            [RG, "-n", "-b", "parse_header", "-"], input=text, capture_output=True).stdout


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_case_blind_matching_leaves_the_turkish_dotless_and_dotted_i_alone_as_rg_does(tmp_path, codii_home):
    """Python folds `i` with `İ` and `I` with `ı`; rg's simple case folding relates neither to i/I. A new
    user's `-i in` over Django counted 4 lines more in its Turkish and Azeri catalogues, `-i ı` 3,412 files
    where rg found 38."""
    root = built(write_tree(tmp_path / "repo", {"tr.po": "İnşa edin\nIrmak\nıslak\ninfo\nDİKKAT listİ\n",
                                                "en.txt": "Index in it\n"}))
    env = {**os.environ, "CODII_SQL_HOME": str(codii_home)}
    for args in (["-i", "in"], ["-i", "i"], ["-i", "ı"], ["-i", "İ"], ["-i", "-o", "i\\w*"], ["-i", "-c", "I"],
                 ["-i", "--column", "list."], ["in"], ["-i", "-w", "info"],
                 # the same spelled inline or escaped, and a part kept case-sensitive (a new user's `(?-i:I)` matched i)
                 ["(?i)in"], ["-i", "\\x{131}"], ["-i", "\\x49"], ["-i", "(?-i:I)rmak"], ["-i", "(?-i:i)rmak"]):
        ours = subprocess.run([sys.executable, "-m", "codii_sql.cli", "grep", "--no-update", "-n", *args], cwd=root,
                              env={**env, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True)
        theirs = subprocess.run([RG, "--no-config", "--sort", "path", "-n", *args], cwd=root, capture_output=True,
                                text=True)
        assert ours.stdout == theirs.stdout, (args, ours.stdout, theirs.stdout)



@pytest.mark.skipif(RG is None, reason="needs ripgrep")
@pytest.mark.parametrize("flags", [["-m1", "-A2"], ["-m1", "-A1"], ["-m1", "-B1", "-A3"], ["-m2", "-A1", "-v"],
                                   ["-m1", "-C1", "--json"], ["-m2", "-A5"]])
def test_matching_lines_past_max_count_in_the_context_are_shown_as_matches_as_rg_shows_them(tmp_path, monkeypatch,
                                                                                          flags):
    """A new user's `-m1 -A3` printed a later matching line as context (`9-use pyo3::...`) where rg prints it as the
    match it is (`9:`), without context of its own and without counting it."""
    root = built(write_tree(tmp_path / "repo", {"t.txt": "foo one\nbar\nfoo two\nfoo three\nbaz\nfoo\nfoo\nqux\n"}))
    monkeypatch.chdir(root)
    theirs = subprocess.run([RG, "--no-config", "-n", *flags, "foo", "t.txt"], capture_output=True, text=True).stdout
    ours = run("grep", "-n", "--no-update", *flags, "foo", "t.txt").stdout
    if "--json" in flags:  # rg's timings and byte counts aside
        theirs, ours = ([ln for ln in out.splitlines() if '"type":"summary"' not in ln and '"type":"end"' not in ln]
                        for out in (theirs, ours))
    assert ours == theirs
    assert run("grep", "-c", "--no-update", *flags[:1], "foo", "t.txt").stdout == flags[0][2:] + "\n"


@pytest.mark.skipif(RG is None, reason="needs ripgrep")
@pytest.mark.parametrize("args", [["-S", "-o", "\\x46oo"], ["-S", "-o", "\\u{46}oo"], ["-S", "-o", "fo\\w"],
                                  ["-S", "-o", "[[:lower:]]+"], ["-S", "-o", "[a-z]{2}"], ["-S", "-o", "(?P<Up>o)o"],
                                  ["-o", "\\u{3c3}+"], ["-C", "150", "needle"]])
def test_smart_case_escapes_unicode_braces_and_wide_context_read_as_rg_reads_them(tmp_path, monkeypatch, args):
    """A new user's `-S '\\x46oo'` matched foo (rg: an escaped F is an upper-case letter), `\\u{3c3}` and `-C 150`
    were refused."""
    lines = ["Foo foo FOO σσ"] + [f"line {i}" for i in range(200)] + ["needle"] + [f"tail {i}" for i in range(200)]
    root = built(write_tree(tmp_path / "repo", {"s.txt": "\n".join(lines) + "\n"}))
    monkeypatch.chdir(root)
    theirs = subprocess.run([RG, "--no-config", "-n", *args, "s.txt"], capture_output=True, text=True)
    ours = run("grep", "-n", "--no-update", *args, "s.txt")
    assert (ours.exit_code, ours.stdout) == (theirs.returncode, theirs.stdout) and theirs.returncode == 0


@pytest.mark.skipif(RG is None, reason="needs ripgrep")
@pytest.mark.parametrize("args", [["--column", "-M", "20"], ["--column", "-M", "20", "--max-columns-preview"],
                                  ["-M", "20"], ["-M", "20", "--max-columns-preview"]])
def test_an_omitted_long_line_is_worded_as_rg_words_it_with_and_without_columns(tmp_path, monkeypatch, args):
    """A new user's `--column -M 20` read `[Omitted long matching line]` where rg 13 counts the line's matches."""
    root = built(write_tree(tmp_path / "repo", {"long.txt": "x" * 50 + " foo " + "y" * 50 + " foo\nshort foo\n"}))
    monkeypatch.chdir(root)
    theirs = subprocess.run([RG, "--no-config", "-n", *args, "foo", "long.txt"], capture_output=True, text=True).stdout
    assert run("grep", "-n", "--no-update", *args, "foo", "long.txt").stdout == theirs


@pytest.mark.skipif(RG is None, reason="needs ripgrep")
def test_case_blind_classes_take_the_turkish_i_letters_as_rg_folds_them(tmp_path, monkeypatch):
    """Python's folding relates İ with i and ı with I: a new user's `-i '[a-z]+'` took İstanbul whole where rg
    takes stanbul, and `-i '[^a-z ]+'` left İ out where rg takes it (270 of 300 fuzzed patterns agreed)."""
    root = built(write_tree(tmp_path / "repo", {"tr.txt": "İstanbul ılık IŞIK iğne KELVİN ſ\nDİYARBAKIR ıi Iİ\n"
                                                          "file İNDİR ılgın x_i\n"}))
    monkeypatch.chdir(root)
    for pattern in ("[a-z]+", "[^a-z ]+", "[i]", "[ı]", "[İ]", "[A-Z]+", "[h-j]", "[^h-j ]+", "[[:lower:]]+", "[ıİ]",
                    "[^ı]", "k[a-z]", "[a-z]ı", "[^I ]+", "\\w[^\\W\\d]", "[i-k]+", "in", "\\p{Lu}", "\\p{Ll}+",
                    "\\P{Lu}+", "\\p{Uppercase}"):
        theirs = subprocess.run([RG, "--no-config", "-i", "-o", "-n", pattern, "tr.txt"], capture_output=True,
                                text=True).stdout
        assert run("grep", "-i", "-o", "-n", "--no-update", pattern, "tr.txt").stdout == theirs, pattern


@pytest.mark.skipif(RG is None, reason="the rg binary is not installed")
def test_pcre2_flag_is_taken_as_rg_takes_it(tmp_path):
    """An agent used to rg writes -P for lookaround; it was refused ("No such option '-P'")."""
    root = built(write_tree(tmp_path / "repo", {"p.py": "def alpha():\n    return beta(1)\n\ndef gamma(x):\n    pass\n"}))
    for pattern in [r"(?<=def )\w+", r"\w+(?=\()", r"(\w)\1"]:
        ours = run("grep", "--no-update", "-n", "-P", pattern, root / "p.py")
        theirs = subprocess.run([RG, "-n", "-P", pattern, str(root / "p.py")], capture_output=True, text=True)
        assert (ours.exit_code, ours.stdout) == (theirs.returncode, theirs.stdout), pattern


def test_a_pattern_asked_again_is_compiled_once_and_a_bad_one_fails_every_time(tmp_path, monkeypatch):
    """A server's agents repeat patterns: the parses and compiles were ~1 ms of a 6-9 ms selective grep."""
    root = built(write_tree(tmp_path / "r", {"a.py": "def parse_header(x):\n    return x\n"}))
    parses = []
    real = trigrams.parse
    monkeypatch.setattr(trigrams, "parse", lambda *a: parses.append(a) or real(*a))
    first = grep(root, r"parse_\w+", word=True)
    once = len(parses)
    again = grep(root, r"parse_\w+", word=True)
    assert lines(first) == lines(again) == [("a.py", 1)] and once and len(parses) == once, parses
    assert lines(grep(root, r"parse_\w+\(")) == [("a.py", 1)] and len(parses) > once  # another: its own
    for _ in range(2):
        with pytest.raises(UsageError, match="position"):
            grep(root, "parse_(")


def test_a_nul_byte_past_the_first_8_kib_ends_what_is_searched_as_rg_stops_there(tmp_path, codii_home):
    """A new user's 100 KB text file with a NUL byte near its end (the index took it for text): grep printed the NUL
    and matched lines after it, where rg stops at the 64 KiB block holding it."""
    rows = b"".join(b"row %d marker\n" % i for i in range(2000))  # ~30 KB: the NUL in the first block
    far = b"".join(b"row %d marker\n" % i for i in range(12000))  # ~190 KB: the NUL in the third block
    root = built(write_tree(tmp_path / "r", {"plain.py": "marker = 1\n"}))
    (root / "near.txt").write_bytes(rows + b"\0binary marker\nafter marker\n")
    (root / "far.txt").write_bytes(far + b"\0binary marker\nafter marker\n")
    assert run("build", root, "--no-vectors").exit_code == 0
    found = grep(root, "marker")
    by_file = {f.path: [g.line for g in f.lines] for f in found.files}
    assert set(by_file) == {"plain.py", "far.txt"}, set(by_file)  # near.txt: its first block is binary
    assert by_file["far.txt"] == list(range(1, len(by_file["far.txt"]) + 1)) and 8000 < len(by_file["far.txt"]) < 12000
    assert not any("\0" in g.text or "after" in g.text for f in found.files for g in f.lines)
