{{ config(materialized='incremental', incremental_strategy='append') }}
-- UNSAFE: a strict watermark. After a half-committed batch, max(event_time) has moved past
-- rows that never landed, and the rerun skips them for good.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time > (select max(event_time) from {{ this }})
{% endif %}
