{#- What rerun_safety.last_committed_window() returns for window_events (and for a model with no
    ledger row), materialized so the test suite can read it. -#}
{{ config(materialized='table') }}
-- depends_on: {{ ref('window_events') }}
{%- set last = rerun_safety.last_committed_window('window_events') if execute else none -%}
{%- set missing = rerun_safety.last_committed_window('no_such_model') if execute else none %}

select
  {{ 'true' if last else 'false' }} as found,
  {% if last and last['window_start'] %}cast('{{ last["window_start"] }}' as timestamp){% else %}cast(null as timestamp){% endif %} as window_start,
  {% if last and last['window_end'] %}cast('{{ last["window_end"] }}' as timestamp){% else %}cast(null as timestamp){% endif %} as window_end,
  cast({{ last['rows_in_target'] if last else 'null' }} as bigint) as rows_in_target,
  {{ 'true' if missing is none else 'false' }} as missing_model_is_none
