"""Git's ``wildmatch`` as Python regexes: one gitignore or gitattributes pattern -> a bytes regex.

A translation of git's ``dir.c`` (``parse_path_pattern``, ``match_basename``, ``match_pathname``)
and ``wildmatch.c`` with ``WM_PATHNAME``, so that a pattern matches exactly the paths Git's does:

* ``*`` and ``?`` never match ``/``; ``[...]`` never matches ``/`` either, takes ``!`` or ``^``
  for negation, ranges, ``\\`` escapes and the POSIX classes (``[:alpha:]``: ASCII only, as Git's);
  a ``]`` right after the opening ``[`` belongs to the class; an unclosed class or an unknown
  ``[:class:]`` makes the pattern match nothing, as do a trailing ``\\``.
* ``**`` between slashes (or at an end) matches any number of folders: ``**/x``, ``a/**/b``,
  ``a/**``; elsewhere (``a**b``) it is a ``*``, except right after a pattern's literal head, which
  Git matches apart (``a**/*`` is ``a`` then ``**/*``: it matches ``a.py``).
* A pattern without a ``/`` (besides one trailing ``/``) matches the last component at any depth;
  with one it is anchored at the folder of its file (one leading ``/`` is dropped). A trailing
  ``/`` matches folders only.

Matching works on UTF-8 bytes, as Git's does: ``?`` is one byte, so it does not match ``ü``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Characters that make a pattern component a glob rather than a literal name (git's is_glob_special).
GLOB_SPECIAL = frozenset(b"*?[\\")
_SLASH = ord("/")
#: A regex no path matches (an unclosed class, a trailing backslash).
NEVER = b"(?!)"
#: What a basename pattern may match before the last component.
ANY_FOLDERS = b"(?:.*/)?"

_CLASSES = {
    b"alnum": lambda c: chr(c).isalnum(), b"alpha": lambda c: chr(c).isalpha(),
    b"blank": lambda c: c in (9, 32), b"cntrl": lambda c: c < 32 or c == 127,
    b"digit": lambda c: chr(c).isdigit(), b"graph": lambda c: 0x21 <= c <= 0x7E,
    b"lower": lambda c: chr(c).islower(), b"print": lambda c: 0x20 <= c <= 0x7E,
    b"punct": lambda c: 0x21 <= c <= 0x7E and not chr(c).isalnum(), b"space": lambda c: c in (9, 10, 13, 32),
    b"upper": lambda c: chr(c).isupper(), b"xdigit": lambda c: chr(c) in "0123456789abcdefABCDEF",
}


@dataclass(frozen=True, slots=True)
class Pattern:
    """One parsed pattern line.

    Attributes:
        core: the regex (bytes) of the pattern itself: of the last component for a ``basename``
            pattern, else of the whole path relative to the pattern's folder.
        negated: the line started with ``!``.
        dir_only: the line ended with ``/``: it matches folders only.
        basename: no inner ``/``: the pattern matches the last component at any depth.
        last: the pattern's last component (for telling literal names from globs).
    """

    core: bytes
    negated: bool
    dir_only: bool
    basename: bool
    last: bytes

    @property
    def regex(self) -> bytes:
        """Matches (``fullmatch``) the whole path relative to the pattern's folder, as UTF-8 bytes."""
        return ANY_FOLDERS + self.core if self.basename else self.core


def parse(line: bytes) -> Pattern | None:
    """The pattern of one line of an ignore file, after Git's trimming; None for a blank line or
    a comment. A line that can match nothing (``!``, ``/``, ``a\\``) gives a pattern of
    :data:`NEVER`."""
    if not line or line.startswith(b"#"):
        return None
    p = _trim_trailing_spaces(line)
    negated = p.startswith(b"!")
    if negated:
        p = p[1:]
    dir_only = p.endswith(b"/")
    if dir_only:
        p = p[:-1]
    basename = b"/" not in p
    last = p.rsplit(b"/", 1)[-1]
    if not p:
        return Pattern(NEVER, negated, dir_only, basename, last)
    if basename:
        return Pattern(translate(p), negated, dir_only, True, last)
    p = p[1:] if p.startswith(b"/") else p
    # match_pathname compares the literal head itself and wildmatches the rest as a pattern of its
    # own, so a "**" right after the head counts as at a pattern's start: Git matches "a**/*" with a.py.
    head = next((i for i, ch in enumerate(p) if ch in GLOB_SPECIAL), len(p))
    return Pattern(re.escape(p[:head]) + translate(p[head:]), negated, dir_only, False, last)


def _trim_trailing_spaces(line: bytes) -> bytes:
    """``line`` without its trailing unescaped spaces (git's trim_trailing_spaces; tabs stay)."""
    last_space, i = None, 0
    while i < len(line):
        ch = line[i]
        if ch == 0x20:
            last_space = i if last_space is None else last_space
        elif ch == 0x5C:  # a backslash keeps the next character, a space included
            i += 1
            if i == len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def translate(p: bytes) -> bytes:
    """The regex (bytes) of wildmatch pattern ``p`` with ``WM_PATHNAME``, for ``fullmatch``."""
    out: list[bytes] = []
    i, n = 0, len(p)
    while i < n:
        ch = p[i]
        if ch == 0x5C:  # "\x": x literally; a trailing backslash matches nothing
            if i + 1 == n:
                return NEVER
            out.append(re.escape(p[i + 1:i + 2]))
            i += 2
        elif ch == 0x3F:  # ?
            out.append(b"[^/]")
            i += 1
        elif ch == 0x2A:  # *
            j = i
            while j < n and p[j] == 0x2A:
                j += 1
            after_slash = i == 0 or p[i - 1] == _SLASH
            if j - i >= 2 and after_slash and p[j:j + 1] == b"/":
                out.append(b"(?:.*/)?")  # "**/": zero or more folders
                j += 1
            elif j - i >= 2 and after_slash and (j == n or p[j:j + 2] == b"\\/"):
                out.append(b".*")  # a trailing "**" (or one before an escaped "/"): anything, "/" included
            else:
                out.append(b"[^/]*")
            i = j
        elif ch == 0x5B:  # [
            regex, i = _bracket(p, i + 1)
            if regex is None:
                return NEVER
            out.append(regex)
        else:
            out.append(re.escape(p[i:i + 1]))
            i += 1
    return b"".join(out)


def _bracket(p: bytes, i: int) -> tuple[bytes | None, int]:
    """The class opening before ``p[i]``, as a regex, and the index after its ``]``; None for a
    class Git aborts on (unclosed, or an unknown ``[:name:]``)."""
    n = len(p)
    negated = i < n and p[i] in b"!^"
    i += negated
    members: set[int] = set()
    prev = 0
    while True:
        if i >= n:
            return None, i
        ch = p[i]
        if ch == 0x5C:
            ch, i = _literal(p, i)
            if ch is None:
                return None, i
            members.add(ch)
        elif ch == 0x2D and prev and i + 1 < n and p[i + 1] != 0x5D:  # a range prev-hi
            hi, i = _literal(p, i + 1)
            if hi is None:
                return None, i
            members.update(range(prev, hi + 1))
            ch = 0
        elif ch == 0x5B and i + 1 < n and p[i + 1] == 0x3A:  # [:name:]
            end = p.find(b"]", i + 2)
            if end < 0:
                return None, i
            name = p[i + 2:end]
            if not name.endswith(b":"):  # no ":]": the "[" is a member, the scan goes on after it
                members.add(ch)
            else:
                test = _CLASSES.get(name[:-1])
                if test is None:
                    return None, i
                members.update(c for c in range(128) if test(c))
                ch, i = 0, end
        else:
            members.add(ch)
        prev = ch
        i += 1
        if i < n and p[i] == 0x5D:
            break
    wanted = (set(range(256)) - members if negated else members) - {_SLASH}
    if not wanted:
        return NEVER, i + 1
    return b"[" + b"".join(re.escape(bytes([c])) for c in sorted(wanted)) + b"]", i + 1


def _literal(p: bytes, i: int) -> tuple[int | None, int]:
    """The byte at ``p[i]`` (the next one when that is a backslash) and its index; None past the end."""
    i += p[i] == 0x5C
    return (p[i], i) if i < len(p) else (None, i)


#: Globs one ``{a,b}`` alternation may expand to at most ('{a,b}{c,d}...' grows as a product).
MAX_BRACE_EXPANSIONS = 64


def unclosed_brace(text: str) -> bool:
    """Whether ``text`` opens a ``{`` (not escaped by ``\\``) that it never closes: rg refuses such a glob,
    which :func:`expand_braces` keeps as it is."""
    depth, i = 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 1
        elif text[i] == "{":
            depth += 1
        elif text[i] == "}" and depth:
            depth -= 1
        i += 1
    return depth > 0


def expand_braces(glob: str) -> list[str]:
    """``glob``'s ``{a,b,...}`` alternations expanded, as rg's globs (globset) read them: ``*.{py,rst}``
    -> ``*.py``, ``*.rst`` (a leading ``!`` kept on each); nested braces too; a brace escaped with ``\\``,
    without a comma, or without its closing one stays as it is (gitignore's own syntax has no braces).
    At most :data:`MAX_BRACE_EXPANSIONS` globs."""
    depth, start = 0, -1
    commas: list[int] = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            if depth == 0:
                start, commas = i, []
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and commas:
                cuts = [start, *commas, i]
                head, tail = glob[:start], glob[i + 1:]
                out: list[str] = []
                for a, b in zip(cuts, cuts[1:]):
                    for rest in expand_braces(tail):
                        out += expand_braces(head + glob[a + 1:b] + rest)
                        if len(out) >= MAX_BRACE_EXPANSIONS:
                            return out[:MAX_BRACE_EXPANSIONS]
                return list(dict.fromkeys(out))
        elif ch == "," and depth == 1:
            commas.append(i)
        i += 1
    return [glob]
