"""C and C++ macros the grammars misread: functions defined through a macro, named by the function
they define, and attribute macros in a declaration's head, hidden from the parser.

``DEFINE_IDTENTRY_RAW_ERRORCODE(exc_page_fault) { ... }`` is a function definition whose
"declarator" is a macro call: tree-sitter's C grammar reads the macro as a type and
``(exc_page_fault)`` as a parenthesized declarator, its C++ grammar reads a function named after
the macro. ``SYSCALL_DEFINE3(read, unsigned int, fd, ...) { ... }`` is, to the C grammar, a call
missing its ``;`` followed by a block. Each is named by the macro's first argument, an identifier
(``exc_page_fault``), with the prefix the Linux kernel's own ``scripts/tags.sh`` gives the
syscall macros (``sys_read``); the macro stays in the chunk's text, so a search for it finds the
definition too.

``static __always_inline __alloc_size(1) void *kmalloc_noprof(size_t size, gfp_t flags)``: the grammar
reads the attribute macro ``__alloc_size(1)`` as the declarator, and its error recovery then ran
the function into the next 245 lines of ``include/linux/slab.h``, whose definitions (``kmalloc``,
``kzalloc``...) were lost. The parser gets such a call as spaces of the same length (offsets and
lines unchanged); the chunks keep the file's own text. So does a call after a type's body
(``} __aligned(8);``, read as a function ``__aligned`` holding the struct).

C++ libraries wrap more in macros: ``PYBIND11_NAMESPACE_BEGIN(detail)`` lines, ``PYBIND11_TYPE_CASTER(...);``
in class bodies, ``class PYBIND11_EXPORT_EXCEPTION error_already_set``, ``PYBIND11_NOINLINE`` before a head.
:func:`hide_cpp_macros` hides those too, for a C++ file the grammar could not read whole.
"""

from __future__ import annotations

import re

import tree_sitter

from .nodes import Span, last_row, node_text

#: A macro's name: upper case by convention (``DEFINE_IDTENTRY``, ``SYSCALL_DEFINE3``, ``BPF_CALL_2``).
_MACRO = re.compile(r"[A-Z][A-Z0-9_]+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
#: A name only a misreading gives a definition: an attribute macro's (``__printf``, ``__aligned``), by the
#: kernel's convention, or an upper-case macro's.
MACRO_NAME = re.compile(r"__\w*|[A-Z][A-Z0-9_]*")
#: The prefix of the function a macro defines, as scripts/tags.sh of Linux 6.12 names it for
#: ctags and etags (``SYSCALL_DEFINE[0-9](x`` -> ``sys_x``); other macros keep the argument as is.
_PREFIXES = (("COMPAT_SYSCALL_DEFINE", "compat_sys_"), ("SYSCALL_DEFINE", "sys_"))
#: Where a macro-defined function can stand: file level, inside preprocessor conditionals,
#: ``extern "C" {`` and namespaces (inside a function, ``list_for_each_entry(...) {`` is a loop).
_FILE_LEVEL = frozenset({"translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                         "preproc_elifdef", "linkage_specification", "namespace_definition", "declaration_list"})


#: A macro call in a declaration's head, on one line: after the words before it (``static inline``, or
#: none), the call of an upper-case or ``__`` name (``__alloc_size(1)``, ``__printf(1, 2)``,
#: ``PRINTF(5, 6)``), then the declarator's name and ``(``: on its line, after a type or not
#: (``void *kmalloc_noprof(``, ``int __printf(6, 7) pci_request_irq(``), or at the start of the next
#: line after a lower-case type, the call's line ending in attribute words or not (``static inline
#: __printf(1, 2) __cold`` + ``void early_printk(``; not
#: ``BTF_ID_FLAGS(func, a)`` + ``BTF_ID_FLAGS(func, b)``, a list of macro calls).
_ATTRIBUTE_CALL = re.compile(
    rb"(?m)^([ \t]*(?:[A-Za-z_]\w*[ \t]+)*?)"
    rb"((?:__\w+|[A-Z][A-Z0-9_]+)\((?:[^()\n]|\([^()\n]*\))*\))"
    rb"(?=(?:[ \t]+(?:[A-Za-z_]\w*[ \t*]+)*?|(?:[ \t]+[A-Za-z_]\w*)*[ \t]*\n[ \t]*(?:[a-z_]\w*[ \t*]+)+?)"
    rb"\**[A-Za-z_]\w*[ \t]*\()")
#: What every such call is followed by, looked for first: the call's own pattern is then tried on those
#: lines alone (over whole files, from each line's start, it took 0.2 ms a kernel file).
_THEN_DECLARATOR = re.compile(
    rb"\)(?:[ \t]+(?:[A-Za-z_]\w*[ \t*]+)*|(?:[ \t]+[A-Za-z_]\w*)*[ \t]*\n[ \t]*(?:[a-z_]\w*[ \t*]+)+)"
    rb"\**[A-Za-z_]\w*[ \t]*\(")
#: A type's body closed by attribute calls (``} __aligned(8);``, ``} __aligned(4) __packed;``): the grammar reads
#: the first as a function declarator, and its error recovery can take in the next declaration.
_AFTER_BODY = re.compile(rb"\n\}([ \t]+[^;{}()\n]*\((?:[^;{}\n]*)\))[ \t]*(?:[A-Za-z_]\w*[ \t]*)*;")
#: One such call, its groups as :func:`_hidden` reads ``_ATTRIBUTE_CALL``'s (no words before it).
_CALL = re.compile(rb"()((?:__\w+|[A-Z][A-Z0-9_]+)\((?:[^()\n]|\([^()\n]*\))*\))")
#: C++'s macros that are no attribute of a head (see :func:`hide_cpp_macros`): an upper-case macro's call as a
#: statement of its own, at a line's start, on one line or several (``PYBIND11_NAMESPACE_BEGIN(detail)``,
#: ``PYBIND11_TYPE_CASTER(type, ...);`` in a class body), found by its start, its parentheses then matched;
_LONE_CALL = re.compile(rb"(?m)^[ \t]*[A-Z][A-Z0-9_]{2,}[ \t]*\(")
#: ... what may follow its ``)``: a ``;`` or not, a comment, the line's end;
_LONE_END = re.compile(rb"[ \t]*(;?)[ \t]*(?://[^\n]*)?(?=\n|\Z)")
#: ... and the next line when no ``;`` ends it: a block makes it a definition (``TEST(a, b)`` + ``{``);
_BLOCK_NEXT = re.compile(rb"\s*\{")
#: ... or, after a block's ``{`` or a statement's ``;`` on its line, the last call of a one-line block, whose
#: arguments may be types (pybind11's ``int foo() const override { PYBIND11_OVERRIDE(int, ProtectedB, foo, ); }``:
#: the classes after it were named ``PYBIND11_OVERRIDE.PublicistB``);
_INLINE_CALL = re.compile(rb"[{;][ \t]*([A-Z][A-Z0-9_]{2,}[ \t]*\()")
_BRACE_NEXT = re.compile(rb"[ \t]*;?[ \t]*\}")
#: ... or a name alone (``PYBIND11_WARNING_PUSH``, ``Q_OBJECT``) after a statement, a block's brace, a preprocessor
#: line or a comment, and before no ``}`` or ``,`` (not an enum's last constant);
_LONE_NAME = re.compile(rb"(?m)(?:[;{}]|^#[^\n]*|//[^\n]*|\*/)[ \t]*\n(?:[ \t]*\n)*([ \t]*[A-Z][A-Z0-9_]{2,}[ \t]*)\n"
                        rb"(?![ \t\n]*[},])")
#: an export macro between ``class`` and the name (``class PYBIND11_EXPORT_EXCEPTION error_already_set :``);
_EXPORT = re.compile(rb"\b(?:class|struct|union)[ \t]+([A-Z][A-Z0-9_]{2,})[ \t]+(?=[A-Za-z_]\w*[ \t]*(?:final\b|:|\{|\n))")
#: upper-case attribute words before a head's type or a constructor's name (``PYBIND11_ALWAYS_INLINE class_ &def(``,
#: ``PYBIND11_NOINLINE ~gil_scoped_acquire(``).
_HEAD_WORDS = re.compile(rb"(?m)^([ \t]*(?:[a-z_]\w*[ \t]+)*?)((?:[A-Z][A-Z0-9_]{2,}[ \t]+)+)"
                         rb"(?=(?:[a-z_][\w:<>, *&]*?[ \t*&])?~?[A-Za-z_]\w*[ \t]*\()")
#: What ends or opens a statement, and string quotes: a macro call's arguments hold none but inside quotes.
_PAREN_STOP = re.compile(rb"[()\"'{};]")
#: The rest of a string or character literal, by its quote.
_LITERALS = {b'"': re.compile(rb'(?:[^"\\\n]|\\.)*"'), b"'": re.compile(rb"(?:[^'\\\n]|\\.)*'")}
#: Bytes a lone call's parentheses are looked for in.
_CALL_BYTES = 4096
#: Calls the grammars know themselves.
_NATIVE = (b"__attribute__(", b"__attribute(", b"__declspec(", b"__typeof__(", b"__typeof(", b"__asm__(", b"__asm(",
           b"__volatile__(", b"__alignof__(")
#: A parameter list, not an attribute's arguments: a type and a name (``size_t size``, ``char *p``),
#: ``(void)`` or ``()``: then the call is the function's own declarator (``void __free_pages(struct page *p)``).
_PARAMETERS = re.compile(rb"[A-Za-z_]\w*[ \t*]+[A-Za-z_*]|\(\s*(?:void\s*)?\)$")


def hide_attribute_macros(data: bytes) -> bytes:
    """``data`` (a C or C++ file's UTF-8) with each attribute macro call of a declaration's head as spaces
    (see the module's docstring), for the parser only; two such calls on one line are both hidden."""
    data = _AFTER_BODY.sub(_hidden_after_body, data)
    lines: list[bytes] = []
    done = 0  # the bytes of ``data`` up to here are in ``lines``
    for then in _THEN_DECLARATOR.finditer(data):
        start = data.rfind(b"\n", 0, then.start()) + 1
        if start < done or data[max(0, start - 3):start].rstrip().endswith(b"\\"):  # read, or in a #define
            continue
        end = data.find(b"\n", then.end())
        end = len(data) if end < 0 else end
        line = data[start:end]
        hidden = _ATTRIBUTE_CALL.sub(_hidden, _ATTRIBUTE_CALL.sub(_hidden, line))
        if hidden != line:
            lines += [data[done:start], hidden]
            done = end
    return b"".join([*lines, data[done:]]) if lines else data


def hide_cpp_macros(data: bytes) -> bytes:
    """``data`` (a C++ file's UTF-8, as :func:`hide_attribute_macros` gives it) with C++'s other macros as
    spaces (lines kept), for the parser only: upper-case macro calls that are statements of their own, export
    macros after ``class`` and attribute words before a head (see ``_LONE_CALL``...). The grammar reads each as
    a declaration or an error, and its error recovery ran on: pybind11's ``class_`` lost every ``def*`` method
    after one, ``class PYBIND11_EXPORT_EXCEPTION error_already_set`` was named ``std::exception``."""
    spans = []
    done = 0  # the end of the last lone call
    for m in _LONE_CALL.finditer(data):
        if m.start() < done or data[max(0, m.start() - 3):m.start()].rstrip().endswith(b"\\"):
            continue  # inside the last one, or in a #define
        close = _closing(data, m.end() - 1)
        end = _LONE_END.match(data, close) if close > 0 else None
        if end is not None and (end.group(1) or not _BLOCK_NEXT.match(data, end.end())):
            spans.append((m.start(), end.end()))
            done = end.end()
    for m in _INLINE_CALL.finditer(data):
        close = _closing(data, m.end() - 1)
        if close > 0 and _BRACE_NEXT.match(data, close):
            spans.append((m.start(1), close))
    data = _blanked(data, spans)  # a lone name's line may follow a lone call's
    return _blanked(data, [m.span(1) for m in _EXPORT.finditer(data)] + [m.span(2) for m in _HEAD_WORDS.finditer(data)]
                    + [m.span(1) for m in _LONE_NAME.finditer(data)])


def _blanked(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with the bytes of each of ``spans`` spaces, but line breaks."""
    if not spans:
        return data
    out = bytearray(data)
    for start, end in spans:
        out[start:end] = re.sub(rb"[^\n]", b" ", data[start:end])
    return bytes(out)


def _closing(data: bytes, opening: int) -> int:
    """The offset after the ``)`` closing the ``(`` at ``opening``, or -1: none within ``_CALL_BYTES``, or a
    ``;``, ``{`` or ``}`` before it (a statement, not a call's arguments)."""
    depth, i, limit = 0, opening, min(len(data), opening + _CALL_BYTES)
    while i < limit:
        found = _PAREN_STOP.search(data, i, limit)
        if found is None:
            return -1
        i, c = found.end(), found.group()
        if c == b"(":
            depth += 1
        elif c == b")":
            depth -= 1
            if depth == 0:
                return i
        elif c in _LITERALS:  # a literal: to its closing quote, escapes skipped
            quote = _LITERALS[c].match(data, i)
            if quote is None:
                return -1
            i = quote.end()
        else:
            return -1
    return -1


def _hidden_after_body(m: re.Match) -> bytes:
    """An ``_AFTER_BODY`` match with its attribute calls as spaces."""
    start, end = m.span(1)
    whole = m.group()
    return whole[:start - m.start()] + _CALL.sub(_hidden, m.group(1)) + whole[end - m.start():]


def _hidden(m: re.Match) -> bytes:
    call = m.group(2)
    if call.startswith(_NATIVE) or _PARAMETERS.search(call):
        return m.group()
    return m.group(1) + b" " * len(call)


def defined_name(macro: str, argument: str) -> str:
    """The name of the function ``macro(argument, ...)`` defines: ``sys_read`` for
    ``SYSCALL_DEFINE3(read``, the argument itself for any other macro."""
    for start, prefix in _PREFIXES:
        if macro.startswith(start):
            return prefix + argument
    return argument


def macro_function_name(node: tree_sitter.Node) -> str | None:
    """The name of a ``function_definition`` whose head is a macro call with an identifier first
    argument, or None for any other definition. C: the macro is the ``type`` and the argument a
    parenthesized declarator (``(void)`` there follows the function's own name, read as the type
    after an attribute macro the grammar does not know: ``__attribute_const__``); C++ (no ``type``, not in a class, whose constructors look alike):
    the macro is the function's name and the argument its first parameter's type."""
    declarator = node.child_by_field_name("declarator")
    kind = node.child_by_field_name("type")
    if declarator is None:
        return None
    if declarator.type == "parenthesized_declarator" and kind is not None and kind.type == "type_identifier":
        inner = declarator.named_children
        if len(inner) != 1 or inner[0].type != "identifier":
            return None
        if node_text(inner[0]) == "void":  # ``size_t __attribute_const__ f(void)``: an unknown attribute
            return node_text(kind)         # macro before it made the grammar read ``f`` as the type
        return defined_name(node_text(kind), node_text(inner[0])) if _MACRO.fullmatch(node_text(kind)) else None
    if kind is not None or declarator.type != "function_declarator" or node.parent is None \
            or node.parent.type == "field_declaration_list":
        return None
    macro = declarator.child_by_field_name("declarator")
    params = declarator.child_by_field_name("parameters")
    first = params.named_children[0] if params is not None and params.named_children else None
    if macro is None or macro.type != "identifier" or not _MACRO.fullmatch(node_text(macro)) or first is None \
            or first.type != "parameter_declaration" or first.child_by_field_name("declarator") is not None:
        return None
    argument = node_text(first)
    return defined_name(node_text(macro), argument) if _IDENTIFIER.fullmatch(argument) else None


def macro_call_spans(root: tree_sitter.Node) -> list[Span]:
    """Definitions the C grammar reads as a macro call without its ``;`` and then a block:
    ``SYSCALL_DEFINE3(read, ...)`` + ``{ ... }`` at file level, named as :func:`defined_name` says."""
    spans = []
    stack = [root]
    while stack:
        parent = stack.pop()
        children = parent.named_children
        for i, node in enumerate(children):
            if node.type in _FILE_LEVEL:
                stack.append(node)
            body = children[i + 1] if i + 1 < len(children) else None
            name = _call_name(node) if body is not None and body.type == "compound_statement" else None
            if name is not None:
                spans.append(Span(node.start_byte, body.end_byte, node.start_point[0], last_row(body), "function", name))
    return spans


def _call_name(node: tree_sitter.Node) -> str | None:
    """``MACRO(first, ...)`` as an expression statement whose ``;`` is missing: the name it defines."""
    if node.type != "expression_statement" or not node.children or not node.children[-1].is_missing:
        return None
    call = node.named_children[0] if node.named_children else None
    if call is None or call.type != "call_expression":
        return None
    macro, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    if macro is None or macro.type != "identifier" or not _MACRO.fullmatch(node_text(macro)) \
            or first is None or first.type != "identifier":
        return None
    return defined_name(node_text(macro), node_text(first))
