"""Static checks for rerun safety: unsafe incremental patterns and non-determinism in compiled SQL."""
from .core import run_lint
from .findings import Finding, LintResult
from .render import render_text
from .rules import RULES

__all__ = ["run_lint", "render_text", "LintResult", "Finding", "RULES"]
