{#- Per group (e.g. per day): count(distinct key) in the model vs in compare_to, plus the model's
    raw count(*). Fails a group when the distinct keys differ by more than tolerance (an absolute
    number of keys), or when the model has more rows than distinct keys there (duplicates).
    A group present on one side only counts 0 on the other. compare_key and compare_group_by name
    compare_to's columns where they differ from the model's (paired in order). -#}
{% test reconcile_counts(model, compare_to, key, group_by=none, tolerance=0, compare_key=none, compare_group_by=none) %}
  {{ return(adapter.dispatch('test_reconcile_counts', 'rerun_safety')(model, compare_to, key, group_by, tolerance, compare_key, compare_group_by)) }}
{% endtest %}

{% macro default__test_reconcile_counts(model, compare_to, key, group_by, tolerance, compare_key=none, compare_group_by=none) %}
  {%- set args = rerun_safety._rs_reconcile_args('reconcile_counts', model, compare_to, group_by, tolerance, compare_group_by) -%}
  {%- set keys = rerun_safety._rs_as_list('reconcile_counts', 'key', key) -%}
  {%- set other_keys = keys if compare_key is none else rerun_safety._rs_as_list('reconcile_counts', 'compare_key', compare_key) -%}
  {%- if other_keys | length != keys | length -%}
    {{ exceptions.raise_compiler_error("reconcile_counts: argument 'compare_key' names " ~ other_keys | length ~ " column(s) and 'key' " ~ keys | length ~ "; they pair in order. Fix: key: ['order_id'] with compare_key: ['id']") }}
  {%- endif -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set tolerance, model_groups, compare_groups = args.tolerance, args.model_groups, args.compare_groups -%}
  {%- set model_keys = rerun_safety._rs_resolve_columns('reconcile_counts', 'key', model, keys) -%}
  {%- set compare_keys = rerun_safety._rs_resolve_columns('reconcile_counts', 'compare_key' if compare_key is not none else 'key (in compare_to)', compare_to, other_keys) -%}
  {%- set model_sql = rerun_safety._rs_key_stats_sql(model, model_keys, model_groups, model_groups) -%}
  {%- set compare_sql = rerun_safety._rs_key_stats_sql(compare_to, compare_keys, compare_groups, model_groups) -%}
with per_group as (
  select * from {{ rerun_safety._rs_align_groups_sql(model_sql, compare_sql, model_groups, ['n_rows', 'n_distinct_keys']) }} as _rs_groups
),
validation_errors as (
  select {% for g in model_groups %}{{ g }}, {% endfor %}
    model_n_rows as model_rows,
    model_n_distinct_keys as model_distinct_keys,
    compare_n_distinct_keys as compare_distinct_keys,
    compare_n_rows as compare_rows,
    model_n_distinct_keys - compare_n_distinct_keys as distinct_key_diff,
    case
      when abs(model_n_distinct_keys - compare_n_distinct_keys) > {{ tolerance }} then 'distinct_keys_differ'
      else 'duplicate_keys_in_model'
    end as reason
  from per_group
  where abs(model_n_distinct_keys - compare_n_distinct_keys) > {{ tolerance }}
     or model_n_rows > model_n_distinct_keys
)
select * from validation_errors
{%- endmacro %}
