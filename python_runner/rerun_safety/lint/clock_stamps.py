"""Audit columns: output columns that only stamp the run's clock. The game day leaves them out of its
comparison (gameday/lineage.audit_columns); the lint says so instead of calling them nondeterministic."""
from __future__ import annotations

import datetime as dt

from sqlglot import exp

# Clock reads: sqlglot's nodes for them, and the names of functions that read the clock (the lint's
# nondeterministic-function and the game day's audit columns both ask is_clock_read)
CLOCK_NODES = tuple(c for c in (getattr(exp, n, None) for n in (
    "CurrentTimestamp", "CurrentDate", "CurrentTime", "CurrentDatetime", "Localtimestamp", "Localtime",
    "CurrentTimestampLTZ")) if isinstance(c, type))
CLOCK_FUNCTIONS = frozenset({
    "now", "getdate", "sysdate", "systimestamp", "clock_timestamp", "statement_timestamp",
    "transaction_timestamp", "timeofday", "get_current_timestamp", "get_current_time", "today",
    "current_timestamp", "current_date", "current_time", "localtimestamp", "localtime",
    "current_localtimestamp"})


def is_clock_read(node: exp.Expression, name: str | None = None) -> bool:
    """Whether a node reads the clock (`name`: its function name, when the caller has it)."""
    if isinstance(node, CLOCK_NODES):
        return True
    if name is None:
        name = str(node.name).lower() if isinstance(node, exp.Anonymous) else ""
    return name in CLOCK_FUNCTIONS


def stamps_the_clock(e: exp.Expression, run_clock: dt.datetime | None = None) -> bool:
    """Whether an expression only reads the run's clock (`now()`, `current_timestamp`, ..., and a string
    literal that is `run_clock`, dbt's run_started_at rendered), through casts, coalesce or truncation,
    with no column, query, window or aggregate in it: an audit column's value."""
    reads = False
    for node in e.walk():
        if isinstance(node, (exp.Column, exp.Query, exp.Subquery, exp.Window, exp.AggFunc, exp.Star, exp.Placeholder)):
            return False
        if is_clock_read(node):
            reads = True
        elif run_clock is not None and isinstance(node, exp.Literal) and node.is_string and \
                _is_the_clock(node.this, run_clock):
            reads = True
    return reads


def _is_the_clock(text: str, run_clock: dt.datetime) -> bool:
    """Whether a string literal is the run's clock (dbt's run_started_at, rendered), in any zone notation."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        return False
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value == run_clock
