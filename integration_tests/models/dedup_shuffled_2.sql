{{ config(materialized='table') }}

{{ rerun_safety.deduplicate(ref('dedup_shuffled_input_2'), key=['id'], order_by=['updated_at']) }}
