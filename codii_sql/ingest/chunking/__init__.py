"""Chunking: a file's text -> chunks of whole lines (tree-sitter definitions, Markdown sections, line windows).

Its modules are imported by name (``chunking.chunker``, ``.layout``, ``.regions``): this package loads
nothing itself, so what needs only a size or a name (the scan's rules) does not load tree-sitter
and the tokenizer (docs/benchmarks.md, "CLI start-up").
"""
