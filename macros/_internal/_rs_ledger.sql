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


{#- The temp relation dbt built this incremental run's batch in (`<identifier>__dbt_tmp<time>`),
    found in the session's temp schema; none when there is none. It still exists when post-hooks
    run (dbt drops it after COMMIT, or at session end). -#}
{% macro _rs_batch_relation(target_relation) %}
  {{ return(adapter.dispatch('_rs_batch_relation', 'rerun_safety')(target_relation)) }}
{% endmacro %}

{% macro default___rs_batch_relation(target_relation) %}
  {{ return(none) }}
{% endmacro %}

{% macro duckdb___rs_batch_relation(target_relation) %}
  {#- DuckDB: temp tables live in the `temp` catalog, listed by duckdb_tables(). -#}
  {%- set prefix = target_relation.identifier ~ '__dbt_tmp' -%}
  {%- set found = run_query("select table_name from duckdb_tables() where temporary and substr(table_name, 1, "
      ~ (prefix | length) ~ ") = " ~ rerun_safety._rs_sql_string(prefix) ~ " order by table_name desc limit 1") -%}
  {%- if found.rows | length == 0 -%}{{ return(none) }}{%- endif -%}
  {{ return('temp.main.' ~ adapter.quote(found.rows[0][0])) }}
{% endmacro %}

{% macro postgres___rs_batch_relation(target_relation) %}
  {#- Postgres: temp tables live in the session's own pg_temp_N schema. -#}
  {%- set prefix = target_relation.identifier ~ '__dbt_tmp' -%}
  {%- set found = run_query("select c.relname from pg_class c where c.relnamespace = pg_my_temp_schema() and substr(c.relname, 1, "
      ~ (prefix | length) ~ ") = " ~ rerun_safety._rs_sql_string(prefix) ~ " order by c.relname desc limit 1") -%}
  {%- if found.rows | length == 0 -%}{{ return(none) }}{%- endif -%}
  {{ return('pg_temp.' ~ adapter.quote(found.rows[0][0])) }}
{% endmacro %}
