"""Lint rules: one function per rule, each with a stable id, grouped by family (windows and
watermarks, determinism, config, hooks). Rules read a `ModelContext` and return `Hit`s; the
registry turns hits into findings and applies the model's suppressions."""
from .base import Hit, Rule
from .registry import RULES, lint_model, locate, make_finding, run_rules, suppressions

__all__ = ["RULES", "Hit", "Rule", "lint_model", "locate", "make_finding", "run_rules", "suppressions"]
