select * from {{ ref('data_events') }}
