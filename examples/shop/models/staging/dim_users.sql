{{ config(materialized='table') }}
-- SAFE: static reference data joined to a seed.
select u.user_id, u.country, c.currency, c.rate_to_usd
from {{ source('raw', 'users') }} u
join {{ ref('currencies') }} c on c.currency = u.currency
