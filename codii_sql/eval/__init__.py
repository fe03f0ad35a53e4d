"""Evaluation (``codii-sql eval``): benchmark datasets, runs through the service, ir-measures metrics, reports."""

from .datasets import EvalConfig
from .report import (
           compare_runs,
           format_comparison,
           format_run,
           load_run,
           save_run,
           summary,
)
from .runner import evaluate

__all__ = ["EvalConfig", "compare_runs", "evaluate", "format_comparison", "format_run", "load_run", "save_run",
           "summary"]
