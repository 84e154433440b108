{{ config(materialized='incremental', incremental_strategy='append', unique_key='event_id', event_time='event_time') }}
-- UNSAFE: unique_key is configured, but the append strategy ignores it.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
