{{ config(materialized='table', post_hook="{{ rerun_safety.record_batch() }}") }}

select * from {{ ref('data_events') }}
where {{ rerun_safety.window_filter('event_at', lookback=1, grain='day') }}
