"""Named declarations that are no chunk of their own: macros, type aliases, constants, module variables, fields.

Outlines and symbol look-ups list them (``symbol cJSON_bool``, ``ZodTypeAny``, ``abortIndex``, ``RRF_K``
found nothing); chunking leaves them where they are, inside the module code around them, so adding
them changed no chunk and no vector. Per language: node type -> (kind, name function); a name
function returns None for what is not a declaration of the file's or a type's scope (a local
variable, a struct a ``typedef`` already names).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter

from .javascript import variable_name
from .nodes import field_name, node_text

#: A declaration's name, its names (a node declaring several; a ``(name, kind)`` pair where the node's modifiers
#: decide the kind: Java's ``static final`` field is a constant, another a variable), or None for no declaration.
NameOf = Callable[[tree_sitter.Node], str | list[str] | list[tuple[str, str]] | None]


def _c_typedef_name(node: tree_sitter.Node) -> str | None:
    """``typedef int cJSON_bool;`` and ``typedef void (*cb_t)(int);`` -> the new type's name; a typedef of
    a struct with a body is that struct's own definition already."""
    kind = node.child_by_field_name("type")
    if kind is not None and kind.child_by_field_name("body") is not None and kind.child_by_field_name("name") is None:
        return None  # `typedef struct {...} foo_t;`: the struct is named foo_t already (`typedef struct node
        # {...} node_t;` keeps node_t: the kernel's spinlock_t is such a name)
    stack = [c for c in node.children_by_field_name("declarator")]
    while stack:
        current = stack.pop()
        if current.type in ("type_identifier", "identifier"):
            return node_text(current)
        stack.extend(reversed(current.named_children))
    return None


def _top_level(*scopes: str) -> Callable[[NameOf], NameOf]:
    """Only a node whose parent is of one of ``scopes`` (the file, a type's body) is named."""
    def wrap(name_of: NameOf) -> NameOf:
        def named(node: tree_sitter.Node) -> str | None:
            return name_of(node) if node.parent is not None and node.parent.type in scopes else None
        return named
    return wrap


def _go_field_names(node: tree_sitter.Node) -> list[str] | None:
    """A named struct field's names (``Errors errorMsgs``; ``X, Y int`` has two); an embedded one (``*Engine``)
    has none of its own: its line is a use of its type, which refs counts. An agent's ``find_symbol
    Context.Errors`` on gin got another type's method."""
    return [node_text(n) for n in node.children_by_field_name("name") if n.is_named] or None


def _go_spec_name(node: tree_sitter.Node) -> list[str] | None:
    """The names of a ``const``/``var`` spec of the file's scope (not a function's: ``gw, gz = 3, 4`` has
    two), or of a ``type`` spec of a group (a declaration of one type is a definition of its own)."""
    group = node.parent
    if group is not None and group.type in ("var_spec_list", "const_spec_list"):  # `var ( a = 1; b = 2 )`
        group = group.parent
    if group is None or group.parent is None or group.parent.type != "source_file":
        return None
    if node.type in ("type_spec", "type_alias") and sum(c.type in ("type_spec", "type_alias")
                                                          for c in node.parent.named_children) == 1:
        return None
    return [node_text(n) for n in node.children_by_field_name("name") if n.is_named] or None  # not its commas


def _java_field_names(node: tree_sitter.Node) -> list[tuple[str, str]] | None:
    """A field's declarators: constants when ``static final`` (or an interface's), else variables (an agent's
    stand-in's ``ModifierCode.value``, ``final public int value;``, was no symbol)."""
    modifiers = next((c for c in node.named_children if c.type == "modifiers"), None)
    words = set(node_text(modifiers).split()) if modifiers is not None else set()
    kind = "constant" if node.type == "constant_declaration" or {"static", "final"} <= words else "variable"
    return [(name, kind) for d in node.children_by_field_name("declarator") if (name := field_name(d))] or None


def _csharp_field_names(node: tree_sitter.Node) -> list[tuple[str, str]] | None:
    """A C# field's or event's declarators: constants when ``const`` (``public const int Max = 5``)."""
    const = any(c.type == "modifier" and node_text(c) == "const" for c in node.named_children)
    declaration = next((c for c in node.named_children if c.type == "variable_declaration"), None)
    if declaration is None:
        return None
    names = [node_text(n) for d in declaration.named_children if d.type == "variable_declarator"
             and (n := d.child_by_field_name("name") or next((c for c in d.named_children if c.type == "identifier"),
                                                              None)) is not None]
    return [(name, "constant" if const else "variable") for name in names] or None


def _php_const_names(node: tree_sitter.Node) -> list[str] | None:
    """A class's ``const DEBUG = 100, INFO = 200;``: each element's name (monolog's ``Logger::DEBUG`` was no symbol)."""
    return [node_text(n) for e in node.named_children if e.type == "const_element"
            and (n := next((c for c in e.named_children if c.type == "name"), None)) is not None] or None


def _php_property_names(node: tree_sitter.Node) -> list[str] | None:
    """A class's ``protected string $name;``: each property's name without its ``$``."""
    return [node_text(n).lstrip("$") for e in node.named_children if e.type == "property_element"
            and (n := e.child_by_field_name("name")) is not None] or None


def _python_assignment_name(node: tree_sitter.Node) -> list[str] | None:
    """The plain names an assignment binds: ``x = ...``, and each of ``cc, dd = 1, 2`` / ``(cc, dd) = ...``."""
    left = node.child_by_field_name("left")
    if left is not None and left.type in ("pattern_list", "tuple_pattern"):
        return [node_text(c) for c in left.named_children if c.type == "identifier"] or None
    return [node_text(left)] if left is not None and left.type == "identifier" else None


#: What may hold a module-scope Python assignment between it and the module: a chained one (`AA = BB = 1`)
#: and the blocks of module-level `if`/`try`/`with` (`try: import x` / `except: HAS_X = False`).
_PY_MODULE_BLOCKS = frozenset({"assignment", "expression_statement", "block", "if_statement", "elif_clause",
                               "else_clause", "try_statement", "except_clause", "finally_clause", "with_statement"})


def _python_module_name(node: tree_sitter.Node) -> list[str] | None:
    """The plain names an assignment of the module's scope binds (not a function's or a class's)."""
    scope = node.parent
    while scope is not None and scope.type in _PY_MODULE_BLOCKS:
        scope = scope.parent
    return _python_assignment_name(node) if scope is not None and scope.type == "module" else None


def _ruby_constant_name(node: tree_sitter.Node) -> str | None:
    left = node.child_by_field_name("left")
    return node_text(left) if left is not None and left.type == "constant" else None


#: Ruby's attribute macros (and Rails' class and module ones): each names accessors of its class.
_RUBY_ATTRIBUTES = re.compile(r"(?:[cm]|thread_m)?attr_(?:accessor|reader|writer)|attr|class_attribute")


def _ruby_attribute_names(node: tree_sitter.Node) -> list[str] | None:
    """``attr_accessor :zone_default, :other`` in a class's or module's body -> its names (a new user's `symbol
    zone_default` on ActiveSupport found nothing); not a call on a receiver, nor one in a method."""
    body = node.parent
    if body is None or body.type != "body_statement" or body.parent is None \
            or body.parent.type not in ("class", "module", "singleton_class"):
        return None  # a method's body is a body_statement too
    method, args = node.child_by_field_name("method"), node.child_by_field_name("arguments")
    if node.child_by_field_name("receiver") is not None or method is None or args is None \
            or not _RUBY_ATTRIBUTES.fullmatch(node_text(method)):
        return None
    return [node_text(a).lstrip(":") for a in args.named_children if a.type == "simple_symbol"] or None


def _js_binding_name(node: tree_sitter.Node) -> str | None:
    """A ``variable_declarator`` of the module's scope (``export const LIMIT = 10``, ``let a = 1, b = 2``,
    a ``.d.ts``'s ``export declare const ZodIssueCode``) binding a plain name; not one inside a function,
    not a destructuring, not one whose declaration the chunker names already (``const f = () => 1``), and
    not an import (``const Npm = require('../npm.js')``, ``.x`` of one, an ``await import()``: npm's
    ``symbol Npm`` listed four such lines before ``class Npm``)."""
    if _imported(node.child_by_field_name("value")):
        return None
    declaration = node.parent
    if declaration is None or declaration.type not in ("lexical_declaration", "variable_declaration"):
        return None
    scope = declaration.parent
    while scope is not None and scope.type in ("export_statement", "ambient_declaration"):
        scope = scope.parent
    if scope is None or scope.type != "program" or variable_name(declaration) is not None:
        return None
    name = node.child_by_field_name("name")
    return node_text(name) if name is not None and name.type == "identifier" else None


def _imported(value: tree_sitter.Node | None) -> bool:
    """Whether a JS/TS binding's ``value`` is a module's (``require('x')``, ``require('x').y``, ``await
    import('x')``)."""
    while value is not None and value.type in ("await_expression", "member_expression", "parenthesized_expression"):
        value = value.child_by_field_name("object") if value.type == "member_expression" else value.named_child(0)
    if value is None or value.type != "call_expression":
        return False
    function = value.child_by_field_name("function")
    return function is not None and (function.type == "import" or function.type == "identifier"
                                     and node_text(function) == "require")


def _python_kind(name: str) -> str:
    return "constant" if name.isupper() else "variable"


_C = {"preproc_def": ("macro", field_name), "preproc_function_def": ("macro", field_name),
      "type_definition": ("type", _c_typedef_name)}
_JS = {"variable_declarator": ("variable", _js_binding_name)}
#: TypeScript's signatures without a body (``declare function``, an overload, an interface's or a declared
#: class's method: a method once inside a class) and namespaces.
_TS = {"type_alias_declaration": ("type", field_name), "function_signature": ("function", field_name),
       "method_signature": ("function", field_name), **_JS}
_RUST_SCOPES = ("source_file", "declaration_list", "mod_item")


def _kotlin_property_name(node: tree_sitter.Node) -> str | None:
    """``override val currentActivity: Activity?`` -> ``currentActivity`` (not ``val (a, b) = pair``)."""
    declared = next((c for c in node.named_children if c.type == "variable_declaration"), None)
    name = declared.named_children[0] if declared is not None and declared.named_children else None
    return node_text(name) if name is not None and name.type == "simple_identifier" else None


def _swift_property_name(node: tree_sitter.Node) -> str | None:
    """``public var name: String`` -> ``name`` (its pattern's one bound identifier)."""
    pattern = node.child_by_field_name("name")
    bound = pattern.child_by_field_name("bound_identifier") if pattern is not None else None
    return node_text(bound) if bound is not None else None

def _solidity_state_name(node: tree_sitter.Node) -> list[tuple[str, str]] | None:
    """A contract's ``uint256 private _totalSupply;`` (a variable) or ``bytes32 public constant ROLE = ...`` /
    ``address private immutable _owner`` (a constant)."""
    name = field_name(node)
    fixed = any(c.type in ("constant", "immutable") for c in node.children)
    return [(name, "constant" if fixed else "variable")] if name else None

_SCALA_SCOPES = ("template_body", "compilation_unit")


def _scala_binding_name(node: tree_sitter.Node) -> list[tuple[str, str]] | None:
    """A template's or file's ``val limit = 5`` (a constant), ``var n``, ``lazy val cache`` (variables): the one
    name its pattern binds (``val (a, b) = pair`` binds no one name)."""
    pattern = node.child_by_field_name("pattern")
    if pattern is None or pattern.type != "identifier":
        return None
    lazy = any(c.type == "modifiers" and "lazy" in node_text(c) for c in node.children)
    return [(node_text(pattern), "constant" if node.type == "val_definition" and not lazy else "variable")]


#: language -> node type -> (kind, name function). A Python or JS/TS variable's kind depends on its name:
#: see :func:`kind_of`.
DECLARATIONS: dict[str, dict[str, tuple[str, NameOf]]] = {
    "c": _C,
    "cpp": _C,
    "javascript": _JS,
    "typescript": _TS,
    "tsx": _TS,
    "go": {"const_spec": ("constant", _go_spec_name), "var_spec": ("variable", _go_spec_name),
           "type_spec": ("type", _go_spec_name), "type_alias": ("type", _go_spec_name),
           "field_declaration": ("variable", _go_field_names)},
    "rust": {"type_item": ("type", _top_level(*_RUST_SCOPES)(field_name)),
             "const_item": ("constant", _top_level(*_RUST_SCOPES)(field_name)),
             "static_item": ("constant", _top_level(*_RUST_SCOPES)(field_name))},
    "java": {"field_declaration": ("constant", _java_field_names),
             "constant_declaration": ("constant", _java_field_names),
             "enum_constant": ("constant", field_name)},
    # Members that are no chunk of their own (a helper's `PythonEngine.IsInitialized`, `PyObject.Handle`,
    # `Logger::DEBUG`, `Response::HTTP_NOT_FOUND` found nothing).
    "csharp": {"property_declaration": ("variable", field_name), "event_declaration": ("variable", field_name),
               "field_declaration": ("variable", _csharp_field_names),
               "event_field_declaration": ("variable", _csharp_field_names)},
    "php": {"const_declaration": ("constant", _php_const_names),
            "property_declaration": ("variable", _php_property_names), "enum_case": ("constant", field_name)},
    # Properties of a type or a file, and a Swift protocol's requirements (expo's `AppContext.currentActivity`,
    # `AnyModule.willDestroy` found nothing).
    "kotlin": {"property_declaration": ("variable", _top_level("class_body", "source_file")(_kotlin_property_name))},
    "swift": {"property_declaration": ("variable", _top_level("class_body", "source_file")(_swift_property_name)),
              "protocol_property_declaration": ("variable", _swift_property_name),
              "protocol_function_declaration": ("method", field_name)},
    "python": {"assignment": ("variable", _python_module_name)},
    "ruby": {"assignment": ("constant", _top_level("program", "body_statement")(_ruby_constant_name)),
             "call": ("variable", _ruby_attribute_names)},
    # A template's vals, vars and type aliases.
    "scala": {"val_definition": ("constant", _top_level(*_SCALA_SCOPES)(_scala_binding_name)),
              "var_definition": ("variable", _top_level(*_SCALA_SCOPES)(_scala_binding_name)),
              "type_definition": ("type", _top_level(*_SCALA_SCOPES)(field_name))},
    # A contract's storage, events and errors (what `emit Transfer(...)` and `revert Unauthorized()` name).
    "solidity": {"state_variable_declaration": ("variable", _solidity_state_name),
                 "constant_variable_declaration": ("constant", field_name),
                 "event_definition": ("type", field_name), "error_declaration": ("type", field_name),
                 "user_defined_type_definition": ("type", field_name)},
}


#: Languages whose module bindings are named constants by their case alone (``RRF_K``, ``MAX_RETRIES``).
_CASE_KINDS = frozenset({"python", "javascript", "typescript", "tsx"})


def kind_of(language: str, node_type: str, name: str) -> str:
    """The kind of a declaration named ``name``: Python's and JS/TS's UPPER_CASE names are constants."""
    kind = DECLARATIONS[language][node_type][0]
    return _python_kind(name) if language in _CASE_KINDS and kind == "variable" else kind
