"""A file's preamble of imports as a chunk of its own kind, ``imports``: ranking weighs it as it weighs a licence.

A module chunk that only imports (``require 'time'``, ``import json``, ``#include <stdio.h>``) names what a
file uses, not what it does; as a three-line chunk BM25's length norm lifted it over the code for any query
word that is a module's name (an agent's stand-in on rack: "constant time string comparison" put three
files' ``# frozen_string_literal: true`` + ``require 'time'`` at #3-#5).
"""

from __future__ import annotations

import re

#: One import line (stripped), by language: what only imports or declares the file's package.
_IMPORT = {
    "python": r"(import|from\s+[\w.]+\s+import)\b.*",
    "javascript": r"import\b.*|export\s+(\*|\{[^}]*\})\s*(as\s+\w+\s+)?from\b.*"
                  r"|(const|let|var)\s+[\w${}\s,:]+=\s*require\(.*|['\"]use strict['\"];?",
    "ruby": r"(require|require_relative|load|autoload)\b.*",
    "go": r"package\s+\w+|import\b.*|\)|(\w+\s+|[._]\s+)?\"[^\"]*\"",
    "rust": r"(pub(\([\w\s]+\))?\s+)?(use\b.*|mod\s+\w+\s*;|extern\s+crate\b.*)|#!\[.*",
    "java": r"(package|import)\s.*",
    "c": r"#\s*(include|import)\b.*|#\s*pragma\s+once",
    "csharp": r"(global\s+)?using\s+[\w.=\s<>,]+;|namespace\s+[\w.]+\s*;",
    "php": r"<\?php|(namespace|use)\s+[\\\w]+.*;|(require|include)(_once)?\b.*|declare\s*\(.*",
    "swift": r"(@testable\s+)?import\s.*",
    "solidity": r"pragma\s.*|import\b.*",
    "proto": r"(syntax|edition)\s*=.*|(package|import|option)\s.*",
    "ocaml": r"open!?\s+[\w.]+",
}
_IMPORT.update(typescript=_IMPORT["javascript"], tsx=_IMPORT["javascript"], kotlin=_IMPORT["java"],
               cpp=_IMPORT["c"])
_LINE = {language: re.compile(pattern) for language, pattern in _IMPORT.items()}
#: A comment line (or a Ruby magic comment), blank lines aside: neither makes a chunk code nor imports. In C
#: and C++ a ``#`` line is the preprocessor's (``#define`` is code).
_COMMENT = re.compile(r"(#|//|/\*|\*|--|;)")
_C_COMMENT = re.compile(r"(//|/\*|\*)")


def only_imports(content: str, language: str | None) -> bool:
    """Whether every line of ``content`` that is not blank or a comment imports (or declares the package) in
    ``language``, and one at least does; False for a language without rules here."""
    line_rule = _LINE.get(language or "")
    if line_rule is None:
        return False
    comment = _C_COMMENT if language in ("c", "cpp") else _COMMENT
    found = False
    for raw in content.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line_rule.fullmatch(line):
            found = True
        elif not comment.match(line):
            return False
    return found
