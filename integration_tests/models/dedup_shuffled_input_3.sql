{#- The same rows as data_deduplicate, inserted in a different order (salt 3). -#}
{{ config(materialized='table') }}

{%- set text = 'string' if target.type == 'spark' else 'varchar' %}

select * from {{ ref('data_deduplicate') }}
order by md5(coalesce(cast(id as {{ text }}), '~') || '|' || coalesce(cast(updated_at as {{ text }}), '~')
             || '|' || coalesce(status, '~') || '|' || coalesce(cast(amount as {{ text }}), '~') || '|salt3')
