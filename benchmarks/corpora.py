"""The benchmark corpora: pinned PyPI sdists, downloaded once with pip and unpacked under a cache dir."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

#: name -> pinned sdists. small ~ 1k chunks, medium ~ 6k, large (Django) ~ thousands of files.
CORPORA: dict[str, tuple[str, ...]] = {
    "small": ("requests==2.32.3",),
    "medium": ("flask==3.1.0", "werkzeug==3.1.3", "jinja2==3.1.4"),
    "large": ("django==5.1.4",),
}

DEFAULT_CACHE_DIR = Path("~/.cache/codii-bench").expanduser()


def fetch(name: str, cache_dir: Path) -> Path:
    """The unpacked corpus ``name`` under ``cache_dir/corpora/<name>/``, downloading its sdists if needed.

    Each sdist unpacks into its own ``<project>-<version>/`` folder. Runs
    ``pip download --no-deps --no-binary :all:``, so only PyPI is contacted.

    Raises:
        KeyError: unknown corpus name.
        subprocess.CalledProcessError: pip failed (offline and not cached yet).
    """
    pins = CORPORA[name]
    target = cache_dir / "corpora" / name
    done = target / ".complete"
    if done.exists():
        return target
    sdists = cache_dir / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "-d", str(sdists), *pins], check=True)
    target.mkdir(parents=True, exist_ok=True)
    for pin in pins:
        project, version = pin.split("==")
        archive = next(p for p in sdists.glob("*.tar.gz")
                       if p.name.lower().replace("_", "-") == f"{project}-{version}.tar.gz".lower())
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
    done.touch()
    return target
