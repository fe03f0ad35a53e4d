"""A real git repository with a small history: bodies, a rename, an ignored file and secrets in its diffs."""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from pathlib import Path

DAY = 86_400
#: The first commit's author and committer date (unix seconds): noon UTC ten days ago, the others a
#: day apart, so they lie within the default bound (the last 2 years) whenever the tests run.
START = int(time.time()) // DAY * DAY - 10 * DAY + DAY // 2


def day_date(day: int) -> str:
    """The UTC date (``YYYY-MM-DD``) of the commit made ``day`` days after :data:`START`."""
    return datetime.datetime.fromtimestamp(START + day * DAY, datetime.timezone.utc).date().isoformat()

SESSION_V1 = '''class Session:
    """Keeps cookies across requests."""

    def send(self, request):
        return self.adapter.send(request)
'''
SESSION_V2 = '''import time


class Session:
    """Keeps cookies across requests."""

    def send(self, request):
        response = self.adapter.send(request)
        if response.status == 503:
            time.sleep(retry_after_seconds(response.headers))
        return response


def retry_after_seconds(headers):
    return int(headers.get("Retry-After", "1"))
'''
SESSION_V3 = SESSION_V2.replace("Keeps cookies across requests.", "Keeps cookies and retries across requests.")


def git(repo: Path, *args: str, day: int = 0) -> str:
    """``git -C repo ARGS`` with a fixed identity and dates (``day`` days after :data:`START`)."""
    when = f"@{START + day * DAY} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env, text=True)
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str, day: int) -> str:
    """Write ``files``, stage everything (ignored files too), commit; the new sha."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A", "-f", ".")
    git(repo, "commit", "-q", "-m", message, day=day)
    return git(repo, "rev-parse", "HEAD")


def make_history(repo: Path) -> dict[str, str]:
    """Four commits (oldest first) -> ``{name: sha}``:

    1. ``init``: ``src/session.py`` and ``config.yml``;
    2. ``retry``: "Honour Retry-After on 503 responses", with a body, changes ``src/session.py``;
    3. ``secrets``: a ``.env`` (a secret by name), ``deploy/notes.txt`` holding a private key block,
       ``vendor/lib.py`` (ignored by ``.codiiignore``), and a ``config.yml`` edit;
    4. ``rename``: ``src/session.py`` -> ``src/http_session.py`` with its docstring edited.
    """
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    shas = {"init": commit(repo, {"src/session.py": SESSION_V1, "config.yml": "timeout: 5\n"},
                           "Add the session module\n\nSessions keep cookies across requests.", 0)}
    shas["retry"] = commit(repo, {"src/session.py": SESSION_V2},
                           "Honour Retry-After on 503 responses\n\nThe adapter slept a fixed second before; servers say "
                           "how long to wait, so the header decides now.", 1)
    shas["secrets"] = commit(repo, {".codiiignore": "vendor/\n", ".env": "API_KEY=supersecretvalue\n",
                                    "deploy/notes.txt": "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAzebra\n",
                                    "vendor/lib.py": "def vendored_quokka():\n    pass\n",
                                    "config.yml": "timeout: 5\nretries: 3\n"},
                             "Add deployment settings and a vendored helper", 2)
    git(repo, "mv", "src/session.py", "src/http_session.py")
    shas["rename"] = commit(repo, {"src/http_session.py": SESSION_V3},
                            "Move the session into http_session\n\nThe name says which protocol it speaks.", 3)
    return shas
