{#- A daily aggregate under its own names: revenue per revenue_date, orders counted by order_id. -#}
select event_date as revenue_date, sum(amount) as revenue, count(*) as orders
from {{ ref('data_events') }}
group by event_date
