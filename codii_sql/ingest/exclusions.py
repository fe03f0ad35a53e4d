"""What codii-sql leaves out whatever the ignore rules say: dependency and build folders, lock files,
minified bundles, binaries by extension, and files that usually hold credentials."""

from __future__ import annotations

_DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", "dist", "build", "target", ".next",
    ".gradle", ".idea", ".vscode",
})
#: A file that makes its folder a virtualenv.
VIRTUALENV_MARKER = "pyvenv.cfg"
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
#: How a refusal names that rule (the agent's get_content, inspect --file).
SECRET_RULE = "usually holds credentials (by its name: .env, *.pem, id_rsa...)"
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".ovpn")
_SECRET_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
_BINARY_EXTENSIONS = frozenset(
    "png jpg jpeg gif bmp ico icns webp tif tiff psd heic avif "
    "zip tar gz tgz bz2 xz zst 7z rar lz4 jar war ear whl egg apk dmg iso deb rpm "
    "ttf otf woff woff2 eot "
    "mp3 mp4 m4a aac wav flac ogg opus avi mov mkv webm wmv "
    "pyc pyo pyd so dylib dll exe o a lib obj class wasm bin "
    "pdf ai eps doc docx xls xlsx ppt pptx odt "
    "db sqlite sqlite3 onnx npy npz pkl pickle parquet h5 hdf5 pt pth ckpt safetensors "
    "tflite pb feather arrow".split()
)


def excluded_dir(name: str) -> bool:
    """Whether a folder called ``name`` (below the root) is a dependency, cache or build folder."""
    return name in _DEFAULT_EXCLUDED_DIRS or name.endswith(".egg-info")


def default_file_reason(name: str) -> str | None:
    """Why a file named ``name`` is skipped whatever the rules say (``lock-file``, ``minified``,
    ``secret``, ``binary-extension``), or None."""
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
