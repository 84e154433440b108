{#- Key uniqueness, composite and NULL-aware: rows are grouped NULL-safely (two rows with key
    (1, NULL) are duplicates, unlike a SQL unique constraint), and a key with a NULL part is a
    finding unless allow_null. One failing row per offending key value. -#}
{% test unique_key(model, columns=none, allow_null=false, column_name=none) %}
  {#- Under a column's data_tests, dbt passes column_name: it is the key when columns is not set. -#}
  {{ return(adapter.dispatch('test_unique_key', 'rerun_safety')(model, columns if columns is not none else column_name, allow_null)) }}
{% endtest %}

{% macro default__test_unique_key(model, columns, allow_null) %}
  {%- set names = rerun_safety._rs_as_list('unique_key', 'columns', columns) -%}
  {%- if allow_null is not boolean -%}
    {{ exceptions.raise_compiler_error("unique_key: argument 'allow_null' must be true or false; got '" ~ allow_null ~ "'.") }}
  {%- endif -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set cols = rerun_safety._rs_quote_all(rerun_safety._rs_resolve_columns('unique_key', 'columns', model, names)) -%}
  {%- set null_checks = [] -%}
  {%- for c in cols -%}{%- do null_checks.append(c ~ ' is null') -%}{%- endfor %}
with key_counts as (
  select {{ cols | join(', ') }}, count(*) as n_rows
  from {{ model }}
  group by {{ cols | join(', ') }}
),
validation_errors as (
  select {{ cols | join(', ') }}, n_rows,
    case when n_rows > 1 then 'duplicate_key' else 'null_key' end as reason
  from key_counts
  where n_rows > 1
  {%- if not allow_null %} or ({{ null_checks | join(' or ') }}){% endif %}
)
select * from validation_errors
{%- endmacro %}
