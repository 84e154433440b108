{{ config(materialized='incremental', incremental_strategy='append') }}
-- UNSAFE: re-reads the last hour on every run and appends it again.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
