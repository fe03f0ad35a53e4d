"""Evaluation (``codii-sql eval``): benchmark datasets and git histories, runs through the service, ir-measures metrics, reports."""

from .datasets import EvalConfig
from .git import GitEvalConfig, evaluate_git, format_git, git_summary
from .report import (
           compare_runs,
           format_comparison,
           format_run,
           load_run,
           save_run,
           summary,
)
from .runner import evaluate
from .tokens import TokensConfig, evaluate_tokens, format_tokens

__all__ = ["EvalConfig", "GitEvalConfig", "compare_runs", "evaluate", "evaluate_git", "format_comparison", "format_git",
           "format_run", "git_summary", "load_run", "save_run", "summary", "TokensConfig", "evaluate_tokens",
           "format_tokens"]
