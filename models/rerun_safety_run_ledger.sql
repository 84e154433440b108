{#- The run ledger for dashboards: one row per committed model run recorded by
    rerun_safety.record_batch(). Disabled unless var rerun_safety_ledger_enabled is true, so a
    plain install creates nothing. The pre-hook creates the ledger table if no run wrote it yet. -#}
{{ config(
    enabled=var('rerun_safety_ledger_enabled', false),
    materialized='view',
    pre_hook="{{ rerun_safety._rs_ensure_ledger() }}"
) }}

select
  model_name,
  relation_name,
  invocation_id,
  window_start,
  window_end,
  rows_in_batch,
  rows_in_target,
  status,
  recorded_at
from {{ rerun_safety._rs_ledger_relation() }}
