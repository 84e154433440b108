{#- Records its batch, then fails in a later post-hook: the transaction rolls back and must take
    the ledger row with it. Enabled only by var rs_it_enable_failing_model (pytest turns it on). -#}
{{ config(
    enabled=var('rs_it_enable_failing_model', false),
    materialized='table',
    post_hook=["{{ rerun_safety.record_batch() }}", "select cast('not a number' as integer)"]
) }}

select * from {{ ref('data_events') }}
