"""What differs between engines in the SQL the runner writes, and what each engine can do cheaply.

A `Dialect` is its sqlglot name (it is a `str`, so it goes wherever sqlglot takes a dialect name) with
the SQL pieces that differ and the capability flags that the diff, the game day and the lint choose
their algorithms by. Nothing outside `warehouse/` compares an engine's name: it asks its dialect.
Each engine's subclass lives in its own folder (`duckdb/dialect.py`, ...); `dialect_for` finds it.
This module imports sqlglot only (the diff uses it without dbt).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
from typing import Iterable, Sequence

from sqlglot import exp


class Dialect(str):
    # --- capabilities (what an algorithm may rely on) ---
    # the catalog is in information_schema (else: DESCRIBE-like commands)
    information_schema = True
    # a base table's rows carry an address the engine finds them by at once (rowid): the rows of some
    # buckets are found reading the bucket's columns only, then read whole ("late materialization")
    late_materialization = False
    # a row's address can be read as text and the row read back by it later (ctid): samples and the
    # keyed comparison read rows back by address, and rows are hashed once
    row_addresses = False
    # two connections of one run can work at the same time (each side of a diff in its own backend)
    concurrent_sides = False
    # the planner's statistics give row counts and value ranges without a scan (table_stats)
    planner_statistics = False
    # both sides' bucket checksums as one UNION ALL aggregate (parallel aggregation needs it)
    union_bucket_aggregate = False
    # hashing a row again costs less than comparing its columns one by one (not so for PostgreSQL's
    # typed hash of a wide row: 2.1 s against 0.85 s)
    cheap_row_hash = True
    # SELECT DISTINCT ON (expr) (rows with a column of a type without `=`, json, stay distinct by hash)
    distinct_on = False
    # the keyed comparison of wide tables: "key_join" (an integer key, rows joined back by key),
    # "address" (rows read back by address), None (not offered)
    keyed_comparison: str | None = None
    # each query costs much before any work (a Spark job): totals, buckets and samples are batched
    costly_queries = False
    # a CTE read twice is computed once when asked (`materialized`)
    materialized_ctes = True
    # range buckets may be narrow (an aggregate into many small buckets is cheap)
    narrow_range_buckets = False
    # a perfect-hash aggregate for a dense integer range, set by perfect_hash_setting
    perfect_hash_setting: str | None = None
    # names an unquoted identifier folds to lower case (PostgreSQL) rather than keeps
    folds_unquoted_to_lower = False
    # a dropped relation takes its dependents along only when asked (`cascade`)
    drop_cascade = ""
    # catalog answers may be cached per connection (not where the catalog is a remote metastore)
    cached_catalog = True
    # the game day's timeline orders rows by a row address (rowid), else by all columns
    ordered_by_row_address = False
    # several game-day workers may write one file of this engine at once (False: one writer per file)
    concurrent_writers = True
    # why two runs of one batch cannot be made to overlap here, the first held open after its writes
    # until the second meets them (the concurrent scenario); None: they can (PostgreSQL)
    overlapping_runs: str | None = ("the game day has no lock to hold one run's writes open by while a second "
                                    "run starts")
    # a sandbox is cloned cheaply (a file copy, a template database): scenarios share a first build
    cheap_clones = False
    # a table's rows are read back in the order they were written (so rewriting them reorders them)
    physical_row_order = False
    # the profile sets the engine's thread count (the determinism scenario runs with another one)
    thread_count_setting = False
    # dbt sources may be files the adapter reads (dbt-duckdb's external_location)
    external_sources = False

    # --- what the dbt adapter does (the lint's adapter traps) ---
    dbt_rejects_insert_overwrite = False
    dbt_microbatch_refuses_unique_key = False
    dbt_ignores_partition_by = False
    dbt_microbatch_merges = False

    # --- types and names ---
    display_name = ""  # as people name the engine ("a DuckDB relation")
    default_schema = "main"
    text_type = "text"
    wide_type = "numeric"  # holds sums of 64-bit hashes
    hash_type = "bigint"
    double_type = "double"
    int_div = "/"

    @property
    def materialized(self) -> str:
        """`materialized ` for a CTE read twice (nothing where the engine has no such keyword)."""
        return "materialized " if self.materialized_ctes else ""

    def quote(self, name: str) -> str:
        return quote_name(name, str(self))

    # --- hashes and sums ---
    def row_hash(self, parts: Sequence[str]) -> str:
        """A 64-bit hash of SQL expressions (NULLs included); equal rows hash alike."""
        raise NotImplementedError

    def typed_row_hash(self, items: Sequence[tuple[str, str]]) -> str:
        """The same of (expression, information_schema data_type) pairs (an engine may hash by type)."""
        return self.row_hash([e for e, _ in items])

    def hashed_as_text(self, data_type: str) -> bool:
        """Whether values of this type are hashed through their text form (no hash function of their own)."""
        return False

    def group_hash(self, parts: Sequence[str], items: Sequence[tuple[str, str]]) -> str:
        """A hash of a group of columns compared (never summed) by the keyed comparison."""
        return self.typed_row_hash(items)

    # an exact sum of 64-bit integers as sums of their parts (None: the engine sums wide integers)
    sum_parts: tuple[str, ...] | None = None

    def combine_sums(self, sums: Sequence[str]) -> str:
        """The exact sum from the sums of the parts (sum_parts) of the same values."""
        raise NotImplementedError

    def int_sum(self, expr: str) -> str:
        """The exact sum of a 64-bit integer expression over a group (0 for none)."""
        return f"cast(coalesce(sum({expr}), 0) as {self.wide_type})"

    def in_list(self, expr: str, ints: Iterable[int]) -> str:
        """`expr` is one of these integers (any of them may be outside 64 bits)."""
        ints = [int(v) for v in ints]
        values = ", ".join(str(v) for v in ints)
        wide = any(v >= 2**63 or v < -2**63 for v in ints)
        if len(ints) <= 64:  # a constant list is a cheap filter; a long one is better as a semi-join
            return f"cast({expr} as {self.wide_type}) in ({values})" if wide else f"{expr} in ({values})"
        return self.long_in_list(expr, values, wide)

    def long_in_list(self, expr: str, values: str, wide: bool) -> str:
        return f"{expr} in ({values})"

    def is_distinct(self, a: str, b: str) -> str:
        return f"{a} is distinct from {b}"

    def bucket_division(self, operand: str, lo: int, width: int, widened: bool) -> str:
        """The bucket number of an integer: (operand - lo) divided by width, as an integer."""
        return f"({operand} - ({lo})) {self.int_div} {width}"

    # --- the catalog ---
    def catalog_query(self) -> str:
        """Columns of some relations with each relation's kind: (table_catalog, table_schema,
        table_name, column_name, data_type, table_type), no WHERE yet, aliases c (columns) and t."""
        return _information_schema_catalog(str(self))

    def table_stats(self, con, schema: str, name: str, columns: Sequence[str]) -> tuple | None:
        """(rows, min, max per column) from the planner's statistics, or None (see planner_statistics)."""
        return None

    # --- the lint's --with-data ---
    def lateness_query(self, table: exp.Table, event: str, load: str) -> str | None:
        """`select count(*), p99, max` of the seconds from each row's event time to its load time (rows
        with both), for the lint's --with-data; None where the engine has no such query here."""
        def epoch(column: str) -> exp.Expression:
            return exp.Extract(this=exp.var("epoch"), expression=exp.cast(exp.column(column, quoted=True), "timestamp"))

        late = exp.alias_(exp.Sub(this=epoch(load), expression=epoch(event)), "rs_late")
        rows = (exp.select(late).from_(table.copy())
                .where(exp.and_(exp.column(load, quoted=True).is_(exp.null()).not_(),
                                exp.column(event, quoted=True).is_(exp.null()).not_())))
        p99 = exp.WithinGroup(this=exp.PercentileCont(this=exp.Literal.number("0.99")),
                              expression=exp.Order(expressions=[exp.Ordered(this=exp.column("rs_late"))]))
        return exp.select(exp.func("count", exp.Star()), p99, exp.func("max", exp.column("rs_late"))).from_(
            rows.subquery("rs_rows")).sql(dialect=str(self))

    # --- the game day's SQL ---
    def shuffled_write(self, sql: str) -> str:
        """dbt's `create table ... as (<the model's SQL>)` with the rows written in another physical order
        (by a hash of each row, `row_order`): what the determinism scenario sends, so that every model it
        builds, intermediate ones included, is read by the models below in an order unrelated to the
        reference build's. Any other statement, and every statement on an engine that keeps no row order,
        goes as it is. The model's SQL stays whole inside dbt's own parentheses."""
        if not self.physical_row_order:
            return sql
        found = _CREATE_TABLE_AS.match(sql)
        if not found:
            return sql
        order = exp.Order(expressions=[exp.Ordered(this=self.row_order())]).sql(dialect=str(self))
        return f"{found['head']}select * from (\n{found['body']}\n) as rs_row {order.strip()}\n{found['tail']}"

    def row_order(self, columns: Sequence[str] = ()) -> exp.Expression:
        """An order of the rows of a table aliased `rs_row` (whose columns are `columns`) unrelated to how
        they were written."""
        return exp.func("md5", exp.cast(exp.column("rs_row"), exp.DataType.build("text")))

    def row_share(self, modulus: int, below: int) -> exp.Expression:
        """A deterministic share (below/modulus) of the rows of a table aliased `rs_row`, independent
        of time order (parallel writers commit in any order; late rows are any rows)."""
        return exp.condition(f"abs(hashtext(rs_row::text)) % {int(modulus)} < {int(below)}", dialect="postgres")

    def sorted_values(self, column: exp.Expression, sep: str | None) -> exp.Expression | None:
        """The column with the values it lists in sorted order (a text list split and joined on
        `sep`; an array when None), or None when the engine has no way here."""
        return None

    # the clock's functions: name -> (return type, the column of the clock's row it reads)
    CLOCK_FUNCTIONS = {"rs_timestamp": ("timestamp", "ts"), "rs_timestamptz": ("timestamptz", "tstz"),
                       "rs_date": ("date", "d"), "rs_time": ("time", "cast(ts as time)")}

    def clock_setup(self, schema: str, table: str) -> list[str]:
        t = f"{schema}.{table}"
        """Statements that create the clock (one row) and its functions in a sandbox."""
        return [f"create schema if not exists {schema}", f"create table {t} (ts timestamp, tstz timestamptz, d date)",
                f"insert into {t} values (null, null, null)", *self.clock_functions(schema, table)]

    def clock_functions(self, schema: str, table: str) -> list[str]:
        out = []
        for name, (rtype, column) in self.CLOCK_FUNCTIONS.items():
            sql = self.clock_function(schema, name, rtype, f"select {column} from {schema}.{table}")
            if sql:
                out.append(sql)
        return out

    def clock_function(self, schema: str, name: str, rtype: str, body: str) -> str | None:
        return f"create function {schema}.{name}() returns {rtype} language sql stable as $$ {body} $$"

    def clock_set(self, when: dt.datetime, schema: str, table: str) -> str:
        """Set the clock to `when` (naive, in the data's time frame; as UTC where a zone is needed)."""
        text = when.strftime("%Y-%m-%d %H:%M:%S.%f")
        update = exp.update(
            exp.table_(table, db=schema),
            {"ts": exp.cast(exp.Literal.string(text), exp.DataType.build("timestamp")),
             "tstz": exp.cast(exp.Literal.string(text + "+00"), exp.DataType.build("timestamptz")),
             "d": exp.cast(exp.Literal.string(when.strftime("%Y-%m-%d")), exp.DataType.build("date"))})
        return update.sql(dialect=str(self))

    def from_duckdb_type(self, kind: str) -> str:
        """A DuckDB type name (DuckDB's CSV sniffer reads seeds) as this engine names it (text if none)."""
        try:
            return exp.DataType.build(kind, dialect="duckdb").sql(dialect=str(self))
        except Exception:  # noqa: BLE001 - sqlglot raises several kinds
            return "text"

    # --- connections, sessions, dbt ---
    def dbt_session(self):
        """A context manager that every dbt invocation on this engine runs inside (none by default)."""
        return contextlib.nullcontext()

    def diff_session_settings(self) -> list[str]:
        """Statements a diff's session runs first (a read-only session may SET)."""
        return []

    def warm_output(self) -> dict | None:
        """A profile output dbt can parse a project with, without a connection (None: not warmed)."""
        return None

    def child_environment(self, output: dict, environ) -> tuple[dict[str, str], bool]:
        """What a confined child of this engine needs in its environment beyond the profile's copy (from
        the command's `environ`), and whether the command resolved the warehouse's address for it (it then
        needs no UDP for a name server)."""
        return {}, False

    def login_user(self, output: dict) -> str | None:
        """The role the profile logs in as, where the engine has roles (init --postgres-role names it)."""
        return None

    # --- row addresses (row_addresses, late_materialization) ---
    def address_text(self) -> str:
        """A base table row's address as text (row_addresses engines)."""
        raise NotImplementedError

    def address_item(self, base_table: bool) -> str:
        """The select item `, <address> as t` carrying each row's address ('' where rows have none; NULL
        for a relation that is not a base table)."""
        if not self.row_addresses:
            return ""
        return f", {self.address_text()} as t" if base_table else ", cast(null as text) as t"

    def at_addresses(self, addresses) -> str:
        """The condition for the rows at these addresses (texts of `address_text`, already checked)."""
        raise NotImplementedError

    def late_materialized(self, relation: str, inner: str, cond: str) -> str:
        """Rows of `relation` found by their addresses reading only `inner` filtered by `cond` (an
        expression that starts with ' and ' or ' where '), then read whole (late_materialization)."""
        raise NotImplementedError

    def refusal_words(self) -> tuple[tuple[str, "re.Pattern", bool], ...]:
        """How this engine's messages word a refusal (refusals.py): (kind, pattern, refused by the engine's
        own setting), the pattern's first group that is set naming the path where there is one."""
        return ()

    def network_needs(self, output: dict) -> tuple[tuple[int, ...] | None, bool, bool]:
        """What the confined game day's network may reach for this profile output (confine/): the TCP
        ports it connects to (None: TCP left open, said in the reports; without the machine's network: any
        port of a loopback of its own), whether it keeps the machine's network at all, and whether it opens
        a Unix socket (a server's socket folder as its host)."""
        return None, True, True


@functools.lru_cache(maxsize=4096)
def quote_name(name: str, dialect: str) -> str:
    """A quoted identifier (cached: a wide table's diff quotes each column in many queries)."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


@functools.lru_cache(maxsize=8)
def _information_schema_catalog(dialect: str) -> str:
    def named(name: str, alias: str) -> exp.Table:
        return exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier("information_schema", quoted=True),
                         alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))

    return catalog_select(named("columns", "c"), named("tables", "t"), dialect)


def catalog_select(columns: exp.Expression, tables: exp.Expression, dialect: str) -> str:
    """The catalog query over these column and table sources (aliased c and t)."""
    same = exp.and_(*[exp.column(k, "c").eq(exp.column(k, "t")) for k in ("table_catalog", "table_schema", "table_name")])
    return (exp.select("c.table_catalog", "c.table_schema", "c.table_name", "c.column_name", "c.data_type", "t.table_type")
            .from_(columns).join(tables, on=same, join_type="left").sql(dialect=dialect))


def functions_called(cond: exp.Expression, dialect: str) -> list[str]:
    """The lower-case names of the functions an expression calls, as the engine sees them."""
    names = []
    for func in cond.find_all(exp.Func):
        if isinstance(func, exp.Anonymous):
            names.append(str(func.name).lower())
        elif not isinstance(func, (exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Coalesce, exp.Connector)):
            names.append(func.sql(dialect=dialect).split("(")[0].strip().lower())
    return names


# dbt's create_table_as on the engines that keep row order: an optional query comment, `create [or
# replace] [temporary] table <name> as (`, the model's SQL, `)`. Names are quoted identifiers (any
# character, "" for a quote) or plain words, dotted.
_NAME = r'(?:"(?:[^"]|"")*"|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[\w$]+))*'
_CREATE_TABLE_AS = re.compile(
    r"(?P<head>\s*(?:/\*.*?\*/\s*)*create\s+(?:or\s+replace\s+)?(?:(?:local\s+|global\s+)?(?:temporary|temp)\s+"
    r"|unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?" + _NAME + r"\s+as\s*\()(?P<body>.*)(?P<tail>\)\s*;?\s*)\Z",
    re.IGNORECASE | re.DOTALL)
