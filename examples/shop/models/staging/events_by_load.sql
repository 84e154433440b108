{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id') }}
-- SAFE: reads by the time rows were loaded, with a day of lookback, and merges on the key, so rows
-- that land late are still picked up.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where loaded_at >= (select max(loaded_at) - interval '1 day' from {{ this }})
{% endif %}
