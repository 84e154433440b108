{#- The same rows as data_deduplicate, inserted in a different order (salt 1). -#}
{{ config(materialized='table') }}

select * from {{ ref('data_deduplicate') }}
order by md5(coalesce(cast(id as varchar), '~') || '|' || coalesce(cast(updated_at as varchar), '~')
             || '|' || coalesce(status, '~') || '|' || coalesce(cast(amount as varchar), '~') || '|salt1')
