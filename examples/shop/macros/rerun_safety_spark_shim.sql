{# Spark only (harmless elsewhere): dbt-spark's incremental materialization accepts only its own
   strategies and partitions tables by partition_by. These overrides of three dbt-spark macros
   (root-project macros take precedence over the adapter's) route partition_overwrite to the
   package and leave every other model to dbt-spark unchanged (docs/partition-overwrite.md, "Spark"). #}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
  {{ return(rerun_safety.spark_validate_incremental_strategy(raw_strategy, file_format)) }}
{% endmacro %}

{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {{ return(rerun_safety.spark_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates)) }}
{% endmacro %}

{% macro partition_cols(label, required=false) %}
  {{ return(rerun_safety.spark_partition_cols(label, required)) }}
{% endmacro %}
