{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',
          post_hook=[
            "delete from {{ source('audit', 'batch_totals') }} where batch_day in (select distinct cast(event_time as date) from {{ this }})",
            "insert into {{ source('audit', 'batch_totals') }} select cast(event_time as date), count(*) from {{ this }} group by 1",
            "insert into {{ source('audit', 'run_log') }} select 'events_totalled', count(*) from {{ this }}"],
          meta={'rerun_safety': {'log_tables': ['audit.run_log']}}) }}
-- SAFE: its post-hook replaces the per-day totals it covers (delete + insert), and appends to a run
-- log that is declared as one row per run.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
