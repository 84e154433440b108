{#- Run ledger storage. Internal (`_rs_` prefix): no contract. -#}

{#- The ledger table: schema from var rerun_safety_ledger_schema (default: the target schema),
    table rerun_safety_ledger. -#}
{% macro _rs_ledger_relation() %}
  {%- set schema = var('rerun_safety_ledger_schema', target.schema) -%}
  {{ return(api.Relation.create(database=target.database, schema=schema, identifier='rerun_safety_ledger', type='table')) }}
{% endmacro %}


{#- Create the ledger schema and table if missing, on the current connection (so inside the
    caller's transaction). -#}
{% macro _rs_ensure_ledger() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set ledger = rerun_safety._rs_ledger_relation() -%}
  {%- do run_query('create schema if not exists ' ~ adapter.quote(ledger.schema)) -%}
  {%- call statement('rerun_safety_ensure_ledger') -%}
    create table if not exists {{ ledger }} (
      model_name varchar,
      relation_name varchar,
      invocation_id varchar,
      window_start timestamp,
      window_end timestamp,
      rows_in_batch bigint,
      rows_in_target bigint,
      status varchar,
      recorded_at timestamp
    )
  {%- endcall -%}
  {{ return('') }}
{% endmacro %}


{% macro _rs_sql_string(value) %}
  {%- if value is none -%}{{ return('null') }}{%- endif -%}
  {{- return("'" ~ (value | string | replace("'", "''")) ~ "'") -}}
{% endmacro %}
