"""Reading one scanned file for indexing: the size cap and binary, minified and private-key sniffing."""

from __future__ import annotations

import codecs
import os
import re
import stat
from pathlib import Path

from .config import DEFAULT_MAX_FILE_BYTES, is_notebook, size_cap
from .generated import COMMENT_LINE
from .scanned import SourceFile

#: A NUL byte in this many leading bytes marks a file binary (Git looks at the first 8000
#: bytes in ``buffer_is_binary``; the issue rounds to 8 KiB).
SNIFF_BYTES = 8192
#: A file longer than this whose lines average more than MINIFIED_MEAN_LINE bytes, and whose
#: long lines are as many as its lines of code, is a minified or generated bundle whatever its
#: name (a 677 KB one-line app.js made 1,490 one-line chunks of noise and cost minutes of model time).
MINIFIED_MIN_BYTES = 16 * 1024
MINIFIED_MEAN_LINE = 1000
#: Line ends as :func:`~codii_sql.text.decode_source` reads them: a lone CR ends a line too.
_LINE_END = re.compile(rb"\r\n?|\n")

#: A private key whatever the file is called (``deploy_key``): PEM/OpenSSH armour (RFC 7468).
_PRIVATE_KEY = re.compile(rb"\A\s*-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
#: The same armour inside a file (a service account's JSON, notes with a key pasted in: a new user's agent
#: was served both), then what may sit between a key's lines: line breaks, a string's escaped ones
#: (``\n`` in JSON), quotes; and a key's body. The smallest key, EC P-256 in PKCS #8, is ~184 base64
#: characters; a header alone (a parser's constant, a document naming the format) is no key.
_KEY_ARMOUR = re.compile(rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_KEY_GAPS = re.compile(rb"\s+|\\[nr]|[\"']")
_KEY_BODY = re.compile(rb"[A-Za-z0-9+/]{128}")


def read_file(root: Path, f: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes | str:
    """The bytes of one scanned file, or why it cannot be indexed.

    Args:
        root: the root that was scanned.
        f: a file from :func:`scan`.
        max_file_bytes: the size cap (bytes) used for the scan; the file may have grown since.
            A notebook may be larger (:func:`~.config.size_cap`): its outputs are not indexed.
    Returns:
        bytes: the whole content, or a reason string: ``"vanished"`` (deleted since the
        scan), ``"unreadable"``, ``"not-regular-file"`` (replaced by a folder, FIFO or device
        since the scan; opened non-blocking, so it never hangs), ``"too-large"``, ``"binary"``
        (a NUL byte in the first :data:`SNIFF_BYTES`, unless the file starts with a UTF-16
        byte-order mark), ``"minified"`` (:func:`is_minified`; never a notebook, whose long lines are
        outputs), ``"secret"`` (a private key).
    """
    cap = size_cap(f.path, max_file_bytes)
    try:
        fd = os.open(os.path.join(root, f.path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return "vanished"
    except OSError:
        return "unreadable"
    try:
        # fstat before wrapping: open() of a folder's descriptor raises IsADirectoryError (a
        # branch switch turning mod.py into mod.py/ ended the whole build with it).
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not-regular-file"
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read(cap + 1)
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)
    if len(data) > cap:
        return "too-large"
    head = data[:SNIFF_BYTES]
    if is_binary(head):
        return "binary"
    if is_minified(data) and not is_notebook(f.path):
        return "minified"
    if holds_private_key(data):
        return "secret"
    return data


def is_minified(data: bytes) -> bool:
    """True for a file minified as a whole: over :data:`MINIFIED_MIN_BYTES`, lines of over
    :data:`MINIFIED_MEAN_LINE` bytes on average (lines ended by LF, CRLF or a lone CR, as the
    decoder ends them), and at least as many such long lines as short lines of code (a bundle's
    licence banner and ``//# sourceMappingURL`` are comments). One long line in a module (a base64
    constant, a data URI) leaves it source: its other lines are code, and the chunker windows the long one."""
    if len(data) <= MINIFIED_MIN_BYTES:
        return False
    ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    if len(data) <= MINIFIED_MEAN_LINE * (ends + 1):
        return False
    long = code = 0
    for line in _LINE_END.split(data):
        if len(line) > MINIFIED_MEAN_LINE:
            long += 1
        elif line.strip() and not COMMENT_LINE.match(line):
            code += 1
    return long >= code


def is_binary(data: bytes) -> bool:
    """True when ``data`` (a file's first :data:`SNIFF_BYTES`) holds a NUL byte and is not UTF-16
    (which has NULs in every ASCII character and opens with a byte-order mark), or opens as a PDF
    (``%PDF-``: Illustrator's .ai files are PDFs, often without a NUL in their first 8 KiB)."""
    if data.startswith(b"%PDF-"):
        return True
    return b"\0" in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def is_private_key(data: bytes) -> bool:
    """True when ``data`` (a file's first bytes) opens with a PEM or OpenSSH private-key header."""
    return _PRIVATE_KEY.match(data) is not None


def holds_private_key(data: bytes) -> bool:
    """True when ``data`` (a whole file) opens with a private-key header (:func:`is_private_key`), or holds one
    anywhere followed within 512 bytes by a key's body: 128 base64 characters once line breaks, escaped line
    breaks and quotes are taken out. One scan for the armour's words (~4 GB/s here) where none is."""
    if is_private_key(data[:SNIFF_BYTES]):
        return True
    if b"PRIVATE KEY-----" not in data:
        return False
    return any(_KEY_BODY.match(_KEY_GAPS.sub(b"", data[m.end():m.end() + 512])) for m in _KEY_ARMOUR.finditer(data))
