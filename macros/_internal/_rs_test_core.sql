{#- Shared core of the rerun_safety generic tests and macros. Internal: names start with `_rs_`,
    no contract, may change in any release. -#}

{#- A column name or a list of column names, as a list. Raises a message naming the caller, the
    argument and the fix when the value is missing or not names. -#}
{% macro _rs_as_list(caller_name, arg_name, value, required=true) %}
  {%- set empty = value is none
        or (value is string and value | trim == '')
        or (value is iterable and value is not string and value is not mapping and value | length == 0) -%}
  {%- if empty -%}
    {%- if required -%}
      {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' is required; set it to a column name or a list of column names, e.g. " ~ arg_name ~ ": ['order_id']") }}
    {%- endif -%}
    {{ return([]) }}
  {%- endif -%}
  {%- if value is string -%}
    {{ return([value | trim]) }}
  {%- endif -%}
  {%- if value is mapping or value is not iterable -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' must be a column name or a list of column names; got " ~ value ~ ". Fix: " ~ arg_name ~ ": ['order_id']") }}
  {%- endif -%}
  {%- set out = [] -%}
  {%- for item in value -%}
    {%- if item is not string or item | trim == '' -%}
      {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' must list column names as strings; got " ~ item ~ ". Fix: " ~ arg_name ~ ": ['order_id']") }}
    {%- endif -%}
    {%- do out.append(item | trim) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- A number (int or float, not a bool, not a quoted string), at least `minimum`. -#}
{% macro _rs_number(caller_name, arg_name, value, minimum=0, integer=false) %}
  {%- set ok = value is number and value is not boolean and (not integer or value is integer) -%}
  {%- if not ok -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' must be " ~ ("an integer" if integer else "a number") ~ "; got '" ~ value ~ "'" ~ (" (a string)" if value is string else "") ~ ". Fix: write it unquoted, e.g. " ~ arg_name ~ ": " ~ (minimum if minimum is not none else 0)) }}
  {%- endif -%}
  {%- if minimum is not none and value < minimum -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' must be >= " ~ minimum ~ "; got " ~ value ~ ".") }}
  {%- endif -%}
  {{ return(value) }}
{% endmacro %}


{#- One of a fixed set of string values. -#}
{% macro _rs_choice(caller_name, arg_name, value, allowed) %}
  {%- if value is not string or (value | lower) not in allowed -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' must be one of " ~ (allowed | join(', ')) ~ "; got '" ~ value ~ "'.") }}
  {%- endif -%}
  {{ return(value | lower) }}
{% endmacro %}


{#- The test's "now" as SQL: as_of (an ISO-8601 date or timestamp, UTC 'Z' / '+00:00' allowed)
    as a timestamp literal, or the warehouse's current_timestamp as a timestamp. The value is
    checked against a strict pattern before it reaches SQL. -#}
{% macro _rs_as_of_sql(caller_name, as_of) %}
  {%- if as_of is none -%}{{ return("cast(current_timestamp as timestamp)") }}{%- endif -%}
  {%- set text = (as_of | string) | trim -%}
  {%- set m = modules.re.match('^(\\d{4}-\\d{2}-\\d{2})(?:[T ](\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d{1,6})?)?))?(?:Z|[+-]00:?00)?$', text) -%}
  {%- if not m -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument 'as_of' must be an ISO-8601 date or timestamp in the time column's zone; got '" ~ text ~ "'. Fix: as_of: '2026-02-10' or as_of: '2026-02-10T06:00:00', or leave it out to use the current time") }}
  {%- endif -%}
  {{ return("cast('" ~ m.group(1) ~ " " ~ (m.group(2) or '00:00:00') ~ "' as timestamp)") }}
{% endmacro %}


{#- Resolve names against the relation's columns (case-insensitive) and return the names as
    the warehouse spells them. An unknown name raises a message listing the real columns.
    Only at execution time: at parse time the relation may not exist yet. -#}
{% macro _rs_resolve_columns(caller_name, arg_name, relation, names) %}
  {%- if not execute -%}
    {{ return(names) }}
  {%- endif -%}
  {%- set by_lower = {} -%}
  {%- set ordered = [] -%}
  {%- for col in adapter.get_columns_in_relation(relation) -%}
    {%- do by_lower.update({col.name | lower: col.name}) -%}
    {%- do ordered.append(col.name) -%}
  {%- endfor -%}
  {%- if ordered | length == 0 -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "': relation " ~ relation ~ " does not exist or has no columns. Fix: build it first (dbt build runs parents before tests) or point the argument at an existing ref()/source().") }}
  {%- endif -%}
  {%- set out = [] -%}
  {%- for name in names -%}
    {%- set key = (name | lower).strip('"') -%}
    {%- if key not in by_lower -%}
      {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' names column '" ~ name ~ "', which is not a column of " ~ relation ~ ". Fix: use one of: " ~ (ordered | join(', '))) }}
    {%- endif -%}
    {%- do out.append(by_lower[key]) -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- All column names of a relation, in table order (empty at parse time). -#}
{% macro _rs_column_names(relation) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set out = [] -%}
  {%- for col in adapter.get_columns_in_relation(relation) -%}{%- do out.append(col.name) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{% macro _rs_quote_all(names) %}
  {%- set out = [] -%}
  {%- for n in names -%}{%- do out.append(adapter.quote(n)) -%}{%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- Per group: raw row count (n_rows) and count of distinct keys (n_distinct_keys). NULL-aware:
    GROUP BY puts NULL keys in one group, so a NULL key counts as one key value, never zero.
    group_exprs are SQL expressions, aliased to group_aliases (already quoted). -#}
{% macro _rs_key_stats_sql(relation, key_cols, group_exprs, group_aliases) %}
  {{ return(adapter.dispatch('_rs_key_stats_sql', 'rerun_safety')(relation, key_cols, group_exprs, group_aliases)) }}
{% endmacro %}

{% macro default___rs_key_stats_sql(relation, key_cols, group_exprs, group_aliases) %}
  {%- set keys = rerun_safety._rs_quote_all(key_cols) -%}
  {%- set inner_select = [] -%}
  {%- for e in group_exprs -%}{%- do inner_select.append(e ~ ' as ' ~ group_aliases[loop.index0]) -%}{%- endfor -%}
  {%- set inner_group = group_exprs + keys -%}
    select
      {% for a in group_aliases %}{{ a }}, {% endfor %}
      sum(_rs_n) as n_rows,
      count(*) as n_distinct_keys
    from (
      select {% for s in inner_select %}{{ s }}, {% endfor %}{{ keys | join(', ') }}, count(*) as _rs_n
      from {{ relation }}
      group by {{ inner_group | join(', ') }}
    ) as _rs_keys
    {% if group_aliases | length > 0 %}group by {{ group_aliases | join(', ') }}{% endif %}
{% endmacro %}


{#- Align two per-group aggregates (model side, compare side) on the group columns, NULL-safe
    and without a FULL JOIN (Postgres refuses FULL JOIN on IS NOT DISTINCT FROM): UNION ALL both
    sides, then sum per group. A group missing on one side gets 0 there. Yields the group columns,
    model_<metric> and compare_<metric> for each metric. -#}
{% macro _rs_align_groups_sql(model_sql, compare_sql, group_cols, metrics) %}
  {%- set groups = group_cols | join(', ') -%}
  (
    select {% for g in group_cols %}{{ g }}, {% endfor %}
      {%- for m in metrics %}sum(model_{{ m }}) as model_{{ m }}, sum(compare_{{ m }}) as compare_{{ m }}{{ ', ' if not loop.last }}{% endfor %}
    from (
      select {% for g in group_cols %}{{ g }}, {% endfor %}
        {%- for m in metrics %}{{ m }} as model_{{ m }}, 0 as compare_{{ m }}{{ ', ' if not loop.last }}{% endfor %}
      from ({{ model_sql }}) as _rs_model_side
      union all
      select {% for g in group_cols %}{{ g }}, {% endfor %}
        {%- for m in metrics %}0 as model_{{ m }}, {{ m }} as compare_{{ m }}{{ ', ' if not loop.last }}{% endfor %}
      from ({{ compare_sql }}) as _rs_compare_side
    ) as _rs_aligned
    {% if group_cols | length > 0 %}group by {{ groups }}{% endif %}
  )
{% endmacro %}


{#- compare_to must be a relation (ref()/source()), not a string. -#}
{% macro _rs_require_relation(caller_name, arg_name, value) %}
  {%- if value is none or value is string or value is number or value.identifier is not defined -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument '" ~ arg_name ~ "' is required and must be a relation; got '" ~ value ~ "'. Fix: " ~ arg_name ~ ": ref('orders_source') or source('raw', 'orders')") }}
  {%- endif -%}
{% endmacro %}

{#- The arguments reconcile_counts and reconcile_sums share, checked: compare_to must be a
    relation, tolerance a number >= 0, group_by (optional) columns of the model, compare_group_by
    (optional, default group_by) the columns of compare_to in the same order (a daily aggregate's
    `revenue_date` beside the payments' `paid_date`). Returns {'tolerance', 'model_groups',
    'compare_groups'} (quoted column names; the groups are only resolved against the relations at
    execution time, empty lists before). -#}
{% macro _rs_reconcile_args(caller_name, model, compare_to, group_by, tolerance, compare_group_by=none) %}
  {%- do rerun_safety._rs_require_relation(caller_name, 'compare_to', compare_to) -%}
  {%- set groups = rerun_safety._rs_as_list(caller_name, 'group_by', group_by, required=false) -%}
  {%- set compare_groups = groups if compare_group_by is none else rerun_safety._rs_as_list(caller_name, 'compare_group_by', compare_group_by) -%}
  {%- if compare_groups | length != groups | length -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument 'compare_group_by' names " ~ compare_groups | length ~ " column(s) and 'group_by' " ~ groups | length ~ "; they pair in order. Fix: group_by: ['revenue_date'] with compare_group_by: ['paid_date']") }}
  {%- endif -%}
  {%- set out = {'tolerance': rerun_safety._rs_number(caller_name, 'tolerance', tolerance, minimum=0),
                 'model_groups': [], 'compare_groups': []} -%}
  {%- if execute -%}
    {%- do out.update({
        'model_groups': rerun_safety._rs_quote_all(rerun_safety._rs_resolve_columns(caller_name, 'group_by', model, groups)),
        'compare_groups': rerun_safety._rs_quote_all(rerun_safety._rs_resolve_columns(caller_name, 'compare_group_by' if compare_group_by is not none else 'group_by (in compare_to)', compare_to, compare_groups))}) -%}
  {%- endif -%}
  {{ return(out) }}
{% endmacro %}


{#- Float columns: equal within a relative tolerance, as the runner's diff (DEFAULT_FLOAT_TOLERANCE
    in python_runner/rerun_safety/diff.py): a and b are equal when
    |a - b| <= tolerance * max(|a|, |b|, 1). Integers, decimals and other types stay exact. -#}
{% macro _rs_default_float_tolerance() %}
  {{ return(1e-9) }}
{% endmacro %}


{#- The float_tolerance argument: none is the default, else a number >= 0 and < 1 (0: exact). -#}
{% macro _rs_float_tolerance_arg(caller_name, value) %}
  {%- if value is none -%}
    {{ return(rerun_safety._rs_default_float_tolerance()) }}
  {%- endif -%}
  {%- set tolerance = rerun_safety._rs_number(caller_name, 'float_tolerance', value, minimum=0) -%}
  {%- if tolerance >= 1 -%}
    {{ exceptions.raise_compiler_error(caller_name ~ ": argument 'float_tolerance' is relative and must be < 1; got " ~ value ~ ". Fix: float_tolerance: 1e-9 (or 0 to compare floats exactly)") }}
  {%- endif -%}
  {{ return(tolerance) }}
{% endmacro %}


{#- {lower-case column name: its tolerance} for the float columns of a relation (execution time
    only; empty when tolerance is 0). 32-bit floats (real; FLOAT on DuckDB) get at least 2^-20,
    eight times their own rounding. -#}
{% macro _rs_float_tolerances(relation, tolerance) %}
  {%- set out = {} -%}
  {%- if not execute or tolerance <= 0 -%}{{ return(out) }}{%- endif -%}
  {%- for col in adapter.get_columns_in_relation(relation) -%}
    {%- if col.is_float() -%}
      {%- do out.update({col.name | lower: ([tolerance, 2 ** -20] | max) if (col.dtype | lower) in ['real', 'float4', 'float'] else tolerance}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}


{#- A SQL condition: floats `a` and `b` equal within `tolerance` (expressions; NULL only equals
    NULL, NaN and infinities only themselves). -#}
{% macro _rs_floats_close_sql(a, b, tolerance) %}
  {{ return(adapter.dispatch('_rs_floats_close_sql', 'rerun_safety')(a, b, tolerance)) }}
{% endmacro %}

{% macro default___rs_floats_close_sql(a, b, tolerance) %}
  {#- (a - b) * 0 = 0 is false for infinities and NaN, whose difference is no measure of closeness. -#}
  {{- return("coalesce((" ~ a ~ " is null and " ~ b ~ " is null) or " ~ a ~ " = " ~ b ~ " or ((" ~ a ~ " - " ~ b ~ ") * 0 = 0 and abs(" ~ a ~ " - " ~ b ~ ") <= " ~ tolerance ~ " * greatest(abs(" ~ a ~ "), abs(" ~ b ~ "), 1)), false)") -}}
{% endmacro %}
