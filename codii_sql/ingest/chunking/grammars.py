"""Per language: which tree-sitter nodes are definitions, how each is named, what belongs to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import tree_sitter

from ...languages import AST_LANGUAGES
from . import classified
from .cmacros import MACRO_NAME, macro_function_name
from .javascript import assignment_name, default_export_name, member_name, variable_name
from .markdown import markdown_spans
from .sql import sql_spans
from .nodes import Span, field_name, first_child_name, node_text


def _go_method_name(node: tree_sitter.Node) -> str | None:
    """``func (s *Server) Start()`` -> ``Server.Start``."""
    method = field_name(node)
    receiver = node.child_by_field_name("receiver")
    stack = [receiver] if receiver is not None else []
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return f"{node_text(current)}.{method}"
        stack.extend(reversed(current.named_children))
    return method


def _go_type_name(node: tree_sitter.Node) -> str | None:
    """A ``type`` declaration is a definition when it declares exactly one type."""
    specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
    return field_name(specs[0]) if len(specs) == 1 else None


def _c_function_name(node: tree_sitter.Node) -> str | None:
    """Follow ``declarator`` fields through pointer/function declarators to the identifier; a
    function a macro defines (``DEFINE_IDTENTRY(exc_int3) {``) by the name it defines."""
    if node.parent is not None and node.parent.type == "compound_statement":
        return None  # C++ reads a loop macro in a body (``list_for_each_entry(p, h, m) {``) as a nested function
    macro_defined = macro_function_name(node)
    if macro_defined is not None:
        return macro_defined
    current = node.child_by_field_name("declarator")
    while current is not None:
        if current.type == "operator_cast":  # ``operator T*() const``: named up to its parameters
            params, shape = None, current.child_by_field_name("declarator")
            while shape is not None and params is None:  # under a pointer or reference declarator or not
                params, shape = shape.child_by_field_name("parameters"), _inner_declarator(shape)
            text = node_text(current)
            return " ".join(text[:params.start_byte - current.start_byte].split()) if params is not None else text
        inner = _inner_declarator(current)
        if inner is None:
            return node_text(current)
        current = inner
    return None


def _inner_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The declarator ``node`` wraps: its ``declarator`` field, or a reference's own child (``class_ &def(...)``:
    the grammar gives the ``&`` declarator no field)."""
    inner = node.child_by_field_name("declarator")
    if inner is None and node.type in ("reference_declarator", "abstract_reference_declarator") and node.named_children:
        inner = node.named_children[-1]
    return inner


def _c_prototype_name(node: tree_sitter.Node) -> str | None:
    """``int *make(int n);`` (a declaration of exactly one function, as headers hold) -> ``make``;
    ``None`` for variables, tables and ``int a(void), b(void);``. Macros before the type
    (``BROTLI_DEC_API``) leave the declarator a direct child rather than the ``declarator`` field."""
    if node_text(node).startswith("typedef"):
        return None  # error recovery around unknown macros made ``typedef void (*f)(...)`` a function "void"
    outer = node.parent
    while outer is not None and outer.type not in ("compound_statement", "field_declaration_list", "declaration_list"):
        outer = outer.parent
    if outer is not None and outer.type == "compound_statement":
        return None  # in a function's body: ``weakref wr(nurse, ...);`` is a variable, ``throw e();`` a statement
    kind = node.child_by_field_name("type")
    typed = kind is not None and kind.type in _C_TYPES and kind.child_by_field_name("body") is not None
    found = []
    stack = [c for c in node.named_children if c.type in ("function_declarator", "pointer_declarator")]
    while stack:
        current = stack.pop()
        if current.type == "function_declarator":
            found.append(current)
        elif current.type in ("pointer_declarator", "parenthesized_declarator"):
            stack.extend(current.named_children)
    if len(found) != 1:
        return None
    inner = found[0].child_by_field_name("declarator")
    if inner is not None and inner.type == "parenthesized_declarator":
        return None  # ``void (*on_done)(int);``: a variable holding a function pointer
    while inner is not None and inner.type != "identifier" and inner.named_child_count:
        inner = inner.child_by_field_name("declarator") or inner.named_children[-1]
    name = node_text(inner) if inner is not None and inner.type in ("identifier", "field_identifier") else None
    if typed and name is not None and MACRO_NAME.fullmatch(name):
        return None  # ``struct s {...} __aligned(8);``: the attribute macro after a type's body read as a function
    return name


def _c_type_name(node: tree_sitter.Node) -> str | None:
    """``struct s {...}`` with a body; an anonymous one takes its ``typedef`` name."""
    if node.child_by_field_name("body") is None:
        return None
    name = field_name(node)
    parent = node.parent
    if name is None and parent is not None and parent.type == "type_definition":
        declarator = parent.child_by_field_name("declarator")
        name = node_text(declarator) if declarator is not None else None
        if declarator is not None and declarator.type == "function_declarator":
            # ``typedef struct {...} __aligned(8) name_t;``: the grammar reads the attribute macro as the
            # declarator and the name as an error after it
            found = [node_text(c) for e in parent.named_children if e.type == "ERROR" for c in e.named_children
                     if c.type in ("identifier", "type_identifier")]
            name = next((n for n in reversed(found) if not n.startswith("__")), None)
    return name


def _impl_name(node: tree_sitter.Node) -> str | None:
    """``impl<'a> Serialize for Foo<'a>`` or ``for &mut Foo<R>`` -> ``Foo``: without references,
    generics and lifetimes, the name a query types (``Foo.serialize``), which the named-symbol
    rule then matches."""
    target = node.child_by_field_name("type")
    while target is not None and target.type == "reference_type":
        target = target.child_by_field_name("type")
    if target is not None and target.type == "generic_type":
        target = target.child_by_field_name("type") or target
    return node_text(target) if target is not None else None


@dataclass(frozen=True)
class Grammar:
    """How to find definitions in one tree-sitter grammar (node types found by parsing samples).

    ``defs`` maps a node type to its kind (``function`` becomes ``method`` inside a class);
    ``names`` overrides the default ``name``-field lookup and may reject a node (``None``);
    ``wrappers`` are parents that belong to the definition (decorators, ``export``,
    ``template<>``); ``prefixes`` are node types kept with the definition below them when they
    sit on their own lines (comments, Rust ``#[attributes]``). ``spans`` replaces the lookup
    by node type where definitions are no nodes of their own (Markdown sections); ``forward``
    node types are declarations kept only where no definition of the same name has a body.
    """

    defs: dict[str, str]
    names: dict[str, Callable[[tree_sitter.Node], str | None]] = field(default_factory=dict)
    wrappers: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ("comment",)
    separator: str = "."
    module_kind: str = "module"
    #: Node types that only declare (C prototypes): a definition only where the file has no body
    #: of the same name (a header's API, not a ``.c`` file's forward declarations).
    forward: frozenset[str] = frozenset()
    #: Node types that add to a type defined elsewhere (Rust ``impl``; see ``Definition.extends``).
    extensions: frozenset[str] = frozenset()
    spans: Callable[[tree_sitter.Node], list[Span]] | None = None


def _csharp_destructor_name(node: tree_sitter.Node) -> str | None:
    """``~GILState()``: ``~GILState``, not the constructor's name (a helper's finalizers were named as constructors)."""
    name = node.child_by_field_name("name")
    return f"~{node_text(name)}" if name is not None else None


def _csharp_operator_name(node: tree_sitter.Node) -> str | None:
    """``operator ==``, ``operator int`` (a conversion): no ``name`` field holds them, so outlines left them out."""
    words = [c for c in node.children if not c.is_named or c.type in ("predefined_type", "identifier")]
    at = next((i for i, c in enumerate(words) if c.type == "operator"), None)
    return f"operator {node_text(words[at + 1])}" if at is not None and at + 1 < len(words) else None


_JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "lexical_declaration": "function", "variable_declaration": "function",
    "class_declaration": "class", "method_definition": "function",
    "expression_statement": "function", "export_statement": "function",
    "pair": "function", "field_definition": "function",
}
_JS_NAMES = {"lexical_declaration": variable_name, "variable_declaration": variable_name,
             "expression_statement": assignment_name, "export_statement": default_export_name,
             "pair": member_name, "field_definition": member_name, "public_field_definition": member_name}
# TypeScript names a class field public_field_definition (whatever its accessibility).
_TS_DEFS = {k: v for k, v in _JS_DEFS.items() if k != "field_definition"} | {
    "abstract_class_declaration": "class", "interface_declaration": "class",
    "enum_declaration": "class", "public_field_definition": "function",
    "abstract_method_signature": "function", "internal_module": "class",
}
_C_TYPES = {"struct_specifier": "class", "union_specifier": "class", "enum_specifier": "class"}
_C_NAMES = ({"function_definition": _c_function_name, "declaration": _c_prototype_name}
            | dict.fromkeys(_C_TYPES, _c_type_name))
_KOTLIN_NAME = first_child_name("type_identifier", "simple_identifier")

GRAMMARS: dict[str, Grammar] = {
    "python": Grammar(
        {"function_definition": "function", "class_definition": "class"},
        wrappers=frozenset({"decorated_definition"})),
    "javascript": Grammar(_JS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "typescript": Grammar(_TS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "tsx": Grammar(_TS_DEFS, _JS_NAMES, frozenset({"export_statement"})),
    "go": Grammar(
        {"function_declaration": "function", "method_declaration": "method",
         "type_declaration": "class"},
        {"method_declaration": _go_method_name, "type_declaration": _go_type_name}),
    "rust": Grammar(
        {"function_item": "function", "function_signature_item": "function",
         "impl_item": "class", "trait_item": "class",
         "struct_item": "class", "enum_item": "class", "union_item": "class",
         "macro_definition": "macro"},
        {"impl_item": _impl_name},
        prefixes=("line_comment", "block_comment", "attribute_item"), extensions=frozenset({"impl_item"})),
    "java": Grammar(
        {"class_declaration": "class", "interface_declaration": "class",
         "enum_declaration": "class", "record_declaration": "class",
         "annotation_type_declaration": "class", "method_declaration": "function",
         "constructor_declaration": "function"},
        prefixes=("line_comment", "block_comment")),
    "c": Grammar({"function_definition": "function", "declaration": "function"} | _C_TYPES, _C_NAMES,
                  frozenset({"type_definition"}), forward=frozenset({"declaration"})),
    "cpp": Grammar(
        {"function_definition": "function", "declaration": "function", "field_declaration": "function",
         "class_specifier": "class"} | _C_TYPES,
        _C_NAMES | {"class_specifier": _c_type_name, "field_declaration": _c_prototype_name},
        frozenset({"type_definition", "template_declaration"}),
        forward=frozenset({"declaration", "field_declaration"})),
    "csharp": Grammar(
        {"class_declaration": "class", "struct_declaration": "class",
         "interface_declaration": "class", "enum_declaration": "class",
         "record_declaration": "class", "method_declaration": "function",
         "constructor_declaration": "function", "destructor_declaration": "function",
         "operator_declaration": "function", "conversion_operator_declaration": "function",
         "local_function_statement": "function"},
        {"destructor_declaration": _csharp_destructor_name, "operator_declaration": _csharp_operator_name,
         "conversion_operator_declaration": _csharp_operator_name}),
    "ruby": Grammar(
        {"class": "class", "module": "class", "method": "function",
         "singleton_method": "function"}),
    "php": Grammar(
        {"class_declaration": "class", "interface_declaration": "class",
         "trait_declaration": "class", "enum_declaration": "class",
         "function_definition": "function", "method_declaration": "function"}),
    "kotlin": Grammar(
        {"class_declaration": "class", "object_declaration": "class",
         "function_declaration": "function", "secondary_constructor": "function"},
        {"class_declaration": _KOTLIN_NAME, "object_declaration": _KOTLIN_NAME,
         "function_declaration": _KOTLIN_NAME, "secondary_constructor": lambda _: "constructor"},
        prefixes=("line_comment", "multiline_comment")),
    "swift": Grammar(
        {"class_declaration": "class", "protocol_declaration": "class",
         "function_declaration": "function", "init_declaration": "function",
         "deinit_declaration": "function"},
        {"init_declaration": lambda _: "init", "deinit_declaration": lambda _: "deinit"},
        prefixes=("comment", "multiline_comment")),
    "bash": Grammar({"function_definition": "function"}),
    "markdown": Grammar({}, prefixes=(), separator=" > ", module_kind="section",
                         spans=markdown_spans),
    "sql": Grammar({}, prefixes=("comment", "marginalia"), spans=sql_spans),
    # Chunker 18's languages (a new user found no definition in Lua, Perl, Emacs Lisp or Erlang code).
    "perl": Grammar({}, prefixes=("comment", "pod"), separator="::", spans=classified.perl_spans),
    "scala": Grammar(
        {"class_definition": "class", "object_definition": "class", "trait_definition": "class",
         "enum_definition": "class", "function_definition": "function", "function_declaration": "function"},
        prefixes=("comment", "block_comment")),
    "lua": Grammar({}, spans=classified.classified(classified.lua)),
    "elisp": Grammar({}, spans=classified.classified(classified.elisp, descend=classified.elisp_scope)),
    "elixir": Grammar({}, prefixes=("comment", "unary_operator"),  # @doc, @spec, @impl: a def's own
                      spans=classified.classified(classified.elixir, frozenset(),
                                                  descend=classified.elixir_scope)),
    "erlang": Grammar({}, separator=":", prefixes=("comment", "spec"),
                      spans=classified.classified(classified.erlang, frozenset({"spec"}),
                                                  descend=lambda node: False)),
    "haskell": Grammar({}, prefixes=("comment", "haddock"),
                       spans=classified.classified(classified.haskell, frozenset({"signature"}),
                                                   descend=lambda node: node.type in classified.HASKELL_SCOPES)),
    # Chunker 19's languages (window chunks only before: no symbol, no outline).
    "solidity": Grammar(
        {"contract_declaration": "class", "interface_declaration": "class", "library_declaration": "class",
         "struct_declaration": "class", "enum_declaration": "class", "function_definition": "function",
         "modifier_definition": "function", "constructor_definition": "function",
         "fallback_receive_definition": "function"},
        {"constructor_definition": lambda _: "constructor",
         "fallback_receive_definition": lambda node: node_text(node).split("(", 1)[0].split()[0]}),
    "proto": Grammar(
        {"message": "class", "enum": "class", "service": "class", "rpc": "function"},
        {"message": first_child_name("message_name"), "enum": first_child_name("enum_name"),
         "service": first_child_name("service_name"), "rpc": first_child_name("rpc_name")}),
    "ocaml": Grammar({}, spans=classified.classified(classified.ocaml,
                                                     descend=lambda node: node.type in classified.OCAML_SCOPES)),
    "ocaml_interface": Grammar({}, spans=classified.ocaml_interface_spans),
    "hcl": Grammar({}, spans=classified.classified(classified.hcl, descend=lambda node: node.type == "body"
                                                   and node.parent is not None and node.parent.type == "config_file")),
    "clojure": Grammar({}, spans=classified.classified(classified.clojure, descend=classified.clojure_scope)),
}

assert set(GRAMMARS) == AST_LANGUAGES
