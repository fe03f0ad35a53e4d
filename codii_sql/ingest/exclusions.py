"""What codii-sql leaves out whatever the ignore rules say: dependency and build-output folders, lock files,
minified bundles, binaries by extension, and files that usually hold credentials."""

from __future__ import annotations

from collections.abc import Container

_DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".next", ".gradle", ".idea", ".vscode",
})
#: Folder names that are build output only beside the file of the tool that writes there (Cargo,
#: Maven and sbt write ``target/``; CMake, setuptools, npm scripts, Gradle and Meson ``build/``;
#: setuptools, npm and Poetry ``dist/``). Elsewhere they are source: the Linux kernel's
#: ``drivers/target``, ``drivers/nvme/target``, ``include/target`` and ``tools/build`` hold 223 files.
_BUILD_OUTPUT_DIRS = {
    "target": frozenset({"Cargo.toml", "pom.xml", "build.sbt"}),
    "build": frozenset({"CMakeLists.txt", "setup.py", "setup.cfg", "pyproject.toml", "package.json", "build.gradle",
                        "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "meson.build"}),
    "dist": frozenset({"setup.py", "setup.cfg", "pyproject.toml", "package.json"}),
}
#: Files that make the folder holding them tool output whatever its name, and the skip reason: a
#: virtualenv, a CMake build tree, and the Cache Directory Tagging convention (bford.info/cachedir;
#: Cargo writes one in ``target/``, wherever ``CARGO_TARGET_DIR`` puts it).
_OUTPUT_MARKERS = {"pyvenv.cfg": "default-excluded", "CMakeCache.txt": "build-output", "CACHEDIR.TAG": "build-output"}
#: Names whose presence changes how their folder or its sibling folders are read (a ``Cargo.toml`` makes
#: the ``target/`` beside it build output): a change to one is not a change of that file alone.
FOLDER_MARKERS = frozenset().union(*_BUILD_OUTPUT_DIRS.values(), _OUTPUT_MARKERS)
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


def excluded_dir(name: str, siblings: Container[str]) -> str | None:
    """Why a folder called ``name`` (below the root), beside the entries named ``siblings``, is left
    out: ``default-excluded`` for a dependency, cache or metadata folder, ``build-output`` for a
    ``target``/``build``/``dist`` beside its build tool's file (:data:`_BUILD_OUTPUT_DIRS`); else None."""
    if name in _DEFAULT_EXCLUDED_DIRS or name.endswith(".egg-info"):
        return "default-excluded"
    tools = _BUILD_OUTPUT_DIRS.get(name)
    return "build-output" if tools is not None and any(t in siblings for t in tools) else None


def marked_output(names: Container[str]) -> str | None:
    """Why a folder holding the entries ``names`` is left out (a :data:`_OUTPUT_MARKERS` file among
    them: ``default-excluded`` for a virtualenv, ``build-output``), or None."""
    return next((reason for marker, reason in _OUTPUT_MARKERS.items() if marker in names), None)


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
