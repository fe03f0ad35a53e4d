"""The progress bar people see on stderr: one row by phase, done/total, units a second, elapsed, time left (rich)."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

err_console = Console(stderr=True)


class _RateColumn(ProgressColumn):
    """``1,234 files/s`` from the task's recent speed (rich keeps it), its unit from the phase."""

    def __init__(self, units: dict[str, str]) -> None:
        super().__init__()
        self.units = units

    def render(self, task: Task) -> Text:
        unit = self.units.get(str(task.description).strip(), "items")
        return Text(f"{task.speed:,.0f} {unit}/s" if task.speed else f"- {unit}/s", style="progress.data.speed")


@contextlib.contextmanager
def phase_bar(units: dict[str, str]):
    """A rich progress bar on stderr, its callback ``update(phase, done, total)`` a row by phase (what a
    phase counts: ``units``, else items)."""
    with Progress(TextColumn("{task.description:<7}"), BarColumn(), MofNCompleteColumn(), _RateColumn(units),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), transient=True,
                  console=err_console) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update
