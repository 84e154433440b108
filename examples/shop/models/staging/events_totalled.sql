{%- if target.type == 'spark' -%}
{#- Spark (parquet: no DELETE, no delete+insert in dbt-spark): the model replaces whole days
    (dynamic partition overwrite on event_day, the lookback moved back to the start of its day), and
    so does its hook: audit.batch_totals is partitioned by batch_day (generate_data.py), and the
    insert overwrite replaces exactly the days it writes, as the delete + insert does elsewhere. -#}
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['event_day'],
          post_hook=[
            "set spark.sql.sources.partitionOverwriteMode = DYNAMIC",
            "insert overwrite table {{ source('audit', 'batch_totals') }} partition (batch_day) select count(*), cast(event_time as date) from {{ this }} group by 2",
            "insert into {{ source('audit', 'run_log') }} select 'events_totalled', count(*) from {{ this }}"],
          meta={'rerun_safety': {'log_tables': [var('audit_schema', 'audit') ~ '.run_log']}}) }}
{%- else -%}
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',
          post_hook=[
            "delete from {{ source('audit', 'batch_totals') }} where batch_day in (select distinct cast(event_time as date) from {{ this }})",
            "insert into {{ source('audit', 'batch_totals') }} select cast(event_time as date), count(*) from {{ this }} group by 1",
            "insert into {{ source('audit', 'run_log') }} select 'events_totalled', count(*) from {{ this }}"],
          meta={'rerun_safety': {'log_tables': [var('audit_schema', 'audit') ~ '.run_log']}}) }}
{%- endif %}
-- SAFE: its post-hook replaces the per-day totals it covers (delete + insert), and appends to a run
-- log that is declared as one row per run.
select *{{ spark_day_column() }} from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_time >= (select {{ spark_whole_days("max(event_time) - interval '3 days'") }} from {{ this }})
{% endif %}
