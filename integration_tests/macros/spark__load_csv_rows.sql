{# Spark only. dbt-spark's session connection binds a NULL seed value as the string 'None'
   (a text column gets 'None', a typed column fails the cast), so the seeds' NULLs would not
   load. Same statements as dbt-spark's spark__load_csv_rows, with NULLs written as typed null
   literals instead of bindings. Found through the dispatch config in dbt_project.yml. #}
{% macro spark__load_csv_rows(model, agate_table) %}
  {% set column_override = model['config'].get('column_types', {}) %}
  {% set statements = [] %}
  {% for chunk in agate_table.rows | batch(get_batch_size()) %}
    {% set bindings = [] %}
    {% set sql %}
      insert into {{ this.render() }} values
      {% for row in chunk -%}
        ({%- for value in row -%}
          {%- set type = column_override.get(agate_table.column_names[loop.index0], adapter.convert_type(agate_table, loop.index0)) -%}
          {%- if value is none -%}
            cast(null as {{ type }})
          {%- else -%}
            {%- do bindings.append(value) -%}
            cast({{ get_binding_char() }} as {{ type }})
          {%- endif -%}
          {%- if not loop.last %},{% endif -%}
        {%- endfor -%})
        {%- if not loop.last %},{% endif %}
      {%- endfor %}
    {% endset %}
    {% do adapter.add_query(sql, bindings=bindings, abridge_sql_log=True) %}
    {% if loop.first %}{% do statements.append(sql) %}{% endif %}
  {% endfor %}
  {{ return(statements[0]) }}
{% endmacro %}
