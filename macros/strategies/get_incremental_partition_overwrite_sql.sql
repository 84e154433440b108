{#- `partition_overwrite` incremental strategy: replace whole partitions of the target with the
    batch (BigQuery/Spark insert_overwrite semantics), atomically inside dbt's transaction: one
    statement on PostgreSQL, one batch of statements on DuckDB (see _po_statement).
    dbt only finds strategy macros in the root project: add the shim documented in the README. -#}
{% macro get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(adapter.dispatch('get_incremental_partition_overwrite_sql', 'rerun_safety')(arg_dict)) }}
{% endmacro %}

{% macro default__get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(rerun_safety._po_statement(arg_dict, rerun_safety._po_fail_by_cast)) }}
{% endmacro %}

{#- DuckDB has error(): the message is raised as is, instead of inside a cast error. -#}
{% macro duckdb__get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(rerun_safety._po_statement(arg_dict, rerun_safety._po_fail_by_error, form='batch')) }}
{% endmacro %}

{#- Spark has no delete: Spark's dynamic partition overwrite of a partitioned table (see
    _partition_overwrite_spark.sql); dbt-spark reaches it through spark_incremental_sql. -#}
{% macro spark__get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(rerun_safety._po_spark_statement(arg_dict)) }}
{% endmacro %}
