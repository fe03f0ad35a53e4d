"""One .db per codebase: the apsw connection with sqlite-vec, the named SQL of sql/, the writer lock."""
