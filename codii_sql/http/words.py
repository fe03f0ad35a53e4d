"""How the HTTP server words what to do: a remedy for a client of the server, a request field as a parameter."""

from __future__ import annotations

from ..errors import Wording

#: One sentence per remedy kind (codii_sql.errors.REMEDIES). The server's indexes are built on the
#: server, so a build is named as its command there.
SENTENCES = {
    "build": "the server's index of {root} must be built (`codii-sql build {root_sh}` on the server)",
    "force_build": "the server's index must be rebuilt (`codii-sql build {root_sh} --force` on the server)",
    "reset_filters": "`codii-sql build {root_sh} --reset-filters` on the server indexes every file",
    "embed_vectors": "`codii-sql build {root_sh} --vectors` on the server embeds them",
    "poll_status": "search again when the server's build has committed files",
    "retry": "try again shortly",
    "read_rest": "ask without max_tokens (or with a larger one) for whole chunks",
    "search_member": "add codebase={root} to search it alone",
    "pass_folder": "pass codebase={root}",
    "clear": "the server's index file must be deleted (`codii-sql clear --db {db_sh} --yes` on the server)",
    "replace_damaged": "the server's index is damaged: `codii-sql build {root_sh} --force` on the server replaces it",
    "doctor": lambda p: f"`codii-sql doctor {p['root_sh'] or 'PATH'}` on the server checks it",
    "free_disk": "the server's disk is full; try again when it has space",
    "make_writable": "the server's index must be made writable",
    "change_embedder": "`codii-sql build {root_sh} --force --embedder {asked}` on the server re-embeds it",
    "drop_member": lambda p: (f"the server's {p['variable']} must drop it" if p.get("variable") else
                              "the server's workspace must drop it (`codii-sql workspace remove` on the server)"),
    "help": "see GET /healthz for what is served",
    "multiline": "add multiline=true",
    "export_again": "the shard is read only: `codii-sql build SOURCE --export {db_sh}` where its source is "
                    "makes it anew, then rename it into the served folder",
    "rerank_model": "search without rerank=1, or start the server with CODII_SQL_RERANK_MODEL set to a "
                    "cross-encoder's folder",
}
#: A request field as the query parameter.
FIELDS = {"path": "codebase", "db": "codebase", "query": "q", "limit": "limit", "mode": "mode", "ext": "ext",
          "glob": "glob", "language": "language", "group_by": "group_by", "max_tokens": "max_tokens",
          "workspace": "workspace", "rerank": "rerank"}


WORDING = Wording(SENTENCES, FIELDS)
words, what, message = WORDING.words, WORDING.what, WORDING.message
