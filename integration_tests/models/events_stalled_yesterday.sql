{#- The same events with the load stalled: nothing yesterday, nothing today. -#}
select * from {{ ref('events_relative_to_now') }}
where event_at < cast(date_trunc('day', cast(current_timestamp as timestamp)) as timestamp) - interval '1 day'
