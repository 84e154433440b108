{#- A rerun appended the last day a second time. -#}
select * from {{ ref('data_events') }}
union all
select * from {{ ref('data_events') }} where event_date = (select max(event_date) from {{ ref('data_events') }})
