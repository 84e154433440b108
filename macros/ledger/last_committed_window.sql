{#- The last committed window of a model from the run ledger: a dict with window_start,
    window_end (datetimes, NULL when that run had no window vars), rows_in_target, invocation_id
    and recorded_at of the ledger row with the greatest window_end (latest recorded_at among
    equals), or none when the ledger or the model has no row. Runs a query: use at execution time. -#}
{% macro last_committed_window(model_name) %}
  {{ return(adapter.dispatch('last_committed_window', 'rerun_safety')(model_name)) }}
{% endmacro %}

{% macro default__last_committed_window(model_name) %}
  {%- if model_name is not string or model_name | trim == '' -%}
    {{ exceptions.raise_compiler_error("last_committed_window: argument 'model_name' must be a model name string; got '" ~ model_name ~ "'. Fix: rerun_safety.last_committed_window('orders')") }}
  {%- endif -%}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {%- set ledger = rerun_safety._rs_ledger_relation() -%}
  {%- if not rerun_safety._rs_ledger_exists(ledger) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set result = run_query(
      "select window_start, window_end, rows_in_target, invocation_id, recorded_at from " ~ ledger
      ~ " where model_name = " ~ rerun_safety._rs_sql_string(model_name | trim)
      ~ " order by window_end desc nulls last, recorded_at desc limit 1") -%}
  {%- if result.rows | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set row = result.rows[0] -%}
  {{ return({'window_start': row[0], 'window_end': row[1], 'rows_in_target': row[2], 'invocation_id': row[3], 'recorded_at': row[4]}) }}
{% endmacro %}
