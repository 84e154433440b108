{# dbt-duckdb replaces each batch's window and refuses a unique_key; dbt-postgres merges on one;
   dbt-spark overwrites the batch's partitions and needs a partition_by column of the batch's grain. #}
{{ config(materialized='incremental', incremental_strategy='microbatch',
          event_time='event_time', batch_size='day', begin='2026-03-01', lookback=2,
          unique_key=('event_id' if target.type == 'postgres' else none),
          partition_by=(['event_day'] if target.type == 'spark' else none)) }}
-- SAFE: each batch covers whole days, a rerun of a day rewrites that day, and two days of lookback
-- cover events that land up to a day late.
select *{{ spark_day_column() }} from {{ ref('stg_events') }}
