{#- The `partition_overwrite` strategy on Spark (no contract): Spark's own dynamic partition
    overwrite on a table partitioned by the partition_key columns. Called through the Spark shim
    macros (spark_validate_incremental_strategy, spark_incremental_sql, spark_partition_cols),
    because dbt-spark's incremental materialization only knows its own strategies. -#}

{#- File formats whose Spark file source overwrites partitions dynamically; Delta, Iceberg and Hudi
    tables need their own jars and semantics (replaceWhere, v2 overwrite), Hive SerDe tables the
    Hive insert path, the others (text, csv, json, jdbc, libsvm) do not round-trip every type. -#}
{% macro _po_spark_file_formats() %}
  {{ return(['parquet', 'orc']) }}
{% endmacro %}

{#- The partition_key of a Spark model: partition_key, else dbt-spark's partition_by; both set must
    name the same columns. A granularity has no Spark equivalent (Spark partitions by column
    values), except 'day' on a date column, which is the column itself: it comes back as the plain
    column name. `columns`: the model's columns (name, data_type), or none before they are known. -#}
{% macro _po_spark_partition_key(columns=none) %}
  {%- set raw = config.get('partition_key') -%}
  {%- set partition_by = config.get('partition_by') -%}
  {%- if partition_by is string -%}{%- set partition_by = [partition_by] -%}{%- endif -%}
  {%- if raw is none or raw == '' or raw == [] -%}
    {{ return(partition_by) }}
  {%- endif -%}
  {%- if raw is mapping and raw.get('field') is string -%}
    {%- set field = raw.get('field') -%}
    {%- set granularity = (raw.get('granularity') or 'day') -%}
    {%- set hint = "Spark partitions by column values: add a date column to the model (cast(" ~ field ~ " as date) as " ~ field ~ "_date) and set partition_key='" ~ field ~ "_date'." -%}
    {%- if granularity is not string or granularity | lower != 'day' -%}
      {% do rerun_safety._po_error("partition_key granularity '" ~ granularity ~ "' has no Spark equivalent. " ~ hint) %}
    {%- endif -%}
    {%- if columns is not none -%}
      {%- for col in columns if col.name | lower == field | lower and (col.data_type | lower) != 'date' -%}
        {% do rerun_safety._po_error("partition_key {'field': '" ~ field ~ "', 'granularity': 'day'} needs a date column on Spark; " ~ field ~ " is " ~ col.data_type ~ ". " ~ hint) %}
      {%- endfor -%}
    {%- endif -%}
    {%- set raw = field -%}
  {%- endif -%}
  {%- if partition_by is not none -%}
    {%- set mine = [raw] if raw is string else (raw | list if raw is iterable and raw is not mapping else []) -%}
    {%- if mine | map('lower') | list != partition_by | map('lower') | list -%}
      {% do rerun_safety._po_error("partition_key (" ~ mine | join(', ') ~ ") and partition_by (" ~ partition_by | join(', ') ~ ") name different columns. Set only one of them.") %}
    {%- endif -%}
  {%- endif -%}
  {{ return(raw) }}
{% endmacro %}

{#- The start of every run (before the table is created): the checks that need no table. -#}
{% macro _po_spark_validate(file_format) %}
  {%- set allowed = rerun_safety._po_spark_file_formats() -%}
  {%- if file_format not in allowed -%}
    {% do rerun_safety._po_error("file_format '" ~ file_format ~ "' cannot overwrite partitions with this strategy on Spark. Set file_format to one of " ~ allowed | join(', ') ~ " (default parquet).") %}
  {%- endif -%}
  {%- if target.get('endpoint') -%}
    {% do rerun_safety._po_error("a SQL endpoint connection cannot run insert overwrite. Connect to a cluster, or pick another incremental_strategy for this model.") %}
  {%- endif -%}
  {#- the model's columns (an analysis, no data read): every config error fails the first run
      too, before a table is created with the wrong partitioning -#}
  {%- set columns = [] -%}
  {%- for row in run_query('describe query ' ~ compiled_code).rows -%}
    {%- do columns.append({'name': row[0], 'data_type': row[1]}) -%}
  {%- endfor -%}
  {%- do rerun_safety._po_parse_config(columns, rerun_safety._po_spark_partition_key(columns)) -%}
{% endmacro %}

{#- The partition columns of an existing table, lower-cased, from `describe table`. -#}
{% macro _po_spark_table_partitions(relation) %}
  {%- set rows = run_query('describe table ' ~ relation).rows -%}
  {%- set out = [] -%}
  {%- set state = {'in': false} -%}
  {%- for row in rows -%}
    {%- set name = (row[0] or '') | trim -%}
    {%- if name == '# Partition Information' -%}
      {%- do state.update({'in': true}) -%}
    {%- elif state['in'] and (name == '' or (name.startswith('#') and name != '# col_name')) -%}
      {%- do state.update({'in': false}) -%}
    {%- elif state['in'] and not name.startswith('#') -%}
      {%- do out.append(name | lower) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(out) }}
{% endmacro %}

{#- The statement of an incremental run; see docs/partition-overwrite.md, "Spark". -#}
{% macro _po_spark_statement(arg_dict) %}
  {% set target_relation = arg_dict['target_relation'] %}
  {% set source_relation = arg_dict['temp_relation'] %}
  {% set dest_columns = arg_dict['dest_columns'] %}
  {% set predicates = arg_dict.get('incremental_predicates') or [] %}
  {% if predicates is string %}{% set predicates = [predicates] %}{% endif %}
  {% set typed = [] %}
  {% for col in dest_columns %}{% do typed.append({'name': col.name, 'data_type': col.data_type}) %}{% endfor %}
  {% set cfg = rerun_safety._po_parse_config(dest_columns, rerun_safety._po_spark_partition_key(typed)) %}
  {% for key in cfg['keys'] %}
    {% set t = key.data_type | lower %}
    {% if t.startswith('array') or t.startswith('map') or t.startswith('struct') %}
      {% do rerun_safety._po_error("partition_key column '" ~ key.name ~ "' is " ~ key.data_type ~ "; Spark cannot partition by a nested type. Use a scalar column.") %}
    {% endif %}
  {% endfor %}

  {#- Replacing partitions of a table that is not partitioned by the key would replace all of it. -#}
  {% set want = cfg['keys'] | map(attribute='name') | map('lower') | list %}
  {% set have = rerun_safety._po_spark_table_partitions(target_relation) %}
  {% if have != want %}
    {% do rerun_safety._po_error(target_relation ~ " is " ~ ("partitioned by (" ~ have | join(', ') ~ ")" if have else "not partitioned") ~ ", not by the partition_key (" ~ want | join(', ') ~ "). Run it once with --full-refresh to rebuild it partitioned by (" ~ want | join(', ') ~ ").") %}
  {% endif %}

  {#- Partition columns come last in a partitioned Spark table, as insert overwrite ... partition
      (...) expects them: select the columns in the table's order. -#}
  {% set keys_lower = want %}
  {% set ordered = [] %}
  {% for col in dest_columns if col.name | lower not in keys_lower %}{% do ordered.append(col) %}{% endfor %}
  {% for key in cfg['keys'] %}
    {% for col in dest_columns if col.name | lower == key.name | lower %}{% do ordered.append(col) %}{% endfor %}
  {% endfor %}
  {#- Spark's insert is by position: a table column the batch lacks (on_schema_change
      append_new_columns dropping one) is written NULL, as dbt's insert by name does elsewhere. -#}
  {% set in_batch = [] %}
  {% for col in adapter.get_columns_in_relation(source_relation) %}{% do in_batch.append(col.name | lower) %}{% endfor %}
  {% set batch_exprs = [] %}
  {% set dest_exprs = [] %}
  {% for col in ordered %}
    {% do dest_exprs.append(adapter.quote(col.name)) %}
    {% if col.name | lower in in_batch %}
      {% do batch_exprs.append(adapter.quote(col.name)) %}
    {% else %}
      {% do batch_exprs.append('cast(null as ' ~ col.data_type ~ ') as ' ~ adapter.quote(col.name)) %}
    {% endif %}
  {% endfor %}

  {% call statement('rerun_safety_partition_overwrite_mode') %}
    set spark.sql.sources.partitionOverwriteMode = DYNAMIC
  {% endcall %}

  {% set guard = none %}
  {% if cfg.static is not none %}
    {% set guard = rerun_safety._po_spark_static_prepare(target_relation, source_relation, cfg) %}
  {% endif %}

  {% set sql %}
/* rerun_safety partition_overwrite */
insert overwrite table {{ target_relation }}
partition ({{ rerun_safety._rs_quote_all(cfg['keys'] | map(attribute='name') | list) | join(', ') }})
select {{ batch_exprs | join(', ') }}
from {{ source_relation }} as DBT_INTERNAL_SOURCE
{%- if guard %}
where {{ guard }}
{%- endif %}
{%- if predicates %}
{# the rows of the replaced partitions that the predicates protect are written back: Spark
   replaces whole partitions, so what a delete would keep must be part of the new partition #}
union all
select {{ dest_exprs | join(', ') }}
from {{ target_relation }} as DBT_INTERNAL_DEST
where exists (
    select 1 from {{ source_relation }} as DBT_INTERNAL_SOURCE
    where {% for key in cfg['keys'] %}DBT_INTERNAL_SOURCE.{{ key.quoted }} <=> DBT_INTERNAL_DEST.{{ key.quoted }}{{ ' and ' if not loop.last }}{% endfor %}
  )
  and not coalesce({% for predicate in predicates %}({{ predicate }}){{ ' and ' if not loop.last }}{% endfor %}, false)
{%- endif %}
  {% endset %}
  {{ return(sql) }}
{% endmacro %}

{#- Static mode: read the batch once (row count, rows outside the listed partitions, which listed
    partitions it has rows for), fail before any change when a row is outside, and drop the listed
    partitions the batch has no rows for, in one ALTER TABLE, just before the insert. An empty batch
    changes nothing. Returns the guard of the insert's WHERE: the same check per row, with
    raise_error, for a batch that is not the one read here (a source read twice can change). -#}
{% macro _po_spark_static_prepare(target_relation, source_relation, cfg) %}
  {%- set src = 'DBT_INTERNAL_SOURCE' -%}
  {%- set match = rerun_safety._po_static_match(src, cfg) -%}
  {%- set shown = [] -%}
  {%- for key in cfg['keys'] -%}
    {%- do shown.append("coalesce(cast(" ~ src ~ "." ~ key.quoted ~ " as string), 'NULL')") -%}
  {%- endfor -%}
  {%- set shown_sql = shown | join(" || ', ' || ") -%}
  {%- set has = [] -%}
  {%- for values in cfg.static -%}
    {%- set one = {'keys': cfg['keys'], 'granularity': none, 'static': [values]} -%}
    {%- do has.append('max(case when ' ~ rerun_safety._po_static_match(src, one) ~ ' then 1 else 0 end) as rerun_safety_has_' ~ loop.index0) -%}
  {%- endfor -%}
  {%- set query -%}
select count(*) as rerun_safety_n,
  sum(case when {{ match }} then 0 else 1 end) as rerun_safety_outside,
  min(case when {{ match }} then null else {{ shown_sql }} end) as rerun_safety_shown,
  {{ has | join(',\n  ') }}
from {{ source_relation }} as {{ src }}
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {%- set names = cfg['keys'] | map(attribute='name') | join(', ') -%}
  {%- set suffix = "), outside the static partitions; nothing was changed. Add it to partitions, or filter the model to the listed partitions." -%}
  {%- if row[1] and row[1] > 0 -%}
    {% do rerun_safety._po_error("a batch row has partition_key (" ~ names ~ ") = (" ~ row[2] ~ suffix) %}
  {%- endif -%}
  {%- if row[0] and row[0] > 0 -%}
    {%- set specs = [] -%}
    {%- for values in cfg.static -%}
      {%- if not row[3 + loop.index0] -%}
        {%- set terms = [] -%}
        {%- for key in cfg['keys'] -%}
          {%- do terms.append(key.quoted ~ ' = ' ~ rerun_safety._po_spark_spec_value(values[loop.index0])) -%}
        {%- endfor -%}
        {%- do specs.append('partition (' ~ terms | join(', ') ~ ')') -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if specs -%}
      {%- call statement('rerun_safety_drop_static_partitions') -%}
        alter table {{ target_relation }} drop if exists {{ specs | join(', ') }}
      {%- endcall -%}
    {%- endif -%}
  {%- endif -%}
  {%- set message_sql = rerun_safety._po_string("partition_overwrite strategy, model '" ~ model.name ~ "': a batch row has partition_key (" ~ names ~ ") = (")
      ~ " || " ~ shown_sql ~ " || " ~ rerun_safety._po_string(suffix) -%}
  {{ return('case when ' ~ match ~ ' then true else raise_error(' ~ message_sql ~ ') end') }}
{% endmacro %}

{#- A static partition value in a partition spec (a constant; Spark casts it to the column type). -#}
{% macro _po_spark_spec_value(value) %}
  {%- if value is none -%}{{ return('null') }}{%- endif -%}
  {%- if value is sameas true or value is sameas false -%}{{ return('true' if value else 'false') }}{%- endif -%}
  {%- if value is number -%}{{ return(value | string) }}{%- endif -%}
  {%- if value is string -%}{{ return(rerun_safety._po_string(value)) }}{%- endif -%}
  {%- if value.isoformat is defined -%}{{ return(rerun_safety._po_string(value.isoformat())) }}{%- endif -%}
  {% do rerun_safety._po_error("partitions value " ~ value ~ " is not a string, number or date.") %}
{% endmacro %}
