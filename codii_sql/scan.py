"""Which files of a codebase to index: a directory walk that honours Git's ignore rules.

The walk reads only directory listings, ``stat`` results and ignore files, never file
contents, so re-scanning an unchanged tree costs no reads; :func:`read_file` reads one file
later and does the binary sniffing.

Ignore rules (Git's ``gitignore(5)`` semantics, compiled by pathspec's ``GitIgnoreSpecPattern``), from
lowest to highest precedence:

1. ``$GIT_DIR/info/exclude`` of the repository at the root (``ROOT/.git`` as a directory, or
   a ``gitdir:`` file as in worktrees and submodules), relative to the root;
2. ``.gitignore`` then ``.codiiignore`` in each directory, relative to that directory; a
   deeper directory's files override its parents'. ``.codiiignore`` uses the same syntax and
   overrides ``.gitignore`` of the same directory (ripgrep's ``.ignore`` convention);
3. ``ignore_patterns`` (from ``.codii.yaml`` or the argument), relative to the root, like
   patterns given to ``git`` on the command line.

Within one file the last matching pattern wins. An ignored directory is not descended into,
so as in Git a negation cannot re-include a file under it. Not read: Git's global
``core.excludesFile`` (the user's machine config, not the codebase's), ignore files above the
root, and any other ``.*ignore`` file (``.dockerignore``, ``.npmignore``...).

After the ignore rules come the default exclusions (VCS metadata, dependency, virtualenv,
cache and build directories; lock files; minified bundles; binary extensions; files that
usually hold credentials, such as ``.env``, ``*.pem``, ``id_rsa``). They match
names of path components relative to the root only, so a root that itself lives under
``build/`` is indexed. A negation in a ``.codiiignore`` or in ``ignore_patterns`` (for
example ``!src/build/``) re-includes a default-excluded path; a ``.gitignore`` negation does
not, because whitelist idioms such as ``!*/`` would otherwise re-include ``node_modules``.

Symlinks are followed only when their real path stays inside the root's real path. A file
or directory reachable both directly and through a symlink is listed under each path the
walk reaches it by (the path is the identity the index stores); a symlinked directory whose
real path is already on the current walk chain is a loop and is not entered.
"""

from __future__ import annotations

import collections
import codecs
import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

#: Files larger than this many bytes are skipped (the issue's default: 1 MiB).
DEFAULT_MAX_FILE_BYTES = 1 << 20

#: A NUL byte in this many leading bytes marks a file binary (Git looks at the first 8000
#: bytes in ``buffer_is_binary``; the issue rounds to 8 KiB).
SNIFF_BYTES = 8192
#: A file longer than this whose lines average more than MINIFIED_MEAN_LINE bytes is a
#: minified or generated bundle whatever its name (a 677 KB one-line app.js made 1,490
#: one-line chunks of noise and cost minutes of model time).
MINIFIED_MIN_BYTES = 16 * 1024
MINIFIED_MEAN_LINE = 1000

#: The optional per-codebase configuration file, at the root.
CONFIG_FILE_NAME = ".codii.yaml"

#: Ignore files read in every directory, lowest precedence first.
IGNORE_FILE_NAMES = (".gitignore", ".codiiignore")

#: Every reason :func:`scan` counts in :attr:`ScanResult.skipped`.
SKIP_REASONS = (
    "ignored", "default-excluded", "too-large", "binary-extension", "lock-file", "minified", "secret",
    "extension-filter", "symlink-outside-root", "symlink-loop", "symlink-dangling",
    "unreadable", "not-regular-file", "undecodable-name",
)

_DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", "dist", "build", "target", ".next",
    ".gradle", ".idea", ".vscode",
})
_VIRTUALENV_MARKER = "pyvenv.cfg"
_LOCK_FILES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
    "poetry.lock", "Pipfile.lock", "uv.lock", "Cargo.lock", "Gemfile.lock", "composer.lock",
    "go.sum",
})
_MINIFIED_SUFFIXES = (".min.js", ".min.mjs", ".min.css", ".map")
#: Files that usually hold credentials: never indexed, embedded, cached or served to an agent
#: unless a ``.codiiignore``/``ignore_patterns`` negation asks for them (``!.env.test``).
#: Templates of them (``.env.example``) carry no secrets and stay.
_SECRET_NAMES = frozenset({
    ".env", ".envrc", ".netrc", ".pgpass", ".pypirc", ".npmrc", ".git-credentials", ".htpasswd",
    "credentials", "credentials.json", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
})
#: A private key whatever the file is called (``deploy_key``): PEM/OpenSSH armour (RFC 7468).
_PRIVATE_KEY = re.compile(rb"\A\s*-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".ovpn")
_SECRET_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
_BINARY_EXTENSIONS = frozenset(
    "png jpg jpeg gif bmp ico icns webp tif tiff psd heic avif "
    "zip tar gz tgz bz2 xz zst 7z rar lz4 jar war ear whl egg apk dmg iso deb rpm "
    "ttf otf woff woff2 eot "
    "mp3 mp4 m4a aac wav flac ogg opus avi mov mkv webm wmv "
    "pyc pyo pyd so dylib dll exe o a lib obj class wasm bin "
    "pdf doc docx xls xlsx ppt pptx odt "
    "db sqlite sqlite3 onnx npy npz pkl pickle parquet h5 hdf5 pt pth ckpt safetensors "
    "tflite pb feather arrow".split()
)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to index.

    Attributes:
        path: POSIX path relative to the codebase root, e.g. ``"src/pkg/mod.py"``.
        size: bytes, from ``stat`` (of the target, for a symlink).
        mtime_ns: modification time in nanoseconds since the epoch, from ``stat``.
    """

    path: str
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    """The outcome of :func:`scan`.

    Attributes:
        files: the files to index, sorted by ``path``.
        skipped: reason (one of :data:`SKIP_REASONS`) -> number of skipped paths. A pruned
            directory counts once, whatever it holds. Besides the obvious ones:
            ``"symlink-dangling"`` is a symlink to nothing; ``"symlink-loop"`` a symlinked
            directory already on the walk chain, or a symlink cycle (ELOOP);
            ``"undecodable-name"`` a name that is not UTF-8; ``"unreadable"`` a directory
            that cannot be listed or an entry that cannot be stat-ed.
    """

    files: list[SourceFile]
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)


@dataclass(frozen=True, slots=True)
class CodebaseConfig:
    """The settings of ``ROOT/.codii.yaml``; every key is optional.

    Attributes:
        ignore_patterns: gitignore-style patterns relative to the root.
        extensions: lower-case suffixes such as ``(".py", ".md")``; when set, only files
            ending in one of them are indexed. ``None`` indexes every extension.
        max_file_bytes: files larger than this many bytes are skipped.
    """

    ignore_patterns: tuple[str, ...] = ()
    extensions: tuple[str, ...] | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES


def load_config(root: Path) -> CodebaseConfig:
    """Read ``ROOT/.codii.yaml``; a missing or empty file gives the defaults.

    Raises:
        ValueError: the file cannot be read, is not valid YAML, is not a mapping, has an
            unknown key or a value of the wrong type. The message is one line naming the file.
    """
    path = Path(root) / CONFIG_FILE_NAME
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
    unknown = sorted(map(str, set(data) - {"ignore_patterns", "extensions", "max_file_bytes"}))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; "
                         "allowed: ignore_patterns, extensions, max_file_bytes")
    try:
        return CodebaseConfig(
            ignore_patterns=_patterns(data.get("ignore_patterns") or []),
            extensions=normalize_extensions(data.get("extensions")),
            max_file_bytes=_positive_int(data.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES)),
        )
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _yaml_where(exc: yaml.YAMLError) -> str:
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
    for pattern in patterns:
        try:
            GitIgnoreSpecPattern(pattern)
        except ValueError:
            raise ValueError(f"ignore_patterns: {pattern!r} is not a valid gitignore pattern") from None
    return patterns


def _positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"max_file_bytes must be a positive integer (bytes), got {value!r}")
    return value


def normalize_extensions(extensions: Sequence[str] | None) -> tuple[str, ...] | None:
    """``["py", ".MD"]`` -> ``(".py", ".md")``; ``None`` stays ``None`` (no filter).

    Raises:
        ValueError: not a list of non-empty strings, or an empty list (it would index nothing).
    """
    if extensions is None:
        return None
    names = _string_list(extensions, "extensions")
    if not names or not all(n.strip(".") for n in names):
        raise ValueError(f"extensions must be a non-empty list like ['.py', '.md'], got {extensions!r}")
    return tuple("." + n.lower().lstrip(".") for n in names)


#: pathspec's name for the regex group that captures the ``/`` after a directory match.
_DIR_MARK = "ps_d"
#: How pathspec starts the regex of a pattern without an inner slash (``*.log``, ``logs/``).
_ANY_LEADING_DIRS = "^(?:.+/)?"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One gitignore pattern, as a regex compiled by pathspec."""

    regex: re.Pattern[str]
    excludes: bool  # False for a negation ("!pattern")
    rescues: bool  # a negation that re-includes default-excluded paths

    def matches_itself(self, path: str, is_dir: bool) -> bool:
        """Whether the pattern matches ``path`` itself, as Git matches it.

        pathspec's regexes also match every path under a matching directory (it checks
        flat file lists); such a match captures the ``/`` after that directory in the
        ``ps_d`` group. The walk prunes ignored directories itself, so those matches are
        discarded here: otherwise ``!*/`` (any directory) would re-include the files under
        every directory. A directory-only pattern (``logs/``) matches a directory when
        ``ps_d`` captures the slash appended after the directory's own name.
        """
        regex = self.regex
        if _DIR_MARK not in regex.groupindex:
            return regex.search(path) is not None
        m = regex.search(path)
        if m is not None and m.group(_DIR_MARK) is None:
            return True
        end = len(path) + 1
        return is_dir and any(m.end(_DIR_MARK) == end for m in regex.finditer(path + "/"))


@dataclass(frozen=True, slots=True)
class _IgnoreLevel:
    """The patterns of one ignore file (or of the config), matched relative to ``base``."""

    base: str  # "" for the root, else "dir/sub/" (with the trailing slash)
    rules: tuple[_Rule, ...]  # in file order
    any_rule: re.Pattern[str]  # all rules in one alternation: most paths match none

    def verdict(self, rel: str, is_dir: bool) -> _Rule | None:
        """The last rule matching the path itself (Git: the last matching pattern wins)."""
        path = rel[len(self.base):]
        if not (self.any_rule.search(path) or is_dir and self.any_rule.search(path + "/")):
            return None
        for rule in reversed(self.rules):
            if rule.matches_itself(path, is_dir):
                return rule
        return None


def _compile(lines: Sequence[str], base: str, can_rescue: bool) -> _IgnoreLevel | None:
    """The level for these pattern lines, or ``None`` when they hold no pattern.

    A negation rescues default-excluded paths only from ``.codiiignore`` or the config, and
    only when its last path component is literal (``!src/build/``, not ``!*/``).
    """
    rules = []
    for line in lines:
        try:
            pattern = GitIgnoreSpecPattern(_fix_trailing_globstar(line))
        except ValueError:
            continue  # Git ignores an invalid pattern (``!``, a trailing ``\\``)
        if pattern.include is None:
            continue
        last = pattern.pattern.rstrip().lstrip("!").rstrip("/").rsplit("/", 1)[-1]
        rules.append(_Rule(
            # DOTALL: file names may hold newlines, which pathspec's ``.`` would not match.
            regex=re.compile(pattern.regex.pattern, pattern.regex.flags | re.DOTALL),
            excludes=pattern.include,
            rescues=can_rescue and not pattern.include and not any(c in last for c in "*?["),
        ))
    if not rules:
        return None
    return _IgnoreLevel(base, tuple(rules), _alternation(r.regex.pattern for r in rules))


def _alternation(regexes: Iterator[str]) -> re.Pattern[str]:
    """One regex matching (with ``.search``) wherever any of ``regexes`` does.

    Each alternative is anchored at the start (``.*?`` before an unanchored one), and the
    alternatives of pathspec's "any leading directories" form share one ``(?:.+/)?`` prefix,
    so a miss costs a few passes instead of one per pattern and start position. A group
    name may appear only once per regex, so pathspec's ``ps_d`` group becomes a plain ``/``.
    """
    any_dirs, rest = [], []
    for regex in regexes:
        regex = regex.replace(f"(?P<{_DIR_MARK}>/)", "/")
        if regex.startswith(_ANY_LEADING_DIRS):
            any_dirs.append(regex[len(_ANY_LEADING_DIRS):])
        else:
            rest.append(regex[1:] if regex.startswith("^") else ".*?" + regex)
    if any_dirs:
        rest.append(_ANY_LEADING_DIRS[1:] + "(?:" + "|".join(any_dirs) + ")")
    return re.compile("^(?:" + "|".join(f"(?:{p})" for p in rest) + ")", re.DOTALL)


def _fix_trailing_globstar(line: str) -> str:
    """``a/**/`` -> ``a/**/*/``: the same directories for Git (those under ``a``), but
    pathspec 1.1.1 turns ``a/**/`` into a match of ``a`` itself."""
    stripped = line.rstrip()
    return stripped + "*/" if stripped.endswith("/**/") else line


def _read_ignore_file(path: str, base: str, can_rescue: bool) -> _IgnoreLevel | None:
    # Git reads ignore files as bytes; an unreadable one is ignored like a missing one.
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return _compile(text.splitlines(), base, can_rescue)


def _git_info_exclude(root: str) -> str:
    """Path of ``info/exclude`` for the repository whose ``.git`` is at the root ("" if none)."""
    dot_git = os.path.join(root, ".git")
    git_dir = dot_git
    if os.path.isfile(dot_git):
        try:
            with open(dot_git, encoding="utf-8") as fh:
                first = fh.readline()
        except (OSError, UnicodeDecodeError):
            return ""
        if not first.startswith("gitdir:"):
            return ""
        git_dir = os.path.join(root, first[len("gitdir:"):].strip())
    # Worktrees keep info/ in the main repository, named by the ``commondir`` file.
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
            git_dir = os.path.join(git_dir, fh.read().strip())
    except (OSError, UnicodeDecodeError):
        pass
    return os.path.join(git_dir, "info", "exclude")


@dataclass(slots=True)
class _Dir:
    """A directory on the walk: as reached (``abs``, ``rel``) and where it really is."""

    abs: str
    rel: str  # "" for the root, else "dir/sub/"
    real: str
    levels: tuple[_IgnoreLevel, ...]  # lowest precedence first
    parent: _Dir | None

    def chain_reals(self) -> Iterator[str]:
        d: _Dir | None = self
        while d is not None:
            yield d.real
            d = d.parent


class _Walker:
    """One scan: the root's settings, the skip counter and the files found so far."""

    def __init__(self, root: Path, max_file_bytes: int, ignore_patterns: Sequence[str],
                 extensions: tuple[str, ...] | None) -> None:
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(self.root)
        self.max_file_bytes = max_file_bytes
        self.extensions = extensions
        top = _compile(list(ignore_patterns), "", can_rescue=True)
        self.top = (top,) if top else ()
        self.files: list[SourceFile] = []
        self.skipped: collections.Counter[str] = collections.Counter()

    def run(self) -> ScanResult:
        exclude_path = _git_info_exclude(self.root)
        exclude = _read_ignore_file(exclude_path, "", can_rescue=False) if exclude_path else None
        stack = [_Dir(self.root, "", self.root_real, (exclude,) if exclude else (), None)]
        while stack:
            stack.extend(self._visit(stack.pop()))
        self.files.sort(key=lambda f: f.path)
        return ScanResult(self.files, self.skipped)

    def _visit(self, d: _Dir) -> list[_Dir]:
        """List one directory: record its files, return its subdirectories to walk."""
        try:
            with os.scandir(d.abs) as it:
                entries = list(it)
        except OSError:
            self.skipped["unreadable"] += 1
            return []
        names = {e.name: e for e in entries}
        if d.parent is not None and _VIRTUALENV_MARKER in names:
            self.skipped["default-excluded"] += 1
            return []
        d.levels = self._with_ignore_files(d, names)
        subdirs = []
        for entry in entries:
            child = self._visit_entry(d, entry)
            if child is not None:
                subdirs.append(child)
        return subdirs

    def _with_ignore_files(self, d: _Dir, names: dict[str, os.DirEntry]) -> tuple[_IgnoreLevel, ...]:
        levels = list(d.levels)
        for name in IGNORE_FILE_NAMES:
            entry = names.get(name)
            # Git (>= 2.32) does not follow a symlinked .gitignore in the working tree.
            if entry is not None and entry.is_file(follow_symlinks=False):
                level = _read_ignore_file(entry.path, d.rel, can_rescue=name != ".gitignore")
                if level:
                    levels.append(level)
        return tuple(levels)

    def _verdict(self, d: _Dir, rel: str, is_dir: bool) -> _Rule | None:
        """The deciding rule for a path: the highest-precedence level with a matching rule."""
        for level in (*self.top, *reversed(d.levels)):
            rule = level.verdict(rel, is_dir)
            if rule is not None:
                return rule
        return None

    def _visit_entry(self, d: _Dir, entry: os.DirEntry) -> _Dir | None:
        name = entry.name
        if not _encodable(name):
            self.skipped["undecodable-name"] += 1
            return None
        rel = d.rel + name
        try:
            is_dir = entry.is_dir()  # follows symlinks; False for a dangling one
        except OSError:
            is_dir = False
        rule = self._verdict(d, rel, is_dir)
        if rule is not None and rule.excludes:
            self.skipped["ignored"] += 1
            return None
        rescued = rule is not None and rule.rescues
        if name == ".git":
            self.skipped["default-excluded"] += 1
            return None
        if is_dir:
            return self._enter_dir(d, entry, rel, rescued)
        self._add_file(entry, rel, rescued)
        return None

    def _enter_dir(self, d: _Dir, entry: os.DirEntry, rel: str, rescued: bool) -> _Dir | None:
        name = entry.name
        if not rescued and (name in _DEFAULT_EXCLUDED_DIRS or name.endswith(".egg-info")):
            self.skipped["default-excluded"] += 1
            return None
        real = os.path.join(d.real, name)
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            reason = self._symlink_reason(real)
            if reason is None and real in d.chain_reals():
                reason = "symlink-loop"
            if reason:
                self.skipped[reason] += 1
                return None
        return _Dir(entry.path, rel + "/", real, d.levels, d)

    def _add_file(self, entry: os.DirEntry, rel: str, rescued: bool) -> None:
        name = entry.name
        reason = None if rescued else _default_file_reason(name)
        if reason is None and self.extensions is not None and not name.lower().endswith(self.extensions):
            reason = "extension-filter"
        checked = reason or self._stat_file(entry)
        if isinstance(checked, str):
            self.skipped[checked] += 1
        else:
            self.files.append(SourceFile(rel, checked.st_size, checked.st_mtime_ns))

    def _stat_file(self, entry: os.DirEntry) -> str | os.stat_result:
        """The target's stat, or a skip reason; never opens the file (a FIFO would block)."""
        is_link = entry.is_symlink()
        try:
            st = entry.stat()
        except OSError as exc:
            if not is_link:
                return "unreadable"
            return ("symlink-loop" if exc.errno == errno.ELOOP
                    else "symlink-dangling" if exc.errno in (errno.ENOENT, errno.ENOTDIR)
                    else "unreadable")
        if is_link and (reason := self._symlink_reason(os.path.realpath(entry.path))):
            return reason
        if not stat.S_ISREG(st.st_mode):
            return "not-regular-file"
        return "too-large" if st.st_size > self.max_file_bytes else st

    def _symlink_reason(self, real: str) -> str | None:
        inside = real == self.root_real or real.startswith(self.root_real.rstrip("/") + "/")
        return None if inside else "symlink-outside-root"


def _encodable(name: str) -> bool:
    """False for names holding bytes that are not UTF-8 (``os`` maps them to lone surrogates,
    which cannot be stored as SQLite TEXT)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _default_file_reason(name: str) -> str | None:
    if name in _LOCK_FILES:
        return "lock-file"
    lower = name.lower()
    if lower.endswith(_MINIFIED_SUFFIXES):
        return "minified"
    if (lower in _SECRET_NAMES or lower.endswith(_SECRET_SUFFIXES)
            or (lower.startswith(".env.") and not lower.endswith(_SECRET_TEMPLATE_SUFFIXES))):
        return "secret"
    if lower.rpartition(".")[2] in _BINARY_EXTENSIONS and "." in lower:
        return "binary-extension"
    return None


def scan(root: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
         ignore_patterns: Sequence[str] = (), extensions: Sequence[str] | None = None) -> ScanResult:
    """List the files to index under ``root`` (see the module docstring for the rules).

    Reads directory listings, ``stat`` results and ignore files only, never file contents.
    The settings usually come from :func:`load_config`.

    Args:
        root: the codebase root directory.
        max_file_bytes: files larger than this (bytes) are skipped as ``"too-large"``.
        ignore_patterns: gitignore-style patterns relative to the root, with the highest
            precedence; a negation here also re-includes a default-excluded path.
        extensions: suffixes such as ``[".py", ".md"]`` (case-insensitive); when given,
            only files ending in one of them are indexed.
    Returns:
        ScanResult: files sorted by path, and skip counts by reason.
    Raises:
        FileNotFoundError / NotADirectoryError: ``root`` is not a directory.
        ValueError: ``extensions`` is empty or ``max_file_bytes`` is not a positive integer.
    """
    if not os.path.isdir(root):
        raise (NotADirectoryError if os.path.exists(root) else FileNotFoundError)(
            f"{root}: not a directory")
    walker = _Walker(root, _positive_int(max_file_bytes), ignore_patterns,
                     normalize_extensions(extensions))
    return walker.run()


def read_file(root: Path, f: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes | str:
    """The bytes of one scanned file, or why it cannot be indexed.

    Args:
        root: the root that was scanned.
        f: a file from :func:`scan`.
        max_file_bytes: the size cap (bytes) used for the scan; the file may have grown since.
    Returns:
        bytes: the whole content, or a reason string: ``"vanished"`` (deleted since the
        scan), ``"unreadable"``, ``"not-regular-file"`` (replaced by a FIFO or device since
        the scan; opened non-blocking, so it never hangs), ``"too-large"``, ``"binary"``
        (a NUL byte in the first :data:`SNIFF_BYTES`, unless the file starts with a UTF-16
        byte-order mark), ``"minified"`` (over :data:`MINIFIED_MIN_BYTES` with lines of
        :data:`MINIFIED_MEAN_LINE` bytes on average), ``"secret"`` (a private key).
    """
    try:
        fd = os.open(os.path.join(root, f.path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return "vanished"
    except OSError:
        return "unreadable"
    with open(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "not-regular-file"
            data = fh.read(max_file_bytes + 1)
        except OSError:
            return "unreadable"
    if len(data) > max_file_bytes:
        return "too-large"
    head = data[:SNIFF_BYTES]
    if is_binary(head):
        return "binary"
    if len(data) > MINIFIED_MIN_BYTES and len(data) > MINIFIED_MEAN_LINE * (data.count(b"\n") + 1):
        return "minified"
    if is_private_key(head):
        return "secret"
    return data


def is_binary(data: bytes) -> bool:
    """True when ``data`` (a file's first :data:`SNIFF_BYTES`) holds a NUL byte and is not UTF-16
    (which has NULs in every ASCII character and opens with a byte-order mark)."""
    return b"\0" in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def is_private_key(data: bytes) -> bool:
    """True when ``data`` (a file's first bytes) opens with a PEM or OpenSSH private-key header."""
    return _PRIVATE_KEY.match(data) is not None
