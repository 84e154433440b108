"""Snapshots and sandboxes: one engine per warehouse behind a small base class."""
from __future__ import annotations

from pathlib import Path

from .base import PREFIX, Engine, Sandbox


def engine_for(target_output: dict, work_root: Path, run_id: str, attach: bool = False,
               confined: bool = False) -> Engine:
    """`confined`: a game day confined by privilege; on PostgreSQL dbt and the runner then reach the
    sandboxes as a role of the run's own (see PostgresEngine)."""
    kind = target_output.get("type")
    if kind == "duckdb":
        from .duckdb import DuckDBEngine

        return DuckDBEngine(target_output, work_root, run_id, attach)
    if kind == "postgres":
        from .postgres import PostgresEngine

        return PostgresEngine(target_output, work_root, run_id, attach, confined=confined)
    if kind == "spark":
        from .spark import SparkEngine

        return SparkEngine(target_output, work_root, run_id, attach)
    from ..errors import ConfigError

    raise ConfigError(f"adapter '{kind}' is not supported (supported: duckdb, postgres, spark)")


__all__ = ["PREFIX", "Engine", "Sandbox", "engine_for"]
