"""Grains by type and expression (partition-lookback-unaligned), and the rules about reruns
(clock-window, self-state, config-column-missing, keys traced through joins, scope), on SQL strings
parsed in the DuckDB and the PostgreSQL dialect, with column types as the scratch catalog gives them."""
from __future__ import annotations

import pytest

from rerun_safety.lint.context import ModelContext
from rerun_safety.lint.rules import run_rules

THIS = ("warehouse", "analytics", "daily")
T = '"warehouse"."analytics"."daily"'
SRC = '"warehouse"."raw"."events"'
TYPES = {"raw.events": {"event_id": "integer", "event_ts": "timestamp", "event_date": "date", "amount": "integer"},
         "analytics.daily": {"event_date": "date", "event_ts": "timestamp", "event_hour": "timestamp",
                             "n": "bigint", "event_id": "integer", "total": "bigint"}}

pytestmark = pytest.mark.parametrize("adapter", ["duckdb", "postgres"])


def po(adapter, where, key="event_date", select="cast(event_ts as date) as event_date, event_ts, event_id"):
    sql = f"select {select} from {SRC} where {where}"
    return ModelContext.from_sql("daily", adapter, f"select {select} from {SRC}", sql, materialized="incremental",
                                 incremental_strategy="partition_overwrite", partition_key=key, this=THIS,
                                 types=TYPES)


def errors(ctx) -> list[str]:
    assert ctx.incremental is None or ctx.incremental.ok, ctx.incremental.error
    return sorted(f.rule for f in _found(ctx) if f.severity == "error")


def _found(ctx):
    """The findings, but this-in-first-build: `_model` gives an incremental model one SQL for both
    branches, so its first build reads {{ this }} wherever the incremental branch does (that rule is
    tested in test_lint_rules.py with a first-build SQL of its own); and window-shorter-than-run, which
    test_window_reach_of_the_grain_shapes checks on these shapes."""
    return [f for f in run_rules(ctx) if f.rule not in ("this-in-first-build", "window-shorter-than-run")]


ALIGNED_DAY = [  # partition_key a DATE column: whole days
    f"cast(event_ts as date) >= (select max(event_date) - 2 from {T})",
    f"cast(event_ts as date) > (select max(event_date) - 2 from {T})",
    f"event_ts >= (select max(event_date) - 2 from {T})",
    f"event_ts >= (select cast(max(event_ts) as date) - interval '2 days' from {T})",
    f"event_ts >= (select date_trunc('day', max(event_ts)) - interval '1 day' from {T})",
    f"event_ts >= (select date_trunc('month', max(event_ts)) from {T})",
    f"event_ts >= (select coalesce(max(event_date), '1900-01-01') from {T})",
    f"event_date >= (select max(event_date) from {T})",
    f"cast(event_ts as date) >= (select max(event_ts) - interval '9 seconds' from {T})",  # a date column: whole days
    f"event_ts >= (select max(event_date) from {T}) - 3",
    f"date_trunc('day', event_ts) >= (select max(event_ts) - interval '5 hours' from {T})",
]
UNALIGNED_DAY = [
    f"event_ts >= (select max(event_ts) - interval '9 seconds' from {T})",
    f"event_ts >= (select max(event_ts) - interval '2 days' from {T})",
    f"event_ts >= (select date_trunc('hour', max(event_ts)) from {T})",
    f"event_ts >= (select max(event_date) - interval '6 hours' from {T})",
    f"event_ts >= (select max(event_hour) from {T})",
    f"event_ts > (select date_trunc('day', max(event_ts)) from {T})",  # skips the first instant of the day
    f"date_trunc('hour', event_ts) >= (select max(event_ts) - interval '1 day' from {T})",
]


@pytest.mark.parametrize("where", ALIGNED_DAY)
def test_aligned_shapes_are_clean(adapter, where):
    assert errors(po(adapter, where)) == []


@pytest.mark.parametrize("where", UNALIGNED_DAY)
def test_unaligned_shapes_are_flagged(adapter, where):
    assert errors(po(adapter, where)) == ["partition-lookback-unaligned"]


def test_window_reach_of_the_grain_shapes(adapter):
    """Under the default daily schedule, the shapes whose window reaches back less than a day from the
    watermark (a half-committed run's older rows are lost): 9 seconds, the start of the last hour, a bare
    `>=` on an hourly timestamp. A day column compared with an instant bound reads whole days: not judged."""
    short = [w for w in ALIGNED_DAY + UNALIGNED_DAY
             if "window-shorter-than-run" in [f.rule for f in run_rules(po(adapter, w))]]
    assert short == [UNALIGNED_DAY[0], UNALIGNED_DAY[2], UNALIGNED_DAY[4]]


def test_grain_from_declared_granularity_and_definitions(adapter):
    month = {"field": "event_date", "granularity": "month"}
    # day-aligned is not month-aligned
    assert errors(po(adapter, f"event_ts >= (select max(event_date) - 2 from {T})", key=month)) == \
        ["partition-lookback-unaligned"]
    assert errors(po(adapter, f"event_ts >= (select date_trunc('month', max(event_ts)) - interval '1 month' "
                              f"from {T})", key=month)) == []
    # hour partitions defined by date_trunc: an hour-aligned lookback is fine, a 30-minute one is not
    hourly = "date_trunc('hour', event_ts) as event_hour, event_ts, event_id"
    assert errors(po(adapter, f"event_ts >= (select max(event_hour) - interval '3 hours' from {T})",
                     key="event_hour", select=hourly)) == []
    assert errors(po(adapter, f"event_ts >= (select max(event_ts) - interval '30 minutes' from {T})",
                     key="event_hour", select=hourly)) == ["partition-lookback-unaligned"]
    # a raw timestamp partition key: one partition per instant, nothing to misalign
    assert errors(po(adapter, f"event_ts >= (select max(event_ts) - interval '9 seconds' from {T})",
                     key="event_ts")) == []
    # a watermark through a CTE, aligned and not
    cte = (f"with wm as (select max(event_date) - 1 as lo from {T}) select cast(event_ts as date) as event_date, "
           f"event_ts, event_id from {SRC} cross join wm where event_ts >= wm.lo")
    ctx = ModelContext.from_sql("daily", adapter, f"select * from {SRC}", cte, materialized="incremental",
                                incremental_strategy="partition_overwrite", partition_key="event_date", this=THIS,
                                types=TYPES)
    assert errors(ctx) == []
    bad = cte.replace("max(event_date) - 1", "max(event_ts) - interval '1 hour'")
    ctx = ModelContext.from_sql("daily", adapter, f"select * from {SRC}", bad, materialized="incremental",
                                incremental_strategy="partition_overwrite", partition_key="event_date", this=THIS,
                                types=TYPES)
    assert errors(ctx) == ["partition-lookback-unaligned"]


# --- clock-window and the scope of clock use -----------------------------------------------------

def _model(adapter, sql, materialized="incremental", strategy="merge", key="event_id", **kw):
    return ModelContext.from_sql("daily", adapter, sql, sql if materialized == "incremental" else None,
                                 materialized=materialized, incremental_strategy=strategy if materialized ==
                                 "incremental" else None, unique_key=key, this=THIS, types=TYPES, **kw)


def test_clock_window(adapter):
    for where in ("event_date >= current_date - 14", "event_ts > now() - interval '3 days'",
                  "event_ts >= current_timestamp - interval '1 hour'"):
        found = _found(_model(adapter, f"select * from {SRC} where {where}"))
        assert [(f.rule, f.severity) for f in found] == [("clock-window", "error")], where
        assert found[0].hint
    # an upper bound on the clock only delays future-stamped rows: a warning
    upper = _found(_model(adapter, f"select * from {SRC} where event_ts >= (select max(event_ts) from {T}) "
                                      "and event_ts < now()"))
    assert [(f.rule, f.severity) for f in upper] == [("clock-window", "warning")]
    # a view that feeds an incremental model: the same hazard
    view = _model(adapter, f"select * from {SRC} where event_date >= current_date - 14", materialized="view",
                  feeds_incremental=True)
    assert [f.rule for f in _found(view)] == ["clock-window"]


def test_clock_window_on_a_keyed_write_is_a_warning(adapter):
    """`where o.event_ts >= current_date - 7` in the is_incremental() branch of a keyed write: a rerun
    reads the same or a larger window and replaces by key, so only a gap between runs longer than the
    window, or a backfill of older days, misses rows. Without a key it stays an error."""
    full = f"select * from {SRC} o"
    batch = f"select * from {SRC} o where o.event_ts >= current_date - 7"

    def found(strategy, key, **kw):
        ctx = ModelContext.from_sql("daily", adapter, full, batch, materialized="incremental",
                                    incremental_strategy=strategy, unique_key=key, this=THIS, types=TYPES, **kw)
        return _found(ctx)

    for strategy, key, kw in (("delete+insert", "event_id", {}), ("merge", "event_id", {}), (None, "event_id", {}),
                              ("partition_overwrite", None, {"partition_key": "event_date"}),
                              ("microbatch", None, {"config": {"event_time": "event_ts", "batch_size": "day"}})):
        hits = [f for f in found(strategy, key, **kw) if f.rule == "clock-window"]
        assert [(f.severity, f.branch) for f in hits] == [("warning", "incremental")], strategy
        assert "gap between two runs is longer than the window" in hits[0].message
        assert "backfill" in hits[0].message
    # append, the default strategy without a key, merge without a unique_key (dbt then inserts only):
    # re-read rows are not replaced
    for strategy in ("append", None, "merge"):
        assert sorted((f.rule, f.severity) for f in found(strategy, None)) == \
            [("append-reread", "error"), ("clock-window", "error")], strategy
    # the clock outside is_incremental(): the full refresh keeps only the last days, an error
    both = ModelContext.from_sql("daily", adapter, batch, batch, materialized="incremental",
                                 incremental_strategy="delete+insert", unique_key="event_id", this=THIS, types=TYPES)
    assert [(f.rule, f.severity, f.branch) for f in _found(both)] == [("clock-window", "error", "full")]


def test_clock_in_a_full_rebuild_is_a_note(adapter):
    table = _model(adapter, f"select *, current_date as built_on from {SRC} where event_date >= current_date - 14",
                   materialized="table")
    found = _found(table)
    assert sorted((f.rule, f.severity) for f in found) == [("nondeterministic-function", "info")] * 2
    # random() stays an error: two builds of the same input differ
    rnd = _model(adapter, f"select *, random() as r from {SRC}", materialized="table")
    assert [(f.rule, f.severity) for f in _found(rnd)] == [("nondeterministic-function", "error")]
    # in an incremental model, a column that only stamps the clock is an audit column (the game day leaves
    # it out: a note), and the clock computed with the row's values is non-deterministic (not a window)
    inc = _model(adapter, f"select *, now() as loaded_at from {SRC} where event_ts >= (select max(event_ts) from {T})")
    assert errors(inc) == [] and [f.severity for f in _found(inc) if f.rule == "nondeterministic-function"] == ["info"]
    aged = _model(adapter, f"select *, current_date - event_date as age from {SRC} "
                           f"where event_ts >= (select max(event_ts) from {T})")
    assert errors(aged) == ["nondeterministic-function"]


# --- self-state --------------------------------------------------------------------------------

def test_self_state(adapter):
    running = (f"select s.event_date, s.n, s.n + coalesce(p.total, 0) as total from {SRC} s "
               f"left join {T} p on p.event_date = s.event_date - 1 "
               f"where s.event_date >= (select max(event_date) from {T})")
    assert errors(_model(adapter, running, strategy="delete+insert", key="event_date")) == ["self-state"]
    scalar = (f"select s.*, (select max(total) from {T}) + s.amount as total from {SRC} s "
              f"where s.event_ts >= (select max(event_ts) from {T})")
    assert errors(_model(adapter, scalar)) == ["self-state"]
    union = f"select event_id, event_ts from {SRC} union all select event_id, event_ts from {T}"
    assert "self-state" in errors(_model(adapter, union))
    prev = (f"with prev as (select event_date, total from {T}) select s.event_date, s.amount + prev.total as total "
            f"from {SRC} s join prev on prev.event_date = s.event_date - 1")
    assert "self-state" in errors(_model(adapter, prev, key="event_date"))


def test_self_state_near_misses(adapter):
    # {{ this }} read only to filter: watermark, not exists, not in, anti join
    for sql in (f"select * from {SRC} where event_ts >= (select max(event_ts) from {T})",
                f"select * from {SRC} s where not exists (select 1 from {T} t where t.event_id = s.event_id)",
                f"select * from {SRC} where event_id not in (select event_id from {T})",
                f"select s.* from {SRC} s left join {T} t on t.event_id = s.event_id where t.event_id is null",
                f"with wm as (select max(event_ts) as lo from {T}) select s.* from {SRC} s cross join wm "
                f"where s.event_ts >= wm.lo"):
        assert errors(_model(adapter, sql)) == [], sql


# --- config-column-missing ---------------------------------------------------------------------

def test_config_columns(adapter):
    sql = f"select event_id, cast(event_ts as date) as event_date from {SRC} where event_ts >= (select max(event_ts) from {T})"
    typo = _model(adapter, sql, key="event_idd")
    found = [f for f in _found(typo) if f.rule == "config-column-missing"]
    assert len(found) == 1 and "unique_key names column 'event_idd'" in found[0].message
    ctx = ModelContext.from_sql("daily", adapter, sql, sql, materialized="incremental",
                                incremental_strategy="partition_overwrite", partition_key="evnt_date", this=THIS)
    assert "config-column-missing" in errors(ctx)
    ok = ModelContext.from_sql("daily", adapter, sql, sql, materialized="incremental",
                               incremental_strategy="partition_overwrite",
                               partition_key={"field": "event_date", "granularity": "day"}, this=THIS)
    assert "config-column-missing" not in errors(ok)
    # an expression as unique_key is not a column name: not checked
    assert "config-column-missing" not in errors(_model(adapter, sql, key="coalesce(event_id, 0)"))
    # `select *` without catalog types: unknown, no finding
    star = ModelContext.from_sql("x", adapter, f"select * from {SRC}", f"select * from {SRC}",
                                 materialized="incremental", incremental_strategy="merge", unique_key="nope",
                                 this=("warehouse", "analytics", "x"))
    assert "config-column-missing" not in errors(star)


# --- ties traced through joins -----------------------------------------------------------------

KEYS = {"raw.events": [["event_id"]], "raw.users": [["user_id"]], "raw.items": [["item_id"]]}


def _table(adapter, sql):
    return ModelContext.from_sql("t", adapter, sql, materialized="table", this=("warehouse", "analytics", "t"),
                                 types=TYPES, keys=KEYS)


def test_ties_through_joins(adapter):
    # a self cross join on a unique key keeps a unique pair
    cross = (f"select * from (select a.event_id as a_id, b.event_id as b_id, row_number() over "
             f"(partition by a.event_id order by b.event_ts, b.event_id) as rn from {SRC} a cross join {SRC} b) x "
             "where rn = 1")
    assert errors(_table(adapter, cross)) == []
    # ...but ordering only by the other side's timestamp ties
    assert errors(_table(adapter, cross.replace(", b.event_id)", ")"))) == ["dedup-order-not-total"]
    # a one-to-many join breaks the left side's key
    items = '"warehouse"."raw"."items"'
    fan = (f"select * from (select e.event_id, i.item_id, row_number() over (partition by e.amount "
           f"order by e.event_id) as rn from {SRC} e join {items} i on i.event_id = e.event_id) x where rn = 1")
    assert errors(_table(adapter, fan)) == ["dedup-order-not-total"]
    # a many-to-one join (the joined side's key equated) keeps it
    users = '"warehouse"."raw"."users"'
    lookup = (f"select * from (select e.event_id, u.user_id, row_number() over (partition by e.amount "
              f"order by e.event_id) as rn from {SRC} e join {users} u on u.user_id = e.amount) x where rn = 1")
    assert errors(_table(adapter, lookup)) == []
    # ordering by every column of the source is total (rows equal on all of them are interchangeable)
    every = (f"select * from (select *, row_number() over (partition by amount order by event_ts, event_date, "
             f"event_id) as rn from {SRC}) x where rn = 1")
    assert errors(_table(adapter, every.replace(", event_id)", ")").replace("event_ts, event_date",
                                                                            "event_ts, event_date"))) == \
        ["dedup-order-not-total"]
    no_key = ModelContext.from_sql("t", adapter, every.replace(", event_id)", ", event_id, amount)"),
                                   materialized="table", this=("warehouse", "analytics", "t"), types=TYPES)
    assert errors(no_key) == []


def test_top_n_and_distinct_on(adapter):
    top3 = (f"select * from (select *, row_number() over (partition by amount order by event_ts) as rn from {SRC}) x "
            "where rn <= 3")
    assert errors(_table(adapter, top3)) == ["dedup-order-not-total"]
    assert errors(_table(adapter, top3.replace("order by event_ts", "order by event_ts, event_id"))) == []
    # a row number kept as a column numbers tied rows differently from one run to the next
    assert errors(_table(adapter, f"select *, row_number() over (order by event_ts) as rn from {SRC}")) == [
        "dedup-order-not-total"]
    assert errors(_table(adapter, f"select *, row_number() over (order by event_ts, event_id) as rn from {SRC}")) == []
    if adapter == "postgres":
        on = f"select distinct on (amount) * from {SRC} order by amount, event_ts desc"
        assert errors(_table(adapter, on)) == ["dedup-order-not-total"]
        assert errors(_table(adapter, on.replace("event_ts desc", "event_ts desc, event_id"))) == []


def test_value_picks_by_an_order_that_ties(adapter):
    pick = f"select amount, first_value(event_id) over (partition by amount order by event_ts) as first_id from {SRC}"
    assert errors(_table(adapter, pick)) == ["dedup-order-not-total"]
    assert errors(_table(adapter, pick.replace("order by event_ts", "order by event_ts, event_id"))) == []
    # the value picked is the order column itself: tied rows share it
    same = f"select amount, first_value(event_ts) over (partition by amount order by event_ts) as first_ts from {SRC}"
    assert errors(_table(adapter, same)) == []
    lag = f"select event_id, lag(amount) over (order by event_ts) as prev_amount from {SRC}"
    assert errors(_table(adapter, lag)) == ["dedup-order-not-total"]
