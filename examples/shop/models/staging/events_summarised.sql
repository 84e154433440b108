{%- if target.type == 'spark' -%}
{#- Spark (parquet: no DELETE, no delete+insert in dbt-spark): the model replaces whole days
    (dynamic partition overwrite on event_day, the lookback moved back to the start of its day), and
    converges as it does elsewhere; the hook is the same. -#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['event_day']) }}
{%- else -%}
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}
{%- endif %}
{{ config(post_hook="insert into {{ source('audit', 'batch_summary') }} select cast(max(event_time) as date), count(*) from {{ this }}") }}
-- UNSAFE (side effect): the model itself converges, but its post-hook appends a summary row on every
-- run, so a rerun doubles what audit.batch_summary says.
select *{{ spark_day_column() }} from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select {{ spark_whole_days("max(event_time) - interval '3 days'") }} from {{ this }})
{% endif %}
