{#- Per group: sum(column) in the model vs in compare_to. Fails a group when the sums differ by
    more than tolerance (absolute). A group present on one side only sums to 0 on the other;
    NULL values count as 0. -#}
{% test reconcile_sums(model, compare_to, column, group_by=none, tolerance=0) %}
  {{ return(adapter.dispatch('test_reconcile_sums', 'rerun_safety')(model, compare_to, column, group_by, tolerance)) }}
{% endtest %}

{% macro default__test_reconcile_sums(model, compare_to, column, group_by, tolerance) %}
  {%- set args = rerun_safety._rs_reconcile_args('reconcile_sums', model, compare_to, group_by, tolerance) -%}
  {%- set cols = rerun_safety._rs_as_list('reconcile_sums', 'column', column) -%}
  {%- if cols | length != 1 -%}
    {{ exceptions.raise_compiler_error("reconcile_sums: argument 'column' must name one numeric column; got " ~ cols ~ ". Fix: column: amount") }}
  {%- endif -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set tolerance, model_groups, compare_groups = args.tolerance, args.model_groups, args.compare_groups -%}
  {%- set model_col = adapter.quote(rerun_safety._rs_resolve_columns('reconcile_sums', 'column', model, cols)[0]) -%}
  {%- set compare_col = adapter.quote(rerun_safety._rs_resolve_columns('reconcile_sums', 'column (in compare_to)', compare_to, cols)[0]) -%}
  {%- set model_sql -%}
    select {% for g in model_groups %}{{ g }}, {% endfor %}coalesce(sum({{ model_col }}), 0) as total, count(*) as n_rows
    from {{ model }} {% if model_groups %}group by {{ model_groups | join(', ') }}{% endif %}
  {%- endset -%}
  {%- set compare_sql -%}
    select {% for g in compare_groups %}{{ g }} as {{ model_groups[loop.index0] }}, {% endfor %}coalesce(sum({{ compare_col }}), 0) as total, count(*) as n_rows
    from {{ compare_to }} {% if compare_groups %}group by {{ compare_groups | join(', ') }}{% endif %}
  {%- endset %}
with per_group as (
  select * from {{ rerun_safety._rs_align_groups_sql(model_sql, compare_sql, model_groups, ['total', 'n_rows']) }} as _rs_groups
),
validation_errors as (
  select {% for g in model_groups %}{{ g }}, {% endfor %}
    model_total as model_sum,
    compare_total as compare_sum,
    model_total - compare_total as sum_diff,
    model_n_rows as model_rows,
    compare_n_rows as compare_rows
  from per_group
  where abs(model_total - compare_total) > {{ tolerance }}
)
select * from validation_errors
{%- endmacro %}
