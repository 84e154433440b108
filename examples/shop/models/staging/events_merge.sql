{%- if target.type == 'spark' -%}
{#- Spark (parquet: MERGE needs Delta, Iceberg or Hudi): the re-read rows replace whole days
    instead, the lookback moved back to the start of its day (dynamic partition overwrite on
    event_day). -#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['event_day']) }}
{%- else -%}
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id') }}
{%- endif %}
-- SAFE: merge on the key absorbs the re-read rows.
select *{{ spark_day_column() }} from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select {{ spark_whole_days("max(event_time) - interval '3 days'") }} from {{ this }})
{% endif %}
