"""The errors a user can cause, as data: what happened, and what to do about it in a face's own words.

An error (and a search answer's note, :mod:`codii_sql.search.answer`) carries ``what`` (what went
wrong, one line) and a ``hint``: advice that reads the same on every face (a plain string), or a
:class:`Remedy`, whose kind each face words in its own terms (the CLI names a command and its
flags, the MCP server a tool and its arguments, the HTTP server a parameter). No face parses
advice back out of a message.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The remedy kinds and their parameters; each face has a sentence for every kind
#: (``cli/words.py``, ``mcp/words.py``, ``http/words.py``; a test holds them equal to this list).
#: ``neutral`` is the sentence of :meth:`Remedy.neutral`, for logs and ``str(err)``.
REMEDIES: dict[str, str] = {
    "build": "build the index",
    "force_build": "rebuild the index with a forced build",
    "reset_filters": "build again without the recorded extension and ignore filters",
    "embed_vectors": "build again with vectors on",
    "poll_status": "follow the build's status, then search again",
    "retry": "try again shortly",
    "read_rest": "read the rest of a result by its file and lines, or ask without a token budget",
    "search_member": "search {root} alone",
    "pass_folder": "pass the codebase folder {root}",
    "clear": "delete the index file {db}",
    "replace_damaged": "a forced build replaces the damaged index, and clearing it deletes {db}",
    "doctor": "check the index with doctor",
    "free_disk": "free some disk space, then try again (the index keeps its last committed state)",
    "make_writable": "make the index file and its folder writable, or copy the .db somewhere writable",
    "change_embedder": "rebuild {root} with the embedder {asked} (a forced build re-embeds everything), or "
                       "build it with its own embedder {recorded}",
    "drop_member": "drop {root} from {where}",
    "help": "see the usage of {command}",
    "multiline": "ask for multiline matching",
    "export_again": "build its codebase where the source is, and export it again to {db}",
    "rerank_model": "name a cross-encoder model's folder for re-ranking, or search without re-ranking",
}


@dataclass(frozen=True)
class Remedy:
    """What the user can do, independent of the face that tells it: a :data:`REMEDIES` kind and
    its parameters (``root``: a codebase folder, ``db``: an index file, ``command``...)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in REMEDIES:
            raise ValueError(f"unknown remedy kind {self.kind!r}")

    def neutral(self) -> str:
        """The face-neutral sentence (``str(err)``, logs)."""
        return worded(self, REMEDIES)


Hint = str | Remedy | None


class _Missing(dict):
    """Format parameters, with an absent one left out rather than raising KeyError."""

    def __missing__(self, key: str) -> str:
        return ""


def worded(hint: Hint, sentences: dict, quote: Callable[[str], str] | None = None) -> str | None:
    """``hint`` in a face's ``sentences`` (one per :data:`REMEDIES` kind: a text with ``{param}``
    placeholders, a parameter the remedy lacks left out, or a function of the parameters); a plain
    string as it is; None for none. ``quote`` makes the paths (``root``, ``db``) fit the face's
    commands (a shell's quoting for the CLI: ``/tmp/My Projects/app``)."""
    if not isinstance(hint, Remedy):
        return hint
    params = {k: quote(v) if quote and k in ("root", "db") and isinstance(v, str) and v else v
              for k, v in hint.params.items()}
    # `{root_sh}`: the path as a shell command needs it, for faces whose sentences hold a command or two.
    params.update({f"{k}_sh": shlex.quote(v) for k, v in hint.params.items() if k in ("root", "db")
                   and isinstance(v, str) and v})
    sentence = sentences[hint.kind]
    text = sentence(_Missing(params)) if callable(sentence) else sentence.format_map(_Missing(params))
    return " ".join(text.split())


class Wording:
    """A face's words: a sentence per remedy kind (``sentences``, as :func:`worded` takes them) and
    its name for each request field (``fields``: ``max_tokens`` -> ``--max-tokens``)."""

    def __init__(self, sentences: dict[str, str], fields: dict[str, str], quote: Callable[[str], str] | None = None):
        if set(sentences) != set(REMEDIES):
            raise ValueError(f"a face words every remedy kind, not {sorted(set(sentences) ^ set(REMEDIES))}")
        self.sentences, self.fields, self.quote = sentences, fields, quote

    def words(self, hint: Hint) -> str | None:
        """``hint`` in this face's words."""
        return worded(hint, self.sentences, self.quote)

    def what(self, err: CodiiError) -> str:
        """What went wrong, its field named as this face names it."""
        return f"{self.fields.get(err.field, err.field)} {err.what}" if err.field else err.what

    def message(self, err: CodiiError) -> str:
        """``what: hint``, the one line this face tells."""
        hint = self.words(err.hint)
        return f"{self.what(err)}: {hint}" if hint else self.what(err)


def hint_text(hint: Hint) -> str | None:
    """``hint`` as face-neutral text (None for none)."""
    return hint.neutral() if isinstance(hint, Remedy) else hint


class BuildStopped(Exception):
    """Raised from a build's progress callback to stop it at a batch boundary on request (a watcher
    stopping, an MCP session ending): what the build committed is kept, and the index is left
    indexed (then stale, since the files it did not reach differ), not failed."""


class CodiiError(Exception):
    """Base class: ``what`` went wrong (one line) and a ``hint`` of what to do (see the module
    docstring); ``field`` names the request field at fault (``max_tokens``, ``path``), which a
    face words as its own option name. ``str(err)`` is ``what: hint`` in neutral words."""

    exit_code = 1

    def __init__(self, what: str, hint: Hint = None, *, field: str | None = None):
        self.what, self.hint, self.field = what, hint, field
        super().__init__(what)

    def __str__(self) -> str:
        text = hint_text(self.hint)
        head = f"{self.field} {self.what}" if self.field else self.what
        return f"{head}: {text}" if text else head

    def __reduce__(self):
        # Errors cross process boundaries (Ray tasks, the build daemon): keep the hint and field.
        return _rebuilt, (type(self), self.what, self.hint, self.field)


def _rebuilt(cls: type[CodiiError], what: str, hint: Hint, field_name: str | None) -> CodiiError:
    return cls(what, hint, field=field_name)


class UsageError(CodiiError):
    """Bad input from the user: a path, a query, an option."""

    exit_code = 2


class NotIndexedError(CodiiError):
    """The codebase has no index yet."""


class IndexMismatchError(CodiiError):
    """The index was built by another model, chunker or schema; a forced build rebuilds it."""


class BuildFailedError(CodiiError):
    """A background build stopped at once (a bad ``.codii.yaml``, an index of another model...)."""


class EmbeddingFailedError(CodiiError):
    """The model failed during a build's vector phase; the chunks embedded so far are kept."""


class IndexBusyError(CodiiError):
    """Another process is writing this codebase's index."""


class DaemonRunningError(IndexBusyError):
    """A background build of this codebase is already running (the exit status says so: 3)."""

    exit_code = 3


class StorageError(CodiiError):
    """The index file cannot be opened or written (disk full, read-only, not a codii-sql index)."""


class DiskFullError(StorageError):
    """SQLite could not write the index: the disk is full (SQLITE_FULL)."""


class ReadOnlyIndexError(StorageError):
    """SQLite could not write the index: the file or its folder is read-only."""


class DamagedIndexError(StorageError):
    """The index file is corrupt (SQLite cannot read it); a forced build replaces it."""


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message, or its type name when the message is empty."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
