{{ config(materialized='table') }}
-- Downstream of an unsafe model: inherits its duplicates.
select cast(date_trunc('day', e.event_time) as date) as day,
       count(*) as orders,
       sum(e.amount * u.rate_to_usd) as revenue_usd
from {{ ref('events_append_lookback') }} e
join {{ ref('dim_users') }} u on u.user_id = e.user_id
where e.event_type = 'order'
group by 1
