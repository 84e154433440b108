{#- Spark shim, part 2: dbt-spark never looks up get_incremental_<strategy>_sql. The root project
    overrides dbt-spark's dbt_spark_get_incremental_sql with a macro returning this one:
    partition_overwrite goes to the package's strategy, every other strategy to dbt-spark. -#}
{% macro spark_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {%- if strategy == 'partition_overwrite' -%}
    {{ return(rerun_safety.get_incremental_partition_overwrite_sql({
        'target_relation': target, 'temp_relation': source, 'existing_relation': existing,
        'unique_key': unique_key, 'dest_columns': adapter.get_columns_in_relation(target),
        'incremental_predicates': incremental_predicates})) }}
  {%- endif -%}
  {{ return(dbt.dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates)) }}
{% endmacro %}
