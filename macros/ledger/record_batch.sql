{#- Post-hook: append one row to the run ledger for this model run. It runs inside the model's
    transaction (dbt runs post-hooks before COMMIT unless told otherwise), so the row exists only
    if the model's data committed: a run that fails or rolls back leaves no row.
    rows_in_batch: on a full build (table, first run, --full-refresh) the rows in the target; on
    an incremental run the rows of the batch (the temp relation dbt built from the model's
    select), else the rows the main statement reported, else NULL. -#}
{% macro record_batch() %}
  {{ return(adapter.dispatch('record_batch', 'rerun_safety')()) }}
{% endmacro %}

{% macro default__record_batch() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set ledger = rerun_safety._rs_ledger_relation() -%}
  {%- do rerun_safety._rs_ensure_ledger() -%}
  {%- set bounds = rerun_safety._rs_window_bounds() -%}
  {%- set main = load_result('main') if load_result is defined else none -%}
  {%- set batch_rows = none -%}
  {%- if main and main.response and main.response.rows_affected is not none and main.response.rows_affected >= 0 -%}
    {%- set batch_rows = main.response.rows_affected -%}
  {%- endif -%}
  {%- set incremental = is_incremental() -%}
  {%- set batch_relation = rerun_safety._rs_batch_relation(this) if incremental else none -%}
insert into {{ ledger }}
  (model_name, relation_name, invocation_id, window_start, window_end, rows_in_batch, rows_in_target, status, recorded_at)
select
  {{ rerun_safety._rs_sql_string(model.name) }},
  {{ rerun_safety._rs_sql_string(this | string) }},
  {{ rerun_safety._rs_sql_string(invocation_id) }},
  {{ rerun_safety._rs_timestamp_literal(bounds['start']) if bounds else 'cast(null as timestamp)' }},
  {{ rerun_safety._rs_timestamp_literal(bounds['end']) if bounds else 'cast(null as timestamp)' }},
  {% if not incremental %}_rs_target.n{% elif batch_relation %}(select count(*) from {{ batch_relation }}){% elif batch_rows is not none %}{{ batch_rows }}{% else %}cast(null as bigint){% endif %},
  _rs_target.n,
  'success',
  cast(current_timestamp as timestamp)
from (select count(*) as n from {{ this }}) as _rs_target
{%- endmacro %}
