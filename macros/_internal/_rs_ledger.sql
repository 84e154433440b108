{#- Run ledger storage. Internal (`_rs_` prefix): no contract. -#}

{#- The ledger table: schema from var rerun_safety_ledger_schema (default: the target schema),
    table rerun_safety_ledger. -#}
{% macro _rs_ledger_relation() %}
  {{ return(adapter.dispatch('_rs_ledger_relation', 'rerun_safety')()) }}
{% endmacro %}

{% macro default___rs_ledger_relation() %}
  {%- set schema = var('rerun_safety_ledger_schema', target.schema) -%}
  {{ return(api.Relation.create(database=target.database, schema=schema, identifier='rerun_safety_ledger', type='table')) }}
{% endmacro %}

{#- Spark: no database level above the schema (a SparkRelation refuses one). -#}
{% macro spark___rs_ledger_relation() %}
  {%- set schema = var('rerun_safety_ledger_schema', target.schema) -%}
  {{ return(api.Relation.create(schema=schema, identifier='rerun_safety_ledger', type='table')) }}
{% endmacro %}


{#- Create the ledger schema and table if missing, on the current connection (so inside the
    caller's transaction). Several models finishing at once (dbt --threads > 1) would race to
    create it: the package's on-run-start hook (_rs_ledger_on_run_start) creates it before any
    model runs, so here it normally exists already. When it does not (a record_batch call the hook
    could not see), Postgres serialises the creation with a transaction-scoped advisory lock. -#}
{% macro _rs_ensure_ledger() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {{ return(adapter.dispatch('_rs_ensure_ledger', 'rerun_safety')()) }}
{% endmacro %}

{% macro default___rs_ensure_ledger() %}
  {%- set ledger = rerun_safety._rs_ledger_relation() -%}
  {%- do run_query('create schema if not exists ' ~ adapter.quote(ledger.schema)) -%}
  {%- call statement('rerun_safety_ensure_ledger') -%}
    {{ rerun_safety._rs_create_ledger_sql(ledger) }}
  {%- endcall -%}
  {{ return('') }}
{% endmacro %}

{% macro postgres___rs_ensure_ledger() %}
  {#- Postgres: two transactions creating the same table both insert it into pg_type and one fails
      ("duplicate key value violates unique constraint pg_type_typname_nsp_index"), IF NOT EXISTS
      or not. The lock is held until this transaction commits, so the next creator sees the table. -#}
  {%- set ledger = rerun_safety._rs_ledger_relation() -%}
  {#- A plain catalog query, not to_regclass(): a name lookup would leave a negative cache entry
      in this session that hides the schema another transaction commits while we wait. -#}
  {%- set found = run_query("select count(*) from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
      ~ " where n.nspname = " ~ rerun_safety._rs_sql_string(ledger.schema) ~ " and c.relname = " ~ rerun_safety._rs_sql_string(ledger.identifier)) -%}
  {%- if found.rows[0][0] > 0 -%}{{ return('') }}{%- endif -%}
  {%- do run_query("select pg_advisory_xact_lock(hashtext('rerun_safety_ledger'))") -%}
  {%- do run_query('create schema if not exists ' ~ adapter.quote(ledger.schema)) -%}
  {%- call statement('rerun_safety_ensure_ledger') -%}
    {{ rerun_safety._rs_create_ledger_sql(ledger) }}
  {%- endcall -%}
  {{ return('') }}
{% endmacro %}


{% macro _rs_create_ledger_sql(ledger) %}
  {{ return(adapter.dispatch('_rs_create_ledger_sql', 'rerun_safety')(ledger)) }}
{% endmacro %}

{#- Spark: no varchar without a length (string is its text type); a parquet table. -#}
{% macro spark___rs_create_ledger_sql(ledger) %}
    create table if not exists {{ ledger }} (
      model_name string,
      relation_name string,
      invocation_id string,
      window_start timestamp,
      window_end timestamp,
      rows_in_batch bigint,
      rows_in_target bigint,
      status string,
      recorded_at timestamp
    ) using parquet
{% endmacro %}

{% macro default___rs_create_ledger_sql(ledger) %}
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
{% endmacro %}


{#- The body of create_ledger(), the on-run-start hook a project adds: create the ledger once, committed, before
    any model runs, when this invocation builds something that records into it (a selected node
    whose post-hook calls record_batch, or var rerun_safety_ledger_enabled is true: set it when
    record_batch is called from a macro of your own, which the hook cannot see). Otherwise it does
    nothing, so a plain install creates nothing. DuckDB has no lock to serialise concurrent
    creators (a second one fails with "Catalog write-write conflict"): this hook is what makes
    --threads > 1 safe there. -#}
{% macro _rs_ledger_on_run_start() %}
  {%- if not execute or not rerun_safety._rs_ledger_wanted() -%}{{ return('') }}{%- endif -%}
  {#- Hooks start outside a transaction; open one so that the commit below always has one. -#}
  {%- call statement('rerun_safety_ledger_on_run_start', auto_begin=true) -%}select 1{%- endcall -%}
  {%- do rerun_safety._rs_ensure_ledger() -%}
  {%- do adapter.commit() -%}
  {{ return('') }}
{% endmacro %}

{% macro _rs_ledger_wanted() %}
  {%- if flags.WHICH not in ('run', 'build', 'seed', 'snapshot', 'retry') -%}{{ return(false) }}{%- endif -%}
  {%- if var('rerun_safety_ledger_enabled', false) -%}{{ return(true) }}{%- endif -%}
  {%- set selected = selected_resources if selected_resources is defined and selected_resources is not none else none -%}
  {%- for node in graph.nodes.values() -%}
    {%- if selected is none or node.unique_id in selected -%}
      {%- if node.unique_id == 'model.rerun_safety.rerun_safety_run_ledger' -%}{{ return(true) }}{%- endif -%}
      {%- for hook in (node.config.get('post-hook') or node.config.get('post_hook') or []) -%}
        {%- set sql = hook.sql if hook is mapping else hook -%}
        {%- if 'record_batch' in (sql | string) -%}{{ return(true) }}{%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}


{#- A SQL string literal, safe under every value of PostgreSQL's standard_conforming_strings
    (the strategy's literal helper). -#}
{% macro _rs_sql_string(value) %}
  {%- if value is none -%}{{ return('null') }}{%- endif -%}
  {{- return(rerun_safety._po_string(value | string)) -}}
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

{#- Spark: dbt-spark's batch is the temporary view `<identifier>__dbt_tmp` (no schema, no time
    suffix). A view is read again when counted: the count is of the model's select re-run after
    the write, the same rows unless that select depends on what the write changed. -#}
{% macro spark___rs_batch_relation(target_relation) %}
  {%- set name = target_relation.identifier ~ '__dbt_tmp' -%}
  {#- temporary views are listed in every schema: name the model's, not the session's current one -#}
  {%- set found = run_query("show views in " ~ adapter.quote(target_relation.schema) ~ " like " ~ rerun_safety._rs_sql_string(name)) -%}
  {%- for row in found.rows if row[2] and (row[1] | lower) == (name | lower) -%}
    {{ return(adapter.quote(name)) }}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- Whether the ledger table exists, asked of the catalog (not dbt's relation cache: the ledger is
    created by hooks the cache never sees). -#}
{% macro _rs_ledger_exists(ledger) %}
  {{ return(adapter.dispatch('_rs_ledger_exists', 'rerun_safety')(ledger)) }}
{% endmacro %}

{% macro default___rs_ledger_exists(ledger) %}
  {%- set found = run_query(
      "select count(*) from information_schema.tables where table_schema = " ~ rerun_safety._rs_sql_string(ledger.schema)
      ~ " and table_name = " ~ rerun_safety._rs_sql_string(ledger.identifier)) -%}
  {{ return(found.rows[0][0] > 0) }}
{% endmacro %}

{#- Spark: no information_schema; SHOW TABLES of the schema (none when the schema is missing). -#}
{% macro spark___rs_ledger_exists(ledger) %}
  {%- set schemas = run_query("show schemas like " ~ rerun_safety._rs_sql_string(ledger.schema)) -%}
  {%- if schemas.rows | length == 0 -%}{{ return(false) }}{%- endif -%}
  {%- set found = run_query("show tables in " ~ adapter.quote(ledger.schema) ~ " like " ~ rerun_safety._rs_sql_string(ledger.identifier)) -%}
  {#- the listing includes the session's temporary views (isTemporary): a table only -#}
  {{ return(found.rows | rejectattr(2) | list | length > 0) }}
{% endmacro %}

{% macro postgres___rs_batch_relation(target_relation) %}
  {#- Postgres: temp tables live in the session's own pg_temp_N schema. -#}
  {%- set prefix = target_relation.identifier ~ '__dbt_tmp' -%}
  {%- set found = run_query("select c.relname from pg_class c where c.relnamespace = pg_my_temp_schema() and substr(c.relname, 1, "
      ~ (prefix | length) ~ ") = " ~ rerun_safety._rs_sql_string(prefix) ~ " order by c.relname desc limit 1") -%}
  {%- if found.rows | length == 0 -%}{{ return(none) }}{%- endif -%}
  {{ return('pg_temp.' ~ adapter.quote(found.rows[0][0])) }}
{% endmacro %}
