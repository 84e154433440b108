{#- The last day lost half of its events and the other half arrived twice: count(*) looks normal. -#}
with last_day as (select max(event_date) as d from {{ ref('data_events') }})
select e.* from {{ ref('data_events') }} as e, last_day where e.event_date < last_day.d
union all
select e.* from {{ ref('data_events') }} as e, last_day where e.event_date = last_day.d and e.event_id % 2 = 0
union all
select e.* from {{ ref('data_events') }} as e, last_day where e.event_date = last_day.d and e.event_id % 2 = 0
