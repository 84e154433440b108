{#- A SQL predicate on `column` for the rows this run should process:
    1. vars rerun_safety_window_start / rerun_safety_window_end set: the half-open window
       column >= start and column < end (ISO-8601, validated in Jinja, rendered as typed literals);
    2. else in an incremental run: column >= date_trunc(grain, max(column) in {{ this }} - lookback
       grains), so the oldest partition touched is always a whole one;
    3. else (first run, full refresh): 1=1.
    lookback is a whole number of grains (lookback=1, grain='day': the watermark's day and the one before). -#}
{% macro window_filter(column, lookback=1, grain='day') %}
  {{ return(adapter.dispatch('window_filter', 'rerun_safety')(column, lookback, grain)) }}
{% endmacro %}

{% macro default__window_filter(column, lookback, grain) %}
  {%- if column is not string or column | trim == '' -%}
    {{ exceptions.raise_compiler_error("window_filter: argument 'column' must be a column name; got '" ~ column ~ "'. Fix: {{ rerun_safety.window_filter('event_at') }}") }}
  {%- endif -%}
  {%- set grain = rerun_safety._rs_choice('window_filter', 'grain', grain, ['hour', 'day', 'week', 'month', 'year']) -%}
  {%- set lookback = rerun_safety._rs_number('window_filter', 'lookback', lookback, minimum=0, integer=true) -%}
  {%- set col = adapter.quote(column | trim) -%}
  {%- set bounds = rerun_safety._rs_window_bounds() -%}
  {%- if bounds is not none -%}
    ({{ col }} >= {{ rerun_safety._rs_timestamp_literal(bounds['start']) }} and {{ col }} < {{ rerun_safety._rs_timestamp_literal(bounds['end']) }})
  {%- elif is_incremental() -%}
    ({{ col }} >= (select date_trunc('{{ grain }}', cast(max({{ col }}) as timestamp) - interval '{{ lookback }} {{ grain }}') from {{ this }})
     or (select max({{ col }}) from {{ this }}) is null)
  {%- else -%}
    1=1
  {%- endif -%}
{%- endmacro %}
