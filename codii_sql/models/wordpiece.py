"""The model's WordPiece tokenizer (BERT uncased vocab shipped in the package), loaded once per process."""

from __future__ import annotations

import functools
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


def count_tokens(texts: list[str]) -> list[int]:
    """Number of word pieces of each text, without ``[CLS]``/``[SEP]`` and without truncation."""
    return [len(e.ids) - 2 for e in get_tokenizer(truncate=False).encode_batch(texts)]
