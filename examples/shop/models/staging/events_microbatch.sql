{{ config(materialized='incremental', incremental_strategy='microbatch',
          event_time='event_time', batch_size='day', begin='2026-03-01', lookback=1) }}
-- SAFE on DuckDB: each batch replaces its own day.
select * from {{ ref('stg_events') }}
