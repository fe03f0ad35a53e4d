"""tree-sitter primitives of the chunker: a parser per thread, cached queries, node text, definition spans."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter
import tree_sitter_language_pack


def node_text(node: tree_sitter.Node) -> str:
    return " ".join(node.text.decode("utf-8", "replace").split())


def field_name(node: tree_sitter.Node) -> str | None:
    name = node.child_by_field_name("name")
    return node_text(name) if name is not None else None


def first_child_name(*types: str) -> Callable[[tree_sitter.Node], str | None]:
    """Name from the first named child of one of ``types`` (grammars without a ``name`` field)."""
    def name(node: tree_sitter.Node) -> str | None:
        for child in node.named_children:
            if child.type in types:
                return node_text(child)
        return None
    return name


@dataclass(frozen=True, slots=True)
class Span:
    """A definition found in the tree, not yet nested: bytes ``start..end`` decide the nesting,
    0-based rows ``head..last`` are its lines (without the comments above it)."""

    start: int
    end: int
    head: int
    last: int
    kind: str
    name: str
    extends: bool = False  # adds to a type defined elsewhere (a Rust ``impl``): see Definition


def last_row(node: tree_sitter.Node) -> int:
    """Last row holding the node's text (a node ending with its newline ends at column 0)."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


_thread_state = threading.local()


def parser_for(language: str) -> tree_sitter.Parser:
    """A parser per thread and language: a tree-sitter parser must not parse on two threads."""
    parsers = _thread_state.__dict__.setdefault("parsers", {})
    if language not in parsers:
        parsers[language] = tree_sitter_language_pack.get_parser(language)
    return parsers[language]


_query_lock = threading.Lock()
_queries: dict[tuple[str, tuple[str, ...]], tree_sitter.Query] = {}


def _query(language: str, node_types: tuple[str, ...]) -> tree_sitter.Query:
    """Compiled ``[(t1) (t2) ...] @n`` query; queries are immutable and shared by threads."""
    key = (language, node_types)
    with _query_lock:
        if key not in _queries:
            source = "[" + " ".join(f"({t})" for t in node_types) + "] @n"
            _queries[key] = tree_sitter.Query(
                tree_sitter_language_pack.get_language(language), source)
        return _queries[key]


def capture(language: str, node_types: tuple[str, ...],
             root: tree_sitter.Node) -> list[tree_sitter.Node]:
    if not node_types:
        return []
    return tree_sitter.QueryCursor(_query(language, node_types)).captures(root).get("n", [])
