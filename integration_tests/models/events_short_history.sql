{#- Only the last three days: too little history for a volume band. -#}
select * from {{ ref('data_events') }} where event_date >= cast('2026-02-07' as date)
