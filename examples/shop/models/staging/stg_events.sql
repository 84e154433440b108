-- A plain view over the raw events: rebuilt from the source each time, so always safe.
select event_id, user_id, event_type, amount, currency, event_time, loaded_at
from {{ source('raw', 'events') }}
