{{ config(materialized='incremental', incremental_strategy='partition_overwrite',
          partition_key={'field': 'event_day', 'granularity': 'day'}) }}
-- SAFE: replaces whole days, and the lookback starts at a day boundary.
select *, cast(date_trunc('day', event_time) as date) as event_day
from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select date_trunc('day', max(event_time) - interval '3 days') from {{ this }})
{% endif %}
