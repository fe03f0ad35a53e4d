"""A codebase's settings: the optional ``.codii.yaml`` at its root, merged with a build's own options."""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


from ..errors import UsageError
from ..languages import bad_extension
from .chunking.layout import ChunkSizes
from .ignore import pattern_problem

#: Files larger than this many bytes are skipped (the issue's default: 1 MiB).
DEFAULT_MAX_FILE_BYTES = 1 << 20
#: The largest ``max_file_bytes`` accepted: a file is read whole into memory (a cloned repository's
#: `.codii.yaml` asking for 99999999999999 made the build fail with a MemoryError traceback).
MAX_FILE_BYTES_LIMIT = 256 << 20
#: A notebook file may be this many times ``max_file_bytes``: its outputs (base64 plots) are not
#: indexed and often weigh megabytes; ``max_file_bytes`` then caps the text of its cells.
NOTEBOOK_SIZE_FACTOR = 16


def is_notebook(name: str) -> bool:
    """True for a Jupyter notebook's name or path (``.ipynb``, any case)."""
    return name.lower().endswith(".ipynb")


def size_cap(name: str, max_file_bytes: int) -> int:
    """Largest size (bytes) worth reading of the file called ``name`` (or at a path ending in it)."""
    return max_file_bytes * NOTEBOOK_SIZE_FACTOR if is_notebook(name) else max_file_bytes


#: The optional per-codebase configuration file, at the root.
CONFIG_FILE_NAME = ".codii.yaml"
#: Its keys, all optional.
CONFIG_KEYS = ("ignore_patterns", "extensions", "max_file_bytes", "vectors", "embedder", "max_chunk_size",
               "min_chunk_size", "embedding_batch_size", "workers", "history", "ann_min_vectors")
#: The integer settings: (lowest, highest, unit). A chunk under 100 characters is a line or two;
#: 64 processes outnumber any machine's cores that chunking could use.
BOUNDS = {"max_chunk_size": (100, 100_000, "characters"), "min_chunk_size": (0, 10_000, "characters"),
          "embedding_batch_size": (1, 4096, "texts per model call"), "workers": (0, 64, "chunking processes, 0 = auto"),
          "ann_min_vectors": (1, 10**9, "vectors from which search uses IVF lists")}


@dataclass(frozen=True, slots=True)
class HistoryBound:
    """Which commits of the branch the history index holds: the newest ``max_commits`` (None: no
    count bound), authored ``since`` a date (git's date syntax, None: no date bound); both None
    with ``off`` set: no history at all."""

    max_commits: int | None
    since: str | None
    off: bool = False

    def to_dict(self) -> dict:
        return {"max_commits": self.max_commits, "since": self.since, "off": self.off}


#: The issue's default: the last 2 years or 5,000 commits, whichever is smaller; the years count back from
#: HEAD's commit (ingest/history.py), in seconds :data:`DEFAULT_HISTORY_SECONDS` (2 x 365.25 days).
DEFAULT_HISTORY = HistoryBound(5000, "2.years.ago")
DEFAULT_HISTORY_SECONDS = 63_115_200
HISTORY_OFF = HistoryBound(None, None, off=True)
#: More commits than this is a mistyped number: Linux, the largest common history, has ~1.3M.
MAX_HISTORY_COMMITS = 10_000_000
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def history_bound(value: object) -> HistoryBound:
    """``--history``'s or ``history:``'s value as a :class:`HistoryBound`: a number of commits
    (``500``), a date (``2024-01-31``), ``true`` (the default) or ``false`` (off).

    Raises:
        ValueError: anything else (one line saying what is taken).
    """
    if value is True:
        return DEFAULT_HISTORY
    if value is False:
        return HISTORY_OFF
    text = str(value).strip()
    if isinstance(value, int) or text.isdigit():
        count = int(text)
        if 1 <= count <= MAX_HISTORY_COMMITS:
            return HistoryBound(count, None)
    elif _ISO_DATE.match(text):
        try:
            datetime.date.fromisoformat(text)
            return HistoryBound(None, text)
        except ValueError:
            pass
    raise ValueError(f"history must be a number of commits (500), a date (2024-01-31), true or false, got {value!r}")


@dataclass(frozen=True, slots=True)
class CodebaseConfig:
    """The settings of ``ROOT/.codii.yaml``; every key is optional.

    Attributes:
        ignore_patterns: gitignore-style patterns relative to the root.
        extensions: lower-case suffixes such as ``(".py", ".md")``; when set, only files
            ending in one of them are indexed. ``None`` indexes every extension.
        max_file_bytes: files larger than this many bytes are skipped.
        vectors: false for BM25 and symbols only (no model time); None: as the builds choose.
        embedder: the embedder name for this codebase's builds (``local``, ``ollama:MODEL``...).
        max_chunk_size, min_chunk_size: chunk sizes in characters (see :class:`~.chunking.ChunkSizes`);
            the model's word-piece budget still caps a chunk.
        embedding_batch_size: texts per call of the embedder (each call's vectors are cached at once).
        workers: chunking processes (0 or None: up to 4, one per core).
        ann_min_vectors: vectors from which a build clusters the index into IVF lists
            (approximate KNN, storage/ann.py; None: :data:`~..storage.ann.ANN_MIN_VECTORS`).
        history: which commits the history index holds (:func:`history_bound`): None for the
            default, :data:`HISTORY_OFF` for none (``history: false``).
    """

    ignore_patterns: tuple[str, ...] = ()
    extensions: tuple[str, ...] | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    vectors: bool | None = None
    embedder: str | None = None
    max_chunk_size: int | None = None
    min_chunk_size: int | None = None
    embedding_batch_size: int | None = None
    workers: int | None = None
    history: HistoryBound | None = None
    ann_min_vectors: int | None = None

    @property
    def chunk_sizes(self) -> ChunkSizes:
        return ChunkSizes(self.max_chunk_size, self.min_chunk_size)


def load_config(root: Path) -> CodebaseConfig:
    """Read ``ROOT/.codii.yaml``; a missing or empty file gives the defaults.

    Raises:
        ValueError: the file cannot be read, is not valid YAML, is not a mapping, has an
            unknown key or a value of the wrong type. The message is one line naming the file.
    """
    path = Path(root) / CONFIG_FILE_NAME
    if not path.exists():
        return CodebaseConfig()
    import yaml  # here: 8 ms of every command's start-up, needed only where a .codii.yaml is

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CodebaseConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: invalid YAML{_yaml_where(exc)}") from None
    if data is None:
        return CodebaseConfig()
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    unknown = sorted(map(str, set(data) - set(CONFIG_KEYS)))
    if unknown:
        meant = [f"{k} (did you mean {close[0]}?)" if (close := difflib.get_close_matches(k, CONFIG_KEYS, 1)) else k
                 for k in unknown]
        raise ValueError(f"{path}: unknown key(s) {', '.join(meant)}; allowed: {', '.join(CONFIG_KEYS)}")
    try:
        config = CodebaseConfig(
            ignore_patterns=_patterns(data.get("ignore_patterns") or []),
            extensions=normalize_extensions(data.get("extensions")),
            max_file_bytes=positive_int(data.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES)),
            vectors=_optional_bool(data.get("vectors"), "vectors"),
            embedder=_optional_name(data.get("embedder"), "embedder"),
            history=history_bound(data["history"]) if data.get("history") is not None else None,
            **{key: bounded(data.get(key), key) for key in BOUNDS},
        )
        sizes = config.chunk_sizes
        if sizes.max_chars is not None and sizes.min_chars is not None and sizes.min_chars >= sizes.max_chars:
            raise ValueError(f"min_chunk_size ({sizes.min_chars}) must be below max_chunk_size ({sizes.max_chars})")
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return config


def bounded(value: object, key: str) -> int | None:
    """``value`` of the integer setting ``key`` (:data:`BOUNDS`), or None when unset.

    Raises:
        ValueError: not an integer within its bounds (one line, naming the unit).
    """
    if value is None:
        return None
    low, high, unit = BOUNDS[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key} must be an integer from {low:,} to {high:,} ({unit}), got {value!r}")
    return value


def _optional_name(value: object, key: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{key} must be a name such as local or ollama:nomic-embed-text, got {value!r}")
    return value.strip() if value is not None else None


def _optional_bool(value: object, key: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def _yaml_where(exc) -> str:
    """`` at line N: problem`` from a PyYAML error, on one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {' '.join(str(problem).split())}"


def _string_list(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


def _patterns(value: object) -> tuple[str, ...]:
    patterns = _string_list(value, "ignore_patterns")
    problem = next(filter(None, map(pattern_problem, patterns)), None)
    if problem is not None:
        raise ValueError(f"ignore_patterns: {problem}")
    return patterns


def positive_int(value: object) -> int:
    """``max_file_bytes`` checked: a whole number of bytes from 1 to :data:`MAX_FILE_BYTES_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"max_file_bytes must be a positive integer (bytes), got {value!r}")
    if value > MAX_FILE_BYTES_LIMIT:
        raise ValueError(f"max_file_bytes is at most {MAX_FILE_BYTES_LIMIT:,} (256 MiB), got {value:,}")
    return value


def normalize_extensions(extensions: Sequence[str] | None) -> tuple[str, ...] | None:
    """``["py", ".MD"]`` -> ``(".py", ".md")``, ``["go,md"]`` -> ``(".go", ".md")``; ``None``
    stays ``None`` (no filter).

    Raises:
        ValueError: not a list of non-empty strings, an empty list, or a name that no file name
            ends with (``*``, ``src/``, ``.p y``): each would index nothing.
    """
    if extensions is None:
        return None
    names = [part.strip() for n in _string_list(extensions, "extensions") for part in n.split(",")]
    if not names:
        raise ValueError(f"extensions must be a non-empty list like ['.py', '.md'], got {extensions!r}")
    problem = next(filter(None, map(bad_extension, names)), None)
    if problem is not None:
        raise ValueError(problem)
    return tuple("." + n.lower().lstrip(".") for n in names)


def extension_filter(extensions: Iterable[str] | None) -> list[str] | None:
    """A build's ``--ext`` / ``customExtensions`` as :func:`normalize_extensions` writes them;
    ``None`` (keep the recorded filter) and ``[]`` (no filter) stay as they are.

    Raises:
        UsageError: see :func:`normalize_extensions`.
    """
    if extensions is None:
        return None
    names = list(extensions)
    try:
        return list(normalize_extensions(names)) if names else []
    except ValueError as err:
        raise UsageError(str(err)) from None


def scan_rules(root: Path, ignore_patterns: list[str], extensions: list[str] | None) -> dict:
    """:func:`codii_sql.ingest.walk.scan` keyword arguments: ``.codii.yaml`` merged with a build's options.

    The config's ignore patterns come first, then ``ignore_patterns``; ``extensions``
    replaces the config's when given.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    try:
        config = load_config(root)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return {"ignore_patterns": [*config.ignore_patterns, *ignore_patterns],
            "extensions": extensions or config.extensions, "max_file_bytes": config.max_file_bytes}


def vectors_wanted(explicit: bool | None, meta: dict, root) -> bool:
    """Whether a build embeds: ``explicit`` (``--vectors``/``--no-vectors``), else what an earlier build
    was told (``meta["vectors"]``), else ``.codii.yaml``'s ``vectors``, else True.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    if explicit is not None:
        return explicit
    if meta.get("vectors") is not None:
        return meta["vectors"]
    try:
        configured = load_config(root).vectors
    except ValueError as err:
        raise UsageError(str(err)) from None
    return configured is not False


def history_wanted(explicit: HistoryBound | None, meta: dict, root) -> HistoryBound:
    """Which commits a build indexes: ``explicit`` (``--history``/``--no-history``), else what an
    earlier build was told (``meta["history_asked"]``), else ``.codii.yaml``'s ``history``, else
    :data:`~.config.DEFAULT_HISTORY`.

    Raises:
        UsageError: ``.codii.yaml`` is malformed.
    """
    if explicit is not None:
        return explicit
    if meta.get("history_asked"):
        return HistoryBound(**meta["history_asked"])
    try:
        configured = load_config(root).history
    except ValueError as err:
        raise UsageError(str(err)) from None
    return configured or DEFAULT_HISTORY
