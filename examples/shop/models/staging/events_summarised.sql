{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',
          post_hook="insert into {{ source('audit', 'batch_summary') }} select cast(max(event_time) as date), count(*) from {{ this }}") }}
-- UNSAFE (side effect): the model itself converges, but its post-hook appends a summary row on every
-- run, so a rerun doubles what audit.batch_summary says.
select * from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select max(event_time) - interval '3 days' from {{ this }})
{% endif %}
