"""The chunker's version, which an index records: what changed in the chunks at each step."""

#: Stored in the index; bump whenever the chunks produced for the same input change (the next
#: build then re-chunks every file, or those of :data:`SCOPED`, reusing the vectors of unchanged chunk texts).
#: 2: a window split no longer leaves a tiny last piece (a lone ``)`` of a long signature).
#: 3: JS/TS assignments of functions are definitions; Markdown setext headings start sections.
#: 4: notebooks are chunked by cell, Vue/Svelte scripts by their grammar, #! scripts by their interpreter.
#: 5: a preamble is no longer merged into a tiny first function; tiny class/impl headers join their
#: first member; licence headers are chunks of kind ``license``; C/C++ prototypes and Rust trait
#: method signatures are definitions; Rust impl symbols drop generics.
#: 6: ``.h`` headers whose text is C++ are chunked by the C++ grammar; an exported JS/TS value
#: a call makes (``export const safeParse = makeSafeParse(...)``) and a TS abstract method are definitions;
#: C/C++ names that error recovery made of keywords or whole lines are not.
#: 7: the subtokens column holds the character pairs of Chinese and Japanese text (text.cjk_bigrams).
#: 8: SQL is chunked by its definitions (``-- name:`` blocks, CREATE statements, CTEs: see :mod:`.sql`).
#: 9: a licence header needs a licence's phrases, not the word alone.
#: 10: C/C++ functions a macro defines are named by the function (``DEFINE_IDTENTRY(exc_int3)`` ->
#: ``exc_int3``, ``SYSCALL_DEFINE3(read, ...)`` -> ``sys_read``: see :mod:`.cmacros`).
#: 11: a long line's pieces are never cut inside an identifier at its ``_`` or ``$``; a UTF-8 file with a
#: few stray bytes is read as UTF-8 (text.decode_source), not Latin-1. Rust's ``macro_rules!`` are of kind ``macro``.
#: 12: Rust items inside a macro's braces (``cfg_rt! { pub fn spawn_blocking ... }``) are definitions and chunks
#: of their own (see :mod:`.rustmacros`).
#: 13: a JS/TS binding a module's value is an import, not a definition (``const Npm = require('../npm.js')``);
#: of a one-line definition too long for a chunk, only the first part is named after it; comments above a
#: definition too long to ride along with it are text chunks of their own.
#: 14: a file with a valid non-ASCII UTF-8 character for every 4 stray bytes is read as UTF-8, not Latin-1
#: (text.decode_source).
#: 15: C and C++ attribute macros in a declaration's head (``static inline __alloc_size(1) void *f(``) are
#: hidden from the parser, whose error recovery lost the definitions after them (see :mod:`.cmacros`).
#: 16: a ``/** ... */`` doc comment a blank line above its definition belongs to it (commander's JSDoc style:
#: each comment was a chunk of its own, labelled with the class); a module chunk that only imports is of kind
#: ``imports`` (:mod:`.imports`); Java fields and enum constants, C# properties, fields and events, PHP class
#: constants and properties are declarations (symbols, outlines), C# operators and finalizers named.
#: 17: a C type's body closed by attribute macros (``} __aligned(8);``) is the type's definition, not a function
#: ``__aligned`` holding it; an attribute macro call followed by attribute words ends a declaration's head
#: (``static inline __printf(1, 2) __cold`` + ``void early_printk(``). C++ files are read without their lone
#: macro calls, export and attribute macros when that reads more of them (pybind11, :func:`.cmacros.hide_cpp_macros`);
#: a C++ head returning a reference is named (``class_ &def(`` -> ``def``), a conversion operator by its type;
#: C/C++ declarations in a function's body are no definitions; more ``.h`` headers are C++ (languages._CPP_LINE).
#: Swift: a file with errors is read again without its ``#if`` lines (:mod:`.swift`), ``/** */`` docs belong to
#: their declaration; Swift and Kotlin properties and Swift protocol requirements are declarations. A file
#: without an extension is chunked in the language a modeline names (``-*- shell-script -*-``, languages.py).
#: A TypeScript namespace holds its members (``Geometry.distance``), as a class does.
#: 18: Perl, Scala, Lua, Emacs Lisp, Elixir, Erlang and Haskell are chunked by their syntax (definitions, symbols,
#: outlines: see :mod:`.classified`); ``.el`` files are Emacs Lisp, ``.hrl`` Erlang (they were no language). A Rust
#: item inside a macro's braces keeps its doc and attributes, and an attribute followed by a ``// why`` comment is
#: its item's (tokio: 217 of 6,530 definitions lost them, 0 now). Go struct fields and Ruby's ``attr_accessor``
#: names are declarations (``Context.Errors``, ``Zone.zone_default``). Other languages' comment lines followed by a
#: ``//`` comment (``/* a */ // b``), which the same rule takes in, are left to their files' next change.
#: 19: Solidity, Protocol Buffers, OCaml (``.ml`` and ``.mli``, whose ``(** doc *)`` under a ``val`` is its own) and
#: Clojure are chunked by their syntax (contracts, messages and services, modules and ``let``s, ``defn``s: see
#: :mod:`.grammars` and :mod:`.classified`); ``.cljs``, ``.cljc`` and ``.mli`` files had no language before.
#: Terraform (HCL) blocks are definitions named as its references name them (``aws_s3_bucket.logs``, ``var.region``). A Haskell class's instances, and an Elixir protocol and its ``defimpl``, are
#: definitions apart (mtl's 19 ``MonadState`` instances were 5); an operator's infix equation (``a <+> b = ...``)
#: joins its signature. A Perl package holds the subs up to the next package statement (``Mojo::UserAgent::start``);
#: a Scala template's ``val``/``var``/``type`` are declarations.
CHUNKER_VERSION = 19

#: Versions that changed the chunks of some files only: their languages and file-name suffixes. An index chunked
#: by the version before re-chunks those files alone (every version since must be one of these; else every file):
#: the kernel's 86k files took 15 min to re-chunk for a change to none of them (docs/benchmarks.md "Thirteenth round").
SCOPED: dict[int, tuple[frozenset[str], frozenset[str]]] = {
    18: (frozenset({"perl", "scala", "lua", "elisp", "elixir", "erlang", "haskell", "rust",
                         "go", "ruby"}), frozenset({".el", ".hrl"})),
    19: (frozenset({"solidity", "proto", "ocaml", "clojure", "haskell", "elixir", "perl", "scala", "ocaml_interface",
                    "hcl"}),
         frozenset({".cljs", ".cljc", ".mli"})),
}


def rechunk_scope(built: int, current: int = CHUNKER_VERSION) -> tuple[list[str], list[str]] | None:
    """What an index chunked by version ``built`` must re-chunk under version ``current``: ``(languages,
    suffixes)`` (sorted) when each version since changed those files alone, None when every file (an index
    of a newer version too)."""
    if built >= current:
        return None
    languages: set[str] = set()
    suffixes: set[str] = set()
    for version in range(built + 1, current + 1):
        if version not in SCOPED:
            return None
        languages |= SCOPED[version][0]
        suffixes |= SCOPED[version][1]
    return sorted(languages), sorted(suffixes)
