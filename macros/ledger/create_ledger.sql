{#- create_ledger(): an on-run-start hook for the project's dbt_project.yml
        on-run-start: ["{{ rerun_safety.create_ledger() }}"]
    creates the run ledger once, committed, before any model runs, when the invocation builds a
    model whose post-hook calls record_batch (or var rerun_safety_ledger_enabled is true: set it
    when record_batch is called from a macro of your own). Needed with --threads > 1 on DuckDB,
    where models finishing at once would race to create it ("Catalog write-write conflict"); on
    PostgreSQL the post-hooks serialise the creation themselves. A no-op otherwise. -#}
{% macro create_ledger() %}
  {{ return(rerun_safety._rs_ledger_on_run_start()) }}
{% endmacro %}
