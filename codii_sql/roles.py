"""The role of a file from its path (source, test, docs, config, generated, vendored): a soft ranking prior."""

from __future__ import annotations

import re

ROLES = ("source", "test", "docs", "config", "generated", "vendored")

_VENDORED_DIRS = {"vendor", "vendored", "_vendor", "third_party", "thirdparty", "third-party", "external", "extern"}
_TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec", "specs", "testdata", "test_data", "fixtures"}
_DOC_DIRS = {"doc", "docs", "documentation", "man", "examples", "example"}
_TEST_FILE = re.compile(
    r"(^test_.*\.py$|_tests?\.(py|go|rb|rs|exs?)$|\.(test|spec)\.[jt]sx?$|^conftest\.py$|Tests?\.(java|kt|cs|swift)$)"
)
_DOC_EXT = {".md", ".rst", ".txt", ".adoc", ".markdown", ".rdoc", ".org", ".tex", ".ipynb"}
_DOC_NAMES = {"readme", "changelog", "changes", "history", "news", "authors", "contributors", "license",
              "licence", "copying", "notice", "contributing", "code_of_conduct", "security", "todo"}
_CONFIG_EXT = {".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".lock", ".in", ".properties", ".xml",
               ".gradle", ".editorconfig", ".env"}
_CONFIG_NAMES = {"pkg-info", "setup.cfg", "makefile", "dockerfile", "manifest.in", "tox.ini", "noxfile.py",
                 ".gitignore", ".gitattributes", ".pre-commit-config.yaml", "license.txt"}
_GENERATED = re.compile(r"(_pb2(_grpc)?\.py$|\.pb\.go$|\.generated\.|\.g\.dart$|_generated\.|\.min\.)")


def classify(path: str) -> str:
    """The role of the file at relative POSIX ``path``: one of :data:`ROLES`.

    Path rules only (no content is read): vendored directories first, then generated
    names, tests (directories such as ``tests/`` or names such as ``test_x.py``,
    ``x_test.go``, ``x.spec.ts``), docs (``docs/``, README/CHANGELOG, prose extensions),
    packaging and config files; everything else is source.
    """
    parts = path.lower().split("/")
    name = parts[-1]
    dirs = set(parts[:-1])
    ext = name[name.rfind("."):] if "." in name else ""
    if dirs & _VENDORED_DIRS:
        return "vendored"
    if _GENERATED.search(name):
        return "generated"
    if dirs & _TEST_DIRS or _TEST_FILE.search(path.rpartition("/")[2]):
        return "test"
    stem = name.split(".")[0]
    if dirs & _DOC_DIRS or ext in _DOC_EXT or stem in _DOC_NAMES:
        return "docs"
    if name in _CONFIG_NAMES or ext in _CONFIG_EXT or name.startswith("."):
        return "config"
    return "source"
