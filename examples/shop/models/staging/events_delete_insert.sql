{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}
-- SAFE: the lookback re-reads rows, and delete+insert on the key replaces them.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
