{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id') }}
-- SAFE: merge on the key absorbs the re-read rows.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
