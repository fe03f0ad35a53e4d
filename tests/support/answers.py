"""Reading the CLI's JSON answers."""

from __future__ import annotations

import json


def last_json(text: str) -> dict:
    """A command's JSON answer: the whole text, or, for ``build --json``'s JSON lines, the last line
    (every line before it must be a progress event)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    events = [json.loads(line) for line in lines[:-1]]
    assert all(e.get("event") == "progress" for e in events), lines[:-1]
    return json.loads(lines[-1])
