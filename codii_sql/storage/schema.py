"""The index file's schema versions: the current one, what opening each older one runs to upgrade it, which read as they are."""

#: Bumped when the tables change shape. 2 added chunks_bits (binary-quantised vectors), 3 partitioned it by
#: rowid % 8, 4 added vector_queue (the vector phase), 5 stems chunks_fts (porter), 6 added history_*, 7 file_texts
#: and file_trigrams (grep), 8 chunks_ivf and chunks_lists (IVF), 9 definitions; older ones migrate on open.
SCHEMA_VERSION = 9
#: The idempotent statements that make every table (the code's and grep's, their look-up indexes, then the history's).
CREATE = ("create_schema", "lookup_indexes", "history_schema")
#: Re-tokenizes chunks_fts: dropped, made anew by create_schema, refilled from chunks.
_RETOKENIZE = ("fts_drop", "create_schema", "fts_rebuild")
#: Fill what create_schema added from the files (grep's texts, definitions): the next build reads every file
#: again, reusing unchanged chunks' vectors; grep reads files without a trigram row whole till then.
_REREAD = ("files_mark_reindex",)
_GREP = (*_REREAD, "grep_mark_incomplete")
#: Schema versions :meth:`.store.Store._migrate` upgrades, and what each runs after create_schema (the new tables).
MIGRATES = {"1": ("bits_rebuild", *_RETOKENIZE, *_GREP), "2": ("bits_rebuild", *_RETOKENIZE, *_GREP),
             "3": (*_RETOKENIZE, *_GREP), "4": (*_RETOKENIZE, *_GREP), "5": _GREP, "6": _GREP, "7": _REREAD, "8": _REREAD}
#: Versions searched as they are when read-only: an unstemmed chunks_fts still matches (FTS5 tokenizes a
#: query with the table's own tokenizer); 5-8 lack tables history, grep, IVF and symbols do without
#: (:meth:`.store.Store._stand_ins`, definitions_stand_in).
READABLE_AS_IS = frozenset({"4", "5", "6", "7", "8"})
