"""Definitions a classifier finds, for grammars where a definition is no node type of its own or spans several.

Elixir's ``def`` and Lisp's ``(cl-defun ...)`` are calls and lists like any other; a Lua function may be an
assignment; Erlang and Haskell write one function as clauses (and a ``-spec`` or a type signature) that the
grammars give as sibling nodes, merged here into one definition. Each language's classifier says what a node
defines, ``(kind, name)``, or None; :func:`classified` walks the tree with it (a definition's nested ones
found inside it, as node-type grammars nest them).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter

from .nodes import Span, last_row, node_text

Classifier = Callable[[tree_sitter.Node], tuple[str, str] | None]


def classified(classify: Classifier, merge_clauses: bool = False,
               descend: Callable[[tree_sitter.Node], bool] = lambda node: True,
               ) -> Callable[[tree_sitter.Node], list[Span]]:
    """The spans function of a grammar whose definitions ``classify`` names, among the root's children and those
    of every node ``descend`` lets in (a walk of every node of a large Erlang file cost more than its parse);
    with ``merge_clauses``, siblings of one name and kind in a row (clauses, a signature and its equations) are
    one definition."""
    def spans(root: tree_sitter.Node) -> list[Span]:
        out: list[Span] = []
        stack = [root]
        while stack:
            node = stack.pop()
            found: list[Span] = []
            for child in node.named_children:
                what = classify(child)
                if what is None:
                    continue
                kind, name = what
                last = found[-1] if found else None
                if merge_clauses and last is not None and (last.kind, last.name) == (kind, name) \
                        and _adjacent(child, last):
                    found[-1] = Span(last.start, child.end_byte, last.head, last_row(child), kind, name)
                else:
                    found.append(Span(child.start_byte, child.end_byte, child.start_point[0], last_row(child),
                                      kind, name))
            out += found
            stack.extend(c for c in reversed(node.named_children) if descend(c))
        return out
    return spans


def _adjacent(node: tree_sitter.Node, span: Span) -> bool:
    """Whether ``node`` follows ``span`` with nothing but white space and comments between them."""
    before = node.prev_named_sibling
    while before is not None and "comment" in before.type and before.start_byte >= span.end:
        before = before.prev_named_sibling
    return before is not None and before.end_byte == span.end


def _text(node: tree_sitter.Node | None) -> str | None:
    return node_text(node) if node is not None else None


def lua(node: tree_sitter.Node) -> tuple[str, str] | None:
    """``function M.split(...)``, ``function M:method()``, ``local function f()`` and a function a variable is
    given (``M.other = function() ... end``, ``local f = function() ... end``)."""
    if node.type == "function_declaration":
        name = _text(node.child_by_field_name("name"))
        return ("function", name) if name else None
    assignment = node
    if node.type == "variable_declaration":
        assignment = next((c for c in node.named_children if c.type == "assignment_statement"), None)
    elif node.type != "assignment_statement" or (node.parent is not None
                                                 and node.parent.type == "variable_declaration"):
        return None  # `local f = function`: its declaration is the definition
    if assignment is None or len(assignment.named_children) != 2:
        return None
    names, values = assignment.named_children
    if len(names.named_children) != 1 or len(values.named_children) != 1 \
            or values.named_children[0].type != "function_definition":
        return None
    return "function", node_text(names.named_children[0])


#: Lisp forms that define a function (``defun`` and ``defmacro`` have nodes of their own): ``cl-defun``,
#: ``cl-defmethod``, ``defsubst``, ``define-minor-mode``, ``transient-define-prefix``...
_LISP_FUNCTION = re.compile(r"(?:[\w-]+-)?(?:def(?:un|subst|method|generic|advice|ine-[\w-]+)\*?)")
#: Lisp forms that define a variable or a face.
_LISP_VARIABLE = re.compile(r"(?:[\w-]+-)?def(?:var|var-local|const|custom|face|group|parameter|alias)\*?")


def elisp(node: tree_sitter.Node) -> tuple[str, str] | None:
    """``(defun f ...)``, ``(defmacro m ...)``, ``(cl-defun f ...)``, ``(define-minor-mode m ...)``; ``(defvar v
    ...)``, ``(defcustom v ...)`` as variables, ``(defconst c ...)`` as a constant."""
    if node.type in ("function_definition", "macro_definition"):
        name = _text(node.child_by_field_name("name"))
        return ("function" if node.type == "function_definition" else "macro", name) if name else None
    if node.type not in ("list", "special_form"):
        return None
    words = [c for c in node.children if c.type == "symbol" or (not c.is_named and c.type not in ("(", ")"))]
    if len(words) < 2 or words[1].type != "symbol":
        return None
    head, name = node_text(words[0]), node_text(words[1])
    if _LISP_FUNCTION.fullmatch(head):
        return "function", name
    if _LISP_VARIABLE.fullmatch(head):
        return ("constant" if "const" in head else "variable"), name
    return None


_ELIXIR_FUNCTIONS = frozenset({"def", "defp", "defmacro", "defmacrop", "defguard", "defguardp", "defdelegate",
                               "defn", "defnp"})
_ELIXIR_MODULES = frozenset({"defmodule", "defprotocol", "defimpl", "defexception", "defstruct"})


def elixir_scope(node: tree_sitter.Node) -> bool:
    """Where Elixir definitions are looked for: a module's ``do`` block, not a function's body."""
    return node.type == "do_block" or (node.type == "call" and (elixir(node) or ("",))[0] == "class")


def elixir(node: tree_sitter.Node) -> tuple[str, str] | None:
    """``defmodule A.B do`` (and protocols, implementations) as a class; ``def f(x)``, ``defp``, ``defmacro`` as a
    function, named by the call they define (``def f(x) when x > 0``: ``f``)."""
    if node.type != "call" or not node.named_children or node.named_children[0].type != "identifier":
        return None
    head = node_text(node.named_children[0])
    arguments = next((c for c in node.named_children if c.type == "arguments"), None)
    first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
    if first is None:
        return None
    if head in _ELIXIR_MODULES:
        return ("class", node_text(first)) if head != "defstruct" else None
    if head not in _ELIXIR_FUNCTIONS:
        return None
    while first.type == "binary_operator":  # `def f(x) when x > 0`, `def a + b`
        first = first.child_by_field_name("left") or first.named_children[0]
    if first.type == "call":
        target = first.child_by_field_name("target") or first.named_children[0]
        return "function", node_text(target)
    return ("function", node_text(first)) if first.type == "identifier" else None


def erlang(node: tree_sitter.Node) -> tuple[str, str] | None:
    """A function's clauses (``fun_decl``, one per clause) as one function; records and types as types, macros."""
    if node.type == "fun_decl":
        clause = next((c for c in node.named_children if c.type == "function_clause"), None)
        name = _text(clause.child_by_field_name("name")) if clause is not None else None
        return ("function", name) if name else None
    if node.type in ("record_decl", "type_alias", "opaque"):
        name = _text(node.child_by_field_name("name"))
        return ("type", name.removesuffix("()")) if name else None
    if node.type == "pp_define":
        lhs = node.child_by_field_name("lhs")
        name = _text(lhs.named_children[0] if lhs is not None and lhs.named_children else lhs)
        return ("macro", name) if name else None
    return None


_HASKELL_TYPES = {"data_type": "class", "newtype": "class", "type_synomym": "type", "class": "class",
                  "type_family": "type"}


#: Where Haskell definitions are looked for: the module's declarations, a class's and an instance's.
HASKELL_SCOPES = frozenset({"declarations", "class", "instance", "class_declarations", "instance_declarations"})


def haskell(node: tree_sitter.Node) -> tuple[str, str] | None:
    """A function's type signature and equations as one function (``fact :: Int -> Int``, ``fact 0 = 1``...); a
    data type, newtype, class or instance as a class; a type synonym as a type."""
    parent = node.parent
    if parent is None or parent.type not in HASKELL_SCOPES - {"class", "instance"}:
        return None
    if node.type in ("function", "signature", "bind"):
        name = _text(node.child_by_field_name("name"))
        return ("function", name) if name else None
    if node.type in _HASKELL_TYPES:
        name = _text(node.child_by_field_name("name"))
        return (_HASKELL_TYPES[node.type], name) if name else None
    if node.type == "instance":  # named by its class: `instance Container []` holds Container's methods for lists
        name = _text(node.child_by_field_name("name"))
        return ("class", name) if name else None
    return None
