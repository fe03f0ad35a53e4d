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


def classified(classify: Classifier, leaders: frozenset[str] | None = None,
               descend: Callable[[tree_sitter.Node], bool] = lambda node: True,
               ) -> Callable[[tree_sitter.Node], list[Span]]:
    """The spans function of a grammar whose definitions ``classify`` names, among the root's children and those
    of every node ``descend`` lets in (a walk of every node of a large Erlang file cost more than its parse).
    With ``leaders`` (None: no merging), siblings of one name and kind in a row are one definition when they are
    nodes of one type (clauses) or the first is of a ``leaders`` type (a ``-spec``, a type signature); classes never
    are: a Haskell class and its instances, each instance of one class (mtl's 19 ``MonadState`` instances were 5),
    an Elixir protocol and its ``defimpl`` stay apart."""
    def spans(root: tree_sitter.Node) -> list[Span]:
        out: list[Span] = []
        stack = [root]
        while stack:
            node = stack.pop()
            found: list[tuple[Span, str]] = []  # each with the type of the node it began at
            for child in node.named_children:
                what = classify(child)
                if what is None:
                    continue
                kind, name = what
                last, first_type = found[-1] if found else (None, "")
                if leaders is not None and last is not None and (last.kind, last.name) == (kind, name) and kind != "class" \
                        and (first_type == child.type or first_type in leaders) and _adjacent(child, last):
                    found[-1] = (Span(last.start, child.end_byte, last.head, last_row(child), kind, name),
                                 child.type)
                else:
                    found.append((Span(child.start_byte, child.end_byte, child.start_point[0], last_row(child),
                                       kind, name), child.type))
            out += [span for span, _ in found]
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
#: ``cl-defmethod``, ``defsubst``, ``define-minor-mode``, ``transient-define-prefix``...; not ``define-key`` (a binding).
_LISP_FUNCTION = re.compile(r"(?:[\w-]+-)?def(?:un|subst|method|generic|advice|ine-(?![\w-]*keys?$)[\w-]+)\*?")
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
    if head.endswith(("-defmacro", "-defmacro*")):  # cl-defmacro: defmacro has a node of its own
        return "macro", name
    if _LISP_VARIABLE.fullmatch(head):
        return ("constant" if "const" in head else "variable"), name
    return None


def elisp_scope(node: tree_sitter.Node) -> bool:
    """Where Emacs Lisp definitions are looked for: inside forms that define nothing themselves (``(when (require
    'vc-git nil t) (defun vc-git-conflicted-files ...))``, ``progn``, ``with-eval-after-load``: 15 of magit's 1,260
    defuns were there), not inside a definition's body."""
    return node.type in ("list", "special_form") and elisp(node) is None


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
    """A function's ``-spec`` and clauses (``fun_decl``, one per clause) as one function (38% of erlang-src's specs
    were a blank line above theirs, and left out); records and types as types, macros."""
    if node.type == "fun_decl":
        clause = next((c for c in node.named_children if c.type == "function_clause"), None)
        name = _text(clause.child_by_field_name("name")) if clause is not None else None
        return ("function", name) if name else None
    if node.type == "spec":  # its function's: merged with the clauses after it, a blank line between or not
        name = _text(node.child_by_field_name("fun"))
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
        name = _text(node.child_by_field_name("name")) or _haskell_infix_name(node)
        return ("function", name) if name else None
    if node.type in _HASKELL_TYPES:
        name = _text(node.child_by_field_name("name"))
        return (_HASKELL_TYPES[node.type], name) if name else None
    if node.type == "instance":  # named by its class: `instance Container []` holds Container's methods for lists
        name = _text(node.child_by_field_name("name"))
        return ("class", name) if name else None
    return None


def _haskell_infix_name(node: tree_sitter.Node) -> str | None:
    """The name an equation written infix defines: ``a <+> b = ...`` -> ``(<+>)``, as its signature names it (the
    signature alone was the definition, its equation lost), and ``x `plus` y = ...`` -> ``plus``."""
    head = node.named_children[0] if node.named_children else None
    operator = head.child_by_field_name("operator") if head is not None and head.type == "infix" else None
    if operator is None:
        return None
    return node_text(operator).strip("`") if operator.type == "infix_id" else f"({node_text(operator)})"


#: OCaml: a ``let`` whose binding takes parameters or whose body is a function is a function; another binding's
#: value (``let default_size = 16``) a constant. ``let () = ...`` (a pattern, not a name) defines nothing. Each
#: binding of ``let rec f ... and g ...`` (and of ``type t = ... and u = ...``) is a definition of its own.
_OCAML_FUNCTION_BODIES = frozenset({"fun_expression", "function_expression"})
OCAML_SCOPES = frozenset({"module_definition", "module_binding", "structure", "class_definition", "class_binding",
                          "object_expression", "value_definition", "type_definition"})


def ocaml(node: tree_sitter.Node) -> tuple[str, str] | None:
    """A ``let`` binding (``let f x = ...``; each of ``let rec f ... and g ...``: camlinternalFormat's five mutually
    recursive functions were one), ``external``, a type binding, ``module M = struct ... end`` and ``module type S =
    sig ... end`` (a class, holding its own), ``class`` and an object's ``method``."""
    if node.type == "let_binding":
        pattern = node.child_by_field_name("pattern")
        if pattern is None or pattern.type not in ("value_name", "parenthesized_operator"):
            return None
        body = node.child_by_field_name("body")
        function = any(c.type == "parameter" for c in node.named_children) or (
            body is not None and body.type in _OCAML_FUNCTION_BODIES)
        return ("function" if function else "constant"), " ".join(node_text(pattern).split())
    if node.type in ("external", "method_definition"):
        name = next((c for c in node.named_children if c.type in ("value_name", "method_name")), None)
        return ("function", node_text(name)) if name is not None else None
    if node.type == "type_binding":
        name = node.child_by_field_name("name")
        return ("type", node_text(name)) if name is not None else None
    named = {"module_definition": ("module_binding", "module_name"), "module_type_definition": (None, "module_type_name"),
             "class_definition": ("class_binding", "class_name")}.get(node.type)
    if named is None:
        return None
    holder = next((c for c in node.named_children if c.type == named[0]), None) if named[0] else node
    name = next((c for c in holder.named_children if c.type == named[1]), None) if holder is not None else None
    return ("class", node_text(name)) if name is not None else None


#: Clojure's defining forms (``clojure.core`` and the usual libraries' ``def`` macros) -> kind.
_CLOJURE_DEFS = {"defn": "function", "defn-": "function", "defmacro": "macro", "defmulti": "function",
                 "defmethod": "function", "defprotocol": "class", "defrecord": "class", "deftype": "class",
                 "definterface": "class", "defstruct": "class", "def": "variable", "defonce": "variable",
                 "deftest": "function", "defspec": "function", "definline": "function"}


def clojure(node: tree_sitter.Node) -> tuple[str, str] | None:
    """``(defn name ...)``, ``(defn- name ...)``, ``(defmacro ...)``, ``(defprotocol P ...)``, ``(defrecord R
    ...)``, ``(def x ...)`` (a constant when its name is ``SHOUTED`` or ``+earmuffed+``), ``(defmethod m
    :dispatch ...)`` named ``m`` as its ``defmulti`` is; metadata (``^:private``, ``^String``) is no name."""
    forms = node.named_children[:2] if node.type == "list_lit" else []
    if forms and forms[0].type == "sym_lit" and _protocol(node.parent):  # (coll-reduce [coll f] [coll f val])
        return ("function", name) if (name := _clojure_name(forms[0])) else None
    if len(forms) < 2 or forms[0].type != "sym_lit" or forms[1].type != "sym_lit":
        return None
    kind = _CLOJURE_DEFS.get(_clojure_name(forms[0]) or "")
    name = _clojure_name(forms[1])
    if kind is None or not name:
        return None
    if kind == "variable" and (name.isupper() or name.startswith("+") and name.endswith("+")):
        kind = "constant"
    return kind, name


def _clojure_name(symbol: tree_sitter.Node) -> str | None:
    """A ``sym_lit``'s symbol without its metadata (``^:private foo`` -> ``foo``; ``s/def`` stays whole)."""
    parts = [c for c in symbol.named_children if c.type in ("sym_ns", "sym_name")]
    return "/".join(node_text(c) for c in parts) if parts else None


def _protocol(node: tree_sitter.Node | None) -> bool:
    """Whether ``node`` is a ``(defprotocol P ...)`` or ``(definterface I ...)`` form, whose lists declare methods."""
    head = node.named_children[0] if node is not None and node.type == "list_lit" and node.named_children else None
    return head is not None and head.type == "sym_lit" and _clojure_name(head) in ("defprotocol", "definterface")


def clojure_scope(node: tree_sitter.Node) -> bool:
    """Where Clojure definitions are looked for: forms that define nothing themselves (``(when-not ...
    (defn ...))``, ``(do ...)``) and a protocol's methods, not a definition's body nor a ``(comment ...)``
    form, whose code is never evaluated (a REPL's scratch: its defns were listed as definitions)."""
    if _protocol(node):
        return True
    if node.type != "list_lit" or clojure(node) is not None:
        return False
    head = node.named_children[0] if node.named_children else None
    return head is None or head.type != "sym_lit" or _clojure_name(head) != "comment"


def perl_spans(root: tree_sitter.Node) -> list[Span]:
    """Perl's subs, in the package that holds them: ``package Mojo::UserAgent;`` runs to the next package statement
    (or the file's end), ``package Foo { ... }`` over its block, so ``sub start`` is ``Mojo::UserAgent::start``
    (a new user's `symbol Mojo::UserAgent` and `Mojo::UserAgent::start` found nothing)."""
    out: list[Span] = []
    top = root.named_children
    for i, node in enumerate(top):
        if node.type != "package_statement" or (name := _text(node.child_by_field_name("name"))) is None:
            continue
        last = node
        if not any(c.type == "block" for c in node.named_children):  # to the next package statement
            for after in top[i + 1:]:
                if after.type in ("package_statement", "eof_marker"):  # `__END__`: what follows is no code
                    break
                if after.type not in ("pod", "comment", "data_section"):  # its documentation stays the file's
                    last = after
        out.append(Span(node.start_byte, last.end_byte, node.start_point[0], last_row(last), "class", name))
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type == "subroutine_declaration_statement":
                name = _text(child.child_by_field_name("name"))
                if name:
                    out.append(Span(child.start_byte, child.end_byte, child.start_point[0], last_row(child),
                                    "function", name))
            elif child.named_child_count:
                stack.append(child)
    return out


OCAML_INTERFACE_SCOPES = frozenset({"module_definition", "module_binding", "signature", "module_type_definition",
                                    "type_definition"})


def ocaml_interface(node: tree_sitter.Node) -> tuple[str, str] | None:
    """An ``.mli``'s ``val f : a -> b`` (a function; ``val x : int`` a constant), ``external``, type bindings and
    modules (``module M : sig ... end``, ``module type S = sig ... end``: a class, holding its own)."""
    if node.type == "value_specification":
        name = next((c for c in node.named_children if c.type in ("value_name", "parenthesized_operator")), None)
        kind = node.child_by_field_name("type")
        return ("function" if kind is not None and kind.type == "function_type" else "constant",
                " ".join(node_text(name).split())) if name is not None else None
    return ocaml(node)


def ocaml_interface_spans(root: tree_sitter.Node) -> list[Span]:
    """The definitions :func:`ocaml_interface` names, each with the ``(** doc *)`` right under it (an ``.mli``
    documents a value below it, as OCaml's stdlib does) when a blank line or its scope's end follows that doc,
    so it cannot be the next one's."""
    spans = classified(ocaml_interface, descend=lambda node: node.type in OCAML_INTERFACE_SCOPES)(root)
    docs: dict[int, tree_sitter.Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type == "comment" and child.text.startswith(b"(**"):
                after = child.next_named_sibling
                if after is None or after.start_point[0] > last_row(child) + 1:
                    docs[child.start_point[0]] = child
            elif child.type in OCAML_INTERFACE_SCOPES:
                stack.append(child)
    out = []
    for span in spans:
        doc = docs.get(span.last + 1)
        if doc is not None and doc.start_byte >= span.end:
            span = Span(span.start, doc.end_byte, span.head, last_row(doc), span.kind, span.name)
        out.append(span)
    return out


#: Terraform's blocks named as its own references name them (``aws_s3_bucket.logs``, ``var.region``,
#: ``module.vpc``, ``data.aws_iam_policy_document.assume``): block type -> (kind, prefix, labels in the name).
_TERRAFORM = {"resource": ("class", "", 2), "data": ("class", "data.", 2), "variable": ("variable", "var.", 1),
              "output": ("variable", "output.", 1), "module": ("class", "module.", 1),
              "provider": ("class", "provider.", 1)}


def hcl(node: tree_sitter.Node) -> tuple[str, str] | None:
    """A top-level HCL block with labels: Terraform's as its references write them (``resource "aws_s3_bucket"
    "logs"`` is ``aws_s3_bucket.logs``); another tool's (Packer, Nomad) as ``type.label``. A block without a
    label (``terraform {}``, ``locals {}``) defines nothing of its own."""
    if node.type != "block" or not node.named_children or node.named_children[0].type != "identifier":
        return None
    kind_of = node_text(node.named_children[0])
    labels = [node_text(c).strip('"') for c in node.named_children[1:] if c.type in ("string_lit", "identifier")]
    if not labels:
        return None
    kind, prefix, count = _TERRAFORM.get(kind_of, ("class", kind_of + ".", len(labels)))
    return kind, prefix + ".".join(labels[:count])
