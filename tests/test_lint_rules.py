"""Each lint rule on SQL strings and configs: SQL that triggers it and near-miss SQL that must not,
parsed in both the DuckDB and the PostgreSQL dialect."""
from __future__ import annotations

import dataclasses

import pytest

from rerun_safety.lint.context import WINDOW_END_SENTINEL, WINDOW_START_SENTINEL, ModelContext
from rerun_safety.lint.rules import RULES, lint_model, run_rules

THIS = ("warehouse", "analytics", "orders")
T = '"warehouse"."analytics"."orders"'  # how dbt renders {{ this }}
SRC = '"warehouse"."raw"."orders"'

pytestmark = pytest.mark.parametrize("adapter", ["duckdb", "postgres"])


def incremental(adapter, sql_incremental, strategy=None, unique_key=None, full_sql=None, **kw):
    return ModelContext.from_sql("orders", adapter, full_sql or f"select * from {SRC}", sql_incremental,
                                 materialized="incremental", incremental_strategy=strategy,
                                 unique_key=unique_key, this=THIS, **kw)


def table(adapter, sql, **kw):
    return ModelContext.from_sql("orders", adapter, sql, materialized="table", this=THIS, **kw)


def rules(ctx) -> list[str]:
    assert ctx.full is None or ctx.full.ok, ctx.full.error
    assert ctx.incremental is None or ctx.incremental.ok, ctx.incremental.error
    return sorted(f.rule for f in run_rules(ctx))


LOOKBACK = f"select * from {SRC} where ts >= (select max(ts) - interval '1 hour' from {T})"
GTE_MAX = f"select * from {SRC} where ts >= (select max(ts) from {T})"
STRICT = f"select * from {SRC} where ts > (select max(ts) from {T})"


# --- append-reread -----------------------------------------------------------------------------

def test_append_lookback_rereads(adapter):
    assert rules(incremental(adapter, LOOKBACK, "append")) == ["append-reread"]
    assert rules(incremental(adapter, GTE_MAX, "append")) == ["append-reread"]
    # the default strategy without unique_key appends too
    assert rules(incremental(adapter, LOOKBACK)) == ["append-reread"]
    # reversed comparison, watermark through a CTE
    cte = (f"with wm as (select max(ts) - interval '2 hours' as lo from {T}) "
           f"select s.* from {SRC} s cross join wm where wm.lo <= s.ts")
    assert rules(incremental(adapter, cte, "append")) == ["append-reread"]
    # no incremental filter at all: every run appends everything again
    assert rules(incremental(adapter, f"select * from {SRC}", "append")) == ["append-reread"]
    # delete+insert or merge without unique_key: dbt deletes nothing and inserts, an append (the game day
    # finds sqlmesh's sushi_dbt waiter_as_customer_by_day doubling this way)
    for strategy in ("delete+insert", "merge"):
        found = run_rules(incremental(adapter, f"select * from {SRC}", strategy))
        assert [f.rule for f in found] == ["append-reread"], strategy
        assert f"strategy '{strategy}' without unique_key" in found[0].message
        assert rules(incremental(adapter, LOOKBACK, strategy)) == ["append-reread"]


def test_append_near_misses(adapter):
    # a key-based strategy replaces the re-read rows
    assert rules(incremental(adapter, LOOKBACK, "delete+insert", "id")) == []
    assert rules(incremental(adapter, LOOKBACK, "merge", "id")) == []
    assert rules(incremental(adapter, LOOKBACK, None, "id")) == []  # default with a key: delete+insert
    # append with a lookback, but rows already in the table are filtered out
    anti = LOOKBACK + f" and id not in (select id from {T})"
    assert rules(incremental(adapter, anti, "append")) == []
    exists = (f"select * from {SRC} s where s.ts >= (select max(ts) - interval '1 hour' from {T}) "
              f"and not exists (select 1 from {T} t where t.id = s.id)")
    assert rules(incremental(adapter, exists, "append")) == []
    left_anti = (f"select s.* from {SRC} s left join {T} t on t.id = s.id "
                 f"where s.ts >= (select max(ts) - interval '1 hour' from {T}) and t.id is null")
    assert rules(incremental(adapter, left_anti, "append")) == []
    # ...but a left join to {{ this }} that keeps matched rows still re-reads them
    left_keep = left_anti.replace(" and t.id is null", "")
    assert rules(incremental(adapter, left_keep, "append")) == ["append-reread"]
    # a table model is never incremental
    assert rules(table(adapter, LOOKBACK)) == []


# --- unique-key-ignored ------------------------------------------------------------------------

def test_unique_key_ignored(adapter):
    ctx = incremental(adapter, f"select * from {SRC} where ts > (select max(ts) from {T})", "append", "id")
    assert rules(ctx) == ["unique-key-ignored", "watermark-strict-gt"]
    assert rules(incremental(adapter, f"{GTE_MAX} and id not in (select id from {T})", "append", "id")) == \
        ["unique-key-ignored"]
    # near miss: the same key with delete+insert
    assert rules(incremental(adapter, GTE_MAX, "delete+insert", "id")) == []


# --- watermark-strict-gt -----------------------------------------------------------------------
def test_each_watermark_finding_points_at_its_own_filter(adapter):
    """Two strict watermarks on {{ this }}, a CTE's and the outer query's (sqlmesh's sushi_dbt writes its
    revenue models so): each finding names the line of its own comparison, not the first {{ this }}."""
    raw = ("{{ config(materialized='incremental') }}\n"
           "with items as (select * from {{ ref('items') }}\n"
           "  where oi.ds > (select max(ds) from {{ this }}))\n"
           "select o.* from {{ ref('orders') }} as o\n"
           "where\n"
           "  \"o\".ds>(select max(ds) from {{ this }})\n")
    sql = (f"with items as (select * from {SRC} as oi where oi.ds > (select max(ds) from {T})) "
           f"select o.* from {SRC} as o where \"o\".ds > (select max(ds) from {T})")
    found = run_rules(incremental(adapter, sql, "append", raw_code=raw, path="models/orders.sql"))
    assert sorted((f.rule, f.line) for f in found) == [("watermark-strict-gt", 3), ("watermark-strict-gt", 6)]
    # a comparison the file does not write as such (a macro's) falls back to the first {{ this }}
    found = run_rules(incremental(adapter, sql, "append", raw_code="{{ config(materialized='incremental') }}\n"
                                  "select * from {{ this }}\n{{ my_filter('ds') }}\n", path="models/orders.sql"))
    assert sorted(f.line for f in found) == [2, 2]



def test_watermark_strict_gt(adapter):
    for strategy, key in (("append", None), ("merge", "id"), ("delete+insert", "id")):
        assert rules(incremental(adapter, STRICT, strategy, key)) == ["watermark-strict-gt"]
    coalesced = f"select * from {SRC} where (select coalesce(max(ts), '1900-01-01') from {T}) < ts"
    assert rules(incremental(adapter, coalesced, "merge", "id")) == ["watermark-strict-gt"]


def test_watermark_near_misses(adapter):
    # `>=` with a key-based strategy re-reads the boundary and replaces it
    assert rules(incremental(adapter, GTE_MAX, "merge", "id")) == []
    # `>` on a lookback is not a bare watermark
    lookback_gt = f"select * from {SRC} where ts > (select max(ts) - interval '1 day' from {T})"
    assert rules(incremental(adapter, lookback_gt, "merge", "id")) == []
    # `>` against a max from another table (not {{ this }})
    other = f"select * from {SRC} where ts > (select max(ts) from \"warehouse\".\"raw\".\"checkpoints\")"
    assert rules(incremental(adapter, other, "merge", "id")) == []


# --- window-shorter-than-run -------------------------------------------------------------------

TS = {"ts": "timestamp with time zone", "id": "integer"}  # the model's own output columns (scratch catalog)
HOURLY = ("hour", 3600.0, "schedule in rerun_safety.yml")


def test_a_window_shorter_than_one_run_is_found(adapter):
    # a one-hour lookback on a sync time under a daily schedule: a half-committed run's older rows are lost
    found = run_rules(incremental(adapter, LOOKBACK, "merge", "id", columns=TS))
    assert [f.rule for f in found] == ["window-shorter-than-run"]
    assert "reaches back 1 hour before the watermark, less than one run (day, the default schedule)" in found[0].message
    # a bare `>=` on an instant re-reads one instant: nothing of a half-committed run
    found = run_rules(incremental(adapter, GTE_MAX, "delete+insert", "id", columns=TS))
    assert [f.rule for f in found] == ["window-shorter-than-run"] and "reaches back nothing" in found[0].message
    six = f"select * from {SRC} where ts > (select max(ts) - interval '6 hours' from {T})"
    assert rules(incremental(adapter, six, "merge", "id", columns=TS)) == ["window-shorter-than-run"]
    assert rules(incremental(adapter, six, "merge", "id", columns=TS, schedule=("6h", 21600.0, "--batch-size"))) == []


def test_window_shorter_than_run_near_misses(adapter):
    assert rules(incremental(adapter, LOOKBACK, "merge", "id", columns=TS, schedule=HOURLY)) == []  # runs hourly
    day = f"select * from {SRC} where ts >= (select max(ts) - interval '1 day' from {T})"
    assert rules(incremental(adapter, day, "merge", "id", columns=TS)) == []
    trunc = f"select * from {SRC} where ts >= (select date_trunc('day', max(ts)) from {T})"
    assert rules(incremental(adapter, trunc, "merge", "id", columns=TS)) == []  # from the start of the last day
    # a date column: `>=` re-reads its whole last day
    assert rules(incremental(adapter, GTE_MAX, "merge", "id", columns={"ts": "date", "id": "integer"})) == []
    # the column's type unknown (no scratch catalog): no finding rather than a guess
    assert rules(incremental(adapter, LOOKBACK, "merge", "id")) == []
    # a strict `>` on the bare max is watermark-strict-gt's
    assert rules(incremental(adapter, STRICT, "merge", "id", columns=TS)) == ["watermark-strict-gt"]


# --- late-watermark ----------------------------------------------------------------------------

LATE = (("raw.orders", "ts", "loaded_at"),)  # the source declares a load time beside its event time


def test_late_watermark(adapter):
    ctx = incremental(adapter, STRICT, "merge", "id", load_times=LATE)
    assert rules(ctx) == ["late-watermark", "watermark-strict-gt"]
    late = next(f for f in run_rules(ctx) if f.rule == "late-watermark")
    assert (late.severity, late.branch) == ("error", "incremental")
    assert "'ts' of raw.orders" in late.message and "'loaded_at'" in late.message
    assert late.hint.startswith("Filter on the load time")
    # `>=` on the event-time watermark misses late rows too, whatever the strategy
    assert rules(incremental(adapter, GTE_MAX, "merge", "id", load_times=LATE)) == ["late-watermark"]
    assert rules(incremental(adapter, GTE_MAX, "append", load_times=LATE)) == ["append-reread", "late-watermark"]
    cte = (f"with wm as (select coalesce(max(ts), '1900-01-01') as hi from {T}) "
           f"select s.* from {SRC} s cross join wm where s.ts >= wm.hi")
    assert rules(incremental(adapter, cte, "delete+insert", "id", load_times=LATE)) == ["late-watermark"]


def test_late_watermark_near_misses(adapter):
    # a filter on the load time reads late rows when they land
    by_load = f"select * from {SRC} where loaded_at >= (select max(loaded_at) - interval '1 hour' from {T})"
    assert rules(incremental(adapter, by_load, "merge", "id", load_times=LATE)) == []
    by_load_gt = f"select * from {SRC} where loaded_at > (select max(loaded_at) from {T})"
    assert rules(incremental(adapter, by_load_gt, "merge", "id", load_times=LATE)) == ["watermark-strict-gt"]
    # a lookback from the event-time watermark: how late rows land is not known statically
    assert rules(incremental(adapter, LOOKBACK, "merge", "id", load_times=LATE)) == []
    # no source upstream declares a load time
    assert rules(incremental(adapter, GTE_MAX, "merge", "id")) == []
    # a table model has no watermark
    assert rules(table(adapter, GTE_MAX, load_times=LATE)) == []


# --- partition-lookback-unaligned --------------------------------------------------------------

def _po(adapter, sql, key=None):
    full = f"select *, cast(date_trunc('day', ts) as date) as day from {SRC}"
    return incremental(adapter, sql, "partition_overwrite", full_sql=full,
                       partition_key=key or {"field": "day", "granularity": "day"})


def test_partition_lookback_unaligned(adapter):
    bad = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
           f"where ts >= (select max(ts) - interval '9 seconds' from {T})")
    assert rules(_po(adapter, bad)) == ["partition-lookback-unaligned"]
    hour = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
            f"where ts >= (select date_trunc('hour', max(ts)) from {T})")
    assert rules(_po(adapter, hour)) == ["partition-lookback-unaligned"]
    # list-form partition key: the grain comes from the column's definition
    assert rules(_po(adapter, bad, key=["day"])) == ["partition-lookback-unaligned"]


def test_partition_lookback_near_misses(adapter):
    aligned = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
               f"where ts >= (select date_trunc('day', max(ts)) - interval '1 day' from {T})")
    assert rules(_po(adapter, aligned)) == []
    month = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
             f"where ts >= (select date_trunc('month', max(ts)) from {T})")
    assert rules(_po(adapter, month)) == []
    as_date = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
               f"where ts >= (select cast(max(ts) as date) from {T})")
    assert rules(_po(adapter, as_date)) == []
    # filtering the partition column itself selects whole partitions
    on_key = (f"select *, cast(date_trunc('day', ts) as date) as day from {SRC} "
              f"where cast(date_trunc('day', ts) as date) >= (select max(day) from {T})")
    assert rules(_po(adapter, on_key.replace("where cast(date_trunc('day', ts) as date)", "where day"),
                     key=["day"])) == []
    # the same unaligned lookback is fine with a key-based strategy
    bad = f"select * from {SRC} where ts >= (select max(ts) - interval '9 seconds' from {T})"
    assert rules(incremental(adapter, bad, "delete+insert", "id")) == []


# --- nondeterministic-function -----------------------------------------------------------------

@pytest.mark.parametrize("expr", ["now()", "current_timestamp", "current_date", "random()", "gen_random_uuid()",
                                  "clock_timestamp()"])
def test_nondeterministic_functions(adapter, expr):
    found = run_rules(table(adapter, f"select id, {expr} as x from {SRC}"))
    assert [f.rule for f in found] == ["nondeterministic-function"]
    assert "column x" in found[0].message


def test_the_clock_in_a_materialization_of_the_projects_own_is_an_error_not_a_note(adapter):
    """A table is rebuilt in full, so its clock column is a note; a materialization of the project's
    own may append to what earlier runs wrote (the game day replays it like an incremental model)."""
    sql = f"select id, current_timestamp as loaded_at from {SRC}"
    found = [f for f in run_rules(table(adapter, sql)) if f.rule == "nondeterministic-function"]
    assert [f.severity for f in found] == ["info"] and "rebuilt in full" in found[0].message
    # the clock computed with the row's own values (an age): an error where earlier runs' rows stay
    age = f"select id, current_date - cast(ts as date) as age_days from {SRC}"
    own = ModelContext.from_sql("orders", adapter, age, materialized="custom_incremental", this=THIS)
    found = [f for f in run_rules(own) if f.rule == "nondeterministic-function"]
    assert [f.severity for f in found] == ["error"] and "two builds of the same input differ" in found[0].message
    # a column that only stamps the clock is an audit column there: the game day leaves it out (a note),
    # unless the model asks to compare it
    own = ModelContext.from_sql("orders", adapter, sql, materialized="custom_incremental", this=THIS)
    found = [f for f in run_rules(own) if f.rule == "nondeterministic-function"]
    assert [f.severity for f in found] == ["info"] and "an audit column" in found[0].message
    compared = ModelContext.from_sql("orders", adapter, sql, materialized="custom_incremental", this=THIS,
                                     rerun_safety_meta={"compare_audit_columns": True})
    assert [f.severity for f in run_rules(compared) if f.rule == "nondeterministic-function"] == ["error"]


def test_nondeterministic_where_vs_ignored_audit_column(adapter):
    where = f"select id, ts from {SRC} where ts > current_timestamp - interval '1 day'"
    ignore = {"rerun_safety_meta": {"ignore_columns": ["loaded_at"]}}
    found = run_rules(table(adapter, where, **ignore))
    assert [f.rule for f in found] == ["nondeterministic-function"]
    assert "in WHERE" in found[0].message
    # near miss: the same function in an ignored audit column
    audit = f"select id, ts, current_timestamp as loaded_at from {SRC}"
    assert rules(table(adapter, audit, **ignore)) == []
    # ...but not in a column that is not ignored
    assert rules(table(adapter, audit.replace("loaded_at", "built_at"), **ignore)) == ["nondeterministic-function"]
    # and a deterministic query is clean
    assert rules(table(adapter, f"select id, date_trunc('day', ts) as d from {SRC}")) == []


# --- dedup-order-not-total ---------------------------------------------------------------------

DEDUP = ("select * from (select *, row_number() over (partition by k order by {order}) as rn from "
         f"{SRC}) d where rn = 1")


def test_dedup_order_not_total(adapter):
    assert rules(table(adapter, DEDUP.format(order="ts"), unique_columns=["id"])) == ["dedup-order-not-total"]
    no_order = f"select * from (select *, row_number() over (partition by k) as rn from {SRC}) d where rn = 1"
    assert rules(table(adapter, no_order, unique_columns=["id"])) == ["dedup-order-not-total"]
    # ordering by the partition's own key does not break ties within it
    assert rules(table(adapter, DEDUP.format(order="ts, k"), unique_key="k")) == ["dedup-order-not-total"]
    # numbering over ties: a row_number or ntile column differs between runs wherever it is used
    for numbering in ("row_number() over (partition by k order by ts)", "ntile(4) over (order by amount)"):
        sql = f"select id, {numbering} as n from {SRC}"
        assert rules(table(adapter, sql, unique_columns=["id"])) == ["dedup-order-not-total"], numbering
    # ordered aggregates without an order by
    for agg in ("string_agg(note, ',')", "array_agg(note)"):
        sql = f"select k, {agg} as notes from {SRC} group by k"
        assert rules(table(adapter, sql, unique_columns=["id"])) == ["dedup-order-not-total"], agg
    # lag over a grouped expression that is not its key (a month grouped, ordered by the day)
    lag = (f"select date_trunc('month', ts) as m, lag(sum(amount)) over (order by min(ts)) as prev "
           f"from {SRC} group by 1")
    assert rules(table(adapter, lag, unique_columns=["id"])) == ["dedup-order-not-total"]
    found = run_rules(table(adapter, f"select id, ntile(4) over (order by amount) as q from {SRC}",
                            unique_columns=["id"]))
    assert "orders by amount, which is not a total order" in found[0].message


def test_dedup_near_misses(adapter):
    # a unique tie-breaker makes the order total
    assert rules(table(adapter, DEDUP.format(order="ts, id"), unique_columns=["id"])) == []
    assert rules(table(adapter, DEDUP.format(order="ts desc, s.id"), unique_columns=["id"])) == []
    # a composite unique set completed by the partition column
    assert rules(table(adapter, DEDUP.format(order="ts, seq"), unique_columns=[["k", "seq"]])) == []
    # numbering over a total order
    numbered = f"select *, row_number() over (partition by k order by ts, id) as rn from {SRC}"
    assert rules(table(adapter, numbered, unique_columns=["id"])) == []
    # rank() and dense_rank() keep or number every tied row alike
    for fn in ("rank()", "dense_rank()"):
        rank = f"select * from (select *, {fn} over (partition by k order by ts desc) as r from {SRC}) x where r <= 1"
        assert rules(table(adapter, rank, unique_columns=["id"])) == [], fn
    # lag over the select's own GROUP BY key (by name, by position, by alias)
    for group in ("group by sale_month", "group by 1", "group by date_trunc('month', ts)"):
        for order in ("sale_month", "date_trunc('month', ts)"):
            if order == "sale_month" and adapter == "postgres":
                continue  # PostgreSQL's window order by does not see output names
            lag = (f"select date_trunc('month', ts) as sale_month, sum(amount) as revenue, "
                   f"lag(sum(amount)) over (order by {order}) as prev from {SRC} {group}")
            assert rules(table(adapter, lag, unique_columns=["id"])) == [], (group, order)
    monthly = (f"select sale_month, sum(revenue) as revenue, lag(sum(revenue)) over (order by sale_month) as prev "
               f"from (select date_trunc('month', ts) as sale_month, amount as revenue from {SRC}) m group by sale_month")
    assert rules(table(adapter, monthly, unique_columns=["id"])) == []
    by_col = f"select k, count(*) as n, lead(count(*)) over (order by k) as next_n from {SRC} group by k"
    assert rules(table(adapter, by_col, unique_columns=["id"])) == []
    # lag over a CTE grouped by (partition, order) after a join (ADE-bench's airbnb wow/mom models):
    # the grouped values are unique whatever the join
    cte = ("with d as (select distinct cast(ts as date) as day from {src}), "
           "g as (select count(*) as n, s.k, d.day as agg_day from d left join {src} s on cast(s.ts as date) "
           "between d.day - 6 and d.day group by {group}) "
           "select *, lag(n, 6) over (partition by k order by agg_day) as prev from g")
    for group in ("k, agg_day", "s.k, d.day", "2, 3"):
        assert rules(table(adapter, cte.format(src=SRC, group=group), unique_columns=["id"])) == [], group
    # ... but not when a grouped value is left out of the output: k alone is not unique
    partial = cte.replace("select count(*) as n, s.k, d.day as agg_day", "select count(*) as n, d.day as agg_day")
    partial = partial.replace("partition by k order by agg_day", "order by agg_day")
    assert rules(table(adapter, partial.format(src=SRC, group="s.k, d.day"), unique_columns=["id"])) == \
        ["dedup-order-not-total"]
    # an order by that ends with a key a test declares unique
    assert rules(table(adapter, f"select id, row_number() over (order by ts, id) as n from {SRC}",
                       unique_columns=["id"])) == []
    # ordered aggregates with their order by
    for agg in ("string_agg(note, ',' order by note)", "array_agg(note order by ts, id)"):
        sql = f"select k, {agg} as notes from {SRC} group by k"
        assert rules(table(adapter, sql, unique_columns=["id"])) == [], agg


# --- window-over-batch -------------------------------------------------------------------------

WINDOW_FULL = (f"select id, customer, ts, amount - lag(amount) over (partition by customer order by ts, id) "
               f"as change from {SRC}")


def test_this_in_the_first_build(adapter):
    """The first-build SQL (is_incremental() false) reads {{ this }}: a CTE of the watermark written
    outside the `if`. PostgreSQL binds it and fails the first build; DuckDB skips it."""
    cte = f"with m as (select max(ts) as hi from {T}) select * from {SRC}"
    inc = cte + " where ts >= (select hi from m)"
    found = run_rules(incremental(adapter, inc, "merge", "id", full_sql=cte))
    assert [(f.rule, f.severity) for f in found] == [("this-in-first-build", "error")]
    assert "in CTE `m`" in found[0].message and "PostgreSQL" in found[0].message
    # read in the select itself (a union with the previous output): the same finding, once
    union = f"select * from {SRC} union all select * from {T}"
    assert rules(incremental(adapter, union, "merge", "id", full_sql=union)).count("this-in-first-build") == 1
    # near misses: {{ this }} only in the incremental branch; a table, not incremental; another
    # schema's relation of the same name
    assert "this-in-first-build" not in rules(incremental(adapter, inc, "merge", "id"))
    assert rules(table(adapter, cte)) == []
    other = f'with m as (select max(ts) as hi from "warehouse"."staging"."orders") select * from {SRC}'
    assert rules(incremental(adapter, other + " where ts >= (select hi from m)", "merge", "id", full_sql=other)) == []


def test_window_over_the_batch(adapter):
    inc = WINDOW_FULL + f" where ts >= (select max(ts) - interval '1 day' from {T})"
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=WINDOW_FULL)) == ["window-over-batch"]
    # a running count over the batch restarts at every run
    running = f"select id, ts, count(*) over (order by ts, id) as seq from {SRC}"
    inc = running + f" where ts >= (select max(ts) - interval '2 hours' from {T})"
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=running)) == ["window-over-batch"]
    # the batch filtered in a CTE that a join of CTEs reads, the window outside (a week-over-week
    # share computed over only the newest day): the filter that the full branch lacks is found
    cte = (f"with r as (select * from {SRC}{{}}), d as (select distinct cast(ts as date) as day from r{{}}), "
           f"f as (select d.day as agg_day, count(r.id) as n from d left join r on cast(r.ts as date) "
           f"between d.day - 6 and d.day group by 1) select agg_day, n, n - lag(n, 6) over (order by agg_day) "
           f"as wow from f")
    full = cte.format("", "")
    inc = cte.format(f" where ts >= (select max(ts) - interval '6 days' from {SRC})",
                     f" where day = (select max(cast(ts as date)) from {SRC})")
    assert rules(incremental(adapter, inc, "delete+insert", "agg_day", full_sql=full)) == ["window-over-batch"]


def test_window_over_whole_partitions_or_trimmed(adapter):
    # ranking numbers the batch on purpose (a dedup); whole-partition aggregates are not judged
    for sql in (f"select * from (select *, row_number() over (partition by id order by ts desc) as rn "
                f"from {SRC}) x where rn = 1",
                f"select id, ts, sum(amount) over (partition by customer) as total from {SRC}"):
        inc = sql.replace(f"from {SRC}", f"from {SRC} where ts >= (select max(ts) - interval '1 day' from {T})")
        assert "window-over-batch" not in rules(incremental(adapter, inc, "merge", "id", full_sql=sql))
    # partitioned by the column the batch is cut on: whole days are read
    days = f"select id, day, ts, lag(ts) over (partition by day order by ts, id) as prev from {SRC}"
    inc = days + f" where day >= (select max(day) - 1 from {T})"
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=days)) == []
    # ... through an alias: the window's partition column is named otherwise in a CTE
    aliased = (f"with e as (select id, ts, cast(ts as date) as event_day from {SRC}{{}}) select id, event_day, "
               f"lag(ts) over (partition by event_day order by ts, id) as prev from e")
    inc = aliased.format(f" where cast(ts as date) >= (select max(event_day) - 1 from {T})")
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=aliased.format(""))) == []
    # whole customers re-read: every customer with a new row, all of its rows
    inc = WINDOW_FULL + (f" where customer in (select customer from {SRC} where ts >= (select max(ts) "
                         f"from {T}))")
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=WINDOW_FULL)) == []
    # a lookback read for the window, then only the newer rows kept
    trimmed = (f"with s as (select * from {SRC}{{}}), w as (select id, customer, ts, lag(amount) over "
               f"(partition by customer order by ts, id) as prev from s) select * from w{{}}")
    inc = trimmed.format(f" where ts >= (select max(ts) - interval '30 days' from {T})",
                         f" where ts >= (select max(ts) from {T})")
    assert rules(incremental(adapter, inc, "merge", "id", full_sql=trimmed.format("", ""))) == []
    # the same filter in both branches is not the batch
    both = WINDOW_FULL + " where ts >= timestamp '2024-01-01'"
    assert rules(incremental(adapter, both, "merge", "id", full_sql=both)) == []


def test_window_over_the_batch_unioned_with_the_rows_kept_in_this(adapter):
    """The batch unioned with the previous active rows read back from {{ this }} before the window: the
    first rows of the batch have their predecessors (a shape met in a generated package, flagged before).
    The same union with a table other than {{ this }}, or a watermark subquery alone, is still the batch."""
    window = "select id, customer, ts, amount - lag(amount) over (partition by customer order by ts, id) as change"
    unioned = (f"with batch as (select id, customer, ts, amount from {SRC}{{}}), prev as (select id, customer, ts, "
               f"amount from {{}} where is_active), rows as (select * from batch union all select * from prev) "
               f"{window} from rows")
    full = f"with rows as (select id, customer, ts, amount from {SRC}) {window} from rows"
    inc = unioned.format(f" where ts > (select max(ts) from {T})", T)
    assert "window-over-batch" not in rules(incremental(adapter, inc, "merge", "id", full_sql=full))
    other = unioned.format(f" where ts > (select max(ts) from {T})", '"warehouse"."raw"."archive"')
    assert "window-over-batch" in rules(incremental(adapter, other, "merge", "id", full_sql=full))


# --- limit-without-order -----------------------------------------------------------------------

def test_limit_without_order(adapter):
    assert rules(table(adapter, f"select * from {SRC} limit 10")) == ["limit-without-order"]
    assert rules(table(adapter, f"select * from {SRC} fetch first 5 rows only")) == ["limit-without-order"]
    sub = f"select id, (select ts from {SRC} limit 1) as first_ts from {SRC}"
    assert rules(table(adapter, sub)) == ["limit-without-order"]


def test_limit_near_misses(adapter):
    assert rules(table(adapter, f"select * from {SRC} order by id limit 10")) == []
    assert rules(table(adapter, f"select * from {SRC} order by id fetch first 5 rows only")) == []
    exists = f"select * from {SRC} s where exists (select 1 from {SRC} t where t.id = s.id limit 1)"
    assert rules(table(adapter, exists)) == []


# --- inclusive-window-bound --------------------------------------------------------------------

START, END = WINDOW_START_SENTINEL, WINDOW_END_SENTINEL


def test_inclusive_window_bound(adapter):
    between = f"select * from {SRC} where ts between '{START}' and '{END}'"
    assert rules(table(adapter, between)) == ["inclusive-window-bound"]
    typed = (f"select * from {SRC} where ts between cast('{START[:10]} 04:05:06.000000' as timestamp) "
             f"and cast('{END[:10]} 06:07:08.000000' as timestamp)")
    assert rules(table(adapter, typed)) == ["inclusive-window-bound"]
    closed = f"select * from {SRC} where ts >= '{START}' and ts <= '{END}'"
    assert rules(table(adapter, closed)) == ["inclusive-window-bound"]


def test_inclusive_window_near_misses(adapter):
    half_open = f"select * from {SRC} where ts >= '{START}' and ts < '{END}'"
    assert rules(table(adapter, half_open)) == []
    other = f"select * from {SRC} where ts between '2020-01-01' and '2020-02-01'"
    assert rules(table(adapter, other)) == []
    left_open = f"select * from {SRC} where ts > '{START}' and ts <= '{END}'"
    assert rules(table(adapter, left_open)) == []


# --- microbatch-postgres and adapter traps -----------------------------------------------------

def test_microbatch(adapter):
    ctx = incremental(adapter, f"select * from {SRC}", "microbatch", "id" if adapter == "postgres" else None)
    expected = ["microbatch-postgres"] if adapter == "postgres" else []
    assert rules(ctx) == expected
    # what dbt-postgres requires (a unique_key for microbatch) never fails the lint gate: a warning
    assert [f.severity for f in run_rules(ctx)] == (["warning"] if adapter == "postgres" else [])
    # near miss: delete+insert over a window on postgres is fine
    assert rules(incremental(adapter, GTE_MAX, "delete+insert", "id")) == []


MB_DAILY = f"select cast(ts as date) as view_date, count(*) as views from {SRC} group by 1"
MB_CFG = {"event_time": "view_date", "batch_size": "day"}


def _microbatch(adapter, sql, key, **config):
    return incremental(adapter, sql, "microbatch", key if adapter == "postgres" else None, full_sql=sql,
                       config={**MB_CFG, **config})


def test_microbatch_keyed_on_its_event_time(adapter):
    """An aggregate by day keyed on its event_time column: each batch recomputes and upserts whole
    days, so only a day that disappears upstream entirely stays stale (a note on PostgreSQL)."""
    found = run_rules(_microbatch(adapter, MB_DAILY, "view_date"))
    assert [(f.rule, f.severity) for f in found] == ([("microbatch-postgres", "info")] if adapter == "postgres" else [])
    if adapter == "postgres":
        assert "unique_key 'view_date'" in found[0].message and "stays stale" in found[0].message
    # a key derived from the event time at a grain inside the batch (hours of a day batch)
    hourly = f"select date_trunc('hour', ts) as view_hour, ts, amount from {SRC}"
    found = run_rules(_microbatch(adapter, hourly, "view_hour", event_time="ts"))
    assert [(f.rule, f.severity) for f in found] == ([("microbatch-postgres", "info")] if adapter == "postgres" else [])
    # near misses, still warnings on PostgreSQL: a key coarser than the batch (a month upserted from one
    # day's rows), a composite key, a key unrelated to the event time
    monthly = f"select date_trunc('month', ts) as view_month, ts, amount from {SRC}"
    for sql, key, cfg in ((monthly, "view_month", {"event_time": "ts"}), (MB_DAILY, "view_date, views", {}),
                          (MB_DAILY, "views", {})):
        found = run_rules(_microbatch(adapter, sql, key, **cfg))
        assert [(f.rule, f.severity) for f in found] == \
            ([("microbatch-postgres", "warning")] if adapter == "postgres" else []), key


def test_adapter_traps(adapter):
    assert rules(incremental(adapter, GTE_MAX, "insert_overwrite", "id")) == ["adapter-trap"]
    po = incremental(adapter, f"select * from {SRC}", "partition_overwrite",
                     partition_key=["day"], root_macros=frozenset({"some_macro"}))
    assert rules(po) == ["adapter-trap"]
    shimmed = incremental(adapter, f"select * from {SRC}", "partition_overwrite", partition_key=["day"],
                          root_macros=frozenset({"get_incremental_partition_overwrite_sql"}))
    assert rules(shimmed) == []
    ducklake = table(adapter, f"select * from {SRC}", config={"partition_by": "day"})
    found = run_rules(ducklake)
    assert [(f.rule, f.severity) for f in found] == ([("adapter-trap", "warning")] if adapter == "duckdb" else [])


# --- hook-append -------------------------------------------------------------------------------

SUMMARY = "insert into {{ source('audit', 'batch_summary') }} select cast(max(ts) as date), count(*) from {{ this }}"
CLEAR = ("delete from {{ source('audit', 'batch_summary') }} "
         "where day in (select distinct cast(ts as date) from {{ this }})")


def _hooked(adapter, post=(), pre=(), meta=None, **kw):
    return incremental(adapter, LOOKBACK, "merge", "id", config={"pre_hook": pre, "post_hook": post},
                       rerun_safety_meta=meta or {}, **kw)


def test_hook_append(adapter):
    found = run_rules(_hooked(adapter, post=[SUMMARY]))
    assert [(f.rule, f.severity, f.branch) for f in found] == [("hook-append", "error", "config")]
    assert "post_hook" in found[0].message and "audit.batch_summary" in found[0].message
    # a single string, a pre-hook, dbt's {sql, transaction} form, a table model: the same
    assert rules(_hooked(adapter, post=SUMMARY)) == ["hook-append"]
    assert rules(_hooked(adapter, pre=[SUMMARY])) == ["hook-append"]
    # names built with ordinary Jinja (dbt's target and this), as hooks are written
    jinja = "insert into {{ target.schema }}_audit.run_log select '{{ this.name }}', count(*), '{{ invocation_id }}' from {{ this }}"
    found = run_rules(_hooked(adapter, post=[jinja]))
    assert [f.rule for f in found] == ["hook-append"] and "analytics_audit.run_log" in found[0].message
    cleared = ("delete from {{ target.schema }}_audit.run_log where model = '{{ this.name }}'")
    assert rules(_hooked(adapter, post=[cleared, jinja])) == []
    assert rules(_hooked(adapter, post=[{"sql": SUMMARY, "transaction": True}])) == ["hook-append"]
    assert rules(table(adapter, f"select * from {SRC}", config={"post_hook": [SUMMARY]})) == ["hook-append"]
    # the delete comes after the insert: the rows of this run are deleted, not the earlier run's
    assert rules(_hooked(adapter, post=[SUMMARY, CLEAR])) == ["hook-append"]
    # a log table declared for another relation does not cover this one
    assert rules(_hooked(adapter, post=[SUMMARY], meta={"log_tables": ["audit.run_log"]})) == ["hook-append"]
    # two appending hooks into two tables: one finding each
    runs = "insert into audit.run_log values (1)"
    assert rules(_hooked(adapter, post=[SUMMARY, runs])) == ["hook-append", "hook-append"]


def test_hook_append_near_misses(adapter):
    # the hooks delete the batch's rows first (in the same hook, or a pre-hook), or truncate
    assert rules(_hooked(adapter, post=[CLEAR, SUMMARY])) == []
    assert rules(_hooked(adapter, post=[f"{CLEAR}; {SUMMARY}"])) == []
    assert rules(_hooked(adapter, pre=[CLEAR], post=[SUMMARY])) == []
    assert rules(_hooked(adapter, post=["truncate table audit.batch_summary", SUMMARY])) == []
    # a keyed insert
    keyed = SUMMARY.replace("from {{ this }}", "from {{ this }} group by 1 on conflict (day) do nothing")
    assert rules(_hooked(adapter, post=[keyed])) == []
    # rows already in the table are skipped
    skip = ("insert into audit.batch_summary select distinct cast(ts as date) from {{ this }} t "
            "where not exists (select 1 from audit.batch_summary b where b.day = cast(t.ts as date))")
    assert rules(_hooked(adapter, post=[skip])) == []
    # a run log declared as one row per run (by schema.table, or as the source renders)
    assert rules(_hooked(adapter, post=[SUMMARY], meta={"log_tables": ["audit.batch_summary"]})) == []
    renamed = _hooked(adapter, post=[SUMMARY], meta={"log_tables": ["audit_prod.batch_summary"]},
                      relation_names={"source:audit.batch_summary": "audit_prod.batch_summary"})
    assert rules(renamed) == []
    # hooks that write nothing, or that sqlglot cannot read
    assert rules(_hooked(adapter, post=["grant select on {{ this }} to reporter", "analyze {{ this }}"])) == []
    assert rules(_hooked(adapter, post=["{% do log('done') %}", "insert into ((("])) == []


# --- hook-writes-other -------------------------------------------------------------------------

CONSUME = "delete from {{ ref('stg_changes') }} where id in (select id from {{ this }} where not is_latest)"


def test_hook_writes_other(adapter):
    """A hook that takes rows from a relation the model does not own: the game day finds the parent's
    state depending on this model (conformance: customer_change_scd over stg_customer_changes)."""
    found = run_rules(_hooked(adapter, post=[CONSUME], relation_names={"ref:stg_changes": "analytics.stg_changes"}))
    assert [(f.rule, f.severity, f.branch) for f in found] == [("hook-writes-other", "error", "config")]
    assert "deletes from analytics.stg_changes" in found[0].message and "post_hook" in found[0].message
    # truncate and update of a source, in a pre-hook
    assert rules(_hooked(adapter, pre=["truncate table {{ source('raw', 'queue') }}"])) == ["hook-writes-other"]
    found = run_rules(_hooked(adapter, post=["update raw.orders set processed = true where id in (select id from {{ this }})"]))
    assert [f.rule for f in found] == ["hook-writes-other"] and "updates raw.orders" in found[0].message
    # an update is not undone by an insert after it
    assert rules(_hooked(adapter, post=["update audit.totals set n = 0", "insert into audit.totals values (1, 1) "
                                        "on conflict (day) do nothing"])) == ["hook-writes-other"]


def test_hook_writes_other_near_misses(adapter):
    # delete + insert into the same table: the hook replaces the rows it covers (examples/shop's events_totalled)
    assert rules(_hooked(adapter, post=[CLEAR, SUMMARY])) == []
    assert rules(_hooked(adapter, post=["truncate table audit.batch_summary", SUMMARY])) == []
    # the model's own relation, by {{ this }} or by name
    assert rules(_hooked(adapter, post=["delete from {{ this }} where amount < 0"])) == []
    assert rules(_hooked(adapter, post=["update {{ this }} set amount = 0 where amount is null"])) == []
    # hooks that write nothing, or that sqlglot cannot read
    assert rules(_hooked(adapter, post=["grant select on {{ this }} to reporter", "delete from ((("])) == []


# --- suppressions ------------------------------------------------------------------------------

def test_suppressions(adapter):
    meta = {"lint_ignore": [{"rule": "limit-without-order", "reason": "sample for a dashboard"}]}
    kept, quiet = lint_model(table(adapter, f"select * from {SRC} limit 10", rerun_safety_meta=meta))
    assert ([f.rule for f in kept], [f.rule for f in quiet]) == ([], ["limit-without-order"])
    # without a reason the suppression is itself an error and suppresses nothing
    meta = {"lint_ignore": [{"rule": "limit-without-order"}, {"rule": "no-such-rule", "reason": "x"}]}
    kept, quiet = lint_model(table(adapter, f"select * from {SRC} limit 10", rerun_safety_meta=meta))
    assert sorted((f.rule, f.severity) for f in kept) == [
        ("limit-without-order", "error"), ("suppression-missing-reason", "error"),
        ("suppression-unknown-rule", "warning")]
    assert quiet == []


def test_rule_table_is_stable(adapter):
    assert list(RULES) == [
        "append-reread", "unique-key-ignored", "watermark-strict-gt", "late-watermark", "window-shorter-than-run",
        "window-shorter-than-lateness",
        "stale-attribute",
        "partition-lookback-unaligned",
        "nondeterministic-function", "clock-window", "self-state", "this-in-first-build", "window-over-batch",
        "config-column-missing",
        "dedup-order-not-total", "limit-without-order", "inclusive-window-bound",
        "microbatch-postgres", "adapter-trap", "hook-append", "hook-writes-other", "unknown-strategy", "own-strategy",
        "compile-error",
        "python-model",
        "sql-parse-error",
        "incremental-branch-unchecked", "suppression-missing-reason", "suppression-unknown-rule"]
    assert {r.severity for r in RULES.values()} == {"error", "warning", "info"}
    assert RULES["compile-error"].severity == "warning"
    assert all(r.what and r.fix for r in RULES.values())


def test_render_text_groups_by_model_and_colours_on_request(adapter):
    from rerun_safety.lint import LintResult, render_text

    ctx = table(adapter, f"select * from {SRC} limit 10", path="models/orders.sql",
                raw_code=f"select * from {SRC}\nlimit 10\n")
    kept, _ = lint_model(ctx)
    result = LintResult(tuple(kept), ("orders", "customers"))
    plain = render_text(result, color=False)
    assert plain.splitlines()[0] == "orders  models/orders.sql"
    assert plain.splitlines()[1].split()[:2] == ["error", "limit-without-order"]
    assert "(models/orders.sql:2)" in plain.splitlines()[1]
    assert plain.splitlines()[-1] == "2 models linted: 1 error, 0 warnings, 0 suppressed"
    assert "\033[" not in plain
    coloured = render_text(result, color=True)
    assert "\033[31merror  \033[0m" in coloured
    assert result.has_errors and result.to_dict()["findings"][0]["line"] == 2


# --- own-strategy -----------------------------------------------------------------------------

def test_a_strategy_or_materialization_of_the_projects_own_is_named_not_passed_over(adapter):
    ctx = incremental(adapter, LOOKBACK, "keyed_replace", "id")
    found = [f for f in run_rules(ctx) if f.rule == "own-strategy"]
    assert [(f.severity, f.message.split(" (")[0]) for f in found] == [
        ("info", "incremental_strategy 'keyed_replace' is the project's own")]
    assert "the game day replays it" in found[0].message
    ctx = ModelContext.from_sql("orders", adapter, f"select * from {SRC}", materialized="rebuilt_table", this=THIS)
    assert [f.rule for f in run_rules(ctx)] == ["own-strategy"]
    # dbt's own strategies and materializations: nothing to say
    for strategy in ("merge", "delete+insert", "append", "microbatch"):
        assert "own-strategy" not in rules(incremental(adapter, LOOKBACK, strategy, "id"))
    assert "own-strategy" not in rules(table(adapter, f"select * from {SRC}"))


def test_a_strategy_no_macro_implements_is_an_error_not_the_projects_own(adapter):
    """Another tool's strategy name (SQLMesh's incremental_by_time_range in a dbt project): dbt finds
    no get_incremental_<name>sql_text and fails on every incremental run."""
    ctx = incremental(adapter, LOOKBACK, "incremental_by_time_range", "id")
    ctx = dataclasses.replace(ctx, strategy_macros=frozenset({"get_incremental_merge_sql"}))
    found = [(f.rule, f.severity) for f in run_rules(ctx) if f.rule in ("own-strategy", "unknown-strategy")]
    assert found == [("unknown-strategy", "error")]
    assert "no macro get_incremental_incremental_by_time_range_sql" in next(
        f.message for f in run_rules(ctx) if f.rule == "unknown-strategy")
    # defined where dbt looks: the project's own, no error
    ctx = dataclasses.replace(ctx, strategy_macros=frozenset({"get_incremental_incremental_by_time_range_sql"}))
    assert [f.rule for f in run_rules(ctx) if f.rule in ("own-strategy", "unknown-strategy")] == ["own-strategy"]
    # not known which macros exist: no claim either way beyond "the project's own"
    ctx = dataclasses.replace(ctx, strategy_macros=None)
    assert [f.rule for f in run_rules(ctx) if f.rule in ("own-strategy", "unknown-strategy")] == ["own-strategy"]


# --- the schedule window-shorter-than-run compares with ----------------------------------------

def test_the_schedule_comes_from_the_option_then_rerun_safety_yml_then_a_day(adapter, tmp_path):
    from types import SimpleNamespace

    from rerun_safety.errors import ConfigError
    from rerun_safety.lint.core import _model_schedule, _schedule

    assert _schedule(tmp_path, None, None) == ("day", 86400.0, "the default schedule")
    (tmp_path / "rerun_safety.yml").write_text("schedule: 6h\n")
    assert _schedule(tmp_path, None, None) == ("6h", 21600.0, "schedule in rerun_safety.yml")
    assert _schedule(tmp_path, "hour", None) == ("hour", 3600.0, "--batch-size")
    (tmp_path / "rerun_safety.yml").write_text("schedule: fortnightly\n")
    with pytest.raises(ConfigError, match=r"rerun_safety.yml: schedule 'fortnightly' is not a batch: use hour"):
        _schedule(tmp_path, None, None)
    (tmp_path / "rerun_safety.yml").write_text("schedule: [1]\n")
    with pytest.raises(ConfigError, match=r"schedule must say how often the models run"):
        _schedule(tmp_path, None, None)
    node = SimpleNamespace(name="m", version=None, meta={"rerun_safety": {"schedule": "week"}},
                           config=SimpleNamespace(meta={}))
    assert _model_schedule(node, ("day", 86400.0, "x")) == ("week", 604800.0, "its meta.rerun_safety.schedule")
    node.meta = {}
    assert _model_schedule(node, ("day", 86400.0, "x")) == ("day", 86400.0, "x")


# --- stale-attribute -----------------------------------------------------------------------------

KINDS = {("raw", "orders"): "event", ("raw", "customers"): "state", ("raw", "countries"): "static",
         ("analytics", "customer_history"): "history"}
BATCH = f" where o.ts >= (select max(ts) - interval '3 days' from {T})"
CUSTOMERS = '"warehouse"."raw"."customers"'


def _joined(adapter, select, join, where=BATCH):
    sql = f"select o.order_id, o.ts, {select} from {SRC} o join {join} on c.customer_id = o.customer_id{where}"
    return incremental(adapter, sql, "merge", "order_id", relation_kinds=KINDS,
                       columns={"order_id": "integer", "ts": "timestamp"})


def test_stale_attribute(adapter):
    found = [f for f in run_rules(_joined(adapter, "c.segment, c.tier as level", f"{CUSTOMERS} c"))
             if f.rule == "stale-attribute"]
    assert [(f.rule, f.severity) for f in found] == [("stale-attribute", "warning")]
    assert found[0].message.startswith("segment, level copied from customers (the current state of what it describes)")


def test_stale_attribute_near_misses(adapter):
    def stale(ctx):
        return [f.rule for f in run_rules(ctx) if f.rule == "stale-attribute"]

    assert stale(_joined(adapter, "c.customer_id as cid", f"{CUSTOMERS} c")) == []  # only the join key
    assert stale(_joined(adapter, "c.segment", f"{CUSTOMERS} c", where="")) == []  # every run reads everything
    assert stale(_joined(adapter, "c.name", '"warehouse"."raw"."countries" c')) == []  # declared static
    assert stale(_joined(adapter, "c.segment", '"warehouse"."analytics"."customer_history" c')) == []  # a snapshot
    point_in_time = (f"select o.order_id, c.segment from {SRC} o join {CUSTOMERS} c on c.customer_id = o.customer_id "
                     f"and o.ts >= c.valid_from and o.ts < c.valid_to{BATCH}")
    assert stale(incremental(adapter, point_in_time, "merge", "order_id", relation_kinds=KINDS)) == []
    # a relation the lint knows nothing of (no manifest): no finding
    assert stale(incremental(adapter, f"select o.order_id, c.segment from {SRC} o join {CUSTOMERS} c "
                                      f"on c.customer_id = o.customer_id{BATCH}", "merge", "order_id")) == []


# --- round four: the grain that carries, and ties that cannot change the output --------------------

CDC = ("select * from (select *, row_number() over (partition by id order by {order}) as rn from "
       f"{SRC}) d where rn = 1")


def _severities(ctx) -> list[tuple[str, str]]:
    assert ctx.full is None or ctx.full.ok, ctx.full.error
    return sorted((f.rule, f.severity) for f in run_rules(ctx))


def test_a_cdc_dedup_ending_with_the_load_time_is_a_note(adapter):
    # copies of one row tied on the update time and the load time are one delivery: a note, not an error
    for load in ("_loaded_at", "_fivetran_synced", "_airbyte_emitted_at", "_sdc_batched_at"):
        found = run_rules(table(adapter, CDC.format(order=f"updated_at desc, {load} desc")))
        assert [(f.rule, f.severity) for f in found] == [("dedup-order-not-total", "info")], load
        assert f"ending with the load time {load}" in found[0].message
    # a load time a source declares (loaded_at_field) counts as one
    declared = table(adapter, CDC.format(order="updated_at desc, landed desc"),
                     load_times=(("shop.orders", "updated_at", "landed"),))
    assert _severities(declared) == [("dedup-order-not-total", "info")]


def test_a_cdc_dedup_without_both_times_stays_an_error(adapter):
    # the load time alone: one sync delivers two versions of a row with the same stamp
    assert _severities(table(adapter, CDC.format(order="_loaded_at desc"))) == [("dedup-order-not-total", "error")]
    # the update time alone, or a load time that is not the last tie-breaker
    assert _severities(table(adapter, CDC.format(order="updated_at desc"))) == [("dedup-order-not-total", "error")]
    assert _severities(table(adapter, CDC.format(order="_loaded_at desc, updated_at desc"))) == [
        ("dedup-order-not-total", "error")]
    # a column merely named like a time is not a load time
    assert _severities(table(adapter, CDC.format(order="updated_at desc, loaded_on desc"))) == [
        ("dedup-order-not-total", "error")]


def test_a_dedup_partitioned_by_a_key_of_what_it_reads_is_total(adapter):
    # the connector's primary key declared for the source (or a unique test on it): one row per partition
    pk = CDC.format(order="updated_at desc")
    assert rules(table(adapter, pk, keys={"raw.orders": [["id"]]})) == []
    # a key of another relation, or a key the partition does not hold, is no help
    assert rules(table(adapter, pk, keys={"raw.other": [["id"]]})) == ["dedup-order-not-total"]
    assert rules(table(adapter, pk, keys={"raw.orders": [["id", "version"]]})) == ["dedup-order-not-total"]


SPINE = ("with p as (select 0 as g union all select 1), raw as (select p0.g + 2 * p1.g as generated_number "
         "from p p0 cross join p p1), all_periods as (select cast('2020-01-01' as date) + ((interval '1 day') * "
         "(row_number() over (order by 1) - 1)) as date_day from raw) ")


def test_a_date_spine_numbers_its_rows_and_its_days_are_unique(adapter):
    # dbt_utils.date_spine: row_number() over (order by 1) keeps no column of the rows it numbers
    assert rules(table(adapter, SPINE + "select * from all_periods")) == []
    # ... and the days it makes are unique: a numbering over them is total
    assert rules(table(adapter, SPINE + "select date_day, row_number() over (order by date_day) as i "
                                        "from all_periods")) == []
    assert rules(table(adapter, SPINE + "select date_day, lag(date_day + 1) over (order by date_day) as p "
                                        "from all_periods")) == []


def test_numbering_that_keeps_a_column_or_an_unnumbered_grain_stays_an_error(adapter):
    # the numbers go with a column of the rows: ties decide which row gets which
    assert rules(table(adapter, f"select id, row_number() over (order by 1) as n from {SRC}")) == \
        ["dedup-order-not-total"]
    # which numberings make a unique column: unpartitioned, shifted by constants (not divided)
    import sqlglot

    from rerun_safety.lint.rules.keys import numbered_columns
    dialect = "duckdb" if adapter == "duckdb" else "postgres"

    def numbered(expr):
        return numbered_columns(sqlglot.parse_one(f"select {expr} as d from raw", read=dialect))
    assert numbered("cast('2020-01-01' as date) + interval '1 day' * (row_number() over (order by 1) - 1)") == ["d"]
    assert numbered("row_number() over (order by g)") == ["d"]
    assert numbered("row_number() over (partition by g % 2 order by 1)") == []
    assert numbered("row_number() over (order by 1) / 2") == []
    assert numbered("g + row_number() over (order by 1)") == []
    assert numbered("rank() over (order by g)") == []


def test_a_ctes_distinct_carries_its_grain(adapter):
    dist = (f"with d as (select distinct k, day from {SRC}), e as (select k, day, 1 as v from d) "
            "select k, day, lag(v) over (partition by k order by day) as prev from e")
    assert rules(table(adapter, dist)) == []
    # without the distinct, (k, day) repeats
    assert rules(table(adapter, dist.replace("distinct ", ""))) == ["dedup-order-not-total"]
    # a distinct over more columns than the order covers is no key of (k, day)
    wider = dist.replace("distinct k, day", "distinct k, day, v").replace("1 as v", "v")
    assert rules(table(adapter, wider)) == ["dedup-order-not-total"]


def test_a_window_over_a_grain_grouped_with_attributes_is_a_warning(adapter):
    # grouped by (month, location, store name), ordered within a location by month: ties only where one
    # location has two names in a month (the game day finds none): a warning naming the attribute
    monthly = (f"with m as (select date_trunc('month', ts) as month_start, location_id, store_name, "
               f"sum(amount) as revenue from {SRC} group by 1, 2, 3) "
               "select *, lag(revenue) over (partition by location_id order by month_start) as prev from m")
    found = run_rules(table(adapter, monthly))
    assert [(f.rule, f.severity) for f in found] == [("dedup-order-not-total", "warning")]
    assert "ties only where store_name takes two values" in found[0].message
    # ...but ordered by the month alone, every location ties: an error
    across = monthly.replace("partition by location_id order by month_start", "order by month_start")
    assert _severities(table(adapter, across)) == [("dedup-order-not-total", "error")]
    # and a key the order does not reach at all stays an error (ntile over a sum per customer)
    ntile = (f"select customer_id, ntile(4) over (partition by region order by total) as q from (select region, "
             f"customer_id, sum(amount) as total from {SRC} group by 1, 2) c")
    assert _severities(table(adapter, ntile)) == [("dedup-order-not-total", "error")]
    # the attribute dropped by a select below the grouping: still unique but for it, still a warning
    dropped = monthly.replace("select *, lag(revenue)", "select month_start, location_id, revenue, lag(revenue)")
    dropped = dropped.replace("from m", "from (select month_start, location_id, revenue from m) d")
    assert _severities(table(adapter, dropped)) == [("dedup-order-not-total", "warning")]
    # an id or a time grouped beside the partition key splits its rows: an error
    for column in ("order_id", "created_at"):
        split = monthly.replace("store_name", column)
        assert _severities(table(adapter, split)) == [("dedup-order-not-total", "error")], column
        split = dropped.replace("store_name", column)
        assert _severities(table(adapter, split)) == [("dedup-order-not-total", "error")], column


def test_a_join_on_equal_columns_carries_the_partition(adapter):
    # joined on m.location_id = s.store_id: partitioned by one is partitioned by the other
    joined = (f"with m as (select month_start, location_id, sum(amount) as revenue from {SRC} group by 1, 2), "
              "s as (select month_start, store_id, count(*) as n from " + SRC + " group by 1, 2) "
              "select m.month_start, m.location_id, lag(s.n) over (partition by m.location_id order by m.month_start) "
              "as prev from m join s on m.location_id = s.store_id and m.month_start = s.month_start")
    assert rules(table(adapter, joined)) == []
    # ...not when the join does not equate them (only the month): many stores per location
    loose = joined.replace("m.location_id = s.store_id and ", "")
    assert rules(table(adapter, loose)) == ["dedup-order-not-total"]


def test_a_limit_after_an_order_with_ties(adapter):
    # the top 10 by amount: rows tied at the cut are kept or left arbitrarily
    top = f"select id, amount from {SRC} order by amount desc limit 10"
    found = run_rules(table(adapter, top, unique_columns=["id"]))
    assert [(f.rule, f.severity) for f in found] == [("dedup-order-not-total", "error")]
    assert "LIMIT 10" in found[0].message and "not a total order" in found[0].message
    # a unique tie-breaker, or an order by a grouped key, makes the cut exact
    assert rules(table(adapter, top.replace("amount desc", "amount desc, id"), unique_columns=["id"])) == []
    grouped = f"select k, sum(amount) as total from {SRC} group by k order by k limit 5"
    assert rules(table(adapter, grouped, unique_columns=["id"])) == []
    # limit 0, and a limit inside exists, pick nothing
    assert rules(table(adapter, top.replace("limit 10", "limit 0"), unique_columns=["id"])) == []
    exists = f"select id from {SRC} s where exists (select 1 from {SRC} t order by t.amount limit 1)"
    assert rules(table(adapter, exists, unique_columns=["id"])) == []
