{#- The events under the names a staging model gives them. -#}
select event_id as order_id, event_date as paid_date, amount as paid_amount from {{ ref('data_events') }}
