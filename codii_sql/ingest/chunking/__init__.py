"""Chunking: a file's text -> chunks of whole lines (tree-sitter definitions, Markdown sections, line windows)."""

from .chunker import CHUNKER_VERSION, DEFAULT_MAX_TOKENS, chunk_text, definitions
from .layout import Chunk, ChunkSizes, Definition
from .regions import FileDefinition, Source, index_source, read_source, source_definitions

__all__ = ["CHUNKER_VERSION", "DEFAULT_MAX_TOKENS", "Chunk", "ChunkSizes", "Definition", "FileDefinition", "Source",
           "chunk_text", "definitions", "index_source", "read_source", "source_definitions"]
