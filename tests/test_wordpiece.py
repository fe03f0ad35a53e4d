"""count_tokens splits plain ASCII into BERT's words itself: its counts must equal the tokenizer's."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from codii_sql.models import wordpiece
from codii_sql.models.wordpiece import count_tokens, get_tokenizer

REPO = Path(__file__).resolve().parent.parent


def tokenizer_counts(texts: list[str]) -> list[int]:
    return [len(e.ids) - 2 for e in get_tokenizer(truncate=False).encode_batch(texts)]


def test_every_line_of_this_repository_counts_as_the_tokenizer_counts():
    lines = []
    for path in sorted([*REPO.glob("codii_sql/**/*.py"), *REPO.glob("sql/*.sql"), *REPO.glob("tests/*.py"),
                        *REPO.glob("docs/*.md"), REPO / "README.md"]):
        lines += [s.strip() for s in path.read_text(encoding="utf-8").split("\n") if s.strip()]
    assert len(lines) > 20_000
    wordpiece._pieces.clear()
    assert count_tokens(lines) == tokenizer_counts(lines)
    assert count_tokens(lines) == tokenizer_counts(lines)  # the second time from the word cache


EDGES = [
    "", " ", "\t", "parse_header(x)", "getUserName", "x\ty", "a\x0bb", "a\x0cb", "a\x7fb", "nul\x00byte",
    "café", "CAFÉ naïve", "获取用户名称", "emoji 🙂 here", "Ω≈ç√", "x" * 99, "y" * 100, "z" * 101,
    "0x1f2e3d4c5b6a7988", "!!!???", "`~!@#$%^&*()-=+[]{}\\|;:'\",.<>/?", "a" + "b" * 150 + " c",
    "\u00a0non-breaking", "zero\u200bwidth", "\u202eoverride", "line\r\nbreak", "tab\tsep\tvalues",
    "x[SEP]y", "[CLS] query [SEP]", "[cls] lower", "[MASK]", "[ PAD ]",
]


def test_edge_texts_count_as_the_tokenizer_counts():
    assert count_tokens(EDGES) == tokenizer_counts(EDGES)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=60), max_size=8))
def test_any_text_counts_as_the_tokenizer_counts(texts):
    assert count_tokens(texts) == tokenizer_counts(texts)
