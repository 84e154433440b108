{#- Per group: sum(column) in the model vs in compare_to. Fails a group when the sums differ by
    more than tolerance (absolute). A group present on one side only sums to 0 on the other;
    NULL values count as 0. A float column (double, real) also tolerates float rounding:
    float_tolerance (relative, default 1e-9, 0 for exact) times the larger sum of absolute values
    (at least 1), the scale of a float sum's rounding error, so that the same rows summed in
    another order pass. Integer and decimal columns stay exact. compare_column and compare_group_by
    name compare_to's columns where they differ from the model's (a daily aggregate's revenue per
    revenue_date against the payments' amount per paid_date). -#}
{% test reconcile_sums(model, compare_to, column, group_by=none, tolerance=0, float_tolerance=none, compare_column=none, compare_group_by=none) %}
  {{ return(adapter.dispatch('test_reconcile_sums', 'rerun_safety')(model, compare_to, column, group_by, tolerance, float_tolerance, compare_column, compare_group_by)) }}
{% endtest %}

{% macro default__test_reconcile_sums(model, compare_to, column, group_by, tolerance, float_tolerance=none, compare_column=none, compare_group_by=none) %}
  {%- set args = rerun_safety._rs_reconcile_args('reconcile_sums', model, compare_to, group_by, tolerance, compare_group_by) -%}
  {%- set float_tolerance = rerun_safety._rs_float_tolerance_arg('reconcile_sums', float_tolerance) -%}
  {%- set cols = rerun_safety._rs_as_list('reconcile_sums', 'column', column) -%}
  {%- if cols | length != 1 -%}
    {{ exceptions.raise_compiler_error("reconcile_sums: argument 'column' must name one numeric column; got " ~ cols ~ ". Fix: column: amount") }}
  {%- endif -%}
  {%- set other_cols = cols if compare_column is none else rerun_safety._rs_as_list('reconcile_sums', 'compare_column', compare_column) -%}
  {%- if other_cols | length != 1 -%}
    {{ exceptions.raise_compiler_error("reconcile_sums: argument 'compare_column' must name one numeric column of compare_to; got " ~ other_cols ~ ". Fix: compare_column: amount") }}
  {%- endif -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set tolerance, model_groups, compare_groups = args.tolerance, args.model_groups, args.compare_groups -%}
  {%- set model_name = rerun_safety._rs_resolve_columns('reconcile_sums', 'column', model, cols)[0] -%}
  {%- set compare_name = rerun_safety._rs_resolve_columns('reconcile_sums', 'compare_column' if compare_column is not none else 'column (in compare_to)', compare_to, other_cols)[0] -%}
  {%- set model_col, compare_col = adapter.quote(model_name), adapter.quote(compare_name) -%}
  {#- a float on either side: the sums are floats -#}
  {%- set loose = [rerun_safety._rs_float_tolerances(model, float_tolerance).get(model_name | lower, 0),
                   rerun_safety._rs_float_tolerances(compare_to, float_tolerance).get(compare_name | lower, 0)] | max -%}
  {%- set metrics = ['total', 'n_rows', 'abs_total'] if loose > 0 else ['total', 'n_rows'] -%}
  {%- set model_sql -%}
    select {% for g in model_groups %}{{ g }}, {% endfor %}coalesce(sum({{ model_col }}), 0) as total, count(*) as n_rows
      {%- if loose > 0 %}, coalesce(sum(abs({{ model_col }})), 0) as abs_total{% endif %}
    from {{ model }} {% if model_groups %}group by {{ model_groups | join(', ') }}{% endif %}
  {%- endset -%}
  {%- set compare_sql -%}
    select {% for g in compare_groups %}{{ g }} as {{ model_groups[loop.index0] }}, {% endfor %}coalesce(sum({{ compare_col }}), 0) as total, count(*) as n_rows
      {%- if loose > 0 %}, coalesce(sum(abs({{ compare_col }})), 0) as abs_total{% endif %}
    from {{ compare_to }} {% if compare_groups %}group by {{ compare_groups | join(', ') }}{% endif %}
  {%- endset %}
with per_group as (
  select * from {{ rerun_safety._rs_align_groups_sql(model_sql, compare_sql, model_groups, metrics) }} as _rs_groups
),
validation_errors as (
  select {% for g in model_groups %}{{ g }}, {% endfor %}
    model_total as model_sum,
    compare_total as compare_sum,
    model_total - compare_total as sum_diff,
    model_n_rows as model_rows,
    compare_n_rows as compare_rows
  from per_group
  {%- if tolerance == 0 and loose == 0 and rerun_safety._rs_decimal_difference_may_round() %}
  where model_total <> compare_total
  {%- else %}
  where abs(model_total - compare_total) > {{ tolerance }}
  {%- if loose > 0 %} + {{ loose }} * greatest(model_abs_total, compare_abs_total, 1){% endif %}
  {%- endif %}
)
select * from validation_errors
{%- endmacro %}


{#- Whether the warehouse may round a difference of two decimals: Spark gives decimal(38, s) minus
    decimal(38, s) the type decimal(38, s - 1) (spark.sql.decimalOperations.allowPrecisionLoss),
    so a difference in the last digit becomes 0; an exact comparison then uses <>. -#}
{% macro _rs_decimal_difference_may_round() %}
  {{ return(adapter.dispatch('_rs_decimal_difference_may_round', 'rerun_safety')()) }}
{% endmacro %}

{% macro default___rs_decimal_difference_may_round() %}
  {{ return(false) }}
{% endmacro %}

{% macro spark___rs_decimal_difference_may_round() %}
  {{ return(true) }}
{% endmacro %}
