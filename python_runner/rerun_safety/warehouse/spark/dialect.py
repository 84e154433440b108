"""Spark SQL: xxhash64, exact sums without BigDecimal, DESCRIBE for the catalog, a parquet clock."""
from __future__ import annotations

import datetime as dt
import re
from typing import Sequence

from sqlglot import exp

from ..dialect import Dialect

# a bigint as three parts of 21-22 bits (high, middle, low) and each part's weight
SUM_PARTS = ("shiftright({0}, 42)", "(shiftright({0}, 21) & 2097151)", "({0} & 2097151)")
_WEIGHTS = (4398046511104, 2097152, 1)


class SparkDialect(Dialect):
    information_schema = False  # DESCRIBE
    costly_queries = True  # a query is a job: ~0.3 s before any work
    materialized_ctes = False
    cached_catalog = False  # the metastore is another process's
    overlapping_runs = ("Spark SQL has no transaction or lock the game day can hold one run's writes open by "
                        "while a second run starts")
    sum_parts = SUM_PARTS

    display_name = "Spark"
    default_schema = "default"
    text_type = "string"
    wide_type = "decimal(38,0)"
    int_div = "div"

    def lateness_query(self, table, event, load):
        return None  # the lint compiles on DuckDB and PostgreSQL only

    def refusal_words(self):
        from ..refusals import DENIED, KERNEL

        # Hadoop's local file system refused by the kernel: a job's `_temporary` folder under the path it
        # writes, or the file itself
        return ((KERNEL, re.compile(r'Mkdirs failed to create (?:file:)?(/[^\s]*?)(?:/_temporary/|\s|$)'), False),
                (KERNEL, re.compile(rf'java\.io\.FileNotFoundException: (?:file:)?(/[^\s]*) \({DENIED}\)'), False))

    def network_needs(self, output: dict) -> tuple[tuple[int, ...] | None, bool, bool]:
        if str(output.get("method") or "") in ("thrift", "http"):
            try:
                return (int(output.get("port") or 10000),), True, False
            except (TypeError, ValueError):
                return (10000,), True, False
        # a session: the JVM and its Python gateway talk over TCP ports of their choosing, on a loopback of
        # the confined process's own (no other network)
        return None, False, False

    def row_hash(self, parts: Sequence[str]) -> str:
        if not parts:
            return "cast(0 as bigint)"
        # xxhash64 chains its arguments as seeds and skips NULLs: (NULL, 1) and (1, NULL) would
        # hash alike, so each part carries its own NULL flag
        return f"xxhash64({', '.join(f'{p}, isnull({p})' for p in parts)})"

    def group_hash(self, parts: Sequence[str], items: Sequence[tuple[str, str]]) -> str:
        return f"hash({', '.join(parts)})"

    def combine_sums(self, sums: Sequence[str]) -> str:
        """The exact decimal(38,0) of three part sums (SUM_PARTS), combined once per group."""
        return " + ".join(f"cast({s} as decimal(38,0)) * {w}" for s, w in zip(sums, _WEIGHTS))

    def int_sum(self, expr: str) -> str:
        # The exact sum as a decimal(38,0), i.e. sum(cast(h as decimal(38,0))) (a bigint sum
        # overflows, an error under ANSI mode), but summed as three bigints of 21-22 bits each:
        # a decimal(38,0) sum runs on Java BigDecimals, 1.5-2.5x the time of the whole scan.
        # Each part's sum stays exact up to 2^41 rows.
        return f"cast({self.combine_sums([f'coalesce(sum({p.format(expr)}), 0)' for p in SUM_PARTS])} as decimal(38,0))"

    def long_in_list(self, expr: str, values: str, wide: bool) -> str:
        # a constant list becomes a hash set (InSet)
        return f"{f'cast({expr} as decimal(38,0))' if wide else expr} in ({values})"

    def is_distinct(self, a: str, b: str) -> str:
        return f"not ({a} <=> {b})"

    # a parquet table written by one ordered query is read back in that order (its files and the rows in
    # each): the determinism scenario's rewrite changes what an unordered collect_list gathers first
    physical_row_order = True

    def row_order(self, columns: Sequence[str] = ()) -> exp.Expression:
        # Spark allows no `*` in ORDER BY: the columns by name (each with its NULL flag, as row_hash)
        return exp.maybe_parse(self.row_hash([f"rs_row.{exp.to_identifier(c, quoted=True).sql(dialect='spark')}"
                                              for c in columns]), dialect="spark")

    def shuffled_write(self, sql: str) -> str:
        """As it is: a Spark table keeps no row order across its files, and its ORDER BY names no whole row
        (reorder_inputs writes the inputs anew by their columns instead)."""
        return sql

    def row_share(self, modulus: int, below: int) -> exp.Expression:
        return exp.condition(f"pmod(xxhash64(rs_row.*), {int(modulus)}) < {int(below)}", dialect="spark")

    def dbt_session(self):
        """dbt-spark's Thrift sessions, whose close may fail or hang: tolerated (see session.py)."""
        from .session import tolerant_thrift_close

        return tolerant_thrift_close()

    def clock_setup(self, schema: str, table: str) -> list[str]:
        t = f"{schema}.{table}"
        # a parquet table (no UPDATE: clock_set overwrites its one row); `timestamp` is Spark's zoned
        # kind, `timestamp_ntz` the naive one. The schema comes from the connection's create_schema
        # (a sandbox's databases are named by the sandbox).
        return [f"create table {t} (ts timestamp_ntz, tstz timestamp, d date) using parquet",
                f"insert into {t} values (null, null, null)", *self.clock_functions(schema, table)]

    def clock_function(self, schema: str, name: str, rtype: str, body: str) -> str | None:
        if rtype == "time":
            return None  # no time-of-day type to return
        spark_type = {"timestamp": "timestamp_ntz", "timestamptz": "timestamp"}.get(rtype, rtype)
        return f"create or replace function {schema}.{name}() returns {spark_type} return ({body})"

    def clock_set(self, when: dt.datetime, schema: str, table: str) -> str:
        text = when.strftime("%Y-%m-%d %H:%M:%S.%f")
        return (f"insert overwrite table {schema}.{table} select "
                f"cast('{text}' as timestamp_ntz), cast('{text}+00:00' as timestamp), "
                f"cast('{when.strftime('%Y-%m-%d')}' as date)")


SPARK = SparkDialect("spark")
