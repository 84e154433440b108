"""`rerun-safety lint` on a project written as a new user would (ordinary SQL, several sources,
the package's own `deduplicate`, catalog introspection), on DuckDB and PostgreSQL: it errs on
exactly the unsafe models, with the right rules, and on nothing else."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.common import REPO_ROOT, load_duckdb_with, load_postgres_with, write_profiles
from rerun_safety.cli import main

SHIM = ("{% macro get_incremental_partition_overwrite_sql(arg_dict) %}\n"
        "  {{ return(rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)) }}\n{% endmacro %}\n")

SOURCES = """version: 2
sources:
  - name: shop
    schema: shop_raw
    tables:
      - name: orders
      - name: customers
      - name: events
models:
  - name: stg_orders
    columns:
      - name: order_id
        data_tests: [unique]
"""

# model name -> (SQL, rules expected at error severity)
MODELS: dict[str, tuple[str, list[str]]] = {
    "stg_orders": ("select order_id, customer_id, amount, ordered_at, updated_at from {{ source('shop', 'orders') }}\n",
                   []),
    # the package's own dedup over a source, and over a model
    "stg_events": ("{{ rerun_safety.deduplicate(source('shop', 'events'), 'event_id', 'loaded_at') }}\n", []),
    "customers_latest": ("{{ config(materialized='table') }}\n"
                         "{{ rerun_safety.deduplicate(ref('stg_customers'), 'customer_id', 'updated_at') }}\n", []),
    "stg_customers": ("select customer_id, name, email, updated_at from {{ source('shop', 'customers') }}\n", []),
    # a seed never loaded into the target (a new user before `dbt seed`): its columns come from the CSV
    "countries_latest": ("{{ rerun_safety.deduplicate(ref('countries'), 'code', 'updated_at') }}\n", []),
    # the catalog read at compile time, as dbt_utils.star does
    "orders_columns": ("{{ config(materialized='table') }}\n"
                       "{%- set cols = adapter.get_columns_in_relation(ref('stg_orders')) -%}\n"
                       "select {% for c in cols %}{{ c.name }}{% if not loop.last %}, {% endif %}{% endfor %}\n"
                       "from {{ ref('stg_orders') }}\n", []),
    "event_types": ("{{ config(materialized='table') }}\n"
                    "{%- set rows = run_query('select count(*) from ' ~ ref('stg_events')) -%}\n"
                    "select event_type, count(*) as n from {{ ref('stg_events') }} group by event_type\n", []),
    # a date-aligned lookback on a DATE partition key: safe
    "daily_events": ("{{ config(materialized='incremental', incremental_strategy='partition_overwrite',\n"
                     "           partition_key='event_date') }}\n"
                     "select cast(event_ts as date) as event_date, event_type, count(*) as n\n"
                     "from {{ ref('stg_events') }}\n"
                     "{% if is_incremental() %}\n"
                     "where cast(event_ts as date) >= (select max(event_date) - 2 from {{ this }})\n"
                     "{% endif %}\ngroup by 1, 2\n", []),
    "orders_merged": ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}\n"
                      "select * from {{ ref('stg_orders') }}\n"
                      "{% if is_incremental() %}\n"
                      "where updated_at >= (select max(updated_at) - interval '3 days' from {{ this }})\n"
                      "{% endif %}\n", []),
    # the clock in a table rebuilt in full that feeds nothing incremental: a note, not an error
    "orders_report": ("{{ config(materialized='table') }}\n"
                      "select current_date as built_on, count(*) as orders from {{ ref('stg_orders') }}\n", []),
    # UNSAFE: a running total read back from its own previous output
    "running_revenue": ("{{ config(materialized='incremental', incremental_strategy='delete+insert',\n"
                        "           unique_key='order_day') }}\n"
                        "with daily as (\n"
                        "  select cast(ordered_at as date) as order_day, sum(amount) as amount\n"
                        "  from {{ ref('stg_orders') }}\n"
                        "  {% if is_incremental() %}\n"
                        "  where ordered_at >= (select max(order_day) from {{ this }})\n"
                        "  {% endif %}\n"
                        "  group by 1\n)\n"
                        "select d.order_day, d.amount,\n"
                        "{% if is_incremental() %} d.amount + coalesce(p.running_total, 0)\n"
                        "{% else %} sum(d.amount) over (order by d.order_day) {% endif %} as running_total\n"
                        "from daily d\n"
                        "{% if is_incremental() %}left join {{ this }} p on p.order_day = d.order_day - 1{% endif %}\n",
                        ["self-state"]),
    # UNSAFE: the batch is the last 14 days before whenever it runs
    "recent_orders": ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}\n"
                      "select * from {{ ref('stg_orders') }}\n"
                      "where cast(ordered_at as date) >= current_date - 14\n", ["clock-window"]),
    # the last week re-read on every run and replaced by key: a rerun reads the same or a larger
    # window, so a warning (gaps and backfills), not an error
    "orders_last_week": ("{{ config(materialized='incremental', incremental_strategy='delete+insert',\n"
                         "           unique_key='order_id') }}\n"
                         "select o.order_id, o.amount, o.ordered_at from {{ ref('stg_orders') }} o\n"
                         "{% if is_incremental() %} where o.ordered_at >= current_date - 7 {% endif %}\n", []),
    # UNSAFE: the same window appended: a rerun appends the week again
    "orders_last_week_appended": ("{{ config(materialized='incremental', incremental_strategy='append') }}\n"
                                  "select o.order_id, o.amount, o.ordered_at from {{ ref('stg_orders') }} o\n"
                                  "{% if is_incremental() %} where o.ordered_at >= current_date - 7 {% endif %}\n",
                                  ["append-reread", "clock-window"]),
    # an aggregate by day keyed (on PostgreSQL) on its event_time column: each batch recomputes and
    # upserts whole days, a note on PostgreSQL
    "page_views_daily": ("{{ config(materialized='incremental', incremental_strategy='microbatch',\n"
                         "           event_time='view_date', batch_size='day', lookback=1, begin='2024-01-01',\n"
                         "           unique_key=('view_date' if target.type == 'postgres' else none)) }}\n"
                         "select cast(event_ts as date) as view_date, count(*) as views\n"
                         "from {{ ref('stg_events') }}\ngroup by 1\n", []),
    # UNSAFE: partition_key misspelt
    "orders_by_day": ("{{ config(materialized='incremental', incremental_strategy='partition_overwrite',\n"
                      "           partition_key='order_dte') }}\n"
                      "select cast(ordered_at as date) as order_date, order_id, amount from {{ ref('stg_orders') }}\n"
                      "{% if is_incremental() %}\n"
                      "where cast(ordered_at as date) >= (select max(order_date) - 1 from {{ this }})\n"
                      "{% endif %}\n", ["config-column-missing"]),
    # UNSAFE: day partitions replaced by a batch that starts 6 hours before the watermark (and 6 hours is less
    # than one daily run: a half-committed run's older rows are never read again)
    "events_hourly_lookback": ("{{ config(materialized='incremental', incremental_strategy='partition_overwrite',\n"
                               "           partition_key='event_date') }}\n"
                               "select event_id, event_ts, cast(event_ts as date) as event_date, event_type\n"
                               "from {{ ref('stg_events') }}\n"
                               "{% if is_incremental() %}\n"
                               "where event_ts >= (select max(event_ts) - interval '6 hours' from {{ this }})\n"
                               "{% endif %}\n", ["partition-lookback-unaligned", "window-shorter-than-run"]),
    # UNSAFE: the latest order per customer, ties on ordered_at broken arbitrarily after a join
    "last_order": ("{{ config(materialized='table') }}\n"
                   "select * from (\n"
                   "  select o.order_id, o.customer_id, c.name, o.ordered_at,\n"
                   "         row_number() over (partition by o.customer_id order by o.ordered_at desc) as rn\n"
                   "  from {{ ref('stg_orders') }} o join {{ ref('customers_latest') }} c on c.customer_id = o.customer_id\n"
                   ") x where rn = 1\n", ["dedup-order-not-total"]),
    # UNSAFE: a window on the clock built in Jinja (the SQL holds a literal date by the time it is read),
    # appended whole on every run
    "orders_jinja_week": ("{{ config(materialized='incremental', incremental_strategy='append') }}\n"
                          "{% set since = modules.datetime.date.today() - modules.datetime.timedelta(days=7) %}\n"
                          "select order_id, amount, ordered_at from {{ ref('stg_orders') }}\n"
                          "where ordered_at >= '{{ since }}'\n", ["append-reread", "clock-window"]),
    # SAFE: the same shape over a var with a fixed default (the clock is not read)
    "orders_since_var": ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}\n"
                         "select order_id, amount, ordered_at from {{ ref('stg_orders') }}\n"
                         "where ordered_at >= '{{ var(\"orders_since\", \"2024-01-01\") }}'\n", []),
    # SAFE: a day-over-day change read from a model that groups by the day: its grain (one row a day)
    # comes through ref() as it does through a CTE, so the order by the day cannot tie
    "orders_daily": ("{{ config(materialized='table') }}\n"
                     "select cast(ordered_at as date) as order_day, sum(amount) as amount\n"
                     "from {{ ref('stg_orders') }} group by 1\n", []),
    "orders_daily_change": ("{{ config(materialized='table') }}\n"
                            "select order_day, amount - lag(amount) over (order by order_day) as change\n"
                            "from {{ ref('orders_daily') }}\n", []),
    # SAFE: a table stamps each order's age from the clock, but the incremental model below it does not
    # read that column: no rerun carries it (a note)
    "orders_aged": ("{{ config(materialized='table') }}\n"
                    "select order_id, amount, ordered_at, current_date - cast(ordered_at as date) as age_days\n"
                    "from {{ ref('stg_orders') }}\n", []),
    "orders_kept": ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}\n"
                    "select order_id, amount, ordered_at from {{ ref('orders_aged') }}\n"
                    "{% if is_incremental() %}\n"
                    "where ordered_at >= (select max(ordered_at) - interval '3 days' from {{ this }})\n"
                    "{% endif %}\n", []),
    # UNSAFE: the same age, read by the incremental model below it: rows written on other days keep other ages
    "orders_aged_read": ("{{ config(materialized='table') }}\n"
                         "select order_id, ordered_at, current_date - cast(ordered_at as date) as age_days\n"
                         "from {{ ref('stg_orders') }}\n", ["nondeterministic-function"]),
    "orders_kept_aged": ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}\n"
                         "select order_id, ordered_at, age_days from {{ ref('orders_aged_read') }}\n"
                         "{% if is_incremental() %}\n"
                         "where ordered_at >= (select max(ordered_at) - interval '3 days' from {{ this }})\n"
                         "{% endif %}\n", []),
    # UNSAFE: the same change over orders, where many orders share a time: lag picks among ties
    "orders_change": ("{{ config(materialized='table') }}\n"
                      "select order_id, amount - lag(amount) over (order by ordered_at) as change\n"
                      "from {{ ref('stg_orders') }}\n", ["dedup-order-not-total"]),
}


def _load(execute, executemany) -> None:
    execute("create schema if not exists shop_raw")
    execute("create table shop_raw.orders (order_id integer, customer_id integer, amount numeric(12, 2), "
            "ordered_at timestamp, updated_at timestamp)")
    execute("create table shop_raw.customers (customer_id integer, name varchar, email varchar, updated_at timestamp)")
    execute("create table shop_raw.events (event_id integer, event_ts timestamp, event_type varchar, "
            "loaded_at timestamp)")
    executemany("insert into shop_raw.orders values (%s, %s, %s, %s, %s)",
                [(i, i % 7, 10 + i, f"2024-01-{1 + i % 20:02d} 10:00:00", f"2024-01-{1 + i % 20:02d} 11:00:00")
                 for i in range(40)])
    executemany("insert into shop_raw.customers values (%s, %s, %s, %s)",
                [(i, f"c{i}", f"c{i}@x.org", "2024-01-01 00:00:00") for i in range(7)])
    executemany("insert into shop_raw.events values (%s, %s, %s, %s)",
                [(i % 30, f"2024-01-{1 + i % 20:02d} 0{i % 10}:00:00", "click", f"2024-01-{1 + i % 20:02d} 12:00:00")
                 for i in range(60)])


def _project(root: Path, engine: str) -> Path:
    project = root / "newshop"
    (project / "models").mkdir(parents=True)
    (project / "macros").mkdir()
    (project / "dbt_project.yml").write_text(
        "name: newshop\nversion: '1.0.0'\nconfig-version: 2\nprofile: newshop\n"
        "models:\n  newshop:\n    +materialized: view\n")
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (project / "macros" / "get_incremental_partition_overwrite_sql.sql").write_text(SHIM)
    (project / "models" / "sources.yml").write_text(SOURCES)
    (project / "seeds").mkdir()
    (project / "seeds" / "countries.csv").write_text("code,name,updated_at\nFR,France,2024-01-01\nDE,Germany,2024-01-02\n")
    for name, (sql, _) in MODELS.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    if engine == "duckdb":  # a Python model: one note, never a parse error
        (project / "models" / "py_scores.py").write_text(
            "def model(dbt, session):\n    dbt.config(materialized='table')\n"
            "    return dbt.ref('stg_orders').filter('amount > 20')\n")
    return project


@pytest.fixture
def newshop(engine, tmp_path, request):
    project = _project(tmp_path, engine)
    profiles = tmp_path / "profiles"
    if engine == "duckdb":
        path = tmp_path / "newshop.duckdb"
        load_duckdb_with(str(path), _load)
        write_profiles(profiles, "newshop", {"type": "duckdb", "path": str(path), "schema": "analytics",
                                             "threads": 1})
    else:
        server = request.getfixturevalue("pg_server")
        dbname = request.getfixturevalue("pg_database")
        load_postgres_with(server.dsn(dbname), _load)
        write_profiles(profiles, "newshop", {"type": "postgres", "host": server.host, "port": server.port,
                                             "user": server.user, "password": "", "dbname": dbname,
                                             "schema": "analytics", "threads": 1})
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke(["deps", "--project-dir", str(project), "--profiles-dir", str(profiles),
                              "--log-path", str(tmp_path / "deps_logs"), "--quiet"])
    assert res.success, res.exception
    return project, profiles


def _lint(project: Path, profiles: Path, *extra: str):
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                    "--format", "json", *extra], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)


def test_new_user_project_errs_on_exactly_the_unsafe_models(newshop, engine):
    project, profiles = newshop
    code, doc = _lint(project, profiles)
    errors: dict[str, list[str]] = {}
    for f in doc["findings"]:
        if f["severity"] == "error":
            errors.setdefault(f["model"], []).append(f["rule"])
    expected = {name: sorted(rules) for name, (_, rules) in MODELS.items() if rules}
    assert {k: sorted(v) for k, v in errors.items()} == expected, doc["findings"]
    assert code == 1
    # no compile problem anywhere: deduplicate, get_columns_in_relation and run_query all compiled
    assert [f for f in doc["findings"] if f["rule"] in ("compile-error", "sql-parse-error")] == []
    notes = sorted((f["model"], f["rule"]) for f in doc["findings"] if f["severity"] == "info")
    expected_notes = [("orders_aged", "nondeterministic-function"), ("orders_report", "nondeterministic-function")]
    if engine == "duckdb":
        expected_notes.append(("py_scores", "python-model"))
    else:
        expected_notes.append(("page_views_daily", "microbatch-postgres"))
    assert notes == expected_notes
    assert [(f["model"], f["rule"]) for f in doc["findings"] if f["severity"] == "warning"] == \
        [("orders_last_week", "clock-window")]
    assert doc["summary"]["models"] == len(MODELS) + (1 if engine == "duckdb" else 0)
    # the fix text comes with each finding
    assert all(f["hint"] for f in doc["findings"] if f["severity"] == "error")

    # the incremental branches compiled in a second process (on PostgreSQL it points its own
    # manifest at the scratch database) give the same errors
    from rerun_safety.lint import run_lint

    parallel = run_lint(project_dir=project, profiles_dir=profiles, parallel=True)
    assert "pass2_process_parse" in parallel.timings
    got: dict[str, list[str]] = {}
    for f in parallel.findings:
        if f.severity == "error":
            got.setdefault(f.model, []).append(f.rule)
    assert {k: sorted(v) for k, v in got.items()} == expected

    # the safe models alone: exit 0
    safe = " ".join(name for name, (_, rules) in MODELS.items() if not rules)
    code, doc = _lint(project, profiles, "--select", safe)
    assert code == 0, [f for f in doc["findings"] if f["severity"] == "error"]


def test_a_model_that_cannot_compile_is_a_warning_naming_why(newshop):
    project, profiles = newshop
    sources = project / "models" / "sources.yml"
    sources.write_text(sources.read_text().replace("      - name: events\n",
                                                   "      - name: events\n      - name: ghost\n"))
    (project / "models" / "ghost_latest.sql").write_text(
        "{{ rerun_safety.deduplicate(source('shop', 'ghost'), 'id', 'ts') }}\n")
    code, doc = _lint(project, profiles, "--select", "ghost_latest stg_orders")
    assert code == 0
    assert [(f["model"], f["rule"], f["severity"]) for f in doc["findings"]] == \
        [("ghost_latest", "compile-error", "warning")]
    assert "source shop.ghost" in doc["findings"][0]["message"]


def test_selection_of_one_model_compiles_its_upstream(newshop):
    """Selected alone, an incremental model over a deduplicated source still gets its real
    columns: the unselected models upstream (one of them introspecting) are compiled and created."""
    project, profiles = newshop
    code, doc = _lint(project, profiles, "--select", "daily_events events_hourly_lookback")
    assert code == 1
    assert [(f["model"], f["rule"], f["severity"]) for f in doc["findings"]] == \
        [("events_hourly_lookback", "partition-lookback-unaligned", "error"),
         ("events_hourly_lookback", "window-shorter-than-run", "error")]  # 6 hours, under a daily default
    assert doc["summary"]["models"] == 2
