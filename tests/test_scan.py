"""The scanner against real files, real symlinks/FIFOs and real ``git ls-files``."""

from __future__ import annotations

import builtins
import codecs
import os
import socket
import subprocess
from pathlib import Path

import pytest

from codii_sql.errors import CodiiError
from codii_sql.ingest.config import CONFIG_FILE_NAME, CodebaseConfig, load_config
from codii_sql.ingest import walk
from codii_sql.ingest.read import read_file
from codii_sql.ingest.walk import SourceFile, scan

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
AS_ROOT = pytest.mark.skipif(os.geteuid() == 0, reason="running as root: file permissions do not apply")


def write(root: Path, rel: str, data: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def paths(root: Path, **kwargs) -> set[str]:
    return {f.path for f in scan(root, **kwargs).files}


def git_ls_files(root: Path) -> set[str]:
    out = subprocess.run(
        ["git", "-c", "core.excludesFile=", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, env=GIT_ENV, capture_output=True, check=True,
    ).stdout
    return {p for p in out.decode("utf-8").split("\0") if p}


def test_ignore_rules_match_git_ls_files(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], env=GIT_ENV, check=True)
    (tmp_path / ".git/info/exclude").write_text("secret.py\n")
    ignore_files = {
        ".gitignore": "*.log\n!keep.log\n/out\nlogs/\n!logs/inside.txt\n**/gen/**\ndocs/**/*.txt\n"
                      "cache*/\n# comment\n\\#literal.py\nspace\\ \n",
        "sub/.gitignore": "!important.log\n/local.py\n*.gen.py\nwhitelist/*\n!whitelist/kept/\n",
        "sub/deeper/.gitignore": "!*.gen.py\n",
        ".dockerignore": "*.py\n",  # other tools' ignore files have no effect
        "sub/.npmignore": "*\n",
    }
    for rel, text in ignore_files.items():
        write(tmp_path, rel, text)
    for rel in [
        "main.py", "app.log", "keep.log", "out/o.py", "sub/out/kept.py", "logs/inside.txt",
        "sub/logs/x.py", "logs", "a/gen/x.py", "gen.py", "docs/a/b/c.txt", "docs/readme.md",
        "docs/c.txt", "cache1/x.py", "cachefile", "#literal.py", "space ", "secret.py",
        "sub/secret.py", "sub/important.log", "sub/other.log", "sub/local.py", "sub/deeper/local.py",
        "sub/m.gen.py", "sub/deeper/m.gen.py", "sub/whitelist/gone.py", "sub/whitelist/kept/k.py",
        "with space.py", "quo'te\".py", "new\nline.py", "ünïcødé/日本.py", "notes.md", "sub/fixtures/f.py",
    ]:
        if rel == "logs":
            write(tmp_path, "sub/deeper/logs")  # a file: the dir-only pattern "logs/" spares it
        else:
            write(tmp_path, rel)
    write(tmp_path, ".codiiignore", "notes.md\n")
    write(tmp_path, "sub/.codiiignore", "fixtures/\n")

    got = paths(tmp_path)

    assert got == git_ls_files(tmp_path) - {"notes.md", "sub/fixtures/f.py"}
    assert {"sub/deeper/logs", "keep.log", "sub/important.log", "sub/deeper/m.gen.py",
            "sub/whitelist/kept/k.py", "new\nline.py", ".dockerignore"} <= got
    assert not {"logs/inside.txt", "secret.py", "out/o.py", "sub/whitelist/gone.py"} & got


def test_ignore_patterns_argument_has_the_highest_precedence(tmp_path):
    write(tmp_path, "sub/.gitignore", "!*.md\n")
    for rel in ["a.md", "keep.md", "sub/b.md", "c.py"]:
        write(tmp_path, rel)
    assert paths(tmp_path, ignore_patterns=["*.md", "!keep.md"]) == {"keep.md", "c.py", "sub/.gitignore"}


def test_gitdir_file_points_to_info_exclude(tmp_path):
    root = tmp_path / "worktree"
    write(tmp_path, "gitdirs/wt/commondir", "../main\n")
    write(tmp_path, "gitdirs/wt/HEAD", "ref: refs/heads/wt\n")
    write(tmp_path, "gitdirs/main/info/exclude", "excluded.py\n")
    for folder in ("objects", "refs"):  # what makes it a repository for Git
        (tmp_path / "gitdirs/main" / folder).mkdir()
    write(root, ".git", "gitdir: ../gitdirs/wt\n")
    write(root, "excluded.py")
    write(root, "kept.py")
    result = scan(root)
    assert [f.path for f in result.files] == ["kept.py"]
    assert result.skipped == {"ignored": 1}  # the .git file is the repository's, no skip


def test_default_exclusions(tmp_path):
    excluded_dirs = [".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
                     ".pytest_cache", ".tox", ".nox", ".next", ".gradle",
                     "pkg.egg-info", ".idea", ".vscode", "myenv"]
    for d in excluded_dirs:
        write(tmp_path, f"{d}/inner.py")
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr/bin\n")
    locks = ["package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Cargo.lock", "uv.lock",
             "Gemfile.lock", "composer.lock", "go.sum"]
    minified = ["app.min.js", "site.min.css", "app.js.map"]
    binaries = ["logo.PNG", "a.zip", "f.woff2", "s.mp3", "m.pyc", "lib.so", "x.dll", "y.exe", "C.class",
                "j.jar", "d.pdf", "d.db", "d.sqlite", "m.onnx", "a.npy"]
    secrets = [".env", ".env.local", "id_rsa", "server.pem", "tls.KEY", ".netrc", "credentials.json", "credentials",
               ".htpasswd"]
    for rel in locks + minified + binaries + secrets:
        write(tmp_path, f"deep/{rel}")
    kept = {"src/app.py", "lib/build", "deep/target.py", "dist/inner.py", "build/inner.py", "target/inner.py", "deep/app.js", "Makefile", "deep/.env.example",
            "deep/id_rsa.pub", "deep/keys.py"}
    for rel in kept:
        write(tmp_path, rel)

    result = scan(tmp_path)

    assert {f.path for f in result.files} == kept
    assert result.skipped == {"default-excluded": len(excluded_dirs) - 1, "lock-file": len(locks),  # .git: no skip
                              "minified": len(minified), "binary-extension": len(binaries), "secret": len(secrets)}


def test_build_output_names_are_skipped_only_beside_their_build_tool(tmp_path):
    """The Linux kernel's source folders called target and build stay; a Cargo, CMake, npm or
    Python project's output beside its manifest goes, and so does any folder a tool tagged."""
    source = ["drivers/target/core.c", "drivers/nvme/target/io.c", "include/target/api.h", "tools/build/Makefile",
              "drivers/Makefile", "tools/Makefile", "web/dist/README.md"]
    output = {"rust/target/": "rust/Cargo.toml", "java/target/": "java/pom.xml", "cpp/build/": "cpp/CMakeLists.txt",
              "py/build/": "py/pyproject.toml", "py/dist/": "py/setup.py", "js/dist/": "js/package.json",
              "app/build/": "app/build.gradle.kts"}
    tagged = {"out-of-tree/": "CMakeCache.txt", "cargo-out/": "CACHEDIR.TAG"}
    for rel in source:
        write(tmp_path, rel)
    for folder, manifest in output.items():
        write(tmp_path, folder + "gen.c")
        write(tmp_path, manifest)
    for folder, marker in tagged.items():
        write(tmp_path, folder + marker)
        write(tmp_path, folder + "gen.c")

    result = scan(tmp_path)

    assert {f.path for f in result.files} == {*source, *output.values()}
    assert sorted(result.skipped_paths) == sorted((folder, "build-output") for folder in {*output, *tagged})


def test_codiiignore_negation_rescues_a_default_exclusion_gitignore_does_not(tmp_path):
    write(tmp_path, ".codiiignore", "!src/build/\n!*.lock\n!.env.test\n")
    write(tmp_path, ".gitignore", "!*/\n")
    for rel in ["src/build/__init__.py", "node_modules/m.js", "poetry.lock", "build/out.py", ".env.test", ".env",
                "package.json", "src/CMakeLists.txt"]:  # build/ beside them is build output
        write(tmp_path, rel)
    assert paths(tmp_path) == {".codiiignore", ".gitignore", "src/build/__init__.py", ".env.test", "package.json",
                               "src/CMakeLists.txt"}


def test_root_under_a_default_excluded_name_is_indexed(tmp_path):
    root = tmp_path / "build" / "target" / "node_modules" / "proj"
    write(root, "src/main.rs")
    assert paths(root) == {"src/main.rs"}


def test_symlinks(tmp_path):
    root = tmp_path / "root"
    outside = write(tmp_path, "outside/secret.py").parent
    write(root, "pkg/real.py")
    links = {
        "pkg/loop": "..",  # the root itself: a loop
        "pkg/same.py": "real.py",  # inside: not read (as Git stores a link), real.py is listed under its own path
        "alias": "pkg",  # a directory inside: not entered, its files listed once under pkg/ (as Git stores a link)
        "out_dir": str(outside),
        "out_file.py": str(outside / "secret.py"),
        "dangling.py": "missing.py",
        "self.py": "self.py",  # ELOOP when followed
    }
    for rel, target in links.items():
        os.symlink(target, root / rel)

    result = scan(root)

    assert [f.path for f in result.files] == ["pkg/real.py"]
    assert result.skipped == {"symlink-loop": 2, "symlink-outside-root": 2, "symlink-dangling": 1,
                              "symlink-folder": 1, "symlink-file": 1}
    assert ("alias/", "symlink-folder") in result.skipped_paths


def test_special_files_are_never_opened(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "pipe.py")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.py"))
        write(tmp_path, "a.py")
        write(tmp_path, ".gitignore", "*.tmp\n")
        opened: list[str] = []
        real_open, real_os_open = builtins.open, os.open
        monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
        monkeypatch.setattr(os, "open", lambda f, *a, **k: opened.append(str(f)) or real_os_open(f, *a, **k))

        result = scan(tmp_path)

    assert [f.path for f in result.files] == [".gitignore", "a.py"]
    assert result.skipped == {"not-regular-file": 2}
    assert {Path(p).name for p in opened} <= {".gitignore", "exclude", "attributes", "commondir", ".git"}


def test_read_file_on_a_fifo_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    assert read_file(tmp_path, SourceFile("pipe.py", 0, 0)) == "not-regular-file"


def test_size_cap(tmp_path):
    write(tmp_path, "small.py", b"x" * 100)
    write(tmp_path, "big.py", b"x" * 101)
    result = scan(tmp_path, max_file_bytes=100)
    assert [(f.path, f.size) for f in result.files] == [("small.py", 100)]
    assert result.skipped == {"too-large": 1}
    write(tmp_path, "small.py", b"x" * 101)  # grew after the scan
    assert read_file(tmp_path, result.files[0], max_file_bytes=100) == "too-large"


def test_read_file_sniffs_binary(tmp_path):
    write(tmp_path, "nul.py", b"abc\x00def")
    write(tmp_path, "late_nul.py", b"a" * 8192 + b"\x00")
    utf16 = codecs.BOM_UTF16_LE + "def f():\n    return 1\n".encode("utf-16-le")
    write(tmp_path, "utf16.py", utf16)
    write(tmp_path, "plain.py", "héllo\n")
    write(tmp_path, "logo/mark.ai", b"%PDF-1.6\n%\xe2\xe3\n1 0 obj\n<</Type/Catalog>>\nendobj\n")
    write(tmp_path, "mark.txt", b"%PDF-1.6\n1 0 obj\n")  # a PDF whatever its name, NUL or not
    write(tmp_path, "pdf.md", "A PDF opens with %PDF-1.7.\n")
    files = {f.path: f for f in scan(tmp_path).files}
    assert "logo/mark.ai" not in files  # by its extension
    assert read_file(tmp_path, files["mark.txt"]) == "binary"
    assert isinstance(read_file(tmp_path, files["pdf.md"]), bytes)
    assert read_file(tmp_path, files["nul.py"]) == "binary"
    assert read_file(tmp_path, files["late_nul.py"]) == b"a" * 8192 + b"\x00"
    assert read_file(tmp_path, files["utf16.py"]) == utf16
    assert read_file(tmp_path, files["plain.py"]) == "héllo\n".encode()


def test_read_file_refuses_a_private_key_whatever_its_name(tmp_path):
    write(tmp_path, "deploy_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n")
    write(tmp_path, "notes.md", "Keys look like `-----BEGIN RSA PRIVATE KEY-----`.\n")
    files = {f.path: f for f in scan(tmp_path).files}
    assert read_file(tmp_path, files["deploy_key"]) == "secret"
    assert isinstance(read_file(tmp_path, files["notes.md"]), bytes)  # naming the header is no key


def test_a_key_pasted_inside_a_file_makes_it_secret_and_a_header_alone_does_not(tmp_path, codii_home):
    """A new user's agent was served a service account's JSON and notes with an RSA key on line 3: only a file
    that opened with the armour was refused. The bodies here have the shape of real keys (base64 of 1,190 bytes)."""
    import base64
    import random

    from codii_sql import service

    body = base64.b64encode(random.Random(7).randbytes(1190)).decode()
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64)) + \
        "\n-----END PRIVATE KEY-----\n"
    write(tmp_path, "service-account.json", '{\n "type": "service_account",\n "private_key": "'
          + pem.replace("\n", "\\n") + '"\n}\n')
    write(tmp_path, "docs/notes.md", "# deploy\nthe key:\n" + pem)
    write(tmp_path, "tests/keys.py", 'KEY = (\n    "' + '"\n    "'.join(pem.split("\n")) + '"\n)\n')
    write(tmp_path, "pkey.py", 'HEADER = "-----BEGIN RSA PRIVATE KEY-----"\n\n\ndef is_key(data):\n'
                               '    return data.startswith(HEADER)\n')
    files = {f.path: f for f in scan(tmp_path).files}
    assert [p for p in files if read_file(tmp_path, files[p]) == "secret"] == \
        ["docs/notes.md", "service-account.json", "tests/keys.py"]
    assert isinstance(read_file(tmp_path, files["pkey.py"]), bytes)  # a parser's constant is no key
    # Built and asked as an agent asks: never indexed, never served from the disk either.
    service.build(service.open_codebase(tmp_path), vectors=False)
    found = service.search(service.SearchRequest("service_account private_key", service.SearchOptions(mode="bm25"),
                                                 [str(tmp_path)], update=False))
    assert all(r.path == "pkey.py" for r in found.results)
    with pytest.raises(CodiiError, match="private key|not indexed|skipped"):
        service.Session().content(service.open_codebase(tmp_path), "docs/notes.md", None, None)


def test_read_file_vanished(tmp_path):
    write(tmp_path, "d/gone.py")
    [f] = scan(tmp_path).files
    (tmp_path / "d/gone.py").unlink()
    assert read_file(tmp_path, f) == "vanished"
    (tmp_path / "d").rmdir()
    (tmp_path / "d").write_text("now a file")
    assert read_file(tmp_path, f) == "vanished"


def test_unchanged_tree_rescans_identically(tmp_path):
    for i in range(5):
        write(tmp_path, f"p{i}/m.py")
    first = scan(tmp_path)
    assert scan(tmp_path) == first
    f = first.files[0]
    st = os.stat(tmp_path / f.path)
    assert (f.size, f.mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_extensions_filter(tmp_path):
    for rel in ["a.py", "README.MD", "b.js", "Makefile", "x.d.ts"]:
        write(tmp_path, rel)
    result = scan(tmp_path, extensions=[".py", "md", ".d.ts"])
    assert [f.path for f in result.files] == ["README.MD", "a.py", "x.d.ts"]
    assert result.skipped == {"extension-filter": 2}


def test_undecodable_file_name_is_skipped(tmp_path):
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.py"), "wb") as fh:
        fh.write(b"x")
    write(tmp_path, "good.py")
    result = scan(tmp_path)
    assert [f.path for f in result.files] == ["good.py"]
    assert result.skipped == {"undecodable-name": 1}


def test_load_config(tmp_path):
    assert load_config(tmp_path) == CodebaseConfig()
    write(tmp_path, CONFIG_FILE_NAME, "ignore_patterns: ['*.md', '!keep.md']\nextensions: [py, .MD]\n"
                                      "max_file_bytes: 2048\n")
    assert load_config(tmp_path) == CodebaseConfig(("*.md", "!keep.md"), (".py", ".md"), 2048)
    write(tmp_path, CONFIG_FILE_NAME, "# nothing set\n")
    assert load_config(tmp_path) == CodebaseConfig()


@pytest.mark.parametrize("text, needle", [
    ("ignore_patterns: [a\nextensions: [.py]\n", "invalid YAML at line"),
    ("- a\n- b\n", "expected a mapping"),
    ("ignore_pattern: ['*.md']\n", "unknown key(s) ignore_pattern (did you mean ignore_patterns?)"),
    ("ignore_patterns: '*.md'\n", "ignore_patterns must be a list of strings"),
    ("ignore_patterns: ['!']\n", "not a valid gitignore pattern"),
    ("extensions: []\n", "extensions must be a non-empty list"),
    ("max_file_bytes: -1\n", "max_file_bytes must be a positive integer"),
    ("max_file_bytes: true\n", "max_file_bytes must be a positive integer"),
    ("max_file_bytes: 99999999999999\n", "max_file_bytes is at most 268,435,456"),  # was a MemoryError traceback
])
def test_malformed_config_raises_one_line_value_error(tmp_path, text, needle):
    write(tmp_path, CONFIG_FILE_NAME, text)
    with pytest.raises(ValueError) as info:
        load_config(tmp_path)
    message = str(info.value)
    assert needle in message and CONFIG_FILE_NAME in message and "\n" not in message


def test_scan_rejects_a_missing_root(tmp_path):
    with pytest.raises(FileNotFoundError):
        scan(tmp_path / "nope")
    with pytest.raises(NotADirectoryError):
        scan(write(tmp_path, "f.py"))


@AS_ROOT
def test_unreadable_directory_is_skipped_and_the_scan_goes_on(tmp_path):
    write(tmp_path, "locked/a.py")
    write(tmp_path, "open/b.py")
    (tmp_path / "locked").chmod(0)
    try:
        result = scan(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [f.path for f in result.files] == ["open/b.py"]
    assert result.skipped == {"unreadable": 1}


@AS_ROOT
def test_unreadable_file_is_reported_by_read_file(tmp_path):
    path = write(tmp_path, "a.py")
    path.chmod(0)
    [f] = scan(tmp_path).files
    assert read_file(tmp_path, f) == "unreadable"


def test_a_symlinked_folder_is_indexed_once_as_git_stores_it(tmp_path):
    """The Linux kernel's scripts/dtc/include-prefixes/arm -> ../../../arch/arm/boot/dts, in small:
    Git lists the link itself, not the files behind it; the walk indexes them once, under arch/."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], env=GIT_ENV, check=True)
    for rel in ("arch/arm/boot/dts/board.dts", "arch/arm/boot/dts/soc.dtsi", "scripts/dtc/dtc.c"):
        write(tmp_path, rel)
    (tmp_path / "scripts/dtc/include-prefixes").mkdir()
    os.symlink("../../../arch/arm/boot/dts", tmp_path / "scripts/dtc/include-prefixes/arm")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, env=GIT_ENV, check=True)

    result = scan(tmp_path)

    assert git_ls_files(tmp_path) == {f.path for f in result.files} | {"scripts/dtc/include-prefixes/arm"}
    assert result.skipped_paths == [("scripts/dtc/include-prefixes/arm/", "symlink-folder")]


def test_one_path_is_listed_exactly_when_the_walk_lists_it(tmp_path):
    """walk.listed (a symbol look-up's or a file read's check, one path at a time) against scan, over
    default exclusions, build output, rescues, symlinks, a nested repository, size and extension limits."""
    root = tmp_path / "root"
    for rel in ["src/app.py", "src/build/__init__.py", "node_modules/m.js", "poetry.lock", ".env", ".env.test",
                "deep/id_rsa", "deep/logo.png", "app.min.js", "js/dist/x.js", "js/package.json", "docs/a.md",
                "ignored/x.py", "keep/y.log", "keep/z.log", "big.py", "nested/.git/HEAD", "nested/n.py", ".git/HEAD"]:
        write(root, rel)
    write(root, "big.py", "x" * 5000)
    write(root, ".gitignore", "ignored/\n*.log\n!keep/z.log\n")
    write(root, ".codiiignore", "!src/build/\n!.env.test\n")
    os.symlink("src", root / "alias")
    os.symlink("app.py", root / "src" / "same.py")
    os.symlink(str(tmp_path), root / "out")
    every = [p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()]
    every += ["alias/app.py", "missing.py", "src/missing/x.py", "out/root/src/app.py"]
    for rules in ({}, {"max_file_bytes": 1000}, {"extensions": [".py"]}, {"ignore_patterns": ["docs/"]}):
        scanned = paths(root, **rules)
        assert scanned and {rel for rel in every if walk.listed(root, rel, **rules)} == scanned, rules
