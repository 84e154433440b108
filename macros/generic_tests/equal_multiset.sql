{#- Multiset equality: every distinct row must occur as many times in the model as in compare_to
    (grouped counts, NULL-safe), so {x,x,y} vs {x,y,y} fails where set-based EXCEPT passes.
    One failing row per differing distinct row, with both counts. -#}
{% test equal_multiset(model, compare_to, columns=none) %}
  {{ return(adapter.dispatch('test_equal_multiset', 'rerun_safety')(model, compare_to, columns)) }}
{% endtest %}

{% macro default__test_equal_multiset(model, compare_to, columns) %}
  {%- do rerun_safety._rs_require_relation('equal_multiset', 'compare_to', compare_to) -%}
  {%- set names = rerun_safety._rs_as_list('equal_multiset', 'columns', columns, required=false) -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- if names | length == 0 -%}
    {%- set names = rerun_safety._rs_column_names(model) -%}
  {%- endif -%}
  {%- set model_cols = rerun_safety._rs_quote_all(rerun_safety._rs_resolve_columns('equal_multiset', 'columns', model, names)) -%}
  {%- set compare_cols = rerun_safety._rs_quote_all(rerun_safety._rs_resolve_columns('equal_multiset', 'columns (in compare_to)', compare_to, names)) -%}
with model_rows as (
  select {{ model_cols | join(', ') }}, count(*) as n from {{ model }} group by {{ model_cols | join(', ') }}
),
compare_rows as (
  select {{ compare_cols | join(', ') }}, count(*) as n from {{ compare_to }} group by {{ compare_cols | join(', ') }}
),
combined as (
  select {{ model_cols | join(', ') }}, n as model_count, 0 as compare_count from model_rows
  union all
  select {{ compare_cols | join(', ') }}, 0 as model_count, n as compare_count from compare_rows
),
validation_errors as (
  select {{ model_cols | join(', ') }}, sum(model_count) as model_count, sum(compare_count) as compare_count
  from combined
  group by {{ model_cols | join(', ') }}
  having sum(model_count) <> sum(compare_count)
)
select * from validation_errors
{%- endmacro %}
