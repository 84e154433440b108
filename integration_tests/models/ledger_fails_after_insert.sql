{#- Records its batch, then, when var rs_it_fail_after_insert is true, fails in a later post-hook:
    the transaction rolls back and must take the ledger row (and the new table) with it (Spark has
    no transaction: the row stays, see docs/ledger.md). Spark only executes a select when its rows are fetched (a hook's never are) but analyses it at once:
    there the failure is an unknown table. -#}
{{ config(
    materialized='table',
    post_hook=[
        "{{ rerun_safety.record_batch() }}",
        "{{ ('select * from rs_it_no_such_table' if target.type == 'spark' else \"select cast('not a number' as integer)\") if var('rs_it_fail_after_insert', false) else 'select 1' }}"
    ]
) }}

select * from {{ ref('data_events') }}
