"""The house by stages holds: the import contracts of pyproject.toml, small modules, one-line package jobs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "codii_sql"
#: STYLE: each module explainable in one line and under about 400 lines.
MAX_MODULE_LINES = 400


def test_the_import_contracts_are_kept():
    """import-linter's layers, forbidden and acyclic contracts (pyproject.toml [tool.importlinter])."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "4 kept, 0 broken" in proc.stdout, proc.stdout[-2000:]


def test_no_module_is_over_the_size_limit():
    sizes = {str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 40
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_every_package_states_its_job_in_one_line():
    inits = sorted(PACKAGE.rglob("__init__.py"))
    assert len(inits) >= 9
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        first = doc.split("\n\n")[0]
        assert first and "\n" not in first, f"{init.relative_to(REPO)}: {first!r}"
