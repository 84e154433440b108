{{ config(materialized='incremental', incremental_strategy='partition_overwrite',
          partition_key={'field': 'event_day', 'granularity': 'day'}) }}
-- UNSAFE: replaces whole days with a batch that starts 9 seconds before the watermark,
-- so the latest day is replaced by its last few seconds.
select *, cast(date_trunc('day', event_time) as date) as event_day
from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '9 seconds' from {{ this }})
{% endif %}
