"""The one face of the engine: build, search, status and the rest, for the CLI, the MCP server and any other face.

Faces import from here only (and from the leaves: errors, paths, codebase); they never touch
apsw, the named SQL, numpy or the stages below.
"""

from ..codebase import Codebase
from ..ingest.config import extension_filter
from ..ingest.report import BuildReport, Progress
from ..search.answer import Answer, Member, Note
from ..search.budget import tokens as estimate_tokens
from ..search.query import STOP_WORDS
from ..search.results import MAX_LIMIT, MAX_TOKENS, MIN_TOKENS, MODES, ROLES, Result, SearchOptions
from ..storage.lock import is_locked
from .aside import AsideReport, build_aside, embed_texts
from .boundary import FileSet
from .builds import build, build_in_background, ensure_index
from .codebases import find_codebase, first_build, is_index_file, open_codebase
from .daemon import daemon_info, detached
from .doctor import doctor
from .dry_run import dry_run
from .export import export, export_target, manifest
from .embedders import embedder_health, embedders_in_use
from .history import MAX_HISTORY_LIMIT, HistoryAnswer, HistoryRequest, search_history
from .indexes import OpenIndexes, open_searcher
from .grep import grep
from .grepping import MAX_CONTEXT, GrepRequest
from .inspecting import inspect_query
from .listing import AGENT as AGENT_LISTING, PERSON as PERSON_LISTING, listing
from .maintenance import clear, clear_target, followed_note
from .reading import FileText, file_text
from .models import ENV_MODEL, cached_models, check_reranker, models_dir, pull_model
from .searching import MAX_QUERY_CHARS, SearchRequest, opened, search
from .session import Session, iso
from .shard_folder import ShardFolder
from .targets import member_paths, members_of
from .status import inspect, is_stale, list_codebases, recorded_filters, stats, status
from .outline import outline
from .references import find_references
from .symbols import find_symbol
from .watchers import registered, watchers
from .why import DEFAULT_WHY_LIMIT, MAX_WHY_LIMIT, WhyAnswer, explain_line, explain_served_line
from .watching import Update, Watcher
from .workspaces import Workspace, add_paths, describe, get_workspace, remove, workspaces

__all__ = [
    "extension_filter",
    "AsideReport", "OpenIndexes", "build_aside", "embed_texts",
    "AGENT_LISTING", "MAX_QUERY_CHARS", "Answer", "Member", "Note", "PERSON_LISTING", "SearchRequest", "listing", "opened",
    "Workspace", "add_paths", "describe", "get_workspace", "member_paths", "members_of", "remove", "workspaces",
    "BuildReport", "Codebase", "ENV_MODEL", "MAX_LIMIT", "MAX_TOKENS", "MIN_TOKENS", "MODES", "ROLES", "Progress", "Result", "SearchOptions",
    "FileText", "Session", "ShardFolder", "build", "file_text", "cached_models", "check_reranker", "clear", "clear_target", "followed_note", "daemon_info",
    "detached", "dry_run", "export", "export_target", "manifest", "embedder_health", "embedders_in_use", "build_in_background", "doctor", "ensure_index",
    "find_codebase", "first_build", "is_index_file", "inspect", "inspect_query", "is_locked", "is_stale", "iso",
    "list_codebases", "models_dir", "open_codebase",
    "open_searcher", "pull_model", "recorded_filters", "search", "stats", "status",
    "FileSet", "Update", "Watcher", "registered", "watchers", "find_references", "find_symbol", "outline",
    "MAX_HISTORY_LIMIT", "HistoryAnswer", "HistoryRequest", "search_history",
    "DEFAULT_WHY_LIMIT", "MAX_WHY_LIMIT", "WhyAnswer", "explain_line", "explain_served_line",
    "GrepRequest", "MAX_CONTEXT", "grep",
    "STOP_WORDS", "estimate_tokens",
]
