"""Models of the shop with one defect each that a fix candidate mends (test_fixes.py on DuckDB,
test_fix_shapes_postgres.py on PostgreSQL)."""

RUN_LOGGED = ("{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',\n"
              "          post_hook=\"insert into {{ source('audit', 'run_log') }} select 'events_logged', count(*) "
              "from {{ this }}\") }}\n"
              "select event_id, amount, event_time from {{ ref('stg_events') }}\n"
              "{% if is_incremental() %}\n"
              "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
              "{% endif %}\n")


DAY_AMOUNTS = ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='day') }}\n"
               "select cast(event_time as date) as day, sum(amount) as amount, count(*) as events\n"
               "from {{ ref('stg_events') }}\n"
               "{% if is_incremental() %}\nwhere cast(event_time as date) > (select max(day) from {{ this }})\n"
               "{% endif %}\ngroup by 1\n")


MICROBATCH = ("{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_time',\n"
              "          batch_size='day', begin='2026-01-01', lookback=0,\n"
              "          unique_key=('event_id' if target.type == 'postgres' else none)) }}\n"
              "select event_id, amount, event_time from {{ source('raw', 'events') }}\n")
