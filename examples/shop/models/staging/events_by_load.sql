{%- if target.type == 'spark' -%}
{#- Spark (parquet: MERGE needs Delta, Iceberg or Hudi): partitioned by the day rows were loaded,
    the lookback moved back to the start of its day, every load day it touches rewritten with all
    of its rows (dynamic partition overwrite on load_day). A row lives in one load day: late rows
    are picked up as in the merge. -#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['load_day']) }}
{%- else -%}
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id') }}
{%- endif %}
-- SAFE: reads by the time rows were loaded, with a day of lookback, and merges on the key, so rows
-- that land late are still picked up.
select *{{ spark_day_column('loaded_at', 'load_day') }} from {{ ref('stg_events') }}
{% if is_incremental() %}
where loaded_at >= (select {{ spark_whole_days("max(loaded_at) - interval '1 day'") }} from {{ this }})
{% endif %}
