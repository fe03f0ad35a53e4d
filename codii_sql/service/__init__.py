"""The one face of the engine: build, search, status and the rest, for the CLI, the MCP server and any other face.

Faces import from here only (and from the leaves: errors, paths, codebase); they never touch
apsw, the named SQL, numpy or the stages below.
"""

from __future__ import annotations

import importlib
import sys
import types

#: What this face exports, by the module that holds it (``None``: the same name there). A name is
#: imported when first asked for (PEP 562): a command then loads the stages it uses, not numpy,
#: onnxruntime's callers, yaml and the build for every ``symbol`` or ``grep`` (docs/benchmarks.md,
#: "CLI start-up").
_EXPORTS: dict[str, dict[str, str | None]] = {
    "..codebase": {"Codebase": None},
    "..ingest.config": {"extension_filter": None},
    "..ingest.report": {"BuildReport": None, "Progress": None},
    "..search.answer": {"Answer": None, "Member": None, "Note": None},
    "..search.budget": {"estimate_tokens": "tokens"},
    "..search.grep_answer": {"GrepAnswer": None},
    "..search.query": {"STOP_WORDS": None},
    "..search.results": {
        "MAX_LIMIT": None,
        "MAX_TOKENS": None,
        "MIN_TOKENS": None,
        "MODES": None,
        "ROLES": None,
        "Result": None,
        "SearchOptions": None,
    },
    "..storage.lock": {"is_locked": None},
    "..storage.store": {"serve_unmapped": None},
    ".aside": {"AsideReport": None, "build_aside": None, "embed_texts": None},
    ".boundary": {"FileSet": None},
    ".builds": {"build": None, "build_in_background": None, "building": None, "embeds_first": None,
                "ensure_index": None, "pending_build": None},
    ".codebases": {"find_codebase": None, "is_index_file": None, "open_codebase": None},
    ".daemon": {"daemon_info": None, "detached": None},
    ".doctor": {"doctor": None},
    ".dry_run": {"dry_run": None},
    ".export": {"export": None, "export_target": None, "manifest": None},
    ".embedders": {"embedder_health": None, "embedders_in_use": None},
    ".history": {"MAX_HISTORY_LIMIT": None, "HistoryAnswer": None, "HistoryRequest": None, "search_history": None},
    ".indexes": {"OpenIndexes": None, "open_searcher": None},
    ".grep": {"grep": None},
    ".grep_filter": {"rg_types": None},
    ".grepping": {"MAX_CONTEXT": None, "SHOWN_LINE_CHARS": None, "GrepRequest": None},
    ".inspecting": {"inspect_query": None},
    ".listing": {"AGENT_LISTING": "AGENT", "PERSON_LISTING": "PERSON", "listing": None},
    ".maintenance": {"clear": None, "clear_target": None, "followed_note": None},
    ".reading": {"FileText": None, "file_text": None},
    ".models": {
        "ENV_MODEL": None,
        "cached_models": None,
        "check_reranker": None,
        "models_dir": None,
        "pull_model": None,
    },
    ".searching": {"MAX_QUERY_CHARS": None, "SearchRequest": None, "opened": None, "search": None},
    ".session": {"Session": None, "iso": None},
    ".shard_folder": {"ShardFolder": None},
    ".targets": {"member_paths": None, "members_of": None},
    ".status": {
        "inspect": None,
        "is_stale": None,
        "list_codebases": None,
        "recorded_filters": None,
        "stats": None,
        "status": None,
    },
    ".outline": {"outline": None},
    ".references": {"find_references": None},
    ".symbols": {"find_symbol": None},
    ".watchers": {"registered": None, "watchers": None},
    ".why": {
        "DEFAULT_WHY_LIMIT": None,
        "MAX_WHY_LIMIT": None,
        "WhyAnswer": None,
        "explain_line": None,
        "explain_served_line": None,
    },
    ".watching": {"Update": None, "Watcher": None},
    ".workspaces": {
        "Workspace": None,
        "add_paths": None,
        "describe": None,
        "get_workspace": None,
        "remove": None,
        "workspaces": None,
    },
}
_WHERE = {name: (module, attr or name) for module, names in _EXPORTS.items() for name, attr in names.items()}

__all__ = sorted(_WHERE)  # noqa: PLE0605 - the names of _EXPORTS


def __getattr__(name: str):
    """The exported ``name``, its module imported on first use (AttributeError for another name)."""
    try:
        module, attr = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


class _Face(types.ModuleType):
    """This package, refusing a submodule as the value of a name it exports: the import system binds
    each submodule it loads to its name here, and nine of them (``grep``, ``status``, ``doctor``...) share
    it with the function exported, which a later ``service.grep(...)`` must still find."""

    def __setattr__(self, name: str, value: object) -> None:
        if not (isinstance(value, types.ModuleType) and name in _WHERE):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Face
