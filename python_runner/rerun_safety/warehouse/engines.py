"""The one factory per need: an engine's sandboxes (game day), its read-only relations (diff), its
scratch catalog (lint); each engine's modules are imported only when asked for."""
from __future__ import annotations

from pathlib import Path

from .base import Engine
from .dialects import ENGINES
from .scratch import Scratch, TargetProfile


def reader_for(name: str):
    """The module that opens an engine's relations read-only for the diff (`location`, `open_sides`,
    `errors`); ConfigError for an engine the diff cannot read."""
    import importlib

    if name not in ENGINES:
        from ..errors import ConfigError

        raise ConfigError(f"the profile's target is type '{name}': diff reads {', '.join(ENGINES[:-1])} and "
                          f"{ENGINES[-1]} targets")
    return importlib.import_module(f"{__package__}.{name}.reading")


def database_errors() -> tuple[type, ...]:
    """The error types of every installed engine's client (a failed query, not a bug of ours)."""
    found: list[type] = []
    for name in ENGINES:
        try:
            found.extend(reader_for(name).errors())
        except ImportError:
            pass
    return tuple(found)


def engine_for(target_output: dict, work_root: Path, run_id: str, attach: bool = False,
               confined: bool = False, max_sandbox_size: int | None = None) -> Engine:
    """`confined`: a game day confined by privilege; on PostgreSQL dbt and the runner then reach the
    sandboxes as a role of the run's own (see PostgresEngine), an in-process Spark keeps a catalog of the
    run's own (see spark/own_catalog.py). `max_sandbox_size`: PostgreSQL's disk budget (postgres/budget.py)."""
    kind = target_output.get("type")
    if kind == "duckdb":
        from .duckdb.engine import DuckDBEngine

        return DuckDBEngine(target_output, work_root, run_id, attach)
    if kind == "postgres":
        from .postgres.engine import PostgresEngine

        return PostgresEngine(target_output, work_root, run_id, attach, confined=confined,
                              max_sandbox_size=max_sandbox_size)
    if kind == "spark":
        from .spark.engine import SparkEngine

        return SparkEngine(target_output, work_root, run_id, attach, confined=confined)
    from ..errors import ConfigError

    raise ConfigError(f"adapter '{kind}' is not supported (supported: duckdb, postgres, spark)")


def scratch_for(adapter: str, tp: TargetProfile, work: Path, run_id: str, catalogs: list[str], manifest,
                confined: bool = False) -> Scratch:
    """The scratch catalog of an engine the lint compiles on (ConfigError for another). `confined`: the
    lint confined by privilege (on PostgreSQL its scratch belongs to a role of its own)."""
    if adapter == "duckdb":
        from .duckdb.scratch import DuckDBScratch

        return DuckDBScratch(tp, work, catalogs)
    if adapter == "postgres":
        from .postgres.scratch import PostgresScratch

        scratch = PostgresScratch(tp, work, run_id, own_role=confined)
        scratch.prepare_manifest(manifest)
        return scratch
    from ..errors import ConfigError

    raise ConfigError(f"lint supports duckdb and postgres targets; this target is '{adapter}'")
