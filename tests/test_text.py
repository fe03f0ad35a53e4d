"""Decoding source bytes and splitting identifiers."""

import codecs

from codii_sql.text import decode_source, identifier_subtokens, split_identifier


def test_split_identifier():
    assert split_identifier("getUserName") == ["get", "user", "name"]
    assert split_identifier("HTTPServer2") == ["http", "server", "2"]
    assert split_identifier("parse_header") == ["parse", "header"]
    assert split_identifier("__init__") == ["init"]


def test_identifier_subtokens_only_from_compound_identifiers():
    assert identifier_subtokens("x = getUserName(plain)") == "get user name"


def test_decode_rules():
    assert decode_source(codecs.BOM_UTF8 + "é".encode()) == "é"
    assert decode_source("héllo\n".encode("utf-16")) == "héllo\n"
    assert decode_source("café".encode("latin-1") * 10) == "café" * 10
    assert decode_source(b"ok \xff " + b"x" * 500) == "ok \ufffd " + "x" * 500
    # A short UTF-8 file with a stray byte (a new user's): its valid non-ASCII characters outnumber the invalid
    # bytes, so it stays UTF-8 (it read as Latin-1, `naÃ¯ve`, and grep 'café' missed it).
    assert decode_source('x = "café"\ny = b"'.encode() + b"\xff" + '"\nz = "naïve"\n'.encode()) == \
        'x = "café"\ny = b"\ufffd"\nz = "naïve"\n'
    assert decode_source("naïve café".encode("latin-1")) == "naïve café"  # Latin-1 holds no valid UTF-8 pair
    # Fewer valid characters than stray bytes still say UTF-8 (a new user's changelog with cp1252 quotes;
    # a short file with one `é` and three stray bytes): both read as Latin-1, `JosÃ©`.
    changelog = b"".join(b"* Fixed bug %d reported by Jos\xc3\xa9 Mu\xc3\xb1oz\n" % i if i % 2 == 0 else
                         b"* Changed \x93default\x94 behaviour %d\n" % i for i in range(40))
    assert "José Muñoz" in decode_source(changelog)
    assert "# café utf8" in decode_source(b'def foo():\n    return "ok\xff\xfe here"\n# caf\xc3\xa9 utf8 \x80\n')
    assert decode_source(b"a\rb\r\nc\n") == "a\nb\r\nc\n"
    assert "\x00" not in decode_source(b"a\x00b")


def test_lone_cr_replacement_keeps_byte_offsets():
    raw = "α\rβ\r\nγ".encode()
    assert len(decode_source(raw).encode()) == len(raw)
