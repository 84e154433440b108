{# Spark only. dbt-spark's session connection turns seed bindings into text itself: a NULL becomes
   the string 'None' (a text column gets 'None', a typed column fails the cast) and a decimal
   becomes a float (12345678901234567.0000000001 loses its last digits). Same statements as
   dbt-spark's spark__load_csv_rows, with every value written as a typed literal instead: NULL as
   null, numbers as their exact text, the rest as an escaped string. Found through the dispatch
   config in dbt_project.yml. #}
{% macro spark__load_csv_rows(model, agate_table) %}
  {% set column_override = model['config'].get('column_types', {}) %}
  {% set statements = [] %}
  {% for chunk in agate_table.rows | batch(get_batch_size()) %}
    {% set sql %}
      insert into {{ this.render() }} values
      {% for row in chunk -%}
        ({%- for value in row -%}
          {%- set type = column_override.get(agate_table.column_names[loop.index0], adapter.convert_type(agate_table, loop.index0)) -%}
          {%- if value is none -%}
            cast(null as {{ type }})
          {%- elif value is sameas true or value is sameas false -%}
            cast({{ 'true' if value else 'false' }} as {{ type }})
          {%- elif value is number -%}
            cast({{ value }} as {{ type }})
          {%- else -%}
            cast({{ rerun_safety._po_string(value | string) }} as {{ type }})
          {%- endif -%}
          {%- if not loop.last %},{% endif -%}
        {%- endfor -%})
        {%- if not loop.last %},{% endif %}
      {%- endfor %}
    {% endset %}
    {% do adapter.add_query(sql, abridge_sql_log=True) %}
    {% if loop.first %}{% do statements.append(sql) %}{% endif %}
  {% endfor %}
  {{ return(statements[0]) }}
{% endmacro %}
