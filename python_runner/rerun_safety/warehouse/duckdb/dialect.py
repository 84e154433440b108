"""DuckDB's SQL: its hashes, its catalog functions, its clock macros, and what it does cheaply."""
from __future__ import annotations

import functools
import re
from typing import Sequence

from sqlglot import exp

from ..dialect import Dialect, catalog_select


class DuckDBDialect(Dialect):
    late_materialization = True  # rowid
    keyed_comparison = "key_join"
    narrow_range_buckets = True
    perfect_hash_setting = "perfect_ht_threshold"
    ordered_by_row_address = True
    concurrent_writers = False  # one writer per database file
    cheap_clones = True  # a file copy
    overlapping_runs = ("one process at a time opens a DuckDB file to write: a second dbt run started while the "
                        "first runs fails to open the database (\"Could not set lock on file\") and writes nothing")
    physical_row_order = True
    thread_count_setting = True  # the profile's settings.threads
    external_sources = True  # dbt-duckdb's sources read from files (external_location)
    dbt_rejects_insert_overwrite = True
    dbt_microbatch_refuses_unique_key = True
    dbt_ignores_partition_by = True

    display_name = "DuckDB"
    default_schema = "main"
    text_type = "varchar"
    wide_type = "hugeint"
    hash_type = "ubigint"
    int_div = "//"

    def row_hash(self, parts: Sequence[str]) -> str:
        if not parts:
            return "cast(0 as ubigint)"
        # hash(a, b) XORs b's hash into a mix of a's: hashed once more, values swapped between
        # two rows of a bucket no longer keep the bucket's sum (a sum of XORs mostly does).
        return f"hash(hash({', '.join(parts)}))" if len(parts) > 1 else f"hash({parts[0]})"

    def group_hash(self, parts: Sequence[str], items: Sequence[tuple[str, str]]) -> str:
        return f"hash({', '.join(parts)})"  # compared, never summed: one mix is enough

    def long_in_list(self, expr: str, values: str, wide: bool) -> str:
        # 64-bit when the values fit: comparing every row as a hugeint costs more
        return f"{expr} in (select unnest([{values}]::{'hugeint' if wide else 'bigint'}[]))"

    def from_duckdb_type(self, kind: str) -> str:
        return kind

    def catalog_query(self) -> str:
        return _catalog()

    def row_order(self, columns: Sequence[str] = ()) -> exp.Expression:
        return exp.func("hash", exp.column("rs_row"))

    def row_share(self, modulus: int, below: int) -> exp.Expression:
        return exp.condition(f"hash(rs_row) % {int(modulus)} < {int(below)}")

    def sorted_values(self, column: exp.Expression, sep: str | None) -> exp.Expression | None:
        lit = exp.Literal.string(sep) if sep is not None else None
        items = column if sep is None else exp.func("string_split", column, lit)
        ordered = exp.func("list_sort", items)
        return ordered if sep is None else exp.func("array_to_string", ordered, lit)

    def clock_function(self, schema: str, name: str, rtype: str, body: str) -> str | None:
        return f"create macro {schema}.{name}() as ({body})"

    def warm_output(self) -> dict | None:
        return {"type": "duckdb", "path": ":memory:", "threads": 1}

    def late_materialized(self, relation: str, inner: str, cond: str) -> str:
        return f"{relation} where rowid in (select rowid from {inner}{cond})"

    def refusal_words(self):
        from ..refusals import DENIED, KERNEL, SANDBOX_FILE

        # a write the kernel refused, and a file outside the sandbox its own setting refused (duckdb/confine.py)
        return ((KERNEL, re.compile(rf'Cannot open file "([^"]*)": {DENIED}'), False),
                (SANDBOX_FILE, re.compile(r'Permission Error: Cannot access (?:file|directory) "([^"]*)" - file system '
                                          r'operations are disabled by configuration'), True))

    def network_needs(self, output: dict) -> tuple[tuple[int, ...] | None, bool, bool]:
        return (), False, False  # a file: no network and no socket at all


@functools.lru_cache(maxsize=1)
def _catalog() -> str:
    """The catalog from the functions information_schema's views are built on, under
    information_schema's names (1-3 ms faster: the views' unions and casts are skipped)."""
    def named(fn: str, alias: str, *cols: exp.Expression) -> exp.Subquery:
        where = [exp.alias_(exp.column("database_name"), "table_catalog"),
                 exp.alias_(exp.column("schema_name"), "table_schema"), exp.column("table_name")]
        return exp.select(*where, *cols).from_(exp.Anonymous(this=fn)).subquery(alias)

    columns = named("duckdb_columns", "c", exp.column("column_name"), exp.column("data_type"),
                    exp.alias_(exp.column("column_index"), "ordinal_position"))
    kind = exp.If(this=exp.column("temporary"), true=exp.Literal.string("LOCAL TEMPORARY"),
                  false=exp.Literal.string("BASE TABLE"))
    tables = named("duckdb_tables", "t", exp.alias_(kind, "table_type"))
    return catalog_select(columns, tables, "duckdb")


DUCKDB = DuckDBDialect("duckdb")
