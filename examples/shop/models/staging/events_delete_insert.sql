{%- if target.type == 'spark' -%}
{#- Spark (parquet: no DELETE, no delete+insert in dbt-spark): the same replacement by whole days.
    The lookback is moved back to the start of its day, so every day it touches is rewritten with
    all of its rows (dynamic partition overwrite on event_day). -#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['event_day']) }}
{%- else -%}
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}
{%- endif %}
-- SAFE: the lookback re-reads rows, and delete+insert on the key replaces them.
select *{{ spark_day_column() }} from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select {{ spark_whole_days("max(event_time) - interval '3 days'") }} from {{ this }})
{% endif %}
