"""The ways in to an engine by its adapter type (registry.ADAPTERS): its sandboxes (game day), its
read-only relations (diff), its scratch catalog (lint); each engine's modules are imported only when asked for."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .adapter import Adapter, no_scratch
from .base import Engine
from .registry import adapter, names
from .scratch import Scratch, TargetProfile


def _listed(kinds: tuple[str, ...]) -> str:
    return f"{', '.join(kinds[:-1])} and {kinds[-1]}" if len(kinds) > 1 else "".join(kinds)


def reader_for(name: str) -> Adapter:
    """The engine whose `location`, `open_sides`, `target_columns` and `errors` read its relations
    read-only for the diff; ConfigError for an engine the diff cannot read."""
    found = adapter(name)
    if found is None or found.reading() is None:
        readable = tuple(n for n in names() if adapter(n).reading() is not None)
        raise ConfigError(f"the profile's target is type '{name}': diff reads {_listed(readable)} targets")
    return found


def database_errors() -> tuple[type, ...]:
    """The error types of every installed engine's client (a failed query, not a bug of ours)."""
    found: list[type] = []
    for name in names():
        try:
            found.extend(adapter(name).errors())
        except ImportError:
            pass
    return tuple(found)


def engine_for(target_output: dict, work_root: Path, run_id: str, attach: bool = False,
               confined: bool = False, max_sandbox_size: int | None = None, statement_guard: bool = True) -> Engine:
    """`confined`: a game day confined by privilege; on PostgreSQL dbt and the runner then reach the
    sandboxes as a role of the run's own (see PostgresEngine), an in-process Spark keeps a catalog of the
    run's own (see spark/own_catalog.py). `max_sandbox_size`: PostgreSQL's disk budget (postgres/budget.py).
    `statement_guard`: the engine's own statement refusals, the second line of confinement (on but in
    tests that prove the first line holds alone)."""
    kind = target_output.get("type")
    found = adapter(str(kind or ""))
    if found is None:
        raise ConfigError(f"adapter '{kind}' is not supported (supported: {', '.join(names())})")
    return found.engine(target_output, work_root, run_id, attach=attach, confined=confined,
                        statement_guard=statement_guard, max_sandbox_size=max_sandbox_size)


def scratch_for(adapter_type: str, tp: TargetProfile, work: Path, run_id: str, catalogs: list[str], manifest,
                confined: bool = False) -> Scratch:
    """The scratch catalog of an engine the lint compiles on (ConfigError for another). `confined`: the
    lint confined by privilege (on PostgreSQL its scratch belongs to a role of its own)."""
    found = adapter(adapter_type)
    if found is None:
        raise no_scratch(adapter_type)
    return found.scratch(tp, work, run_id, catalogs, manifest, confined=confined)
