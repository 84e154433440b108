{#- Multiset equality: every distinct row must occur as many times in the model as in compare_to
    (grouped counts, NULL-safe), so {x,x,y} vs {x,y,y} fails where set-based EXCEPT passes.
    One failing row per differing distinct row, with both counts.
    Float columns (double, real on either side) are equal within float_tolerance (relative,
    default 1e-9, 0 for exact): distinct rows left over on the two sides are paired when their
    other columns are equal, their surplus counts match and every float is within the tolerance
    (taken in float order, per value of the other columns). Other types stay exact. -#}
{% test equal_multiset(model, compare_to, columns=none, float_tolerance=none) %}
  {{ return(adapter.dispatch('test_equal_multiset', 'rerun_safety')(model, compare_to, columns, float_tolerance)) }}
{% endtest %}

{% macro default__test_equal_multiset(model, compare_to, columns, float_tolerance=none) %}
  {%- do rerun_safety._rs_require_relation('equal_multiset', 'compare_to', compare_to) -%}
  {%- set names = rerun_safety._rs_as_list('equal_multiset', 'columns', columns, required=false) -%}
  {%- set float_tolerance = rerun_safety._rs_float_tolerance_arg('equal_multiset', float_tolerance) -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- if names | length == 0 -%}
    {%- set names = rerun_safety._rs_column_names(model) -%}
  {%- endif -%}
  {%- set model_names = rerun_safety._rs_resolve_columns('equal_multiset', 'columns', model, names) -%}
  {%- set compare_names = rerun_safety._rs_resolve_columns('equal_multiset', 'columns (in compare_to)', compare_to, names) -%}
  {%- set model_cols = rerun_safety._rs_quote_all(model_names) -%}
  {%- set compare_cols = rerun_safety._rs_quote_all(compare_names) -%}
  {%- set model_floats = rerun_safety._rs_float_tolerances(model, float_tolerance) -%}
  {%- set compare_floats = rerun_safety._rs_float_tolerances(compare_to, float_tolerance) -%}
  {%- set loose = [] -%}   {#- (quoted model column, position, tolerance) of the float columns -#}
  {%- set exact = [] -%}
  {%- for name in model_names -%}
    {%- set tol = [model_floats.get(name | lower, 0), compare_floats.get(compare_names[loop.index0] | lower, 0)] | max -%}
    {%- if tol > 0 -%}
      {%- do loose.append((model_cols[loop.index0], loop.index0, tol)) -%}
    {%- else -%}
      {%- do exact.append(model_cols[loop.index0]) -%}
    {%- endif -%}
  {%- endfor %}
with model_rows as (
  select {{ model_cols | join(', ') }}, count(*) as _rs_n from {{ model }} group by {{ model_cols | join(', ') }}
),
compare_rows as (
  select {{ compare_cols | join(', ') }}, count(*) as _rs_n from {{ compare_to }} group by {{ compare_cols | join(', ') }}
),
combined as (
  select {{ model_cols | join(', ') }}, _rs_n as model_count, 0 as compare_count from model_rows
  union all
  select {{ compare_cols | join(', ') }}, 0 as model_count, _rs_n as compare_count from compare_rows
),
differing as (
  select {{ model_cols | join(', ') }}, sum(model_count) as model_count, sum(compare_count) as compare_count
  from combined
  group by {{ model_cols | join(', ') }}
  having sum(model_count) <> sum(compare_count)
),
{%- if loose | length > 0 %}
{%- set side = "case when model_count > compare_count then 0 else 1 end" %}
{%- set pair = "partition by " ~ ((exact + ['_rs_rank']) | join(', ')) %}
ranked as (
  select differing.*,
    row_number() over (partition by {{ (exact + [side]) | join(', ') }} order by {% for col, i, tol in loose %}{{ col }}{{ ', ' if not loop.last }}{% endfor %}) as _rs_rank
  from differing
),
paired as (
  select ranked.*,
    count(*) over ({{ pair }}) as _rs_pair_rows,
    min(model_count - compare_count) over ({{ pair }}) as _rs_surplus_lo,
    max(model_count - compare_count) over ({{ pair }}) as _rs_surplus_hi
    {%- for col, i, tol in loose %},
    min({{ col }}) over ({{ pair }}) as _rs_lo_{{ i }}, max({{ col }}) over ({{ pair }}) as _rs_hi_{{ i }},
    count({{ col }}) over ({{ pair }}) as _rs_nn_{{ i }}
    {%- endfor %}
  from ranked
),
validation_errors as (
  select {{ model_cols | join(', ') }}, model_count, compare_count
  from paired
  where not (
    _rs_pair_rows = 2 and _rs_surplus_lo = -_rs_surplus_hi
    {%- for col, i, tol in loose %}
    and _rs_nn_{{ i }} <> 1 and {{ rerun_safety._rs_floats_close_sql('_rs_lo_' ~ i, '_rs_hi_' ~ i, tol) }}
    {%- endfor %}
  )
)
{%- else %}
validation_errors as (
  select * from differing
)
{%- endif %}
select * from validation_errors
{%- endmacro %}
