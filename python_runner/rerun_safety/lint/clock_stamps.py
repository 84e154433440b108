"""Audit columns: output columns that only stamp the run's clock. The game day leaves them out of its
comparison (gameday/lineage.audit_columns); the lint says so instead of calling them nondeterministic."""
from __future__ import annotations

import datetime as dt

from sqlglot import exp

# Clock reads by name (beside sqlglot's CurrentTimestamp, CurrentDate, ...): those the game day simulates
CLOCK_FUNCTIONS = {"now", "get_current_timestamp", "transaction_timestamp", "statement_timestamp",
                   "clock_timestamp", "current_localtimestamp", "getdate", "sysdate", "today", "current_date",
                   "get_current_time", "localtimestamp", "current_timestamp"}
CLOCK_NODES = tuple(getattr(exp, n) for n in ("CurrentTimestamp", "CurrentDate", "CurrentTime", "CurrentDatetime",
                                              "Localtimestamp", "Localtime") if hasattr(exp, n))


def stamps_the_clock(e: exp.Expression, run_clock: dt.datetime | None = None) -> bool:
    """Whether an expression only reads the run's clock (`now()`, `current_timestamp`, ..., and a string
    literal that is `run_clock`, dbt's run_started_at rendered), through casts, coalesce or truncation,
    with no column, query, window or aggregate in it: an audit column's value."""
    reads = False
    for node in e.walk():
        if isinstance(node, (exp.Column, exp.Query, exp.Subquery, exp.Window, exp.AggFunc, exp.Star, exp.Placeholder)):
            return False
        if isinstance(node, CLOCK_NODES) or (
                isinstance(node, exp.Anonymous) and str(node.name).lower() in CLOCK_FUNCTIONS):
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
