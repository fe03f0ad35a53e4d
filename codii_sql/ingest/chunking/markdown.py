"""Markdown sections: one per ATX or setext heading, up to the next heading of its level or higher."""

from __future__ import annotations

import tree_sitter

from .nodes import Span, capture, last_row, node_text

#: Heading level of a setext underline; ATX levels come from the ``atx_hN_marker`` child.
_SETEXT_LEVELS = {"setext_h1_underline": 1, "setext_h2_underline": 2}


def _heading_level(heading: tree_sitter.Node) -> int:
    """1..6 for ``#``..``######``, 1 for a ``===`` and 2 for a ``---`` underline."""
    for child in heading.children:
        if child.type in _SETEXT_LEVELS:
            return _SETEXT_LEVELS[child.type]
        if child.type.startswith("atx_h") and child.type.endswith("_marker"):
            return int(child.type[len("atx_h")])
    return 1


def _heading_container(heading: tree_sitter.Node) -> tree_sitter.Node:
    """The document, block quote or list item holding the heading (sections are skipped)."""
    node = heading.parent
    while node.type == "section" and node.parent is not None:
        node = node.parent
    return node


def markdown_spans(root: tree_sitter.Node) -> list[Span]:
    """One section per heading, up to the next heading of the same or a higher level in the
    same container (document, block quote, list item) or to the container's end.

    The grammar's ``section`` nodes follow ATX headings only: a setext heading is a plain
    child of the section before it. So sections are rebuilt from the headings of both styles,
    the way the grammar builds them for ATX.
    """
    by_container: dict[int, tuple[tree_sitter.Node, list[tree_sitter.Node]]] = {}
    for heading in capture("markdown", ("atx_heading", "setext_heading"), root):
        container = _heading_container(heading)
        by_container.setdefault(container.id, (container, []))[1].append(heading)
    return [span for container, headings in by_container.values()
            for span in _container_sections(container, headings)]


def _container_sections(container: tree_sitter.Node,
                        headings: list[tree_sitter.Node]) -> list[Span]:
    """The sections of one container's headings. A heading without text ends sections like
    any other but is no definition: its lines stay with the enclosing section."""
    ends = [(h, h.start_byte, h.start_point[0] - 1, _heading_level(h))
            for h in sorted(headings, key=lambda h: h.start_byte)]
    ends.append((None, container.end_byte, last_row(container), 0))
    spans: list[Span] = []
    open_: list[tuple[int, tree_sitter.Node, str]] = []  # (level, heading, name), outermost first
    for heading, end, last, level in ends:
        while open_ and open_[-1][0] >= level:
            _, opener, name = open_.pop()
            row = opener.start_point[0]
            spans.append(Span(opener.start_byte, end, row, max(last, row), "section", name))
        content = heading.child_by_field_name("heading_content") if heading is not None else None
        if content is not None and node_text(content):
            open_.append((level, heading, node_text(content)))
    return spans
