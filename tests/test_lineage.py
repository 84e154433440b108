"""output_time_column: which output column of a model carries its inputs' time, from compiled SQL.
Pure: sqlglot only, no warehouse."""
from __future__ import annotations

import pytest

from rerun_safety.gameday.lineage import output_time_column

ORDERS = '"warehouse"."main"."stg_orders"'
CUSTOMERS = '"warehouse"."main"."dim_customers"'
INPUTS = {"stg_orders": "ordered_at", "raw_events": "event_ts"}
BOTH = ("duckdb", "postgres")


def otc(sql: str, dialect: str = "duckdb", inputs=INPUTS):
    return output_time_column(sql, dialect, inputs)


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("sql", "expected"), [
    # passed on as it is
    (f"select * from {ORDERS}", "ordered_at"),
    (f"select o.* from {ORDERS} as o", "ordered_at"),
    (f"select order_id, ordered_at, amount from {ORDERS}", "ordered_at"),
    (f"select o.order_id, o.ordered_at from {ORDERS} o", "ordered_at"),
    # renamed, cast, truncated, shifted
    (f"select order_id, ordered_at as order_time from {ORDERS}", "order_time"),
    (f"select cast(ordered_at as date) as day, count(*) as n from {ORDERS} group by 1", "day"),
    (f"select ordered_at::date as order_date from {ORDERS}", "order_date"),
    (f"select date_trunc('day', ordered_at) as day, sum(amount) as revenue from {ORDERS} group by date_trunc('day', ordered_at)", "day"),
    (f"select date_trunc('month', o.ordered_at) as month, count(*) from {ORDERS} o group by 1", "month"),
    (f"select ordered_at + interval '2 hours' as local_time from {ORDERS}", "local_time"),
    (f"select (ordered_at) as t from {ORDERS}", "t"),
    (f"select coalesce(ordered_at, cast('1970-01-01' as timestamp)) as t from {ORDERS}", "t"),
    (f"select cast(ordered_at as timestamp) as ts from {ORDERS}", "ts"),
    # through CTEs and subqueries
    (f"with src as (select * from {ORDERS}), daily as (select cast(ordered_at as date) as d, count(*) as n "
     f"from src group by 1) select d as order_day, n from daily", "order_day"),
    (f"select day, n from (select date_trunc('day', ordered_at) as day, count(*) as n from {ORDERS} group by 1) as x",
     "day"),
    (f"with a as (select ordered_at as t1 from {ORDERS}), b as (select t1 as t2 from a), c as (select * from b) "
     f"select t2 from c", "t2"),
    # joins: the time comes from one side
    (f"select c.customer_name, o.order_id, o.ordered_at from {ORDERS} o join {CUSTOMERS} c on o.customer_id = c.id",
     "ordered_at"),
    (f"select c.*, o.ordered_at as bought_at from {CUSTOMERS} c left join {ORDERS} o using (customer_id)", "bought_at"),
    (f"select c.name, x.day from {CUSTOMERS} c join (select customer_id, cast(ordered_at as date) as day "
     f"from {ORDERS}) x on x.customer_id = c.id", "day"),
    # union all: named by the first branch
    (f"select order_id as id, ordered_at as t from {ORDERS} union all "
     f"select event_id, event_ts from \"warehouse\".\"main\".\"raw_events\"", "t"),
    (f"select event_id as id, null as t from \"warehouse\".\"main\".\"raw_events\" union all "
     f"select order_id, ordered_at from {ORDERS}", "t"),
    # an aggregate that is a time per group counts when nothing more direct is there
    (f"select customer_id, max(ordered_at) as last_seen from {ORDERS} group by 1", "last_seen"),
    (f"select customer_id, min(ordered_at) as first_seen, count(*) as n from {ORDERS} group by 1", "first_seen"),
    (f"select cast(ordered_at as date) as day, max(ordered_at) as last_order from {ORDERS} group by 1", "day"),
    (f"select max(ordered_at) as last_order, cast(ordered_at as date) as day from {ORDERS} group by 2", "day"),
])
def test_traced(sql, expected, dialect):
    assert otc(sql, dialect) == expected


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize("sql", [
    f"select count(*) as n from {ORDERS}",
    f"select customer_id, count(ordered_at) as orders from {ORDERS} group by 1",
    f"select extract(year from ordered_at) as y, count(*) from {ORDERS} group by 1",
    f"select cast(ordered_at as varchar) as label from {ORDERS}",
    f"select order_id, amount from {ORDERS}",
    f"select * from {CUSTOMERS}",
    f"select 1 as one",
    f"select row_number() over (order by ordered_at) as rn from {ORDERS}",
    f"select max(ordered_at) over (partition by customer_id) as last_seen from {ORDERS}",
    "this is not sql (",
    "",
])
def test_not_traced(sql, dialect):
    assert otc(sql, dialect) is None


def test_select_star_exclude_and_replace_duckdb():
    assert otc(f"select * exclude (ordered_at) from {ORDERS}") is None
    assert otc(f"select * replace (cast(ordered_at as date) as ordered_at) from {ORDERS}") == "ordered_at"
    assert otc(f"select * replace (order_id as ordered_at) from {ORDERS}") is None


def test_postgres_folds_unquoted_names_duckdb_keeps_them():
    sql = f'select cast(ordered_at as date) as OrderDay from {ORDERS}'
    assert otc(sql, "postgres") == "orderday"
    assert otc(sql, "duckdb") == "OrderDay"
    assert otc(f'select ordered_at as "OrderDay" from {ORDERS}', "postgres") == "OrderDay"


def test_input_keys_are_table_names_matched_without_case_or_schema():
    assert otc(f"select * from {ORDERS}", inputs={"STG_ORDERS": "ordered_at"}) == "ordered_at"
    assert otc(f"select * from {ORDERS}", inputs={"main.stg_orders": "ordered_at"}) == "ordered_at"
    assert otc("select * from stg_orders", inputs={"stg_orders": "ordered_at"}) == "ordered_at"
    assert otc(f"select * from {ORDERS}", inputs={"orders": "ordered_at"}) is None
    # the time column name itself is matched case-insensitively
    assert otc(f"select ORDERED_AT as t from {ORDERS}") == "t"


def test_a_cte_shadows_an_input_of_the_same_name():
    sql = (f"with stg_orders as (select order_id, 1 as ordered_at from {CUSTOMERS}) "
           "select ordered_at from stg_orders")
    assert otc(sql) is None


def test_union_all_by_name_duckdb():
    sql = (f"select order_id, ordered_at as t from {ORDERS} union all by name "
           f"select event_id as order_id, event_ts as t from \"w\".\"main\".\"raw_events\"")
    assert otc(sql) == "t"


def test_except_takes_the_left_branch_only():
    sql = (f"select order_id, 1 as x from {ORDERS} except "
           f"select event_id, event_ts from \"w\".\"main\".\"raw_events\"")
    assert otc(sql) is None


def test_time_bucket_and_date_function():
    assert otc(f"select time_bucket(interval '1 hour', ordered_at) as hour, count(*) from {ORDERS} group by 1") == "hour"
    assert otc(f"select date(ordered_at) as d from {ORDERS}", "postgres") == "d"
    assert otc(f"select ordered_at at time zone 'UTC' as utc_time from {ORDERS}", "postgres") == "utc_time"


def test_first_column_wins_among_equally_direct_ones():
    sql = f"select cast(ordered_at as date) as day, ordered_at from {ORDERS}"
    assert otc(sql) == "day"
    assert otc(f"select *, cast(ordered_at as date) as day from {ORDERS}") == "ordered_at"


def test_compiled_dbt_model_with_window_filter_and_semicolon():
    sql = f"""
    with source as (
        select * from {ORDERS}
        where ordered_at >= cast('2024-01-01' as timestamp) and ordered_at < cast('2024-01-02' as timestamp)
    ),
    deduped as (
        select *, row_number() over (partition by order_id order by ordered_at desc, order_id) as _rn
        from source
    )
    select order_id, customer_id, amount, date_trunc('day', ordered_at) as order_date
    from deduped where _rn = 1;
    """
    assert otc(sql) == otc(sql, "postgres") == "order_date"


@pytest.mark.parametrize("dialect", BOTH)
def test_shop_models_as_dbt_compiles_them(dialect):
    inputs = {"events_append_lookback": "event_time", "stg_events": "event_time", "dim_users": ""}
    daily = """-- Downstream of an unsafe model: inherits its duplicates.
select cast(date_trunc('day', e.event_time) as date) as day,
       count(*) as orders,
       sum(e.amount * u.rate_to_usd) as revenue_usd
from "shop"."main"."events_append_lookback" e
join "shop"."main"."dim_users" u on u.user_id = e.user_id
where e.event_type = 'order'
group by 1"""
    assert output_time_column(daily, dialect, inputs) == "day"
    lookback = """select * from "shop"."main"."stg_events"
where event_time >= (select max(event_time) - interval '3 days' from "shop"."main"."events_append_lookback")"""
    assert output_time_column(lookback, dialect, inputs) == "event_time"
    scored = 'select event_id, amount, random() as sample_score from "shop"."main"."stg_events"'
    assert output_time_column(scored, dialect, inputs) is None


def test_unknown_dialect_is_a_caller_error():
    with pytest.raises(ValueError):
        output_time_column(f"select * from {ORDERS}", "duckdbb", INPUTS)


@pytest.mark.parametrize("dialect", BOTH)
def test_nested_time_arithmetic_and_distinct(dialect):
    assert otc(f"select date_trunc('day', ordered_at)::date as d from {ORDERS}", dialect) == "d"
    assert otc(f"select date_trunc('day', ordered_at) + interval '1 day' - interval '1 second' as day_end "
               f"from {ORDERS}", dialect) == "day_end"
    assert otc(f"select distinct customer_id, cast(ordered_at as date) as day from {ORDERS}", dialect) == "day"
    # a time of day alone is not a time axis
    assert otc(f"select cast(ordered_at as time) as t from {ORDERS}", dialect) is None
