{{ config(materialized='table') }}
-- Monitoring that reads the same table it should watch: it counts what the watermark model kept.
select cast(date_trunc('day', event_time) as date) as day, count(*) as events
from {{ ref('events_watermark') }}
group by 1
