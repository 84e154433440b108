{{ config(materialized='incremental', incremental_strategy='append', event_time='event_time') }}
-- UNSAFE: re-reads the last 3 days on every run and appends them again.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
