{#- Serialise the runs of one model: two runs of the same relation that overlap (a retry started
    while the first attempt still runs, a manual backfill during the nightly run) take turns
    instead of both writing what neither sees of the other (dbt's delete+insert and merge then
    keep the batch twice).

    As a pre-hook on any incremental model (dbt runs it inside the model's transaction, before the
    batch is selected):

        {{ config(pre_hook="{{ rerun_safety.serialize_runs() }}") }}
        {{ config(pre_hook="{{ rerun_safety.serialize_runs(lock_timeout='10min') }}") }}

    PostgreSQL: a transaction-scoped advisory lock keyed by the relation's name, so a second run
    waits until the first has committed, then reads its table as the first left it and replaces its
    rows. Readers and other writers of the table are not blocked. `lock_timeout` (a PostgreSQL
    interval, e.g. '30s'): a run that waits longer fails with one line and writes nothing; none
    (the default) waits as long as the first run takes. The `partition_overwrite` strategy takes the
    same lock by itself.
    DuckDB: nothing to do, one process writes a database file at a time (a second process cannot
    open it). Other engines: nothing (no transaction to hold a lock in). -#}
{% macro serialize_runs(lock_timeout=none) %}
  {{ return(adapter.dispatch('serialize_runs', 'rerun_safety')(lock_timeout)) }}
{% endmacro %}

{% macro default__serialize_runs(lock_timeout=none) %}
  {{ return('') }}
{% endmacro %}

{% macro postgres__serialize_runs(lock_timeout=none) %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {{ return(rerun_safety._rs_run_lock(this, lock_timeout)) }}
{% endmacro %}

{#- The statement that takes the run lock of `relation` in the current transaction (PostgreSQL).
    A DO block, so that a lock_timeout is set for the wait alone and a run that waited too long
    fails with a sentence rather than with "canceling statement due to lock timeout". -#}
{% macro _rs_run_lock(relation, lock_timeout=none) %}
  {%- set key = rerun_safety._po_string('rerun_safety run lock ' ~ (relation | string)) -%}
  {%- if lock_timeout is none -%}
    {{ return('select pg_advisory_xact_lock(hashtextextended(' ~ key ~ ', 0))') }}
  {%- endif -%}
  {%- if lock_timeout is not string or not lock_timeout | trim -%}
    {{ exceptions.raise_compiler_error("serialize_runs, model '" ~ model.name ~ "': lock_timeout must be a PostgreSQL interval such as '30s' or '10min' (got " ~ lock_timeout ~ ").") }}
  {%- endif -%}
  {%- set message = "model '" ~ model.name ~ "': another run of " ~ (relation | string) ~ " held its run lock for longer than lock_timeout (" ~ lock_timeout ~ "); nothing was written. Run it again once that run has ended, or raise lock_timeout." -%}
  {%- set body -%}
declare before text := current_setting('lock_timeout');
begin
  perform set_config('lock_timeout', {{ rerun_safety._po_string(lock_timeout) }}, true);
  perform pg_advisory_xact_lock(hashtextextended({{ key }}, 0));
  perform set_config('lock_timeout', before, true);
exception when lock_not_available then
  raise exception using message = {{ rerun_safety._po_string(message) }};
end
  {%- endset -%}
  {%- set tag = '$rerun_safety_lock$' -%}
  {%- if tag in body -%}
    {{ exceptions.raise_compiler_error("serialize_runs, model '" ~ model.name ~ "': the relation's name or lock_timeout holds " ~ tag ~ ", which the lock statement's body cannot hold.") }}
  {%- endif -%}
  {{ return('do ' ~ tag ~ '\n' ~ body ~ '\n' ~ tag) }}
{% endmacro %}
