{# dbt-duckdb replaces each batch's window and refuses a unique_key; dbt-postgres merges on one. #}
{{ config(materialized='incremental', incremental_strategy='microbatch',
          event_time='event_time', batch_size='day', begin='2026-03-01', lookback=2,
          unique_key=('event_id' if target.type == 'postgres' else none)) }}
-- SAFE: each batch covers whole days, a rerun of a day rewrites that day, and two days of lookback
-- cover events that land up to a day late.
select * from {{ ref('stg_events') }}
