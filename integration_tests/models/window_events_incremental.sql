{#- Spark has no delete+insert: the package's partition_overwrite replaces the window's whole
    days there (the window is aligned to the grain), with the same result. -#}
{% if target.type == 'spark' %}
{{ config(
    materialized='incremental',
    incremental_strategy='partition_overwrite',
    partition_key='event_date',
    post_hook="{{ rerun_safety.record_batch() }}"
) }}
{% else %}
{{ config(
    materialized='incremental',
    incremental_strategy='delete+insert',
    unique_key='event_id',
    post_hook="{{ rerun_safety.record_batch() }}"
) }}
{% endif %}

select * from {{ ref('data_events') }}
where {{ rerun_safety.window_filter('event_at', lookback=1, grain='day') }}
