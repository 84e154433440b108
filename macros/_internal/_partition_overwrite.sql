{#- Internal helpers of the `partition_overwrite` strategy (no contract). -#}

{% macro _po_error(message) %}
  {{ exceptions.raise_compiler_error("partition_overwrite strategy, model '" ~ model.name ~ "': " ~ message) }}
{% endmacro %}

{#- The profile setting that runs statements outside a transaction (dbt-duckdb
    `disable_transactions: true`, dbt-postgres `autocommit: true`), or '' when there is none. -#}
{% macro _po_transactions_off() %}
  {% if target.get('disable_transactions') %}
    {{ return('disable_transactions: true') }}
  {% endif %}
  {% if target.get('autocommit') %}
    {{ return('autocommit: true') }}
  {% endif %}
  {{ return('') }}
{% endmacro %}

{#- Validate the model config against the columns being written; return
    {'keys': [{'name', 'quoted', 'data_type'}], 'granularity': none|str, 'static': none|list of tuples}. -#}
{#- `raw`: the partition_key to parse, when not the model's own config (Spark resolves it first). -#}
{% macro _po_parse_config(dest_columns, raw=none) %}
  {% set granularities = ['hour', 'day', 'month', 'year'] %}
  {% set shape_hint = "partition_key='<column>', partition_key=['<column>', ...] or partition_key={'field': '<date or timestamp column>', 'granularity': 'day'}" %}
  {% set raw = config.get('partition_key') if raw is none else raw %}
  {% set granularity = none %}
  {% if raw is none or raw == '' or raw == [] %}
    {% do rerun_safety._po_error("partition_key is not set. Add " ~ shape_hint ~ " to the model's config.") %}
  {% elif raw is mapping %}
    {% if not raw.get('field') or raw.get('field') is not string %}
      {% do rerun_safety._po_error("partition_key is a dict without a 'field' column name (got " ~ raw ~ "). Use " ~ shape_hint ~ ".") %}
    {% endif %}
    {% set granularity = (raw.get('granularity') or 'day') %}
    {% if granularity is not string or granularity | lower not in granularities %}
      {% do rerun_safety._po_error("partition_key granularity '" ~ granularity ~ "' is unknown. Set 'granularity' to one of " ~ granularities | join(', ') ~ ".") %}
    {% endif %}
    {% set granularity = granularity | lower %}
    {% set names = [raw.get('field')] %}
  {% elif raw is string %}
    {% set names = [raw] %}
  {% elif raw is iterable %}
    {% set names = raw | list %}
  {% else %}
    {% do rerun_safety._po_error("partition_key must be " ~ shape_hint ~ "; got " ~ raw ~ ".") %}
  {% endif %}

  {% set by_lower = {} %}
  {% for col in dest_columns %}
    {% do by_lower.update({col.name | lower: col}) %}
  {% endfor %}
  {% set keys = [] %}
  {% for name in names %}
    {% if name is not string or (name | lower) not in by_lower %}
      {% do rerun_safety._po_error("partition_key names '" ~ name ~ "', which is not a column of the model (columns: "
          ~ dest_columns | map(attribute='name') | join(', ') ~ "). Set partition_key to one of them.") %}
    {% endif %}
    {% set col = by_lower[name | lower] %}
    {% do keys.append({'name': col.name, 'quoted': adapter.quote(col.name), 'data_type': col.data_type}) %}
    {% if granularity and 'date' not in col.data_type | lower and 'time' not in col.data_type | lower %}
      {% do rerun_safety._po_error("partition_key field '" ~ col.name ~ "' is " ~ col.data_type ~ ", not a date or timestamp, so it cannot have a granularity. Use partition_key='" ~ col.name ~ "' or a date/timestamp field.") %}
    {% endif %}
  {% endfor %}

  {% set static = none %}
  {% set raw_partitions = config.get('partitions') %}
  {% if raw_partitions is not none %}
    {% if raw_partitions is string or raw_partitions is mapping or raw_partitions is not iterable %}
      {% do rerun_safety._po_error("partitions must be a list of partition values, e.g. partitions=['2024-01-01', '2024-01-02'] (a list of lists for a list partition_key); got " ~ raw_partitions ~ ". Remove partitions to replace the partitions present in the batch.") %}
    {% endif %}
    {% if raw_partitions | length == 0 %}
      {% do rerun_safety._po_error("partitions is an empty list. List the partitions to replace, or remove partitions to replace the partitions present in the batch.") %}
    {% endif %}
    {% set static = [] %}
    {% for entry in raw_partitions %}
      {% if keys | length == 1 %}
        {% set values = [entry] %}
      {% elif entry is string or entry is mapping or entry is not iterable or entry | length != keys | length %}
        {% do rerun_safety._po_error("partitions entries must each be a list of " ~ keys | length ~ " values, one per partition_key column ("
            ~ keys | map(attribute='name') | join(', ') ~ "); got " ~ entry ~ ".") %}
      {% else %}
        {% set values = entry | list %}
      {% endif %}
      {% for value in values %}
        {% if value is mapping or (value is iterable and value is not string) %}
          {% do rerun_safety._po_error("partitions values must be scalars (string, number, date or null); got " ~ value ~ ".") %}
        {% endif %}
      {% endfor %}
      {% do static.append(values) %}
    {% endfor %}
  {% endif %}
  {{ return({'keys': keys, 'granularity': granularity, 'static': static}) }}
{% endmacro %}

{#- The partition value of a row: the column itself, or truncated to the granularity. -#}
{% macro _po_part_expr(alias, key, granularity) %}
  {%- if granularity -%}
    date_trunc('{{ granularity }}', {{ alias }}.{{ key.quoted }})
  {%- else -%}
    {{ alias }}.{{ key.quoted }}
  {%- endif -%}
{% endmacro %}

{#- A static partition value as a typed SQL literal; quotes in strings are doubled, never pasted raw. -#}
{% macro _po_literal(value, key, granularity) %}
  {%- if value is sameas true or value is sameas false -%}
    {%- set text = 'true' if value else 'false' -%}
  {%- elif value is number -%}
    {%- set text = value | string -%}
    {%- if text | lower in ['nan', 'inf', '-inf'] -%}
      {% do rerun_safety._po_error("partitions value " ~ text ~ " is not a finite number.") %}
    {%- endif -%}
  {%- elif value is string -%}
    {%- set text = rerun_safety._po_string(value) -%}
  {%- elif value.isoformat is defined -%}
    {%- set text = rerun_safety._po_string(value.isoformat()) -%}
  {%- else -%}
    {% do rerun_safety._po_error("partitions value " ~ value ~ " is not a string, number or date.") %}
  {%- endif -%}
  {%- set typed = 'cast(' ~ text ~ ' as ' ~ key.data_type ~ ')' -%}
  {%- if granularity -%}
    date_trunc('{{ granularity }}', {{ typed }})
  {%- else -%}
    {{ typed }}
  {%- endif -%}
{% endmacro %}

{#- A boolean that is true when the row at `alias` lies in one of the static partitions. -#}
{% macro _po_static_match(alias, cfg) %}
  {%- set alternatives = [] -%}
  {%- for values in cfg.static -%}
    {%- set terms = [] -%}
    {%- for key in cfg['keys'] -%}
      {%- set value = values[loop.index0] -%}
      {%- set expr = rerun_safety._po_part_expr(alias, key, cfg.granularity) -%}
      {%- if value is none -%}
        {%- do terms.append(expr ~ ' is null') -%}
      {%- else -%}
        {%- do terms.append(expr ~ ' = ' ~ rerun_safety._po_literal(value, key, cfg.granularity)) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do alternatives.append('(' ~ terms | join(' and ') ~ ')') -%}
  {%- endfor -%}
  ({{ alternatives | join('\n      or ') }})
{%- endmacro %}

{#- Dynamic mode: the target rows whose partition is present in the batch, as two disjoint
    conditions, one per DELETE. The first (no key NULL) is a plain IN, which both engines plan
    as a hash semi-join; an OR with the NULL case would stop PostgreSQL from doing so (it falls
    back to a per-row subplan that is quadratic once the batch outgrows work_mem). The second
    matches rows with a NULL key NULL-safely and only scans the batch when such rows exist. -#}
{% macro _po_dynamic_matches(dest, source_relation, cfg) %}
  {%- set src = 'DBT_INTERNAL_SOURCE' -%}
  {%- set dest_exprs = [] -%}
  {%- set src_exprs = [] -%}
  {%- set dest_nulls = [] -%}
  {%- set src_nulls = [] -%}
  {%- set same_terms = [] -%}
  {%- for key in cfg['keys'] -%}
    {%- set d = rerun_safety._po_part_expr(dest, key, cfg.granularity) -%}
    {%- set s = rerun_safety._po_part_expr(src, key, cfg.granularity) -%}
    {%- do dest_exprs.append(d) -%}
    {%- do src_exprs.append(s) -%}
    {%- do dest_nulls.append(d ~ ' is null') -%}
    {%- do src_nulls.append(s ~ ' is null') -%}
    {%- do same_terms.append(s ~ ' is not distinct from ' ~ d) -%}
  {%- endfor -%}
  {%- set range_guard = '' -%}
  {%- if cfg.granularity -%}
    {#- A granularity field: compare the raw column with the batch's [first, last + 1 grain)
        range first, so the truncation below runs only on the rows inside it. -#}
    {%- set key = cfg['keys'][0] -%}
    {%- set raw_dest = dest ~ '.' ~ key.quoted -%}
    {%- set raw_src = src ~ '.' ~ key.quoted -%}
    {%- set range_guard -%}
{{ raw_dest }} >= (select date_trunc('{{ cfg.granularity }}', min({{ raw_src }})) from {{ source_relation }} as {{ src }})
    and {{ raw_dest }} < (select date_trunc('{{ cfg.granularity }}', max({{ raw_src }})) + interval '1 {{ cfg.granularity }}' from {{ source_relation }} as {{ src }})
    and {% endset -%}
  {%- endif -%}
  {%- set not_null_match -%}
{{ range_guard }}({{ dest_exprs | join(', ') }}) in (
        select distinct {{ src_exprs | join(', ') }} from {{ source_relation }} as {{ src }}
    )
  {%- endset -%}
  {%- if cfg['keys'] | length == 1 -%}
    {#- one key: the NULL partition is replaced iff the batch has it; an uncorrelated check -#}
    {%- set null_match -%}
{{ dest_nulls[0] }} and exists (
        select 1 from {{ source_relation }} as {{ src }} where {{ src_nulls[0] }}
    )
    {%- endset -%}
  {%- else -%}
    {%- set null_match -%}
({{ dest_nulls | join(' or ') }}) and exists (
        select 1 from {{ source_relation }} as {{ src }}
        where ({{ src_nulls | join(' or ') }}) and {{ same_terms | join(' and ') }}
    )
    {%- endset -%}
  {%- endif -%}
  {{ return([not_null_match, null_match]) }}
{%- endmacro %}

{#- The types whose text form casts back to the same value on both engines; other partition
    values (floats, intervals, nested types, ...) are matched through the batch table instead. -#}
{% macro _po_literal_type(key, granularity) %}
  {%- set t = key.data_type | lower -%}
  {%- if granularity -%}
    {#- truncating a date gives a timestamp: compare the column with timestamps -#}
    {{ return('timestamp' if t == 'date' else key.data_type) }}
  {%- endif -%}
  {%- set base = t.split('(')[0].split(' ')[0] -%}
  {%- if '[' not in t and base in ['tinyint', 'smallint', 'int', 'int2', 'int4', 'int8', 'integer', 'bigint', 'hugeint',
                                   'utinyint', 'usmallint', 'uinteger', 'ubigint', 'uhugeint', 'varchar', 'character',
                                   'char', 'bpchar', 'text', 'string', 'date', 'timestamp', 'timestamptz', 'timestamp_s',
                                   'timestamp_ms', 'timestamp_ns', 'boolean', 'bool', 'numeric', 'decimal'] -%}
    {{ return(key.data_type) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Dynamic mode, when the batch has at most `limit` partitions (16 for a list partition_key)
    whose values have a literal form: read them from the batch (a small temp table, inside the
    same transaction) and return the conditions of the target rows to replace, with the
    partitions written as typed literals. The engines then filter the target scan with
    constants (zone maps on DuckDB, indexes on PostgreSQL) instead of joining it with the batch;
    a granularity field becomes half-open ranges of the raw column, contiguous partitions merged
    into one range, so no row is truncated. Returns none when this form does not apply. -#}
{% macro _po_literal_matches(dest, source_relation, cfg, limit=1000) %}
  {%- set keys = cfg['keys'] -%}
  {%- set granularity = cfg.granularity -%}
  {%- set limit = limit if keys | length == 1 else 16 -%}
  {%- set types = [] -%}
  {%- for key in keys -%}
    {%- set t = rerun_safety._po_literal_type(key, granularity) -%}
    {%- if t is none -%}{{ return(none) }}{%- endif -%}
    {%- do types.append(t) -%}
  {%- endfor -%}
  {%- set src = 'DBT_INTERNAL_SOURCE' -%}
  {%- set parts = [] -%}
  {%- set texts = [] -%}
  {%- set order = [] -%}
  {%- for key in keys -%}
    {%- do parts.append(rerun_safety._po_part_expr(src, key, granularity) ~ ' as rerun_safety_p' ~ loop.index0) -%}
    {%- do texts.append('cast(rerun_safety_p' ~ loop.index0 ~ ' as varchar) as rerun_safety_t' ~ loop.index0) -%}
    {%- do order.append('rerun_safety_p' ~ loop.index0 ~ ' nulls last') -%}
  {%- endfor -%}
  {%- if granularity -%}
    {%- do texts.append("cast(rerun_safety_p0 + interval '1 " ~ granularity ~ "' as varchar) as rerun_safety_next") -%}
  {%- endif -%}
  {%- set query -%}
select {{ texts | join(', ') }}
from (select distinct {{ parts | join(', ') }} from {{ source_relation }} as {{ src }}) as rerun_safety_parts
order by {{ order | join(', ') }}
limit {{ limit + 2 }}
  {%- endset -%}
  {%- set rows = run_query(query).rows -%}
  {%- set values = [] -%}
  {%- set with_null = [] -%}
  {%- for row in rows -%}
    {%- if (row.values() | list)[:keys | length] | select('none') | list | length > 0 -%}
      {%- do with_null.append(row) -%}
    {%- else -%}
      {%- do values.append(row) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if values | length > limit -%}{{ return(none) }}{%- endif -%}

  {%- set matches = [] -%}
  {%- if values and granularity -%}
    {%- set raw = dest ~ '.' ~ keys[0].quoted -%}
    {%- set runs = [] -%}
    {%- for row in values -%}
      {%- if runs and runs[-1][1] == row[0] -%}
        {%- do runs[-1].pop() -%}
        {%- do runs[-1].append(row[1]) -%}
      {%- else -%}
        {%- do runs.append([row[0], row[1]]) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set ranges = [] -%}
    {%- for lo, hi in runs -%}
      {%- do ranges.append('(' ~ raw ~ ' >= ' ~ rerun_safety._po_text_literal(lo, types[0]) ~ ' and ' ~ raw ~ ' < ' ~ rerun_safety._po_text_literal(hi, types[0]) ~ ')') -%}
    {%- endfor -%}
    {%- do matches.append(ranges | join('\n      or ') if ranges | length == 1 else '(' ~ ranges | join('\n      or ') ~ ')') -%}
  {%- elif values -%}
    {%- set tuples = [] -%}
    {%- for row in values -%}
      {%- set literals = [] -%}
      {%- for key in keys -%}
        {%- do literals.append(rerun_safety._po_text_literal(row[loop.index0], types[loop.index0])) -%}
      {%- endfor -%}
      {%- do tuples.append(literals[0] if keys | length == 1 else '(' ~ literals | join(', ') ~ ')') -%}
    {%- endfor -%}
    {%- set columns = [] -%}
    {%- for key in keys -%}{%- do columns.append(dest ~ '.' ~ key.quoted) -%}{%- endfor -%}
    {%- do matches.append('(' ~ columns | join(', ') ~ ') in (' ~ tuples | join(', ') ~ ')') -%}
  {%- endif -%}
  {%- if with_null -%}
    {#- a partition with a NULL value: matched NULL-safely through the batch, as in the general form -#}
    {%- do matches.append(rerun_safety._po_dynamic_matches(dest, source_relation, cfg)[1]) -%}
  {%- endif -%}
  {{ return(matches) }}
{%- endmacro %}

{#- A value read back as text, as a literal of the given type, never pasted raw. -#}
{% macro _po_text_literal(text, data_type) -%}
  cast({{ rerun_safety._po_string(text) }} as {{ data_type }})
{%- endmacro %}

{#- A string literal holding `text` exactly, whatever the server's settings: partition values come
    from the data, so a literal that a setting can reinterpret is an injection. -#}
{% macro _po_string(text) -%}
  {{ return(adapter.dispatch('_po_string', 'rerun_safety')(text)) }}
{%- endmacro %}

{% macro default___po_string(text) -%}
  {{ return("'" ~ (text | string) | replace("'", "''") ~ "'") }}
{%- endmacro %}

{#- Spark reads a backslash in '...' as an escape (spark.sql.parser.escapedStringLiterals is off
    by default): both the backslash and the quote are escaped with one. -#}
{% macro spark___po_string(text) -%}
  {{ return("'" ~ (text | string) | replace("\\", "\\\\") | replace("'", "\\'") ~ "'") }}
{%- endmacro %}

{#- PostgreSQL reads a backslash in '...' as an escape when standard_conforming_strings is off (a
    server, database, role or session setting): a text with a backslash becomes an escape string
    E'...' with backslashes doubled, which means the same under either value of the setting (and
    a text without one means the same in '...' under both). -#}
{% macro postgres___po_string(text) -%}
  {%- set text = text | string -%}
  {%- if "\\" in text -%}
    {{ return("E'" ~ text | replace("\\", "\\\\") | replace("'", "''") ~ "'") }}
  {%- endif -%}
  {{ return("'" ~ text | replace("'", "''") ~ "'") }}
{%- endmacro %}

{#- Engine-specific ways to abort the statement from inside a row expression, with a message
    built from the row (so it is never constant-folded at plan time). Both return a boolean. -#}
{% macro _po_fail_by_cast(message_sql) -%}
  cast({{ message_sql }} as boolean)
{%- endmacro %}

{% macro _po_fail_by_error(message_sql) -%}
  (error({{ message_sql }}) is null)
{%- endmacro %}

{#- Two runs of one model that overlap take turns (PostgreSQL): the replacement's first statement
    takes the relation's run lock (serialize_runs.sql) in dbt's transaction, before the deletes take
    their snapshot, so a second run waits until the first has committed and then replaces what it
    wrote. Config: serialize_runs (default true), lock_timeout (a PostgreSQL interval; default: wait).
    Other engines: nothing (DuckDB: one writer process per file). -#}
{% macro _po_run_lock(relation) %}
  {{ return(adapter.dispatch('_po_run_lock', 'rerun_safety')(relation)) }}
{% endmacro %}

{% macro default___po_run_lock(relation) %}
  {{ return('') }}
{% endmacro %}

{% macro postgres___po_run_lock(relation) %}
  {%- if config.get('serialize_runs', true) is sameas false -%}{{ return('') }}{%- endif -%}
  {{ return(rerun_safety._rs_run_lock(relation, config.get('lock_timeout')) ~ ';') }}
{% endmacro %}

{#- The replacement, inside dbt's transaction. PostgreSQL (form 'cte'): ONE statement whose
    data-modifying CTEs delete the partitions (disjoint row sets) and whose outer INSERT writes
    the batch; the deletes see the statement's snapshot, so inserted rows are never deleted.
    DuckDB (form 'batch'): the same deletes and insert as consecutive statements of one batch,
    because a DuckDB DELETE inside a CTE costs 0.06-0.1 s more per 100,000 replaced rows than
    the same statements run one after the other. Either way the transaction makes it atomic: any
    error (a static-partition violation, a constraint) aborts it and dbt rolls it back, and a
    killed process never commits it. -#}
{% macro _po_statement(arg_dict, fail_macro, form='cte') %}
  {% set off = rerun_safety._po_transactions_off() %}
  {% if off %}
    {% do rerun_safety._po_error("the profile sets " ~ off ~ ", so the delete and the insert could not run in one transaction. Remove " ~ off.split(':')[0] ~ " from the profile's target, or pick another incremental_strategy for this model.") %}
  {% endif %}
  {% set target_relation = arg_dict['target_relation'] %}
  {% set source_relation = arg_dict['temp_relation'] %}
  {% set dest_columns = arg_dict['dest_columns'] %}
  {% set predicates = arg_dict.get('incremental_predicates') or [] %}
  {% if predicates is string %}{% set predicates = [predicates] %}{% endif %}
  {% set cfg = rerun_safety._po_parse_config(dest_columns) %}
  {% set dest_cols_csv = get_quoted_csv(dest_columns | map(attribute='name')) %}

  {% if cfg.static is not none %}
    {#- an empty batch changes nothing here either: no rows usually means nothing arrived, not
        that the listed partitions are now empty -#}
    {% set delete_matches = [rerun_safety._po_static_match('DBT_INTERNAL_DEST', cfg)
        ~ '\n  and exists (select 1 from ' ~ source_relation ~ ')'] %}
    {% set shown = [] %}
    {% for key in cfg['keys'] %}
      {% do shown.append("coalesce(cast(" ~ rerun_safety._po_part_expr('DBT_INTERNAL_SOURCE', key, cfg.granularity) ~ " as varchar), 'NULL')") %}
    {% endfor %}
    {% set prefix = "partition_overwrite strategy, model '" ~ model.name ~ "': a batch row has partition_key ("
        ~ cfg['keys'] | map(attribute='name') | join(', ') ~ ") = (" %}
    {% set suffix = "), outside the static partitions; nothing was changed. Add it to partitions, or filter the model to the listed partitions." %}
    {% set message_sql = rerun_safety._po_string(prefix) ~ " || " ~ shown | join(" || ', ' || ") ~ " || " ~ rerun_safety._po_string(suffix) %}
  {% else %}
    {% set delete_matches = rerun_safety._po_literal_matches('DBT_INTERNAL_DEST', source_relation, cfg) %}
    {% if delete_matches is none %}
      {% set delete_matches = rerun_safety._po_dynamic_matches('DBT_INTERNAL_DEST', source_relation, cfg) %}
    {% endif %}
  {% endif %}

  {#- the batch's rows; a static-partition violation aborts the statement (and the transaction) -#}
  {% set insert_sql %}
insert into {{ target_relation }} ({{ dest_cols_csv }})
select {{ dest_cols_csv }}
from {{ source_relation }} as DBT_INTERNAL_SOURCE
{%- if cfg.static is not none %}
where case when {{ rerun_safety._po_static_match('DBT_INTERNAL_SOURCE', cfg) }}
      then true
      else {{ fail_macro(message_sql) }}
      end
{%- endif %}
  {% endset %}

  {% set sql %}
/* rerun_safety partition_overwrite */
{{ rerun_safety._po_run_lock(target_relation) }}
{%- if form == 'batch' %}
{%- for delete_match in delete_matches %}
delete from {{ target_relation }} as DBT_INTERNAL_DEST
where {{ delete_match }}
{%- for predicate in predicates %}
  and ({{ predicate }})
{%- endfor %};
{% endfor %}
{%- elif delete_matches %}
with
{%- for delete_match in delete_matches %}
rerun_safety_deleted_{{ loop.index }} as (
    delete from {{ target_relation }} as DBT_INTERNAL_DEST
    where {{ delete_match }}
    {%- for predicate in predicates %}
      and ({{ predicate }})
    {%- endfor %}
    returning 1
){{ ',' if not loop.last }}
{%- endfor %}
{%- endif %}
{{ insert_sql }}
  {% endset %}
  {{ return(sql) }}
{% endmacro %}
