{# dbt only looks up incremental strategy macros in the root project: this shim exposes the
   package's strategy under the name dbt expects (`rerun-safety init` writes this file). #}
{% macro get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)) }}
{% endmacro %}
