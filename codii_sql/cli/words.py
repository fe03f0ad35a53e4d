"""How the CLI words what to do: a remedy as a command and its flags, a request field as its option."""

from __future__ import annotations

import shlex

from ..errors import Wording

#: One sentence per remedy kind (codii_sql.errors.REMEDIES).
SENTENCES = {
    "build": "run `codii-sql build {root}`",
    # An index file named by --db is rebuilt by naming it again (else the default one is built).
    "force_build": lambda p: f"`codii-sql build {p['root']} --force{' --db ' + p['db'] if p['db'] else ''}` rebuilds it",
    "reset_filters": "`codii-sql build {root} --reset-filters` indexes every file",
    "embed_vectors": "`codii-sql build {root} --vectors` embeds them",
    "poll_status": "`codii-sql status {root}` follows it; search again when it reports files indexed",
    "retry": "try again shortly",
    "read_rest": "search without --max-tokens (or with a larger one) for whole chunks",
    "search_member": "search it alone with --path {root}",
    "pass_folder": "pass the codebase folder {root} (--path or PATH)",
    "clear": "`codii-sql clear --db {db} --yes` deletes it",
    "replace_damaged": "`codii-sql build {root} --force` replaces it, `codii-sql clear --db {db} --yes` deletes it",
    "doctor": lambda p: f"`codii-sql doctor {p['root'] or 'PATH'}` checks it and says how to replace a damaged one",
    "free_disk": "free some space, then run the command again (the index keeps its last committed state)",
    "make_writable": "make the index and its folder writable, or copy the .db somewhere writable and pass --db",
    "change_embedder": "`codii-sql build {root} --force --embedder {asked}` re-embeds everything (or pass "
                       "--embedder {recorded})",
    "drop_member": lambda p: (f"drop it from {p['variable']}" if p.get("variable") else
                              f"`codii-sql workspace remove {p['workspace']} {p['root']}` drops it"),
    "help": "see `{command} --help`",
    "multiline": "pass -U (--multiline)",
    "export_again": "build its source where that is and export it again (`codii-sql build SOURCE --vectors "
                    "--export {db}`)",
    "rerank_model": "pass --rerank-model PATH or set CODII_SQL_RERANK_MODEL (README, \"Re-ranking\")",
}
#: A request field as the CLI's option (codii_sql.service.SearchRequest, SearchOptions).
FIELDS = {"path": "--path", "db": "--db", "query": "QUERY", "limit": "--limit", "mode": "--mode", "ext": "--ext",
          "glob": "--glob", "language": "--language", "group_by": "--group-by", "max_tokens": "--max-tokens",
          "workspace": "--workspace", "rerank": "--rerank", "since": "--since", "line": "LINE"}


# Paths in the commands it suggests are quoted as a shell needs them (`build '/tmp/My Projects/app'`).
WORDING = Wording(SENTENCES, FIELDS, shlex.quote)
words, what, message = WORDING.words, WORDING.what, WORDING.message
