"""rerun_safety: prove that a dbt project is safe to run twice."""

__version__ = "0.1.0"
