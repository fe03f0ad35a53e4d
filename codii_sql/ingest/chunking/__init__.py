"""Chunking: a file's text -> chunks of whole lines (tree-sitter definitions, Markdown sections, line windows)."""

from .chunker import CHUNKER_VERSION, DEFAULT_MAX_TOKENS, chunk_text, definitions
from .layout import Chunk, Definition

__all__ = ["CHUNKER_VERSION", "DEFAULT_MAX_TOKENS", "Chunk", "Definition", "chunk_text", "definitions"]
