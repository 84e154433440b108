{#- Spark shim, part 1: dbt-spark's incremental materialization accepts only its own strategies.
    The root project overrides dbt-spark's dbt_spark_validate_get_incremental_strategy with a
    macro returning this one (see docs/partition-overwrite.md, "Spark"): partition_overwrite is
    checked here, every other strategy by dbt-spark itself. -#}
{% macro spark_validate_incremental_strategy(raw_strategy, file_format) %}
  {%- if raw_strategy == 'partition_overwrite' -%}
    {%- do rerun_safety._po_spark_validate(file_format) -%}
    {{ return(raw_strategy) }}
  {%- endif -%}
  {{ return(dbt.dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format)) }}
{% endmacro %}
