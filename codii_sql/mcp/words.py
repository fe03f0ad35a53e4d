"""How the MCP server words what to do for an agent: a remedy as a tool call, a request field as an argument."""

from __future__ import annotations

from ..errors import Wording

#: One sentence per remedy kind (codii_sql.errors.REMEDIES).
SENTENCES = {
    "build": "call index_codebase with path='{root}', then poll get_indexing_status: search_code answers once it "
             "says every file is searchable (the vectors follow in the background)",
    "force_build": lambda p: (f"call index_codebase with path='{p['root']}' and force=true" if p.get("root")
                              else "call index_codebase for this codebase with force=true"),
    "reset_filters": "index_codebase with resetFilters=true indexes every file",
    "embed_vectors": "a build with vectors embeds them; index_codebase keeps the index's choice, so ask the user "
                     "(`codii-sql build {root_sh} --vectors`)",
    "poll_status": "poll get_indexing_status and search again when it reports files indexed",
    "retry": "try again shortly",
    "read_rest": "get_content or get_chunk reads the rest",
    "search_member": "search_code with path='{root}' searches it alone",
    "pass_folder": "pass path='{root}' (search_code accepts a subfolder as it is)",
    "clear": "clear_index deletes it",
    "replace_damaged": "call index_codebase with path='{root}' and force=true to replace it (clear_index deletes it)",
    "doctor": lambda p: f"the user can check it with `codii-sql doctor {p['root_sh'] or 'PATH'}`",
    "free_disk": "free some space, then call the tool again (the index keeps its last committed state)",
    "make_writable": "the user must make the index and its folder writable",
    "change_embedder": "call index_codebase with force=true to re-embed everything with {asked}, or with "
                       "embedder='{recorded}'",
    "drop_member": lambda p: ("ask the user to drop it from " + (p["variable"] if p.get("variable") else
                              f"the workspace (`codii-sql workspace remove {p['workspace']} {p['root_sh']}`)")),
    "help": "fix the arguments as the tool's input schema says",
    "multiline": "call grep_code with multiline=true",
    "export_again": "the user must build its source and export it again "
                    "(`codii-sql build SOURCE --vectors --export {db_sh}`)",
    "rerank_model": "search without rerank, or ask the user to start the MCP server with CODII_SQL_RERANK_MODEL "
                    "set to a cross-encoder's folder",
}
#: A request field as the tools' argument.
FIELDS = {"path": "path", "db": "path", "query": "query", "limit": "limit", "mode": "mode", "ext": "extensionFilter",
          "glob": "pathGlob", "language": "language", "group_by": "group_by", "max_tokens": "max_tokens",
          "workspace": "workspace", "rerank": "rerank", "since": "since", "line": "line"}


WORDING = Wording(SENTENCES, FIELDS)
words, what, message = WORDING.words, WORDING.what, WORDING.message
