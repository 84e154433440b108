"""The engines' SQL pieces: quoting, row hashes per engine, catalog lookups, the user's filter."""

from __future__ import annotations

import functools
import re
from typing import Iterable, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from ..sandbox.base import Connection, ident
from .results import DiffError, Side


_TEMPORAL = ("date", "timestamp", "datetime")
_TID = re.compile(r"^\(\d+,\d+\)$")
_INTEGER = {"tinyint", "smallint", "integer", "bigint", "int", "int2", "int4", "int8"}

# PostgreSQL types without an extended hash function: hashed through their text form.
_PG_TEXT_HASHED = ("json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle",
                   "user-defined", "money")


def _at_addresses(tids) -> str:
    """PostgreSQL: rows at these addresses (ctid texts already matched against _TID)."""
    return f"ctid = any(array[{', '.join(repr(t) for t in tids)}]::tid[])"


def text_type(dialect: str) -> str:
    return {"duckdb": "varchar", "spark": "string"}.get(dialect, "text")


def wide_type(dialect: str) -> str:
    """An integer type that holds sums of 64-bit hashes."""
    return {"duckdb": "hugeint", "spark": "decimal(38,0)"}.get(dialect, "numeric")


def materialized(dialect: str) -> str:
    """`materialized ` for a CTE read twice (Spark has no such keyword)."""
    return "" if dialect == "spark" else "materialized "


@functools.lru_cache(maxsize=4096)
def _q(name: str, dialect: str) -> str:
    """A quoted identifier (cached: a wide table's diff quotes each column in many queries)."""
    return ident(name).sql(dialect=dialect)


def _rel(schema: str, name: str, dialect: str) -> str:
    return f"{_q(schema, dialect)}.{_q(name, dialect)}"


def _hash_sql(parts: Sequence[str], dialect: str) -> str:
    if not parts:
        return "cast(0 as ubigint)" if dialect == "duckdb" else "cast(0 as bigint)"
    if dialect == "spark":
        # xxhash64 chains its arguments as seeds and skips NULLs: (NULL, 1) and (1, NULL) would
        # hash alike, so each part carries its own NULL flag
        return f"xxhash64({', '.join(f'{p}, isnull({p})' for p in parts)})"
    if dialect == "duckdb":
        # hash(a, b) XORs b's hash into a mix of a's: hashed once more, values swapped between
        # two rows of a bucket no longer keep the bucket's sum (a sum of XORs mostly does).
        return f"hash(hash({', '.join(parts)}))" if len(parts) > 1 else f"hash({parts[0]})"
    # Uses each type's hash opclass, so it agrees with `=`: -0.0 = 0.0, 1.0 = 1.00, NaN = NaN.
    return f"hash_record_extended(row({', '.join(parts)}), 0)"


# PostgreSQL: the extended hash function of each type's default hash opclass (the one
# `hash_record_extended` and hash joins use, so it agrees with `=`: -0.0 = 0.0, 1.0 = 1.00,
# 'a ' = 'a' in char(n)), called per column; a row() record costs about twice as much.
_PG_HASH_FUNCS = {
    "smallint": "hashint2extended", "integer": "hashint4extended",
    "text": "hashtextextended", "character varying": "hashtextextended", "character": "hashbpcharextended",
    "real": "hashfloat4extended", "double precision": "hashfloat8extended", "numeric": "hash_numeric_extended",
    "uuid": "uuid_hash_extended", "jsonb": "jsonb_hash_extended", "interval": "interval_hash_extended",
    "timestamp without time zone": "timestamp_hash_extended", "time without time zone": "time_hash_extended",
}


def _pg_const(i: int) -> int:
    """A fixed 64-bit constant per column position (the hash of NULL there), as a signed bigint."""
    v = ((i + 1) * 0x9E3779B97F4A7C15) & (2**64 - 1)
    return v - 2**64 if v >= 2**63 else v


def _pg_hash(items: Sequence[tuple[str, str]]) -> str:
    """A 64-bit PostgreSQL hash of (expression, information_schema data_type) pairs.

    Each column is hashed by its own type's hash function seeded by its position (NULL: a constant
    per position), the column hashes are XORed, and the result goes through one more hash of all
    its 64 bits. That last step matters for sums: `hash_record_extended` combines its columns
    linearly (h = 31 h + hash(col)), so swapping one column's values between two rows of a bucket
    keeps the sum of their hashes, up to wraparound (two thirds of such swaps went unseen).
    bigint is hashed from all 64 bits (its own hash folds them to 32 first); types without a
    function here share one `hash_record_extended(row(...))`.
    """
    if not items:
        return "cast(0 as bigint)"
    terms, rest = [], []
    for i, (expr, typ) in enumerate(items):
        if typ == "bigint":
            term = f"hashint4extended({i + 1}, {expr})"  # the value as the seed: all 64 bits mixed
        elif typ == "numeric":
            # numeric's hash returns the seed for NaN, Infinity and -Infinity alike: those (and only a
            # value whose hash happens to equal the seed) are hashed as float8, which tells them apart
            term = (f"case when hash_numeric_extended({expr}, {i + 1}) = {i + 1} then "
                    f"hashfloat8extended(cast({expr} as double precision), {i + 1}) "
                    f"else hash_numeric_extended({expr}, {i + 1}) end")
        elif typ == "boolean":
            term = f"hashint4extended(cast({expr} as integer), {i + 1})"
        elif typ in _PG_HASH_FUNCS:
            term = f"{_PG_HASH_FUNCS[typ]}({expr}, {i + 1})"
        else:
            rest.append(expr)
            continue
        terms.append(f"coalesce({term}, ({_pg_const(i)}))")
    if rest:
        terms.append(f"hash_record_extended(row({', '.join(rest)}), {len(items) + 1})")
    return f"hashint4extended(0, {' # '.join(terms)})"


def row_hash(columns: list[str], dialect: str, alias: str | None = None) -> str:
    return _hash_sql([(f"{alias}." if alias else "") + _q(c, dialect) for c in columns], dialect)


def _hash_type(dialect: str) -> str:
    return "ubigint" if dialect == "duckdb" else "bigint"


# Spark: a bigint as three parts of 21-22 bits (high, middle, low) and each part's weight
SPARK_PARTS = ("shiftright({0}, 42)", "(shiftright({0}, 21) & 2097151)", "({0} & 2097151)")
SPARK_WEIGHTS = (4398046511104, 2097152, 1)


def spark_combine(sums: Sequence[str]) -> str:
    """The exact decimal(38,0) of three part sums (SPARK_PARTS), combined once per group."""
    return " + ".join(f"cast({s} as decimal(38,0)) * {w}" for s, w in zip(sums, SPARK_WEIGHTS))


def _int_sum(expr: str, dialect: str) -> str:
    if dialect == "spark":
        # The exact sum as a decimal(38,0), i.e. sum(cast(h as decimal(38,0))) (a bigint sum
        # overflows, an error under ANSI mode), but summed as three bigints of 21-22 bits each:
        # a decimal(38,0) sum runs on Java BigDecimals, 1.5-2.5x the time of the whole scan.
        # Each part's sum stays exact up to 2^41 rows.
        return f"cast({spark_combine([f'coalesce(sum({p.format(expr)}), 0)' for p in SPARK_PARTS])} as decimal(38,0))"
    return f"cast(coalesce(sum({expr}), 0) as {wide_type(dialect)})"


def _in_list(expr: str, ints: Iterable[int], dialect: str) -> str:
    ints = [int(v) for v in ints]
    values = ", ".join(str(v) for v in ints)
    if len(ints) <= 64:  # a constant list is a cheap filter; a long one is better as a semi-join
        cast = wide_type(dialect)
        return f"cast({expr} as {cast}) in ({values})" if any(v >= 2**63 or v < -2**63 for v in ints) \
            else f"{expr} in ({values})"
    if dialect == "duckdb":  # 64-bit when the values fit: comparing every row as a hugeint costs more
        wide = any(v >= 2**63 or v < -2**63 for v in ints)
        return f"{expr} in (select unnest([{values}]::{'hugeint' if wide else 'bigint'}[]))"
    if dialect == "spark":  # a constant list becomes a hash set (InSet)
        wide = any(v >= 2**63 or v < -2**63 for v in ints)
        return f"{f'cast({expr} as decimal(38,0))' if wide else expr} in ({values})"
    # A constant array is hashed once (PostgreSQL 14+) and, unlike a semi-join, filters inside the
    # workers of a parallel scan.
    wide = any(v >= 2**63 or v < -2**63 for v in ints)
    return f"{expr} = any(array[{values}]::{'numeric' if wide else 'bigint'}[])"


def _rows_of_keys(src: str, key: str, keys: Iterable[int]) -> str:
    """DuckDB: a derived table of the rows of `src` (FROM ... [WHERE ...]) whose integer `key` is one
    of `keys`, by a join with the list rather than an IN filter: the join's filter on the key cuts
    the scan (3,000 keys of 10M rows: 0.032 s against 0.039 s as a semi-join; 1,000 of 200,000
    rows of 150 columns: 0.010 s against 0.015 s)."""
    values = ", ".join(str(int(v)) for v in keys)
    return _rows_joined(src, key, f"select unnest([{values}]::bigint[]) as rs_k")


def _rows_joined(src: str, key: str, keys: str) -> str:
    """A derived table of the rows of `src` (FROM ... [WHERE ...]) whose `key` is among the `rs_k`
    column of the query `keys`."""
    return f"(select rs_t.* from (select * from {src}) rs_t join ({keys}) rs_keys on rs_t.{key} = rs_keys.rs_k) rs_x"


# Functions a filter never needs: settings, sequences, locks, signals, files, large objects, remote
# or dynamic SQL, sleeps, and volatile values (PostgreSQL is also asked, see diff_command).
_UNSAFE_FUNCTION = re.compile(
    r"(set_config|setval|nextval|currval|lastval|setseed|random|rand|uuid|gen_random_uuid|uuid_generate_.*"
    r"|pg_.*|lo_.*|dblink.*|.*_to_xml.*|query_to_.*|current_setting|txid_.*|clock_timestamp|timeofday"
    r"|sleep|read_.*|write_.*|copy.*|getenv|load_extension|install_extension|.*_scan)", re.I)


def where_functions(cond: exp.Expression, dialect: str) -> list[str]:
    """The lower-case names of the functions a --where expression calls, as the engine sees them."""
    names = []
    for func in cond.find_all(exp.Func):
        if isinstance(func, exp.Anonymous):
            names.append(str(func.name).lower())
        elif not isinstance(func, (exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Coalesce, exp.Connector)):
            names.append(func.sql(dialect=dialect).split("(")[0].strip().lower())
    return names


def parse_where(sql: str | None, dialect: str) -> exp.Expression | None:
    """A user filter: exactly one boolean expression, no statements, subqueries or semicolons."""
    if sql is None or not sql.strip():
        return None
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
        statements = sqlglot.parse(sql, read=dialect)
    except (ParseError, TokenError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "parse error"
        raise DiffError(f"--where is not valid {dialect} SQL: {first}") from None
    if any(t.token_type == TokenType.SEMICOLON for t in tokens) or len(statements) != 1 or statements[0] is None:
        raise DiffError("--where must be one boolean expression, without semicolons")
    cond = statements[0]
    for node in cond.walk():  # comments are not re-emitted: the engine's rules for them (nesting) differ
        node.comments = None
    forbidden = (exp.Query, exp.Subquery, exp.Command, exp.DDL, exp.DML, exp.AggFunc, exp.Window,
                 exp.Set, exp.Use, exp.Transaction, exp.Commit, exp.Rollback)
    bad = cond.find(*forbidden) if not isinstance(cond, forbidden) else cond
    if bad is not None:
        raise DiffError(f"--where must be a plain boolean expression: {type(bad).__name__.lower()} is not "
                        "allowed (no subqueries, statements, aggregates or window functions)")
    for name in where_functions(cond, dialect):
        if _UNSAFE_FUNCTION.fullmatch(name):
            raise DiffError(f"--where may not call {name}(): a filter reads rows; it cannot change settings or "
                            "data, or call volatile functions")
    inner = cond.unnest() if isinstance(cond, exp.Paren) else cond
    if not isinstance(inner, (exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Column, exp.Func)) \
            or isinstance(inner, (exp.Literal,)):
        raise DiffError(f"--where must be a boolean condition, got: {cond.sql(dialect=dialect)}")
    return cond


def _where_relation(con: Connection, table: exp.Table, alias: str | None = None) -> exp.Expression:
    """information_schema's condition for one relation (its schema, name, and catalog if named)."""
    conds = [exp.column("table_schema", alias).eq(exp.Literal.string(table.db or ("main" if con.dialect == "duckdb"
                                                                                  else "public"))),
             exp.column("table_name", alias).eq(exp.Literal.string(table.name))]
    if table.catalog:
        conds.append(exp.column("table_catalog", alias).eq(exp.Literal.string(table.catalog)))
    return exp.and_(*conds)


def _kinds(con: Connection) -> dict[str, bool]:
    """Per connection: relation (as DuckDB SQL) -> whether it is a base table."""
    return con.__dict__.setdefault("_rs_base_tables", {})


def _is_base_table(side: Side) -> bool:
    if side.con.dialect == "spark":
        return False  # only DuckDB's rowid and PostgreSQL's ctid use it
    cache = _kinds(side.con)
    key = side.table.sql(dialect="duckdb")
    if key not in cache:
        row = side.con.fetchone(exp.select("table_type").from_(exp.Table(this=ident("tables"), db=ident("information_schema")))
                                .where(_where_relation(side.con, side.table)))
        cache[key] = bool(row) and str(row[0]).upper() == "BASE TABLE"
    return cache[key]


def columns_of(con: Connection, table: exp.Table) -> list[tuple[str, str]]:
    return columns_of_pair(con, table, None)[0]


def columns_of_pair(con: Connection, left: exp.Table, right: exp.Table | None) -> tuple[list, list]:
    """(name, type) of each column of `left` and of `right` (None: left alone), in one catalog
    query on DuckDB and PostgreSQL (a wide pair: 3 ms for both against 10 ms for two queries)."""
    if con.dialect == "spark":  # no information_schema: DESCRIBE
        return con.columns(left.db or "default", left.name), (
            con.columns(right.db or "default", right.name) if right is not None else [])
    tables = [left] if right is None else [left, right]
    if con._caching and not any(t.catalog for t in tables):  # see Connection.catalog_cached
        found = [con.columns(t.db or ("main" if con.dialect == "duckdb" else "public"), t.name) for t in tables]
        return found[0], found[1] if right is not None else []
    # the relation's kind comes along (a base table's rows can be read back by rowid or ctid; see
    # _is_base_table), rather than in a query of its own
    d = con.dialect
    where = " or ".join(_where_relation(con, t, "c").sql(dialect=d) for t in tables)
    rows = con.fetchall(f"{_catalog_query(d)} where {where} order by c.ordinal_position")
    out: tuple[list, list] = ([], [])
    for i, t in enumerate(tables):
        schema, name, catalog = t.db or ("main" if d == "duckdb" else "public"), t.name, t.catalog
        mine = [r for r in rows if r[1] == schema and r[2] == name and (not catalog or r[0] == catalog)]
        if mine:
            _kinds(con)[t.sql(dialect="duckdb")] = str(mine[0][5]).upper() == "BASE TABLE"
        out[i].extend((r[3], str(r[4])) for r in mine)
    return out


@functools.lru_cache(maxsize=8)
def _catalog_query(dialect: str) -> str:
    """information_schema's columns of some relations, with each relation's kind (no WHERE yet).
    On DuckDB the same from the catalog functions that information_schema's views are built on,
    under information_schema's names (1-3 ms faster: the views' unions and casts are skipped)."""
    same = exp.and_(*[exp.column(k, "c").eq(exp.column(k, "t")) for k in ("table_catalog", "table_schema", "table_name")])
    if dialect == "duckdb":
        def named(fn: str, alias: str, *cols: exp.Expression) -> exp.Subquery:
            where = [exp.alias_(exp.column("database_name"), "table_catalog"),
                     exp.alias_(exp.column("schema_name"), "table_schema"), exp.column("table_name")]
            return exp.select(*where, *cols).from_(exp.Anonymous(this=fn)).subquery(alias)

        columns = named("duckdb_columns", "c", exp.column("column_name"), exp.column("data_type"),
                        exp.alias_(exp.column("column_index"), "ordinal_position"))
        kind = exp.If(this=exp.column("temporary"), true=exp.Literal.string("LOCAL TEMPORARY"),
                      false=exp.Literal.string("BASE TABLE"))
        tables = named("duckdb_tables", "t", exp.alias_(kind, "table_type"))
    elif dialect == "postgres":  # information_schema leaves materialized views out: they come from pg_catalog
        return (f"select c.table_catalog, c.table_schema, c.table_name, c.column_name, c.data_type, t.table_type "
                f"from ({_PG_COLUMNS}) as c left join ({_PG_TABLES}) as t on {same.sql(dialect=dialect)}")
    else:
        columns = exp.Table(this=ident("columns"), db=ident("information_schema"), alias=exp.TableAlias(this=ident("c")))
        tables = exp.Table(this=ident("tables"), db=ident("information_schema"), alias=exp.TableAlias(this=ident("t")))
    return (exp.select("c.table_catalog", "c.table_schema", "c.table_name", "c.column_name", "c.data_type", "t.table_type")
            .from_(columns).join(tables, on=same, join_type="left").sql(dialect=dialect))


# information_schema's columns and tables, and a materialized view's the way information_schema would
# show them (its data_type: a built-in type's name without modifiers, ARRAY, or USER-DEFINED)
_PG_MATVIEW_TYPE = ("case when t.typelem <> 0 and t.typlen = -1 then 'ARRAY' when tn.nspname = 'pg_catalog' "
                    "then format_type(a.atttypid, null) when t.typtype = 'd' and bn.nspname = 'pg_catalog' "
                    "then format_type(t.typbasetype, null) else 'USER-DEFINED' end")
_PG_COLUMNS = (
    "select table_catalog::text, table_schema::text, table_name::text, column_name::text, data_type::text, "
    "ordinal_position::int from information_schema.columns union all "
    "select current_database()::text, n.nspname::text, r.relname::text, a.attname::text, "
    f"{_PG_MATVIEW_TYPE}, a.attnum::int from pg_attribute a join pg_class r on r.oid = a.attrelid "
    "join pg_namespace n on n.oid = r.relnamespace join pg_type t on t.oid = a.atttypid "
    "join pg_namespace tn on tn.oid = t.typnamespace left join pg_type b on b.oid = t.typbasetype "
    "left join pg_namespace bn on bn.oid = b.typnamespace "
    "where r.relkind = 'm' and a.attnum > 0 and not a.attisdropped and has_table_privilege(r.oid, 'select')")
_PG_TABLES = (
    "select table_catalog::text, table_schema::text, table_name::text, table_type::text from information_schema.tables "
    "union all select current_database()::text, n.nspname::text, r.relname::text, 'MATERIALIZED VIEW' "
    "from pg_class r join pg_namespace n on n.oid = r.relnamespace where r.relkind = 'm'")


def _src(side: Side, d: str) -> str:
    where = f" where {side.where.sql(dialect=d)}" if side.where is not None else ""
    return f"{side.table.sql(dialect=d)}{where}"
