"""Rules on a model's config: keys and partitions that name missing columns or are ignored, and
strategies the adapter rejects or runs differently from what the name suggests."""
from __future__ import annotations

import re

from sqlglot import exp

from ...project import BUILTIN_MATERIALIZATIONS
from ...warehouse.dialects import dialect_for
from ..context import ModelContext
from ..findings import INFO, WARNING
from ..grain import aligned, unit_grain
from .base import Hit, needle
from .windows import partition_spec, projection_grain


def unique_key_ignored(ctx: ModelContext) -> list[Hit]:
    """unique_key configured with the append strategy, which ignores it."""
    if ctx.is_incremental and ctx.unique_key and (ctx.incremental_strategy or "") == "append":
        key = ", ".join(ctx.unique_key)
        return [Hit("unique-key-ignored",
                    f"unique_key '{key}' is configured but incremental_strategy 'append' ignores it: "
                    "re-read rows are inserted again, not replaced",
                    "config", (r"unique_key", r"append"))]
    return []


def _output_names(ctx: ModelContext) -> set[str] | None:
    """The model's output columns: its relation in the scratch catalog, else the outer select's
    projections when they name every column (no `*`)."""
    if ctx.columns is not None:
        return set(ctx.columns)
    for _, parsed in ctx.branches():
        stmt = parsed.statements[-1]
        outer = stmt if isinstance(stmt, exp.Select) else None
        if outer is None or any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
                                for p in outer.expressions):
            return None
        return {p.alias_or_name.lower() for p in outer.expressions}
    return None


def config_columns(ctx: ModelContext) -> list[Hit]:
    """partition_key and unique_key must name columns of the compiled model: a misspelt key makes
    the strategy fail at run time, or (unique_key on some adapters) match nothing."""
    if not ctx.is_incremental:
        return []
    names = _output_names(ctx)
    if not names:
        return []
    hits = []
    part_cols, _ = partition_spec(ctx)
    for label, cols in (("partition_key", sorted(part_cols)), ("unique_key", [c.lower() for c in ctx.unique_key])):
        for col in cols:
            if col and re.fullmatch(r"[a-z_][a-z0-9_$]*", col) and col not in names:  # expressions: not checked
                shown = ", ".join(sorted(names)[:12]) + (", ..." if len(names) > 12 else "")
                hits.append(Hit("config-column-missing",
                                f"{label} names column '{col}', which model {ctx.name} does not have "
                                f"(its columns: {shown})", "config", (needle(col), label), key=f"{label}|{col}"))
    return hits


def _batch_grain_key(ctx: ModelContext) -> str | None:
    """The unique_key column when it is the model's event_time column, or one derived from it at
    the batch grain or finer (`date_trunc('day', event_time) as day` with batch_size 'day'): each
    key value then lies in one batch, which recomputes it whole."""
    event_time = str(ctx.config.get("event_time") or "").lower()
    if len(ctx.unique_key) != 1 or not event_time:
        return None
    key = ctx.unique_key[0].lower()
    if key == event_time:
        return key
    batch = unit_grain(str(ctx.config.get("batch_size") or ""))
    for _, parsed in ctx.branches():
        grain, src = projection_grain(parsed.statements[-1], key)
        if src == event_time and batch and grain and aligned(grain, batch):
            return key
    return None


def microbatch_postgres(ctx: ModelContext) -> list[Hit]:
    """microbatch on dbt-postgres runs a MERGE upsert: rows deleted upstream stay. Keyed on the
    event time at the batch grain, each batch replaces whole keys: only a key whose rows all
    disappear upstream stays (a note)."""
    if not (ctx.is_incremental and dialect_for(ctx.adapter_type).dbt_microbatch_merges and ctx.strategy == "microbatch"):
        return []
    key = _batch_grain_key(ctx)
    if key is not None:
        return [Hit("microbatch-postgres",
                    f"incremental_strategy 'microbatch' on dbt-postgres upserts each batch with MERGE on "
                    f"unique_key '{key}', the event time at the batch grain: every batch recomputes and replaces "
                    f"whole values of '{key}'; only one whose rows all disappear upstream stays stale",
                    "config", (r"microbatch",), severity=INFO)]
    return [Hit("microbatch-postgres",
                "incremental_strategy 'microbatch' on dbt-postgres upserts each batch with MERGE "
                "(unique_key required): rows deleted or re-keyed upstream stay in the table",
                "config", (r"microbatch",), severity=WARNING)]


def adapter_trap(ctx: ModelContext) -> list[Hit]:
    """Config that dbt-duckdb / dbt-postgres reject or silently ignore."""
    if not ctx.is_incremental and not ctx.config.get("partition_by") and not ctx.config.get("partitioned_by"):
        return []
    hits = []
    adapter, facts = ctx.adapter_type, dialect_for(ctx.adapter_type)
    if ctx.is_incremental and facts.dbt_rejects_insert_overwrite and ctx.strategy == "insert_overwrite":
        hits.append(Hit("adapter-trap",
                        f"dbt-{adapter} rejects incremental_strategy 'insert_overwrite' (reserved for adapters "
                        "that implement it)", "config", (r"insert_overwrite",)))
    if ctx.is_incremental and ctx.strategy == "partition_overwrite":
        if not ctx.partition_key:
            hits.append(Hit("adapter-trap", "incremental_strategy 'partition_overwrite' without partition_key: "
                            "the strategy cannot tell which partitions to replace", "config", (r"partition_overwrite",)))
        if ctx.root_macros and "get_incremental_partition_overwrite_sql" not in ctx.root_macros:
            hits.append(Hit("adapter-trap",
                            "incremental_strategy 'partition_overwrite' but the root project has no "
                            "get_incremental_partition_overwrite_sql shim: dbt only finds strategy macros there",
                            "config", (r"partition_overwrite",)))
    if ctx.is_incremental and facts.dbt_microbatch_refuses_unique_key and ctx.strategy == "microbatch" and ctx.unique_key:
        hits.append(Hit("adapter-trap", "dbt-duckdb's microbatch refuses unique_key (it replaces each batch "
                        "window with delete+insert)", "config", (r"unique_key",)))
    if facts.dbt_ignores_partition_by and (ctx.config.get("partition_by") or ctx.config.get("partitioned_by")):
        hits.append(Hit("adapter-trap", "dbt-duckdb reads partition_by/partitioned_by for DuckLake only and "
                        "ignores it on a plain table; rerun_safety's partition_overwrite reads partition_key",
                        "config", (r"partition(ed)?_by",), severity=WARNING))
    return hits


# Strategies and materializations dbt and this package know; anything else is the project's own.
KNOWN_STRATEGIES = frozenset({"append", "delete+insert", "merge", "microbatch", "insert_overwrite",
                              "partition_overwrite", "default"})
KNOWN_MATERIALIZATIONS = BUILTIN_MATERIALIZATIONS  # the game day's own list: the two agree on "the project's own"


def unknown_strategy(ctx: ModelContext) -> list[Hit]:
    """A strategy no reachable macro implements: dbt fails on every incremental run of the model."""
    macro = f"get_incremental_{ctx.strategy}_sql"
    if (ctx.is_incremental and ctx.strategy not in KNOWN_STRATEGIES and ctx.strategy_macros is not None
            and macro not in ctx.strategy_macros):
        return [Hit("unknown-strategy", f"incremental_strategy '{ctx.strategy}' has no macro {macro} in the "
                    "project, the model's package or the adapter: dbt fails on every incremental run "
                    "(the first build, a full refresh, works)", "config", (re.escape(ctx.strategy),))]
    return []


def own_strategy(ctx: ModelContext) -> list[Hit]:
    """A strategy or materialization of the project's own: the rules cannot read what it writes."""
    if unknown_strategy(ctx):
        return []
    if ctx.is_incremental and ctx.strategy not in KNOWN_STRATEGIES:
        return [Hit("own-strategy", f"incremental_strategy '{ctx.strategy}' is the project's own "
                    f"(get_incremental_{ctx.strategy}_sql): the lint cannot judge it; the game day replays it",
                    "config", (re.escape(ctx.strategy),), severity=INFO)]
    if ctx.materialized and ctx.materialized not in KNOWN_MATERIALIZATIONS:
        return [Hit("own-strategy", f"materialized '{ctx.materialized}' is the project's own: the lint cannot "
                    "judge it; the game day replays it at every run, as it does incremental models",
                    "config", (re.escape(ctx.materialized),), severity=INFO)]
    return []
