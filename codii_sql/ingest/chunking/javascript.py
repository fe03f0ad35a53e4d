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


#: Wrappers around an exported value that leave it the same value (TypeScript casts, parentheses).
_VALUE_WRAPPERS = frozenset({"as_expression", "satisfies_expression", "non_null_expression",
                             "parenthesized_expression"})


def variable_name(node: tree_sitter.Node) -> str | None:
    """``const f = () => {}``: a definition if its single declarator binds a function/class, or,
    exported, what a call makes (``export const safeParse = _safeParse(ZodRealError)``, zod's
    ``export const ZodType = core.$constructor("ZodType", (inst) => {...})``: a module's API)."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    while value is not None and value.type in _VALUE_WRAPPERS and value.named_child_count:
        value = value.named_children[0]
    exported = node.parent is not None and node.parent.type == "export_statement"
    if value is None or not (value.type in FUNCTION_VALUES or exported and value.type == "call_expression"):
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


#: Where an object literal is named API (``const api = {...}``, ``module.exports = {...}``,
#: ``export default {...}``, a nested ``{ helpers: {...} }``) rather than an argument.
_NAMED_OBJECT_HOLDERS = frozenset({"variable_declarator", "assignment_expression", "export_statement", "pair"})


def member_name(node: tree_sitter.Node) -> str | None:
    """``post: function (url) {}`` (a pair of a named object, see :data:`_NAMED_OBJECT_HOLDERS`) or
    ``handle = (e) => {}`` (a class field): a definition when its value is a function or class,
    named by its key."""
    value = node.child_by_field_name("value")
    if value is None or value.type not in FUNCTION_VALUES:
        return None
    holder = node.parent.parent if node.type == "pair" and node.parent is not None else None
    if holder is not None and holder.type not in _NAMED_OBJECT_HOLDERS:
        return None  # an options object passed to a call (tests are full of them): not an API
    key = node.child_by_field_name("key") or node.child_by_field_name("property") or node.child_by_field_name("name")
    if key is None or key.type not in ("property_identifier", "private_property_identifier", "string", "identifier"):
        return None
    return node_text(key).strip("'\"`") or None


def default_export_name(node: tree_sitter.Node) -> str | None:
    """``export default function httpAdapter() {}`` written as an expression (``cond && function
    f()``, ``function () {}``, ``() => {}``): a definition named by the function's own name, or
    ``default``. Exported declarations (``export function f``) are their own nodes; an exported
    object's methods are definitions of their own."""
    value = node.child_by_field_name("value")
    candidates = [value] if value is not None else []
    if value is not None and value.type in ("binary_expression", "ternary_expression", "parenthesized_expression"):
        candidates = value.named_children
    for candidate in candidates:
        if candidate.type in FUNCTION_VALUES:
            return field_name(candidate) or "default"
    return None
