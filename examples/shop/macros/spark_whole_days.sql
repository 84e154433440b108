{#- The example on Spark: parquet tables have no DELETE, UPDATE or MERGE, and dbt-spark has no
    delete+insert, so the keyed models replace whole days there instead (dbt-spark insert_overwrite:
    dynamic partition overwrite of a table partitioned by a day column). Two helpers give the
    Spark SQL on Spark and nothing, or the expression unchanged, on every other engine, so the
    DuckDB and PostgreSQL SQL stays what it was. -#}

{#- `, cast(<column> as date) as <name>`: the day column a Spark table is partitioned by. -#}
{% macro spark_day_column(column='event_time', name='event_day') %}
  {%- if target.type == 'spark' -%}
    {{ return(', cast(' ~ column ~ ' as date) as ' ~ name) }}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}

{#- A lookback start moved back to the start of its day on Spark: replacing whole days from a start
    inside a day would replace that day with its last hours. -#}
{% macro spark_whole_days(expression) %}
  {%- if target.type == 'spark' -%}
    {{ return("date_trunc('day', " ~ expression ~ ")") }}
  {%- endif -%}
  {{ return(expression) }}
{% endmacro %}
