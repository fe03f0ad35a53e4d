"""The role of a file (source, test, docs, config, generated, vendored, data) from its path, attributes and header: a soft ranking prior."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

ROLES = ("source", "test", "docs", "changelog", "config", "generated", "vendored", "data")
#: Bumped when the rules change: a build then re-classifies every indexed file (cheap, no
#: re-chunking), since the role is stored in the files table. 5: .gitattributes' linguist marks
#: and files that declare themselves generated (issue 16).
#: 6: changelogs are a role of their own (they were docs); README-like names are docs only as prose
#: (``security.py`` is code).
#: 7: HTML pages a tool wrote are generated (a generator ``<meta>``, or Sphinx's links: .generated).
#: 8: a ``deps/`` folder is vendored.
#: 9: JavaScript and declaration files compiled from a TypeScript source the tree holds are generated
#: (:func:`compiled_copies`).
VERSION = 9
#: Roles a set linguist attribute gives, first wins when several are set.
_MARKED = ("generated", "vendored", "docs")

#: ``deps``: C projects' bundled libraries (redis's deps/hiredis, jemalloc, lua; node's deps/v8), Elixir's
#: fetched ones (a new user's `symbol dictAdd` on redis listed deps/hiredis/dict.c before src/dict.c).
_VENDORED_DIRS = {"vendor", "vendored", "_vendor", "third_party", "thirdparty", "third-party", "external", "extern",
                  "deps"}
_TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec", "specs", "testdata", "test_data", "fixtures"}
_DOC_DIRS = {"doc", "docs", "documentation", "man", "examples", "example"}
_TEST_FILE = re.compile(
    r"(^test_.*\.py$|_tests?\.(py|go|rb|rs|exs?)$|\.(test|spec)\.[jt]sx?$|^conftest\.py$|Tests?\.(java|kt|cs|swift)$)"
)
_DOC_EXT = {".md", ".rst", ".txt", ".adoc", ".markdown", ".rdoc", ".org", ".tex", ".ipynb"}
#: A project's history, not its documentation: a changelog quotes every change's words, and ranked
#: first for 97 of the 900 commit subjects of the git dev set (issue 17), above the code changed.
_CHANGELOG_NAMES = {"changelog", "changes", "history", "news", "releases", "release-notes", "release_notes",
                    "whatsnew", "whats_new"}
_CHANGELOG_DIRS = {"changelog", "changelogs", "changes", "newsfragments", "changelog.d", "release-notes"}
_DOC_NAMES = {"readme", "authors", "contributors", "license",
              "licence", "copying", "notice", "contributing", "code_of_conduct", "security", "todo"}
#: Project and build files too: Xcode's and MSBuild's (Alamofire's project.pbxproj, 494 chunks, and
#: MediatR's .csproj/.sln ranked as source, first for symbol names they list).
_CONFIG_EXT = {".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".lock", ".in", ".properties", ".xml",
               ".gradle", ".editorconfig", ".env", ".pbxproj", ".xcscheme", ".xcworkspacedata", ".plist",
               ".xcconfig", ".xcprivacy", ".entitlements", ".csproj", ".fsproj", ".vbproj", ".vcxproj", ".sln",
               ".props", ".targets", ".nuspec", ".config"}
#: Packaging metadata inside wheels and sdists (requests-2.3.0.dist-info/METADATA ranked first
#: for an issue about sessions).
_METADATA_DIR = re.compile(r"\.(dist|egg)-info$")
_CONFIG_NAMES = {"pkg-info", "setup.cfg", "makefile", "dockerfile", "manifest.in", "tox.ini", "noxfile.py",
                 ".gitignore", ".gitattributes", ".pre-commit-config.yaml", "license.txt", "build", "workspace",
                 "jenkinsfile", "procfile", "vagrantfile", "gemfile", "rakefile"}
#: Data, not code or prose: translation catalogues (Django's 1,272 .po files were 24% of its
#: chunks, classed source, embedded first and ranked above middleware/csrf.py for "where is the
#: CSRF token checked"), tables, and armoured signatures (jq's sig/*.asc: 726 chunks of base64).
_DATA_EXT = {".po", ".pot", ".xlf", ".xliff", ".csv", ".tsv", ".psv", ".asc", ".sig"}
_GENERATED = re.compile(r"(_pb2(_grpc)?\.py$|\.pb\.go$|\.generated\.|\.g\.dart$|_generated\.|\.min\.)")


def classify(path: str, marks: Mapping[str, bool] | None = None, declared_generated: bool = False) -> str:
    """The role of the file at relative POSIX ``path``: one of :data:`ROLES`.

    ``marks`` are its linguist attributes (:meth:`.attributes.Attributes.marks`): a set one
    decides (generated, then vendored, then docs); an unset one (``-linguist-vendored``) turns
    off the path rule it names. ``declared_generated`` (:func:`.generated.declares_generated`,
    from the content) makes it generated after the vendored, generated-name and data rules.
    Otherwise path rules: vendored directories first (``vendor/``,
    ``third_party/``..., and a ``packages/`` directory nested inside another package, as in
    ``requests/packages/urllib3``; a top-level ``packages/`` is a monorepo's own code), then
    generated names, data (translation catalogues, tables, signatures), tests (directories such as ``tests/`` or names such as ``test_x.py``,
    ``x_test.go``, ``x.spec.ts``), changelogs (``CHANGELOG.md``, ``HISTORY.rst``, ``NEWS``, towncrier's
    ``changelog/`` fragments), docs (``docs/``, README, prose extensions,
    upper-case names without extension such as ``INSTALL``),
    packaging metadata and config files; everything else is source.
    """
    marks = marks or {}
    for role in _MARKED:
        if marks.get(role):
            return role
    off = {role for role, on in marks.items() if not on}
    return _by_path(path, off, declared_generated and "generated" not in off)


def _by_path(path: str, off: set[str], declared_generated: bool) -> str:
    """The path rules of :func:`classify`, without those of the roles in ``off``."""
    parts = path.lower().split("/")
    name = parts[-1]
    dirs = set(parts[:-1])
    ext = name[name.rfind("."):] if "." in name else ""
    if "vendored" not in off and (dirs & _VENDORED_DIRS or "packages" in parts[1:-1] or "site-packages" in dirs):
        return "vendored"
    if "generated" not in off and _GENERATED.search(name):
        return "generated"
    if ext in _DATA_EXT:
        return "data"
    if declared_generated:
        return "generated"
    if dirs & _TEST_DIRS or _TEST_FILE.search(path.rpartition("/")[2]):
        return "test"
    stem = name.split(".")[0]
    # An upper-case name without extension is a project's prose by convention (INSTALL, THANKS,
    # EXAMPLES in Sphinx's sdist ranked above its code for issues).
    metadata = any(map(_METADATA_DIR.search, dirs))
    shouting = (not ext and len(name) > 2 and name not in _CONFIG_NAMES and not metadata
                and path.rpartition("/")[2] == name.upper() and any(ch.isalpha() for ch in name))
    prose = ext in _DOC_EXT or not ext  # django/middleware/security.py is code, SECURITY.md is not
    if "docs" not in off and prose and (stem in _CHANGELOG_NAMES or dirs & _CHANGELOG_DIRS):
        return "changelog"
    if "docs" not in off and (dirs & _DOC_DIRS or ext in _DOC_EXT or (stem in _DOC_NAMES and prose) or shouting):
        return "docs"
    if name in _CONFIG_NAMES or ext in _CONFIG_EXT or name.startswith(".") or metadata:
        return "config"
    return "source"


#: What a TypeScript build writes beside or apart from its sources, longest first (``.d.ts`` before ``.ts``).
_COMPILED_EXT = (".d.mts", ".d.cts", ".d.ts", ".mjs", ".cjs", ".js", ".jsx")
_TS_EXT = (".mts", ".cts", ".tsx", ".ts")
#: The output folders a build names; a copy under one stands for the source under ``src/`` (or the root).
_OUTPUT_DIRS = frozenset({"dist", "lib", "build", "out", "esm", "cjs", "es", "umd", "types", "module", "commonjs"})


def compiled_copies(paths: Iterable[str]) -> frozenset[str]:
    """Of ``paths`` (a tree's relative paths), the JavaScript and declaration files a TypeScript source of the
    same tree was compiled to: ``x.js``/``x.cjs``/``x.d.ts`` beside ``x.ts``, or at the root or under an output
    folder (``dist/``, ``lib/``, ``esm/``...) for ``src/x.ts``. They are ``generated``: a published zod
    ships each module five times (``src/*.ts``, ``.js``, ``.cjs``, ``.d.ts``, ``.d.cts``), and for
    ``prettifyError`` the source came third behind two copies (a helper). A tree with no TypeScript has none."""
    paths = list(paths)
    sources = set()
    for path in paths:
        if path.endswith(_TS_EXT) and not path.endswith((".d.ts", ".d.mts", ".d.cts")):
            stem = path[:path.rfind(".")]
            sources.add(stem)
            if stem.startswith("src/"):
                sources.add(stem[4:])
    if not sources:
        return frozenset()
    copies = set()
    for path in paths:
        ext = next((e for e in _COMPILED_EXT if path.endswith(e)), None)
        if ext is None:
            continue
        stem = path[:-len(ext)]
        top, _, rest = stem.partition("/")
        if stem in sources or (rest and top in _OUTPUT_DIRS and rest in sources):
            copies.add(path)
    return frozenset(copies)

