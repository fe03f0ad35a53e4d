"""The model's WordPiece tokenizer (BERT uncased vocab shipped in the package), loaded once per process."""

from __future__ import annotations

import functools
import re
from importlib import resources

from tokenizers import BertWordPieceTokenizer

#: all-MiniLM-L6-v2 was trained on at most 256 word pieces (sentence-transformers config).
MAX_TOKENS = 256


def vocab_path() -> str:
    """Path of the bundled ``vocab.txt`` (30,522 entries, md5 64800d5d8528ce344256daf115d4965e)."""
    return str(resources.files("codii_sql.data") / "vocab.txt")


@functools.cache
def get_tokenizer(truncate: bool = True) -> BertWordPieceTokenizer:
    """A process-wide tokenizer: lower-cased, ``[CLS] ... [SEP]``, truncated at 256 ids if ``truncate``.

    Reproduces the reference ids in ``../shared/models/`` exactly (``BertWordPieceTokenizer``
    with ``lowercase=True``, per the model's ``tokenizer_config.json``). Two instances, so
    counting never toggles the truncation of the one the embedder uses from another thread.
    """
    tok = BertWordPieceTokenizer(vocab_path(), lowercase=True)
    if truncate:
        tok.enable_truncation(MAX_TOKENS)
    return tok


#: Printable ASCII and the whitespace BERT's normalizer turns into spaces: text the word split
#: below reproduces exactly (anything else, e.g. accents, CJK or control characters, goes to the tokenizer).
_PLAIN = re.compile(r"[\t\n\r -~]*")
#: BERT's pre-tokenizer over lower-cased plain text: runs of letters and digits, and each ASCII
#: punctuation character alone (``_`` included: ``parse_header`` is three words).
_WORD = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
#: Word pieces per word seen so far in this process (code repeats its words: a chunking worker asks
#: the tokenizer about each word once). Cleared past :data:`_MAX_WORDS` entries (~100 bytes each).
_pieces: dict[str, int] = {}
_MAX_WORDS = 500_000


@functools.cache
def _special_tokens() -> re.Pattern:
    """The tokenizer's special tokens (``[CLS]``, ``[SEP]``...), which it matches in raw text, case and all."""
    added = get_tokenizer(truncate=False).get_added_tokens_decoder().values()
    return re.compile("|".join(re.escape(t.content) for t in added))


def count_tokens(texts: list[str]) -> list[int]:
    """Number of word pieces of each text, without ``[CLS]``/``[SEP]`` and without truncation.

    Exactly what the tokenizer counts, about 8x cheaper on code: a plain-ASCII text is split into
    BERT's words here (lower-cased, split at whitespace and punctuation), and each word's pieces
    are looked up, the tokenizer asked only about words not seen before in this process. Other
    texts (and those holding a special token such as ``[SEP]``) go to the tokenizer whole. (Counting every line of a file with the tokenizer was ~45% of
    chunking's CPU; the counts are compared with the tokenizer's in tests/test_wordpiece.py.)
    """
    tok = get_tokenizer(truncate=False)
    special = _special_tokens()
    counts = [0] * len(texts)
    words: dict[int, list[str]] = {}
    other: list[int] = []
    whole = "\n".join(texts)
    if whole.isascii() and _PLAIN.fullmatch(whole) and not ("[" in whole and special.search(whole)):
        # One check for the whole batch (a file's lines, as a rule); split again where no text holds a line break.
        lowered = whole.lower().split("\n") if whole.count("\n") == len(texts) - 1 else [t.lower() for t in texts]
        words = dict(enumerate(map(_WORD.findall, lowered)))
    else:
        for i, text in enumerate(texts):
            if text.isascii() and _PLAIN.fullmatch(text) and not ("[" in text and special.search(text)):
                words[i] = _WORD.findall(text.lower())
            else:
                other.append(i)
    if len(_pieces) > _MAX_WORDS:
        _pieces.clear()
    new = list(set().union(*words.values()).difference(_pieces))
    for word, enc in zip(new, tok.encode_batch(new, add_special_tokens=False)):
        _pieces[word] = len(enc.ids)
    pieces = _pieces.__getitem__
    for i, ws in words.items():
        counts[i] = sum(map(pieces, ws))
    for i, enc in zip(other, tok.encode_batch([texts[i] for i in other])):
        counts[i] = len(enc.ids) - 2
    return counts
