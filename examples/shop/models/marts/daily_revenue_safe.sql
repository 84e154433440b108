{{ config(materialized='table') }}
-- Downstream of a safe model: safe.
select cast(date_trunc('day', event_time) as date) as day, count(*) as orders, sum(amount) as revenue
from {{ ref('events_delete_insert') }}
where event_type = 'order'
group by 1
