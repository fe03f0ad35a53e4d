"""Rust items written inside a macro's braces, read as the items they are.

tokio, for one, writes much of its API inside configuration macros: ``cfg_rt! { pub fn
spawn_blocking ... }``, ``cfg_net! { pub struct TcpListener ... }``. tree-sitter's Rust grammar
reads a macro's body as a token tree, so none of those functions, structs or impls was a
definition: ``symbol spawn_blocking`` found nothing and the whole block was one chunk. Each
multi-line ``{ ... }`` body of a macro called where items stand (the file, a module, an impl) is parsed
again as Rust, and its definitions are placed at their bytes and rows in the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import tree_sitter

from .nodes import Span, capture, parser_for

#: Where a macro call stands for items: the file, the body of a module, an impl or a trait.
_ITEM_LEVEL = frozenset({"source_file", "declaration_list"})
#: Items whose body may hold such a call (``impl TcpListener { cfg_net! { pub async fn bind ... } }``).
_HOLDERS = frozenset({"mod_item", "impl_item", "trait_item"})

SpansOf = Callable[[tree_sitter.Node], tuple[list[Span], list[Span]]]


def macro_body_spans(root: tree_sitter.Node, spans_of: SpansOf) -> tuple[list[Span], list[Span]]:
    """The definitions and declarations (``spans_of`` of a parse, as the chunker finds them in a
    file) of every item-level macro body under ``root``, shifted to the file's bytes and rows;
    a body's own macro bodies are ``spans_of``'s to find (it calls back here)."""
    spans: list[Span] = []
    declarations: list[Span] = []
    for body in _item_bodies(root):
        found, declared = spans_of(parser_for("rust").parse(body.text[1:-1]).root_node)
        shift = (body.start_byte + 1, body.start_point[0])
        spans += [_shifted(s, *shift) for s in found]
        declarations += [_shifted(s, *shift) for s in declared]
    return spans, declarations


def macro_prefix_rows(root: tree_sitter.Node, prefixes: tuple[str, ...]) -> set[int]:
    """The rows of the own-line comments and attributes (``prefixes``) inside item-level macro bodies under
    ``root``, as the body's own parse reads them: to the file's parse ``#[track_caller]`` there is tokens, so
    ``tokio::spawn`` lost it and the 150-line doc above it (55 of tokio's 6,282 definitions lost theirs)."""
    rows: set[int] = set()
    for body in _item_bodies(root):
        text = body.text[1:-1]
        inner = parser_for("rust").parse(text).root_node
        lines = text.split(b"\n")
        for node in capture("rust", prefixes, inner):
            (sr, sc), (er, ec) = node.start_point, node.end_point
            if ec == 0 and er > sr:
                er, ec = er - 1, len(lines[er - 1])
            after = lines[er][ec:].strip()
            if sr == 0 or lines[sr][:sc].strip() or after and not after.startswith(b"//"):
                continue  # on the `{` line, or beside code (a `// why` after it is none)
            rows.update(range(sr + body.start_point[0], er + body.start_point[0] + 1))
        rows.update(r + body.start_point[0] for r in macro_prefix_rows(inner, prefixes))
    return rows


def _item_bodies(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """The multi-line ``{ ... }`` token trees of the macros called where items stand under ``root``."""
    stack = [root]
    while stack:
        parent = stack.pop()
        for node in parent.named_children:
            if node.type in _HOLDERS and (body := node.child_by_field_name("body")) is not None:
                stack.append(body)
            elif node.type == "macro_invocation" and parent.type in _ITEM_LEVEL:
                body = node.named_children[-1] if node.named_children else None
                if body is not None and body.type == "token_tree" and body.text.startswith(b"{") \
                        and body.end_point[0] != body.start_point[0]:
                    yield body


def _shifted(span: Span, byte: int, row: int) -> Span:
    """``span`` of a body parsed alone, placed where the body starts in the file (its ``{``'s row is
    the body's first row)."""
    return dataclasses.replace(span, start=span.start + byte, end=span.end + byte, head=span.head + row,
                               last=span.last + row)
