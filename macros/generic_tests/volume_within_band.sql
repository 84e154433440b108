{#- Dedup-aware volume monitoring of the last complete period:
    - distinct_keys_below_band / distinct_keys_above_band: its count of DISTINCT keys is outside
      mean ± sigmas·stddev of the training periods, i.e. the periods with data in the
      training_periods periods before it (the tested period is never in its own training);
    - duplicate_rows: its raw count(*) exceeds its distinct key count;
    - insufficient_history: fewer than min_training_periods training periods (the band is not
      checked then; duplicates still are).
    So a doubled day cannot pass as a great day, and duplicates cannot mask a real drop.

    Which period is tested. The current period is the one containing `as_of`, which defaults to
    the moment the test runs (the warehouse's current_timestamp, as a timestamp in the session's
    time zone; pass as_of in the time column's zone if they differ). It is still filling up, so
    by default it is left out and the period before it is tested: a team running `dbt test`
    every morning with period='day' tests yesterday, whole, and not the few hours of today.
    The tested period is fixed by the clock, not by the data: when yesterday has no rows at all
    (the load stalled) its 0 distinct keys fail the band instead of the test quietly checking an
    older day. include_current_period=true tests the current period instead (for a check that
    runs after the period closed but before the clock moved on, or at a fixed as_of).
    Rows after the tested period are ignored.

    Args: time_column (one date/timestamp column), key (column or list), period (hour, day,
    week, month; default day), training_periods (30), sigmas (3), min_training_periods (7),
    include_current_period (false), as_of (an ISO-8601 date or timestamp such as '2026-02-10' or
    '2026-02-10T06:00:00Z'; default: now). -#}
{% test volume_within_band(model, time_column, key, period='day', training_periods=30, sigmas=3, min_training_periods=7, include_current_period=false, as_of=none) %}
  {{ return(adapter.dispatch('test_volume_within_band', 'rerun_safety')(model, time_column, key, period, training_periods, sigmas, min_training_periods, include_current_period, as_of)) }}
{% endtest %}

{% macro default__test_volume_within_band(model, time_column, key, period, training_periods, sigmas, min_training_periods, include_current_period=false, as_of=none) %}
  {%- set time_cols = rerun_safety._rs_as_list('volume_within_band', 'time_column', time_column) -%}
  {%- if time_cols | length != 1 -%}
    {{ exceptions.raise_compiler_error("volume_within_band: argument 'time_column' must name one date/timestamp column; got " ~ time_cols ~ ". Fix: time_column: event_at") }}
  {%- endif -%}
  {%- set keys = rerun_safety._rs_as_list('volume_within_band', 'key', key) -%}
  {%- set period = rerun_safety._rs_choice('volume_within_band', 'period', period, ['hour', 'day', 'week', 'month']) -%}
  {%- set training_periods = rerun_safety._rs_number('volume_within_band', 'training_periods', training_periods, minimum=1, integer=true) -%}
  {%- set sigmas = rerun_safety._rs_number('volume_within_band', 'sigmas', sigmas, minimum=0) -%}
  {%- set min_training_periods = rerun_safety._rs_number('volume_within_band', 'min_training_periods', min_training_periods, minimum=2, integer=true) -%}
  {%- if min_training_periods > training_periods -%}
    {{ exceptions.raise_compiler_error("volume_within_band: argument 'min_training_periods' (" ~ min_training_periods ~ ") cannot exceed 'training_periods' (" ~ training_periods ~ "). Fix: lower min_training_periods or raise training_periods.") }}
  {%- endif -%}
  {%- if include_current_period is not sameas true and include_current_period is not sameas false -%}
    {{ exceptions.raise_compiler_error("volume_within_band: argument 'include_current_period' must be true or false; got '" ~ include_current_period ~ "'. Fix: include_current_period: true (unquoted)") }}
  {%- endif -%}
  {%- set now_sql = rerun_safety._rs_as_of_sql('volume_within_band', as_of) -%}
  {{ config(fail_calc='count(*)') }}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set tcol = adapter.quote(rerun_safety._rs_resolve_columns('volume_within_band', 'time_column', model, time_cols)[0]) -%}
  {%- set key_cols = rerun_safety._rs_resolve_columns('volume_within_band', 'key', model, keys) -%}
  {%- set period_expr = "date_trunc('" ~ period ~ "', cast(" ~ tcol ~ " as timestamp))" -%}
  {%- set current_start = "date_trunc('" ~ period ~ "', " ~ now_sql ~ ")" -%}
with per_period as (
  {{ rerun_safety._rs_key_stats_sql(model, key_cols, [period_expr], ['period_start']) }}
),
latest as (
  {#- the tested period: the current one, or (default) the complete one before it -#}
  select {{ current_start if include_current_period else "(" ~ current_start ~ " - interval '1 " ~ period ~ "')" }} as period_start
),
training as (
  select
    count(*) as training_periods_used,
    avg(p.n_distinct_keys) as training_mean,
    coalesce(stddev_samp(p.n_distinct_keys), 0) as training_stddev
  from per_period as p
  cross join latest as l
  where p.period_start < l.period_start
    and p.period_start >= l.period_start - interval '{{ training_periods }} {{ period }}'
),
checks as (
  select
    l.period_start,
    coalesce(p.n_rows, 0) as n_rows,
    coalesce(p.n_distinct_keys, 0) as n_distinct_keys,
    t.training_periods_used,
    t.training_mean,
    t.training_stddev,
    t.training_mean - {{ sigmas }} * t.training_stddev as lower_bound,
    t.training_mean + {{ sigmas }} * t.training_stddev as upper_bound
  from latest as l
  left join per_period as p on p.period_start = l.period_start
  cross join training as t
),
validation_errors as (
  select checks.*, 'insufficient_history' as reason
  from checks where training_periods_used < {{ min_training_periods }}
  union all
  select checks.*, 'distinct_keys_below_band' as reason
  from checks where training_periods_used >= {{ min_training_periods }} and n_distinct_keys < lower_bound
  union all
  select checks.*, 'distinct_keys_above_band' as reason
  from checks where training_periods_used >= {{ min_training_periods }} and n_distinct_keys > upper_bound
  union all
  select checks.*, 'duplicate_rows' as reason
  from checks where n_rows > n_distinct_keys
)
select * from validation_errors
{%- endmacro %}
