"""JavaScript and TypeScript definitions that are not declarations: functions and classes bound to names or members."""

from __future__ import annotations

import tree_sitter

from .nodes import field_name, node_text

#: Values that make a JS/TS variable or assignment a definition.
FUNCTION_VALUES = frozenset({
    "arrow_function", "function_expression", "function", "generator_function", "class"})

#: Parts of an assignment target that no one types when searching: ``X.prototype.m`` is
#: ``X.m`` (the name an ES2015 class method gets, and ``m`` or ``X.m`` then both find it),
#: ``this.m = function`` inside ``function X`` is ``X.m`` (the parent adds the ``X``).
_JS_SILENT_PARTS = frozenset({"prototype", "this"})


def variable_name(node: tree_sitter.Node) -> str | None:
    """``const f = () => {}``: a definition only if its single declarator binds a function/class."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None or value.type not in FUNCTION_VALUES:
        return None
    return field_name(declarators[0])


def _js_target_parts(node: tree_sitter.Node) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; ``None`` for computed targets (``a[k]``, ``f().x``)."""
    parts: list[str] = []
    while node.type == "member_expression":
        prop = node.child_by_field_name("property")
        if prop is None or prop.type not in ("property_identifier", "private_property_identifier"):
            return None
        parts.append(node_text(prop))
        node = node.child_by_field_name("object")
        if node is None:
            return None
    if node.type not in ("identifier", "this"):
        return None
    return [node_text(node)] + parts[::-1]


def assignment_name(node: tree_sitter.Node) -> str | None:
    """``res.send = function send() {}`` (an expression statement): a definition when it assigns
    a function or class to a name or member; named by the target (``res.send``)."""
    expression = node.named_children[0] if node.named_child_count else None
    if expression is None or expression.type != "assignment_expression":
        return None
    target, value = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    # ``res.type = res.contentType = function type()``: the first target is the main name.
    while value is not None and value.type == "assignment_expression":
        value = value.child_by_field_name("right")
    if target is None or value is None or value.type not in FUNCTION_VALUES:
        return None
    parts = _js_target_parts(target)
    if parts is None:
        return None
    own = field_name(value)
    if parts in (["module", "exports"], ["exports"]) and own:
        return own  # ``module.exports = function debounce()``: searched for as ``debounce``
    return ".".join(p for p in parts if p not in _JS_SILENT_PARTS) or None
