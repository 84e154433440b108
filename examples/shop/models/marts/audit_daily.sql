{{ config(materialized='table') }}
-- Reads what events_summarised's hook writes: it inherits the duplicated summaries.
-- depends_on: {{ ref('events_summarised') }}
select batch_day, count(*) as summaries, sum(events) as events
from {{ source('audit', 'batch_summary') }}
group by 1
