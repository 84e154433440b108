{#- Spark shim, part 3: the `partitioned by` of the table dbt-spark creates. The root project
    overrides dbt-spark's partition_cols with a macro returning this one: an incremental model
    with partition_overwrite is partitioned by its partition_key (or partition_by), every other
    model as dbt-spark does it. -#}
{% macro spark_partition_cols(label, required=false) %}
  {%- if config.get('materialized') == 'incremental' and config.get('incremental_strategy') == 'partition_overwrite' -%}
    {%- set key = rerun_safety._po_spark_partition_key() -%}
    {%- if key is not none -%}
      {%- set names = [key] if key is string else key | list -%}
      {{ return(label ~ ' (' ~ rerun_safety._rs_quote_all(names) | join(', ') ~ ')') }}
    {%- endif -%}
  {%- endif -%}
  {{ return(dbt.partition_cols(label, required)) }}
{% endmacro %}
