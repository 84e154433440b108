{#- One row per key, the latest by order_by, chosen by a total order so the result never depends
    on scan order: order_by descending (NULLs last), then every other column ascending (NULLs
    last). Rows equal on every column are interchangeable, so the output is the same whichever is
    kept. PARTITION BY groups NULL keys together: a NULL key is one key value, and no row is
    dropped because a column is NULL. Returns a complete select over the relation's columns. -#}
{% macro deduplicate(relation, key, order_by) %}
  {{ return(adapter.dispatch('deduplicate', 'rerun_safety')(relation, key, order_by)) }}
{% endmacro %}

{% macro default__deduplicate(relation, key, order_by) %}
  {%- do rerun_safety._rs_require_relation('deduplicate', 'relation', relation) -%}
  {%- set keys = rerun_safety._rs_as_list('deduplicate', 'key', key) -%}
  {%- set orders = rerun_safety._rs_as_list('deduplicate', 'order_by', order_by) -%}
  {%- if not execute -%}
    {{ return('select * from ' ~ relation) }}
  {%- endif -%}
  {%- set columns = adapter.get_columns_in_relation(relation) -%}
  {%- set keys = rerun_safety._rs_resolve_columns('deduplicate', 'key', relation, keys) -%}
  {%- set orders = rerun_safety._rs_resolve_columns('deduplicate', 'order_by', relation, orders) -%}
  {%- set order_terms = [] -%}
  {%- for name in orders -%}
    {%- do order_terms.append(adapter.quote(name) ~ ' desc nulls last') -%}
  {%- endfor -%}
  {%- set all_names = [] -%}
  {%- for col in columns -%}
    {%- do all_names.append(adapter.quote(col.name)) -%}
    {%- if col.name not in keys and col.name not in orders -%}
      {%- do order_terms.append(rerun_safety._rs_tiebreak_expr(col) ~ ' asc nulls last') -%}
    {%- endif -%}
  {%- endfor -%}
select {{ all_names | join(', ') }}
from (
  select {{ all_names | join(', ') }},
    row_number() over (
      partition by {{ rerun_safety._rs_quote_all(keys) | join(', ') }}
      order by {{ order_terms | join(', ') }}
    ) as _rs_row_number
  from {{ relation }}
) as _rs_deduplicated
where _rs_row_number = 1
{%- endmacro %}


{#- The sort expression of one tie-break column. -#}
{% macro _rs_tiebreak_expr(column) %}
  {{ return(adapter.dispatch('_rs_tiebreak_expr', 'rerun_safety')(column)) }}
{% endmacro %}

{% macro default___rs_tiebreak_expr(column) %}
  {{ return(adapter.quote(column.name)) }}
{% endmacro %}

{% macro postgres___rs_tiebreak_expr(column) %}
  {#- Postgres: text sorts by the database collation (locale-dependent) and json has no ordering; byte order ("C") and text casts give the same total order everywhere. -#}
  {%- set dtype = column.dtype | lower -%}
  {%- if dtype in ('json', 'xml', 'point', 'polygon', 'line', 'lseg', 'box', 'path', 'circle') -%}
    {{ return('cast(' ~ adapter.quote(column.name) ~ ' as text) collate "C"') }}
  {%- elif column.is_string() -%}
    {{ return(adapter.quote(column.name) ~ ' collate "C"') }}
  {%- endif -%}
  {{ return(adapter.quote(column.name)) }}
{% endmacro %}
