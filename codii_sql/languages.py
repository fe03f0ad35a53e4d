"""Language of a source file from its path, using tree-sitter-language-pack grammar names."""

from __future__ import annotations

import posixpath
import re

#: Languages chunked on their syntax tree by :mod:`codii_sql.chunk`; every other language
#: (and ``None``) is chunked in overlapping line windows.
AST_LANGUAGES: frozenset[str] = frozenset({
    "python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "csharp",
    "ruby", "php", "kotlin", "swift", "bash", "markdown", "sql",
    "perl", "scala", "lua", "elisp", "elixir", "erlang", "haskell",
    "solidity", "proto", "ocaml", "ocaml_interface", "clojure", "hcl",
})

# Grammar names where tree-sitter-language-pack has a grammar, plain names otherwise.
_EXTENSIONS: dict[str, str] = {
    "py": "python", "pyi": "python", "pyw": "python",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "go": "go", "rs": "rust", "java": "java",
    # ``.h`` goes to C (the C++ grammar rejects C code using C++ keywords such as ``new`` as
    # identifiers) unless its text is C++: see :func:`detect_language`.
    "c": "c", "h": "c",
    "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "c++": "cpp", "hh": "cpp", "hpp": "cpp",
    "hxx": "cpp", "h++": "cpp", "ipp": "cpp", "tpp": "cpp", "inl": "cpp", "cu": "cpp",
    "cs": "csharp", "rb": "ruby", "rake": "ruby", "gemspec": "ruby",
    "php": "php", "phtml": "php", "kt": "kotlin", "kts": "kotlin", "swift": "swift",
    "sh": "bash", "bash": "bash", "zsh": "bash", "ksh": "bash",
    "md": "markdown", "markdown": "markdown", "mdx": "markdown",
    "json": "json", "jsonc": "json", "json5": "json", "ipynb": "json",
    "yml": "yaml", "yaml": "yaml", "toml": "toml",
    "html": "html", "htm": "html", "xhtml": "html", "xml": "xml", "svg": "xml", "xsd": "xml",
    "css": "css", "scss": "scss", "sass": "scss", "less": "less",
    "sql": "sql", "rst": "rst", "txt": "text", "text": "text", "adoc": "asciidoc",
    "ini": "ini", "cfg": "ini", "conf": "ini", "properties": "properties", "env": "dotenv",
    "mk": "make", "cmake": "cmake", "dockerfile": "dockerfile",
    "vue": "vue", "svelte": "svelte", "lua": "lua", "r": "r", "scala": "scala", "sc": "scala",
    "pl": "perl", "pm": "perl", "hs": "haskell", "ex": "elixir", "exs": "elixir",
    "erl": "erlang", "hrl": "erlang", "el": "elisp", "dart": "dart", "m": "objc", "mm": "objc", "proto": "proto",
    "graphql": "graphql", "gql": "graphql", "tex": "latex", "csv": "csv", "tsv": "tsv",
    "ps1": "powershell", "bat": "batch", "cmd": "batch", "zig": "zig", "nim": "nim",
    "jl": "julia", "clj": "clojure", "cljs": "clojure", "cljc": "clojure", "ml": "ocaml", "mli": "ocaml_interface", "fs": "fsharp", "groovy": "groovy",
    "gradle": "groovy", "tf": "hcl", "hcl": "hcl", "sol": "solidity", "v": "verilog",
    "vhd": "vhdl", "asm": "asm", "s": "asm", "j2": "jinja", "jinja": "jinja",
}

# Files recognised by their whole name (compared case-sensitively, as on disk).
_FILE_NAMES: dict[str, str] = {
    "Makefile": "make", "makefile": "make", "GNUmakefile": "make",
    "Dockerfile": "dockerfile", "Containerfile": "dockerfile",
    "CMakeLists.txt": "cmake", "Rakefile": "ruby", "Gemfile": "ruby", "Podfile": "ruby",
    "Vagrantfile": "ruby", "Jenkinsfile": "groovy", "BUILD": "starlark", "WORKSPACE": "starlark",
    "Pipfile": "toml", "Cargo.lock": "toml", "poetry.lock": "toml", "go.mod": "gomod",
    ".bashrc": "bash", ".bash_profile": "bash", ".profile": "bash", ".zshrc": "bash",
    ".gitignore": "text", ".dockerignore": "text", ".editorconfig": "ini", ".env": "dotenv",
    "README": "text", "LICENSE": "text", "COPYING": "text", "NOTICE": "text",
    "AUTHORS": "text", "CHANGELOG": "text", "CONTRIBUTORS": "text",
}


#: Interpreters named by a ``#!`` line (the program's base name, version suffixes included).
_INTERPRETERS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), lang) for p, lang in (
    (r"python[\d.]*", "python"), (r"(ba|z|da|k)?sh", "bash"), (r"node(js)?|deno|bun", "javascript"),
    (r"ts-node|tsx", "typescript"),
    (r"ruby[\d.]*", "ruby"), (r"perl[\d.]*", "perl"),
))


def shebang_language(first_line: str) -> str | None:
    """Language of the interpreter a ``#!`` line names (``#!/bin/sh``, ``#!/usr/bin/python3.12``,
    ``#!/usr/bin/env -S python3 -u``), or ``None`` for no ``#!`` line or another interpreter."""
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if words and posixpath.basename(words[0]) == "env":
        # env's own options (-S, -i) and VAR=value assignments come before the program.
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    program = posixpath.basename(words[0]) if words else ""
    return next((lang for pattern, lang in _INTERPRETERS if pattern.fullmatch(program)), None)


#: A line only C++ has (a namespace or template, a class with a body or a base, an access
#: specifier): a ``.h`` file holding one is C++. Parsed as C, fmt's headers lost their classes
#: and namespaces (``enum class color`` became a function spanning the file).
#: Also C++'s: a standard header without ``.h`` (``#include <cstring>``), ``using``, an inline namespace, a
#: statement naming a scope (``detail::value_and_holder v_h;``, not in a comment or after a quote) and
#: ``= default;``: pybind11's headers without a class or template were read as C (a ``throw e();`` became a
#: function); none of the Linux kernel's 26,318 headers holds one.
_CPP_LINE = re.compile(r"^[ \t]*(?:namespace(?:[ \t]+[\w:]+)?[ \t]*\{|template[ \t]*<|"
                       r"class[ \t]+\w+[^;()\n]*(?:\{|:)|(?:public|protected|private)[ \t]*:(?!:)|"
                       r"#[ \t]*include[ \t]*<[\w/]+>|using[ \t]+(?:namespace[ \t]|\w+[ \t]*=)|inline[ \t]+namespace\b|"
                       r'(?![ \t]|//|/?\*)[^\n"]*?\b[A-Za-z_]\w*::[A-Za-z_~][^\n]*;[ \t]*$|'
                       r"[^\n]*\)[ \t]*=[ \t]*(?:default|delete)[ \t]*;)", re.M)


#: Editors' modelines naming a file's language: Emacs's on the first line (``-*- shell-script -*-``,
#: ``-*- mode: python; coding: utf-8 -*-``), vim's or ex's in the first or last lines (``# ex: filetype=sh``).
_EMACS_MODE = re.compile(r"-\*-[ \t]*(?:mode:[ \t]*)?([\w+-]+)[ \t]*(?:;[^\n]*)?-\*-")
_VIM_MODE = re.compile(r"(?:^|\s)(?:vim?|ex):[^\n]*?\b(?:ft|filetype)=([\w+-]+)")
#: Their names for the languages :data:`AST_LANGUAGES` chunks on their syntax.
_MODES = {"shell-script": "bash", "sh": "bash", "bash": "bash", "zsh": "bash", "python": "python",
          "ruby": "ruby", "perl": "perl", "javascript": "javascript", "js": "javascript"}


def modeline_language(first_line: str, text: str | None = None) -> str | None:
    """Language a modeline names: Emacs's on ``first_line``, vim's or ex's in the first or last 5 lines
    of ``text``; ``None`` when none names one of :data:`_MODES` (bash-completion's scripts have no ``#!``
    line: `# apt(8) completion -*- shell-script -*-`)."""
    found = _EMACS_MODE.search(first_line)
    if found is None and text:
        lines = text.split("\n", 5)[:5] + text[-2000:].rsplit("\n", 5)[-5:]
        found = next(filter(None, map(_VIM_MODE.search, lines)), None)
    return _MODES.get(found.group(1).lower()) if found is not None else None


def detect_language(path: str, first_line: str = "", text: str | None = None) -> str | None:
    """Language of the file at ``path`` (relative or absolute, ``/``-separated), or ``None``.

    Well-known file names (``Makefile``, ``Dockerfile``...) win over the extension, which is
    compared lower-cased (``Foo.PY`` is Python). ``Dockerfile.dev`` and ``x.dockerfile`` are
    Dockerfiles. A file without an extension (``bin/deploy``, ``.hooks``) is recognised by its
    ``first_line`` when that is a ``#!`` line (:func:`shebang_language`), or by a modeline
    (:func:`modeline_language`). A ``.h`` header is
    ``cpp`` when its ``text`` (if given) has a line only C++ has, else ``c``. Names are
    tree-sitter-language-pack grammar names for the languages in :data:`AST_LANGUAGES` and
    plain names (``json``, ``yaml``, ``text``...) otherwise. Returns ``None`` for unknown
    extensions; the chunker then uses line windows.
    """
    name = posixpath.basename(path.replace("\\", "/"))
    if name in _FILE_NAMES:
        return _FILE_NAMES[name]
    if name.startswith(("Dockerfile.", "Containerfile.")):
        return "dockerfile"
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return shebang_language(first_line) or modeline_language(first_line, text)
    language = _EXTENSIONS.get(ext.lower())
    if language == "c" and text is not None and ext.lower() == "h" and _CPP_LINE.search(text):
        return "cpp"
    return language


#: Characters no file-name ending holds: glob syntax, folder separators, white space.
_NOT_IN_AN_EXTENSION = re.compile(r"[*?\[\]/\\\s]")


def bad_extension(ext: str) -> str | None:
    """Why ``ext`` (``.py``, ``py``) can be no file-name ending, as one line, or None: a build or a
    search filtered by ``*`` or ``src/`` matched nothing and said nothing."""
    if not ext.strip(". "):
        return "an empty extension filter matches nothing: pass one such as .py"
    if _NOT_IN_AN_EXTENSION.search(ext):
        return (f"{ext!r} is not a file-name ending: pass endings such as .py or .md "
                "(to match paths by a pattern, search with a path glob)")
    return None


#: What people call the languages as a filter names them: file endings and common short names.
LANGUAGE_ALIASES = {"ts": "typescript", "js": "javascript", "jsx": "javascript", "mjs": "javascript",
                    "py": "python", "python3": "python", "rb": "ruby", "rs": "rust", "golang": "go",
                    "cs": "csharp", "c#": "csharp", "c++": "cpp", "cxx": "cpp", "hpp": "cpp", "kt": "kotlin",
                    "kts": "kotlin", "sh": "bash", "shell": "bash", "zsh": "bash", "md": "markdown",
                    "yml": "yaml", "objc": "objc", "objective-c": "objc",
                    # rg's type names (`rg --type-list`) an agent passes to grep -t out of habit
                    "txt": "text", "docker": "dockerfile", "protobuf": "proto", "tex": "latex", "ps": "powershell",
                    "makefile": "make", "ex": "elixir", "erl": "erlang", "hs": "haskell", "ml": "ocaml",
                    "pl": "perl", "jl": "julia", "clj": "clojure", "fs": "fsharp", "tf": "hcl", "bat": "batch",
                    "sol": "solidity", "mli": "ocaml_interface"}


#: Every language a file can be detected as (by its ending or its whole name).
KNOWN_LANGUAGES: frozenset[str] = frozenset(_EXTENSIONS.values()) | frozenset(_FILE_NAMES.values())


def language_name(name: str) -> str:
    """The language a filter ``name`` means (``ts`` -> ``typescript``), lower case."""
    key = name.strip().lower()
    return LANGUAGE_ALIASES.get(key, key)
