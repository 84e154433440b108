"""A simulated clock for dbt runs in a sandbox: every run sees the end of the batch being run.

Two halves:
- SQL: every statement dbt sends to a sandbox has its clock reads (`current_date`,
  `current_timestamp`, `now()`, `today()`, `localtimestamp`, ...) replaced by calls to functions in
  the sandbox's `rerun_safety_clock` schema, which read one row that the runner sets before each
  run. Views keep reading it when they are queried later, as they would read the real clock.
  The replacement works on tokens (sqlglot's tokenizer), so strings, comments and quoted names are
  untouched and the rest of the statement stays byte for byte as dbt wrote it.
- dbt's own context: `run_started_at`, Jinja's `modules.datetime` (`now()`, `utcnow()`,
  `today()`) and the end of a microbatch model's default window (the invocation's start time)
  are the simulated time during the invocation.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import re
from typing import Callable, Iterator

from sqlglot.tokens import TokenType

from .warehouse.dialects import dialect_for

from .warehouse.base import CLOCK_SCHEMA, CLOCK_TABLE  # noqa: F401 - the clock's public names

# What each clock read becomes: the function returning the timestamp (naive), the timestamp with
# time zone, the date, or the time of day.
_KEYWORDS = {
    TokenType.CURRENT_DATE: "rs_date",
    TokenType.CURRENT_TIMESTAMP: "rs_timestamptz",
    TokenType.LOCALTIMESTAMP: "rs_timestamp",
    TokenType.CURRENT_TIME: "rs_time",
}
if hasattr(TokenType, "LOCALTIME"):
    _KEYWORDS[TokenType.LOCALTIME] = "rs_time"
_FUNCTIONS = {
    "now": "rs_timestamptz", "get_current_timestamp": "rs_timestamptz", "transaction_timestamp": "rs_timestamptz",
    "statement_timestamp": "rs_timestamptz", "clock_timestamp": "rs_timestamptz",
    "current_localtimestamp": "rs_timestamp", "getdate": "rs_timestamp", "sysdate": "rs_timestamp",
    "today": "rs_date", "current_date": "rs_date", "get_current_time": "rs_time",
}
# Clock reads that cannot be replaced by a value of the same kind: reported on the model.
_UNSIMULATED_FUNCTIONS = {"timeofday"}
_MAYBE_CLOCK = re.compile(r"current_|now|today|localtime|getdate|sysdate|timeofday|"
                          r"(?:transaction|statement|clock)_timestamp", re.IGNORECASE)
_PYTHON_CLOCK = re.compile(r"\b(datetime\.(?:datetime\.)?(?:now|utcnow|today)|date\.today|time\.time)\s*\(")


def setup_sql(dialect: str) -> list[str]:
    """Statements that create the clock (one row) and its functions in a sandbox."""
    return dialect_for(dialect).clock_setup(CLOCK_SCHEMA, CLOCK_TABLE)


def function_sql(dialect: str) -> list[str]:
    """The clock's functions (a sandbox cloned on Spark gets its own, reading its own row)."""
    return dialect_for(dialect).clock_functions(CLOCK_SCHEMA, CLOCK_TABLE)


def set_sql(when: dt.datetime, dialect: str) -> str:
    """Set the clock to `when` (naive, in the data's time frame; as UTC where a zone is needed)."""
    return dialect_for(dialect).clock_set(when, CLOCK_SCHEMA, CLOCK_TABLE)


def rewrite(sql: str, dialect: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(new sql, clock reads replaced, clock reads left as they are). Unchanged when nothing reads
    the clock or the statement cannot be tokenized."""
    if not _MAYBE_CLOCK.search(sql):
        return sql, (), ()
    from sqlglot.dialects.dialect import Dialect

    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except Exception:  # noqa: BLE001 - a statement sqlglot cannot tokenize is sent as it is
        return sql, (), ()
    edits: list[tuple[int, int, str]] = []
    used: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        prev = tokens[i - 1] if i else None
        if prev is not None and prev.token_type == TokenType.DOT:
            i += 1
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.token_type in _KEYWORDS:
            end = tok.end
            # current_timestamp(3), localtimestamp(0): the precision goes with the keyword
            if (nxt is not None and nxt.token_type == TokenType.L_PAREN and i + 2 < len(tokens)):
                j = i + 2
                if tokens[j].token_type == TokenType.NUMBER and j + 1 < len(tokens) and \
                        tokens[j + 1].token_type == TokenType.R_PAREN:
                    end, i = tokens[j + 1].end, j + 1
                elif tokens[j].token_type == TokenType.R_PAREN:
                    end, i = tokens[j].end, j
            edits.append((tok.start, end, f"{CLOCK_SCHEMA}.{_KEYWORDS[tok.token_type]}()"))
            used.append(tok.text.lower())
        elif tok.token_type == TokenType.VAR and nxt is not None and nxt.token_type == TokenType.L_PAREN \
                and i + 2 < len(tokens) and tokens[i + 2].token_type == TokenType.R_PAREN:
            name = tok.text.lower()
            if name in _FUNCTIONS:
                edits.append((tok.start, tokens[i + 2].end, f"{CLOCK_SCHEMA}.{_FUNCTIONS[name]}()"))
                used.append(f"{name}()")
                i += 2
            elif name in _UNSIMULATED_FUNCTIONS:
                kept.append(f"{name}()")
        i += 1
    if not edits:
        return sql, (), tuple(kept)
    parts, pos = [], 0
    for start, end, text in edits:
        parts += [sql[pos:start], text]
        pos = end + 1
    parts.append(sql[pos:])
    return "".join(parts), tuple(dict.fromkeys(used)), tuple(dict.fromkeys(kept))


def python_clock_reads(code: str) -> tuple[str, ...]:
    """Clock reads in a Python model's code: these run outside dbt's SQL and cannot be simulated."""
    return tuple(dict.fromkeys(m.group(1) for m in _PYTHON_CLOCK.finditer(code or "")))


# Distinct sub-second digits for each clock value that is formatted with %f (see _FrozenClock).
_UNIQUE_MICROS = itertools.count(1)
_NAME_STAMP = re.compile(r"(?:%[YmdHMS])*%f")


class _FrozenClock:
    """Classes that stand in for datetime.datetime / datetime.date with a fixed 'now'.

    dbt names some relations after the time of day down to the microsecond (dbt-duckdb's Python
    incremental models: `<model>__dbt_tmp` + `strftime("%Y%m%d%H%M%S%f")`, and it leaves that table
    behind; dbt-postgres's temp relations use `%H%M%S%f`). Two real runs never share a microsecond;
    two runs at one simulated time would share the name and the second would fail. So the value
    of `now()` is the simulated time, exactly, and only a name stamp (a format of bare digits
    ending in `%f`, no separators, unlike a timestamp written into data) gets digits of its own."""

    def __init__(self, when: dt.datetime):
        utc = when.replace(tzinfo=dt.timezone.utc)

        class FrozenDatetime(dt.datetime):
            def strftime(self, fmt: str) -> str:
                if _NAME_STAMP.fullmatch(fmt):
                    fmt = fmt.replace("%f", f"{next(_UNIQUE_MICROS) % 1_000_000:06d}")
                return super().strftime(fmt)

            @classmethod
            def _at(cls, t: dt.datetime) -> "FrozenDatetime":
                return cls(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond, t.tzinfo)

            @classmethod
            def now(cls, tz=None):
                return cls._at(utc.astimezone(tz) if tz is not None else when)

            @classmethod
            def utcnow(cls):
                return cls._at(when)

            @classmethod
            def today(cls):
                return cls._at(when)

        class FrozenDate(dt.date):
            @classmethod
            def today(cls):
                return when.date()

        self.datetime = FrozenDatetime
        self.date = FrozenDate


@contextlib.contextmanager
def simulated(when: dt.datetime | None, dialect: str,
              record: Callable[[str, tuple[str, ...], tuple[str, ...]], None] | None = None,
              rewrite_sql: Callable[[str], str] | None = None) -> Iterator[None]:
    """Within the block, dbt invocations in this process run at `when` (see the module's doc).
    `record(node, replaced, kept)` is told which node's SQL read the clock. `rewrite_sql`: what
    every statement goes through after that (a sandbox's names, see warehouse/spark/engine.py); with
    `when` None only that."""
    if when is None and rewrite_sql is None:
        yield
        return
    import dbt.cli.requires as requires
    import dbt.context.base as context_base
    import dbt.tracking as tracking
    import dbt_common.invocation as invocation
    from dbt.adapters.sql.connections import SQLConnectionManager

    frozen = _FrozenClock(when) if when is not None else None
    original_reset = requires.reset_invocation_id
    original_modules = context_base.get_datetime_module_context
    original_tracking_datetime = tracking.datetime
    original_add_query = SQLConnectionManager.add_query

    def reset_invocation_id() -> None:
        original_reset()
        invocation._INVOCATION_STARTED_AT = when  # microbatch's default end, dbt's run timing

    def datetime_module_context():
        ctx = original_modules()
        ctx["datetime"], ctx["date"] = frozen.datetime, frozen.date
        return ctx

    def add_query(self, sql, *args, **kwargs):
        new, used, kept = rewrite(sql, dialect) if when is not None else (sql, (), ())
        if (used or kept) and record is not None:
            conn = self.get_if_exists()
            record(getattr(conn, "name", None) or "", used, kept)
        if rewrite_sql is not None:
            new = rewrite_sql(new)
        return original_add_query(self, new, *args, **kwargs)

    if when is not None:
        requires.reset_invocation_id = reset_invocation_id
        context_base.get_datetime_module_context = datetime_module_context
        tracking.datetime = frozen.datetime
    SQLConnectionManager.add_query = add_query
    try:
        yield
    finally:
        requires.reset_invocation_id = original_reset
        context_base.get_datetime_module_context = original_modules
        tracking.datetime = original_tracking_datetime
        SQLConnectionManager.add_query = original_add_query
