{#- The dedup-on-read pattern: the raw table is append-only (a rerun may append the same
    records again), and everything downstream reads this view, which keeps the latest row per
    key deterministically. -#}
{{ config(materialized='view') }}

{{ rerun_safety.deduplicate(ref('data_deduplicate'), key='id', order_by='updated_at') }}
