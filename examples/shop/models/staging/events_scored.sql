{{ config(materialized='table') }}
-- UNSAFE: random() makes two builds of the same input differ.
select event_id, event_time, amount, random() as sample_score
from {{ ref('stg_events') }}
