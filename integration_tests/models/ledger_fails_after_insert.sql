{#- Records its batch, then, when var rs_it_fail_after_insert is true, fails in a later post-hook:
    the transaction rolls back and must take the ledger row (and the new table) with it. -#}
{{ config(
    materialized='table',
    post_hook=[
        "{{ rerun_safety.record_batch() }}",
        "{{ \"select cast('not a number' as integer)\" if var('rs_it_fail_after_insert', false) else 'select 1' }}"
    ]
) }}

select * from {{ ref('data_events') }}
