{{ config(materialized='table', post_hook="{{ rerun_safety.record_batch() }}") }}

select * from {{ ref('data_events') }}
