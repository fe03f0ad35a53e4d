"""Swift the grammar misreads: conditional compilation inside a ``switch``, hidden from the parser.

tree-sitter-swift reads ``#if os(iOS)`` between a declaration's members, not between a ``switch``'s cases:
one such block in expo's ``AppContext.swift`` made the file one error from line 8 to 944, and its class and
40 methods were lost (a new user's ``symbol AppContext``). Its directive lines as spaces leave both branches'
cases in one ``switch``, which the grammar reads; the chunks keep the file's own text.
"""

from __future__ import annotations

import re

#: A line of conditional compilation: ``#if``, ``#elseif``, ``#else``, ``#endif``.
_DIRECTIVE = re.compile(rb"(?m)^[ \t]*#(?:if|elseif|else|endif)\b[^\n]*")


def hide_directives(data: bytes) -> bytes:
    """``data`` (a Swift file's UTF-8) with each conditional compilation line as spaces, for the parser only."""
    return _DIRECTIVE.sub(lambda m: b" " * len(m.group()), data)
