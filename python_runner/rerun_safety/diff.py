"""Multiset diff of two relations: bucket checksums in the warehouse first, rows only where they differ.

How it works
  1. Each side is cut into buckets: by key range (one integer key), by the hash of the key
     (other keys), by the row hash (no key) or by a partition column. Per bucket the warehouse
     computes `count(*)` and `sum(row hash)`; only those aggregates are compared.
     With hash buckets a plain `count(*), sum(row hash)` of both sides comes first, so identical
     tables cost one checksum scan; range and column buckets are cheap enough to go first.
  2. Only buckets whose checksums differ are read again, row by row, and compared as multisets
     of (key, row hash) in SQL (one connection) or in Python, bucket chunk by bucket chunk (two
     connections: only bucket checksums and the rows of differing buckets cross). A few sample
     rows are fetched at the end.

PostgreSQL specifics (all plain SELECTs; the session only sets work_mem)
  - Both sides' bucket checksums are one aggregate over a UNION ALL, which the planner runs as a
    Partial HashAggregate in parallel workers (`max_parallel_workers_per_gather`, default 2).
    Grouped by an expression of a unique key, the planner expects one group per row and never
    picks a parallel plan; over a UNION ALL it expects few groups. One side alone (two databases)
    gets an empty second branch for the same reason, and the two databases run at the same time.
  - The row hash calls each column type's own extended hash function (see `_pg_hash`), about
    twice as fast as `hash_record_extended(row(...))`, and mixes the result once more.
  - Key-range buckets of an analyzed table are sized from `pg_stats` (no min/max scan); the
    bucket boundaries change no answer, only the speed.
  - The re-read of differing buckets filters with a constant array (hashed, parallel) and keeps
    one `ctid` per differing row, so the sample rows are fetched by address, not by a third scan.

Exactness (the same equality as `EXCEPT ALL` on each engine)
  - A row present twice is two rows: `{1,1,2}` and `{1,2,2}` differ, with or without a key.
  - NULL is a value: NULL equals NULL, and `(1, NULL)` differs from `(NULL, 1)`.
  - Floats (double, real) are equal within a relative tolerance, see "Floats" below; with
    `float_tolerance=0` they are hashed by exact value: `0.1 + 0.2` differs from `0.3`. `-0.0`
    equals `0.0` and NaN equals NaN, as the engines' own `=` and `EXCEPT ALL` decide.
  - PostgreSQL numerics compare by value (`1.0` equals `1.00`), as `=` does.
  - A column whose type differs between the sides is compared by its text form on both sides and
    the change is listed in `type_changes`: a timestamp that lost its microseconds differs, one
    that kept them compares equal; `1.0` and `1.00` across a decimal scale change differ.
  - Row identity is a 64-bit hash (DuckDB `hash(...)`; PostgreSQL: each type's hash opclass
    function, so it follows `=`), and a bucket matches when its count and the sum of its hashes
    match. The row hash is mixed non-linearly at the end, so values swapped between two rows of
    a bucket change the sum (`hash_record_extended` is linear in its columns and kept it).
    DuckDB's `hash(a, b, ...)` XORs its last column's hash into a mix of the others, so it is
    hashed once more for the same reason. One limit: PostgreSQL hashes timestamp, time and
    interval values through a 32-bit fold of their 64 bits, so about one pair of different
    values in 2^32 shares a hash (bigint, whose own hash folds too, is hashed from all 64 bits
    here). Otherwise two different multisets are taken as equal only on a 64-bit sum collision.

Floats
  Two float values a, b are equal when |a - b| <= tol * max(|a|, |b|, 1): relative for magnitudes
  above 1, absolute (tol) below, so that a sum that should be 0 and came out as 1e-13 is still 0.
  The default tol, DEFAULT_FLOAT_TOLERANCE = 1e-9, is about 4,500 times the 64-bit machine epsilon: the
  order of summation moves a sum of 10^6 values by about 1e-14 of its size, and the worst-case
  bound n * eps stays below 1e-9 up to 10^7 same-sign terms; a change of one part in a billion is
  still found. 32-bit columns (real) use at least 2^-20 (~9.5e-7), eight times their own epsilon.
  Integers, decimals, strings, dates and keys stay exact; a column whose type differs between the
  sides is compared by its text form, exactly.
  - Checksums: each float is rounded before hashing to a grid no wider than its tolerance (to
    p = 1 + ceil(-log2 tol) significant bits by a Veltkamp split for |x| >= 1, to multiples of
    2^(1-p) below 1; infinities and NaN as they are), so equal rounded values are always within
    the tolerance and tables equal up to float noise keep their checksums.
  - Two values within the tolerance on either side of a rounding boundary round apart: their
    buckets differ and are confirmed row by row. Rows left unmatched by the (rounded) row hash
    on both sides are read with their exact float values and paired in Python (same key and
    non-float columns, every float within the tolerance); a key whose rows all pair is no longer
    changed. Over MAX_TOLERANCE_ROWS unmatched rows the pairing is skipped and the counts are
    those of the rounded values (the tables differ anyway).
"""
from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from .errors import RerunSafetyError
from .sandbox.base import Connection, ident

SAMPLE_ROWS = 5
MAX_PARTITIONS = 400
MAX_BUCKETS = 1 << 18
RANGE_ROWS_PER_BUCKET = 256
# PostgreSQL's aggregate cost barely depends on the number of groups: smaller buckets there
# mean fewer rows to read again.
PG_RANGE_ROWS_PER_BUCKET = 64
HASH_ROWS_PER_BUCKET = 128
MAX_LISTED_BUCKETS = 50_000  # more differing buckets than this: compare every row instead
CHUNK_ROWS = 200_000  # two connections: rows per side held in memory at once
_TEMPORAL = ("date", "timestamp", "datetime")
_TID = re.compile(r"^\(\d+,\d+\)$")
_INTEGER = {"tinyint", "smallint", "integer", "bigint", "int", "int2", "int4", "int8"}
# PostgreSQL types without an extended hash function: hashed through their text form.
_PG_TEXT_HASHED = ("json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle",
                   "user-defined", "money")
# Float column types (information_schema spelling, lower case) of both engines.
_FLOAT64 = {"double", "double precision", "float8"}
_FLOAT32 = {"float", "real", "float4"}
DEFAULT_FLOAT_TOLERANCE = 1e-9
FLOAT_ABS_FLOOR = 1.0  # below this magnitude the tolerance is absolute
REAL_MIN_TOLERANCE = 2.0 ** -20  # 32-bit floats: eight times their machine epsilon
MAX_TOLERANCE_ROWS = 200_000  # unmatched rows read back for the float pairing, at most


class DiffError(RerunSafetyError):
    """A relation, column or filter given to the diff is wrong, or a query failed."""


@dataclass(frozen=True)
class DiffResult:
    """`reference` is the left side, `current` the right side.

    extra_rows / missing_rows: rows only in current / only in reference, as multisets.
    Keyed: missing_keys / extra_keys are keys only in reference / only in current;
    duplicate_keys are keys with more than one row in current and more rows there than in
    reference (reference_duplicate_keys the other way round); changed_rows are keys with one row
    on each side whose rows differ; changed_keys are keys with the same number of rows on both
    sides whose rows differ.
    """
    reference_rows: int
    rows: int
    identical: bool
    extra_rows: int = 0
    missing_rows: int = 0
    extra_copies: int = 0  # extra rows that are exact copies of reference rows
    duplicate_keys: int = 0
    missing_keys: int = 0
    extra_keys: int = 0
    changed_rows: int = 0
    keyed: bool = False
    schema_message: str = ""
    differing_columns: tuple[str, ...] = ()
    sample: tuple[dict, ...] = ()
    partitions: tuple[tuple[str, int, int], ...] = ()
    partition_column: str | None = None
    reference_duplicate_keys: int = 0
    changed_keys: int = 0
    type_changes: tuple[str, ...] = ()
    bucketing: str = ""  # range | hash | rowhash | column
    buckets: int = 0
    buckets_differing: int = 0
    differing_partitions: tuple[tuple[str, int, int], ...] = ()
    float_tolerance: float = 0.0  # the relative tolerance the float columns were compared with


@dataclass(frozen=True)
class Side:
    """One relation to compare: a connection, a table (optionally catalog-qualified), a filter."""
    con: Connection
    table: exp.Table
    where: exp.Expression | None = None
    display: str = ""

    @property
    def label(self) -> str:
        return self.display or ".".join(p.name for p in self.table.parts)


# ----------------------------------------------------------------------------- SQL pieces

def _q(name: str, dialect: str) -> str:
    return ident(name).sql(dialect=dialect)


def _rel(schema: str, name: str, dialect: str) -> str:
    return f"{_q(schema, dialect)}.{_q(name, dialect)}"


def _hash_sql(parts: Sequence[str], dialect: str) -> str:
    if not parts:
        return "cast(0 as ubigint)" if dialect == "duckdb" else "cast(0 as bigint)"
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


def _int_sum(expr: str, dialect: str) -> str:
    return f"cast(coalesce(sum({expr}), 0) as {'hugeint' if dialect == 'duckdb' else 'numeric'})"


def check_float_tolerance(value: float | None) -> float:
    """The tolerance to use: None is DEFAULT_FLOAT_TOLERANCE, 0 is exact; a number in [0, 1)."""
    if value is None:
        return DEFAULT_FLOAT_TOLERANCE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise DiffError(f"float tolerance must be a number >= 0 and < 1 (0 compares floats exactly); got {value!r}")
    return float(value)


def float_tolerance_of(data_type: str, tolerance: float) -> float | None:
    """The tolerance of a column of this type: None for a type that is not a float (exact)."""
    t = data_type.lower()
    if tolerance <= 0 or (t not in _FLOAT64 and t not in _FLOAT32):
        return None
    return max(tolerance, REAL_MIN_TOLERANCE) if t in _FLOAT32 else tolerance


def round_float_sql(expr: str, dialect: str, tolerance: float) -> str:
    """`expr` (a float) rounded to a grid no wider than `tolerance` * max(|x|, 1), as a double.

    p = 1 + ceil(-log2 tolerance) significant bits: the spacing of p-bit numbers is at most
    2^(1-p) <= tolerance of their magnitude. |x| >= 1: a Veltkamp split (g = x * (2^(53-p) + 1);
    g + (x - g) is x rounded to p bits, three operations, no logarithm). |x| < 1: (x + M) - M with
    M = 1.5 * 2^(53-p) rounds to multiples of 2^(1-p), the grid of [1, 2). Infinities, NaN and
    magnitudes over 1e300 (where the split would overflow) stay as they are.
    """
    double = "double" if dialect == "duckdb" else "double precision"
    x = f"cast({expr} as {double})"
    bits = 1 + math.ceil(-math.log2(tolerance))
    if bits >= 53:
        return x
    c = f"cast({float(2 ** (53 - bits) + 1)!r} as {double})"
    m = f"cast({1.5 * 2.0 ** (53 - bits)!r} as {double})"
    return (f"(case when abs({x}) < 1 then ({x} + {m}) - {m} "
            f"when abs({x}) < 1e300 then ({x} * {c}) + ({x} - {x} * {c}) else {x} end)")


def floats_close(a, b, tolerance: float) -> bool:
    """The float equality of the diff: NULL only equals NULL, NaN equals NaN, inf only itself."""
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if a == b or (a != a and b != b):
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tolerance * max(abs(a), abs(b), FLOAT_ABS_FLOOR)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)


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
    forbidden = (exp.Query, exp.Subquery, exp.Command, exp.DDL, exp.DML, exp.AggFunc, exp.Window,
                 exp.Set, exp.Use, exp.Transaction, exp.Commit, exp.Rollback)
    bad = cond.find(*forbidden) if not isinstance(cond, forbidden) else cond
    if bad is not None:
        raise DiffError(f"--where must be a plain boolean expression: {type(bad).__name__.lower()} is not "
                        "allowed (no subqueries, statements, aggregates or window functions)")
    inner = cond.unnest() if isinstance(cond, exp.Paren) else cond
    if not isinstance(inner, (exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Column, exp.Func)) \
            or isinstance(inner, (exp.Literal,)):
        raise DiffError(f"--where must be a boolean condition, got: {cond.sql(dialect=dialect)}")
    return cond


# ----------------------------------------------------------------------------- the plan

@dataclass
class _Plan:
    dialect: str
    left: Side
    right: Side
    columns: list[str]
    key: tuple[str, ...]
    lh: str = ""  # row hash over the compared columns, per side
    rh: str = ""
    mode: str = "hash"
    lb: str = ""  # bucket expression per side
    rb: str = ""
    lp: str = ""  # partition label (column mode)
    rp: str = ""
    buckets: int = 0
    schema_message: str = ""
    type_changes: tuple[str, ...] = ()
    counts: tuple[int, int] = (0, 0)
    extra: dict = field(default_factory=dict)
    tolerance: float = 0.0
    floats: list[tuple[str, float]] = field(default_factory=list)  # (column, its tolerance), compared loosely
    lnh: str = ""  # hash of the columns compared exactly (not the floats), per side
    rnh: str = ""

    def src(self, side: Side, extra_cond: str | None = None, after: str | None = None) -> str:
        """FROM ... WHERE for a side; `extra_cond` selects buckets, `after` filters the selected rows."""
        if after:
            if self.dialect == "postgres":
                # The fence makes PostgreSQL pick the bucket's rows before hashing any of them.
                return f"(select * from {self.src(side, extra_cond)} offset 0) as picked where {after}"
            return f"{self.src(side, extra_cond)} and {after}"
        if extra_cond and self.dialect == "duckdb" and _is_base_table(side):
            # Late materialization: find the rowids reading only the bucket's columns, then fetch
            # whole rows for those alone (about half the cost of filtering whole rows).
            inner = self.src(side)
            return (f"{side.table.sql(dialect=self.dialect)} where rowid in "
                    f"(select rowid from {inner}{' and ' if side.where is not None else ' where '}{extra_cond})")
        conds = []
        if side.where is not None:
            conds.append(f"({side.where.sql(dialect=self.dialect)})")
        if extra_cond:
            conds.append(extra_cond)
        where = f" where {' and '.join(conds)}" if conds else ""
        return f"{side.table.sql(dialect=self.dialect)}{where}"

    @property
    def keys_sql(self) -> list[str]:
        return [_q(k, self.dialect) for k in self.key]


def _is_base_table(side: Side) -> bool:
    cache = side.con.__dict__.setdefault("_rs_base_tables", {})
    key = side.table.sql(dialect="duckdb")
    if key not in cache:
        t = side.table
        conds = [exp.column("table_schema").eq(exp.Literal.string(t.db or ("main" if side.con.dialect == "duckdb"
                                                                              else "public"))),
                 exp.column("table_name").eq(exp.Literal.string(t.name))]
        if t.catalog:
            conds.append(exp.column("table_catalog").eq(exp.Literal.string(t.catalog)))
        row = side.con.fetchone(exp.select("table_type").from_(exp.Table(this=ident("tables"), db=ident("information_schema")))
                                .where(exp.and_(*conds)))
        cache[key] = bool(row) and str(row[0]).upper() == "BASE TABLE"
    return cache[key]


def columns_of(con: Connection, table: exp.Table) -> list[tuple[str, str]]:
    conds = [exp.column("table_schema").eq(exp.Literal.string(table.db or ("main" if con.dialect == "duckdb" else "public"))),
             exp.column("table_name").eq(exp.Literal.string(table.name))]
    if table.catalog:
        conds.append(exp.column("table_catalog").eq(exp.Literal.string(table.catalog)))
    q = (exp.select("column_name", "data_type")
         .from_(exp.Table(this=ident("columns"), db=ident("information_schema")))
         .where(exp.and_(*conds)).order_by("ordinal_position"))
    return [(r[0], str(r[1])) for r in con.fetchall(q)]


def _plan(left: Side, right: Side, key: Sequence[str], ignore_columns: Sequence[str],
          bucket_column: str | None, strict: bool, float_tolerance: float | None = None) -> _Plan:
    d = left.con.dialect
    tolerance = check_float_tolerance(float_tolerance)
    lcols, rcols = columns_of(left.con, left.table), columns_of(right.con, right.table)
    for side, cols in ((left, lcols), (right, rcols)):
        if not cols:
            raise DiffError(f"relation {side.label} does not exist (or has no columns)")
    ignore = {c.lower() for c in ignore_columns}
    ltypes = {c: t.lower() for c, t in lcols}
    rtypes = {c: t.lower() for c, t in rcols}
    lnames = [c for c, _ in lcols if c.lower() not in ignore]
    rnames = {c for c, _ in rcols if c.lower() not in ignore}
    schema_message = ""
    if set(lnames) != rnames:
        added = sorted(rnames - set(lnames))
        removed = sorted(set(lnames) - rnames)
        schema_message = "columns differ:" + "".join(f" +{c}" for c in added) + "".join(f" -{c}" for c in removed)
    columns = [c for c in lnames if c in rnames]
    type_changes = tuple(f"{c}: {ltypes[c]} -> {rtypes[c]}" for c in columns if ltypes[c] != rtypes[c])
    key = tuple(key)
    if key and not all(k in ltypes and k in rtypes for k in key):
        if strict:
            bad = next(k for k in key if k not in ltypes or k not in rtypes)
            where = left.label if bad not in ltypes else right.label
            raise DiffError(f"key column '{bad}' is not a column of {where}")
        key = ()
    if bucket_column and not (bucket_column in ltypes and bucket_column in rtypes):
        if strict:
            where = left.label if bucket_column not in ltypes else right.label
            raise DiffError(f"partition column '{bucket_column}' is not a column of {where}")
        bucket_column = None

    # Floats of the same type on both sides are compared within their tolerance (keys exactly).
    loose = {c: t for c in columns if c not in key and ltypes[c] == rtypes[c]
             and (t := float_tolerance_of(ltypes[c], tolerance)) is not None}

    def col(c: str, types: dict[str, str], rounded: bool = True) -> tuple[str, str]:
        q = _q(c, d)
        if rounded and c in loose:
            return round_float_sql(q, d, loose[c]), "double precision"
        if ltypes[c] != rtypes[c]:
            return f"cast({q} as {'varchar' if d == 'duckdb' else 'text'})", "text"
        if d == "postgres" and (types[c] in _PG_TEXT_HASHED or types[c].startswith(_PG_TEXT_HASHED)):
            return f"cast({q} as text)", "text"
        return q, types[c]

    def hashed(cols: Sequence[str], types: dict[str, str], rounded: bool = True) -> str:
        items = [col(c, types, rounded) for c in cols]
        return _pg_hash(items) if d == "postgres" else _hash_sql([e for e, _ in items], d)

    plan = _Plan(d, left, right, columns, key, schema_message=schema_message, type_changes=type_changes,
                 tolerance=tolerance, floats=list(loose.items()))
    plan.lh = hashed(columns, ltypes)
    plan.rh = hashed(columns, rtypes)
    if loose:
        exact = [c for c in columns if c not in loose]
        plan.lnh, plan.rnh = hashed(exact, ltypes), hashed(exact, rtypes)
    if bucket_column:
        plan.mode = "column"
        q = _q(bucket_column, d)
        temporal = any(t in ltypes[bucket_column] for t in _TEMPORAL) and any(t in rtypes[bucket_column] for t in _TEMPORAL)
        plan.lp = plan.rp = f"cast({q} as date)" if temporal else q
        if ltypes[bucket_column] != rtypes[bucket_column] and not temporal:
            plan.lp = plan.rp = f"cast({q} as {'varchar' if d == 'duckdb' else 'text'})"
        plan.lb = plan.rb = _hash_sql([plan.lp], d)
    else:
        # Range buckets need a column whose equal rows (or keys) always share a value: a key
        # column when keyed, any compared column otherwise; integers only.
        pool = key if key else tuple(columns)
        plan.extra["range_candidates"] = [c for c in pool if ltypes[c] in _INTEGER and rtypes[c] in _INTEGER]
        if key:
            plan.mode = "hash"
            plan.lb = plan.rb = hashed(key, ltypes, rounded=False)
        else:
            plan.mode = "rowhash"
            plan.lb, plan.rb = plan.lh, plan.rh
    return plan


def _pair(plan: _Plan, left, right) -> tuple:
    """Call `left()` and `right()`; two PostgreSQL connections run at the same time (two backends)."""
    if plan.dialect == "postgres" and plan.left.con is not plan.right.con:
        with ThreadPoolExecutor(max_workers=1) as pool:
            later = pool.submit(right)
            return left(), later.result()
    return left(), right()


def _totals(plan: _Plan, same: bool) -> tuple[int, int, object, object]:
    d = plan.dialect
    parts = {}
    for name, side, h in (("l", plan.left, plan.lh), ("r", plan.right, plan.rh)):
        parts[name] = f"select count(*) as c, {_int_sum(h, d)} as s from {plan.src(side)}"
    if same:
        row = plan.left.con.fetchone(f"select l.c, l.s, r.c, r.s from ({parts['l']}) l, ({parts['r']}) r")
        return int(row[0]), int(row[2]), row[1], row[3]
    a, b = _pair(plan, lambda: plan.left.con.fetchone(parts["l"]), lambda: plan.right.con.fetchone(parts["r"]))
    return int(a[0]), int(b[0]), a[1], b[1]


def _pg_stats_row(side: Side, cands: Sequence[str]) -> tuple | None:
    """(rows, min, max per candidate) of a PostgreSQL table from its statistics, or None.

    Only for a plain table without a filter, analyzed since its last 10% of changes, with a
    histogram or common values for every candidate. The numbers are a sample's: they only size
    the buckets, and any cut into buckets gives the same answer.
    """
    if side.where is not None or not _is_base_table(side):
        return None
    lit = lambda v: exp.Literal.string(v).sql(dialect="postgres")  # noqa: E731
    rows = side.con.fetchall(
        f"select c.reltuples, s.n_mod_since_analyze, st.attname, cast(st.histogram_bounds as text), "
        f"cast(st.most_common_vals as text) from pg_catalog.pg_class c "
        f"join pg_catalog.pg_namespace n on n.oid = c.relnamespace "
        f"left join pg_catalog.pg_stat_user_tables s on s.relid = c.oid "
        f"left join pg_catalog.pg_stats st on st.schemaname = n.nspname and st.tablename = c.relname "
        f"and not st.inherited and st.attname in ({', '.join(lit(c) for c in cands)}) "
        f"where c.relkind = 'r' and n.nspname = {lit(side.table.db or 'public')} and c.relname = {lit(side.table.name)}")
    if not rows or rows[0][0] is None or rows[0][0] < 1 or rows[0][1] is None or rows[0][1] > 0.1 * rows[0][0]:
        return None
    found = {}
    for _n, _m, att, hist, mcv in rows:
        try:
            values = [int(v) for text in (hist, mcv) if text for v in text.strip("{}").split(",") if v != "NULL"]
        except ValueError:
            return None
        if att is None or not values:
            return None
        found[att] = (min(values), max(values))
    if set(found) != set(cands):
        return None
    return (int(rows[0][0]), *(v for c in cands for v in found[c]))


def _set_range_buckets(plan: _Plan) -> bool:
    """Pick an integer column whose range spreads the rows over enough buckets; False if none."""
    d, cands = plan.dialect, plan.extra.get("range_candidates") or []
    if not cands:
        return False
    rows = None
    if d == "postgres":
        rows = list(_pair(plan, lambda: _pg_stats_row(plan.left, cands), lambda: _pg_stats_row(plan.right, cands)))
        rows = None if None in rows else rows
    from_stats = rows is not None
    if rows is None:
        sel = ", ".join(f"min({_q(c, d)}), max({_q(c, d)})" for c in cands)
        lq, rq = (f"select count(*), {sel} from {plan.src(side)}" for side in (plan.left, plan.right))
        if d == "postgres" and plan.left.con is plan.right.con:
            both = plan.left.con.fetchone(f"select * from ({lq}) l cross join ({rq}) r")
            rows = [both[:len(both) // 2], both[len(both) // 2:]]
        else:
            rows = list(_pair(plan, lambda: plan.left.con.fetchone(lq), lambda: plan.right.con.fetchone(rq)))
    plan.counts = (int(rows[0][0]), int(rows[1][0]))
    per_bucket = RANGE_ROWS_PER_BUCKET if d == "duckdb" else PG_RANGE_ROWS_PER_BUCKET
    wanted = max(1, min(MAX_BUCKETS, -(-max(plan.counts) // per_bucket)))
    for i, c in enumerate(cands):
        mins = [r[1 + 2 * i] for r in rows if r[1 + 2 * i] is not None]
        maxs = [r[2 + 2 * i] for r in rows if r[2 + 2 * i] is not None]
        lo, hi = (int(min(mins)), int(max(maxs))) if mins else (0, 0)
        if hi - lo + 1 < wanted and len(cands) > 1 and i < len(cands) - 1:
            continue  # too few distinct values to cut the rows finely: try the next column
        if hi - lo + 1 < wanted and wanted > 1:
            return False
        span = hi - lo + 1
        # Aim at per_bucket values per bucket (a dense unique key puts one row on each
        # value), so a sparse region of the key does not widen the buckets of a dense one.
        width = max(1, -(-span // MAX_BUCKETS),
                    min(per_bucket, -(-span * per_bucket // max(1, max(plan.counts)))))
        plan.buckets = -(-(hi - lo + 1) // width) + 1
        div = "//" if d == "duckdb" else "/"
        q = _q(c, d)
        # Integers computed here, not user text; NULL gets its own bucket.
        # Values lie in [lo, hi]: `q - lo` cannot overflow when the span fits 31 bits. A bare
        # column expression keeps DuckDB's statistics, so its aggregate stays cheap.
        operand = q if hi - lo < 2**31 else f"cast({q} as {'hugeint' if d == 'duckdb' else 'numeric'})"
        raw = f"({operand} - ({lo})) {div} {width}"
        if d == "postgres" and operand != q:
            # numeric `/` keeps the fraction; the span is at least 2**31, so the width is at least
            # 2**13 and the quotient fits a bigint.
            raw = f"cast(div({operand} - ({lo}), {width}) as bigint)"
        if from_stats:
            # Values may lie outside the sampled range: no offset, so nothing can overflow (and
            # NULL may share bucket -1 with values just below zero, which changes no answer).
            raw = f"{q} / {width}"
        plan.extra["range_raw"] = raw
        plan.lb = plan.rb = f"coalesce({raw}, -1)"
        plan.mode = "range"
        plan.extra["range_column"] = c
        return True
    return False


def _set_hash_buckets(plan: _Plan) -> None:
    n = 1
    while n < MAX_BUCKETS and n * HASH_ROWS_PER_BUCKET < max(plan.counts):
        n *= 2
    plan.buckets = n
    plan.lb, plan.rb = f"(({plan.lb}) & {n - 1})", f"(({plan.rb}) & {n - 1})"


def _bucket_query(plan: _Plan, side: Side, b: str, h: str, p: str) -> str:
    d = plan.dialect
    if plan.mode == "column":
        return (f"select {_hash_sql(['p'], d)} as b, p, c, s from (select {p} as p, count(*) as c, "
                f"{_int_sum(h, d)} as s from {plan.src(side)} group by 1) g")
    if plan.mode == "range" and d == "duckdb":
        return (f"select coalesce(b, -1) as b, null as p, c, s from (select {plan.extra['range_raw']} as b, "
                f"count(*) as c, {_int_sum(h, d)} as s from {plan.src(side)} group by 1) g")
    return (f"select {b} as b, null as p, count(*) as c, {_int_sum(h, d)} as s "
            f"from {plan.src(side)} group by 1")


def _pg_bucket_groups(plan: _Plan, sides: Sequence[tuple[int, Side, str, str, str]]) -> str:
    """PostgreSQL bucket checksums of one or both sides in one aggregate that can run in parallel.

    The sides are one UNION ALL: its output column has no statistics, so the planner expects few
    buckets and picks a Partial HashAggregate under a Gather (a GROUP BY on an expression of a
    unique key is estimated at one group per row, and that plan is never parallel). One side alone
    gets an empty second branch (`and false`) for the same reason.
    """
    col = plan.mode == "column"
    branches = [f"select {s} as s, {p if col else b} as g, {h} as h from {plan.src(side)}"
                for s, side, b, h, p in sides]
    if len(sides) == 1:
        s, side, b, h, p = sides[0]
        branches.append(f"select {s}, {p if col else b}, {h} from {plan.src(side, 'false')}")
    grouped = (f"select g, count(*) filter (where s = 0) as lc, count(*) filter (where s = 1) as rc, "
               f"sum(h) filter (where s = 0) as ls, sum(h) filter (where s = 1) as rs "
               f"from ({' union all '.join(branches)}) u group by g")
    if col:
        return f"select {_hash_sql(['g'], plan.dialect)} as b, cast(g as text) as p, lc, rc, ls, rs from ({grouped}) x"
    return f"select g as b, cast(null as text) as p, lc, rc, ls, rs from ({grouped}) x"


def _pg_differing_buckets_same(plan: _Plan) -> tuple[int, int, int, list[tuple]]:
    g = _pg_bucket_groups(plan, ((0, plan.left, plan.lb, plan.lh, plan.lp), (1, plan.right, plan.rb, plan.rh, plan.rp)))
    differ = "lc <> rc or ls is distinct from rs"
    rows = plan.left.con.fetchall(
        f"with g as materialized ({g}) select t.lt, t.rt, t.nb, t.nj, j.b, j.p, j.lc, j.rc from "
        f"(select coalesce(sum(lc), 0) as lt, coalesce(sum(rc), 0) as rt, count(*) as nb, "
        f"count(*) filter (where {differ}) as nj from g) t left join "
        f"(select b, p, lc, rc from g where {differ} order by b limit {MAX_LISTED_BUCKETS + 1}) j on true")
    lt, rt, nb, nj = (int(v) for v in rows[0][:4])
    if plan.mode == "column":
        plan.buckets = nb
    return lt, rt, nj, [(r[4], r[5], int(r[6]), int(r[7])) for r in rows if r[4] is not None]


def _differing_buckets_same(plan: _Plan) -> tuple[int, int, int, list[tuple]]:
    """One query: both sides' bucket checksums, joined in the warehouse; returns the differing ones."""
    if plan.dialect == "postgres":
        return _pg_differing_buckets_same(plan)
    lq = _bucket_query(plan, plan.left, plan.lb, plan.lh, plan.lp)
    rq = _bucket_query(plan, plan.right, plan.rb, plan.rh, plan.rp)
    label = "cast(coalesce(l.p, r.p) as varchar)" if plan.dialect == "duckdb" else "cast(coalesce(l.p, r.p) as text)"
    sql = (f"with l as materialized ({lq}), r as materialized ({rq}), "
           f"j as (select coalesce(l.b, r.b) as b, {label} as p, coalesce(l.c, 0) as lc, coalesce(r.c, 0) as rc "
           f"from l full outer join r on l.b = r.b where l.c is distinct from r.c or l.s is distinct from r.s) "
           f"select t.lt, t.rt, t.nb, t.nj, j.b, j.p, j.lc, j.rc from (select "
           f"(select coalesce(sum(c), 0) from l) as lt, (select coalesce(sum(c), 0) from r) as rt, "
           f"(select count(*) from l) + (select count(*) from r) as nb, (select count(*) from j) as nj) t "
           f"left join (select * from j order by b limit {MAX_LISTED_BUCKETS + 1}) j on true")
    rows = plan.left.con.fetchall(sql)
    lt, rt, nb, nj = (int(v) for v in rows[0][:4])
    if plan.mode == "column":
        plan.buckets = nb // 2
    listed = [(r[4], r[5], int(r[6]), int(r[7])) for r in rows if r[4] is not None]
    return lt, rt, nj, listed


def _differing_buckets_across(plan: _Plan) -> tuple[int, int, int, list[tuple]]:
    def fetch(side: Side, b: str, h: str, p: str):
        if plan.dialect == "postgres":
            sql = f"select b, p, lc, ls from ({_pg_bucket_groups(plan, [(0, side, b, h, p)])}) x"
        else:
            sql = _bucket_query(plan, side, b, h, p)
        return {r[0]: (r[1], int(r[2]), r[3]) for r in side.con.fetchall(sql)}

    lmap, rmap = _pair(plan, lambda: fetch(plan.left, plan.lb, plan.lh, plan.lp),
                       lambda: fetch(plan.right, plan.rb, plan.rh, plan.rp))
    if plan.mode == "column":
        plan.buckets = len(set(lmap) | set(rmap))
    listed = []
    for b in set(lmap) | set(rmap):
        lv, rv = lmap.get(b), rmap.get(b)
        if lv is None or rv is None or lv[1:] != rv[1:]:
            label = (lv or rv)[0]
            listed.append((b, None if label is None else str(label), lv[1] if lv else 0, rv[1] if rv else 0))
    listed.sort(key=lambda t: t[0])
    return (sum(v[1] for v in lmap.values()), sum(v[1] for v in rmap.values()), len(listed), listed)


def _in_list(expr: str, ints: Iterable[int], dialect: str) -> str:
    ints = [int(v) for v in ints]
    values = ", ".join(str(v) for v in ints)
    if len(ints) <= 64:  # a constant list is a cheap filter; a long one is better as a semi-join
        cast = "hugeint" if dialect == "duckdb" else "numeric"
        return f"cast({expr} as {cast}) in ({values})" if any(v >= 2**63 or v < -2**63 for v in ints) \
            else f"{expr} in ({values})"
    if dialect == "duckdb":
        return f"{expr} in (select unnest([{values}]::hugeint[]))"
    # A constant array is hashed once (PostgreSQL 14+) and, unlike a semi-join, filters inside the
    # workers of a parallel scan.
    wide = any(v >= 2**63 or v < -2**63 for v in ints)
    return f"{expr} = any(array[{values}]::{'numeric' if wide else 'bigint'}[])"


# ----------------------------------------------------------------------------- row level

_COUNT_FIELDS = ("only_l", "only_r", "copies_r", "keys_only_l", "keys_only_r", "changed_rows",
                 "changed_keys", "dup_l", "dup_r")


def _rows_same(plan: _Plan, buckets: list[int] | None) -> tuple[dict, list, list]:
    """Row-level multiset comparison of the differing buckets, in one query in the warehouse."""
    d, ht = plan.dialect, _hash_type(plan.dialect)
    ks = plan.keys_sql
    kcols = "".join(f", {k} as k{i}" for i, k in enumerate(ks))
    knames = "".join(f"k{i}, " for i in range(len(ks)))
    # PostgreSQL base tables: keep one row address (ctid) per differing (bucket, key, hash), so
    # that the sample rows are then fetched by address instead of by another scan.
    pg = d == "postgres"
    # Floats: the hash of the exact columns and the rounded floats ride along (both follow from
    # the row hash, so the groups stay the same), to find unmatched rows that may pair.
    fl = "".join(f", {round_float_sql(_q(c, d), d, t)} as r{i}" for i, (c, t) in enumerate(plan.floats))
    fnames = "".join(f", r{i}" for i in range(len(plan.floats)))
    fnames = f", nh{fnames}" if plan.floats else ""
    parts = []
    for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh), (1, plan.right, plan.rb, plan.rh, plan.rnh)):
        cond = _in_list(b, buckets, d) if buckets is not None else None
        tid = (", cast(ctid as text) as t" if _is_base_table(side) else ", cast(null as text) as t") if pg else ""
        fcols = f", {nh} as nh{fl}" if plan.floats else ""
        parts.append(f"select {s} as s, {b} as b, {h} as h{kcols}{fcols}{tid} from {plan.src(side, cond)}")
    nb = f"cast(null as {'hugeint' if d == 'duckdb' else 'numeric'})"
    z = "cast(0 as bigint)"
    nt = ", cast(null as text)" if pg else ""

    def i(x: str) -> str:
        return f"cast(coalesce(sum({x}), 0) as bigint)"

    tids = ", min(t) filter (where s = 0) as tl, min(t) filter (where s = 1) as tr" if pg else ""
    sql = (f"with u as ({parts[0]} union all {parts[1]}), "
           f"p as materialized (select b, {knames}h{fnames}, sum(1 - s) as lc, sum(s) as rc{tids} from u "
           f"group by b, {knames}h{fnames}) ")
    counts = (f"select 'rows' as kind, {i('case when lc > rc then lc - rc else 0 end')} as a1, "
              f"{i('case when rc > lc then rc - lc else 0 end')} as a2, "
              f"{i('case when lc > 0 and rc > lc then rc - lc else 0 end')} as a3, "
              f"{z} as a4, {z} as a5, {z} as a6, {z} as a7, {z} as a8, {z} as a9, "
              f"{nb} as b, cast(null as {ht}) as h{nt} from p")
    selects = [counts]
    if ks:
        sql += (f", k as (select {knames}sum(lc) as kl, sum(rc) as kr, "
                f"max(case when lc <> rc then 1 else 0 end) as dif from p group by {knames.rstrip(', ')}) ")
        selects.append(
            f"select 'keys', {z}, {z}, {z}, {i('case when kr = 0 then 1 else 0 end')}, "
            f"{i('case when kl = 0 then 1 else 0 end')}, "
            f"{i('case when dif = 1 and kl = 1 and kr = 1 then 1 else 0 end')}, "
            f"{i('case when dif = 1 and kl = kr then 1 else 0 end')}, "
            f"{i('case when kl > 1 and kl > kr then 1 else 0 end')}, "
            f"{i('case when kr > 1 and kr > kl then 1 else 0 end')}, {nb}, cast(null as {ht}){nt} from k")
    for kind, cond in (("l", "lc > rc"), ("r", "rc > lc")):
        selects.append(f"select * from (select '{kind}', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, "
                       f"cast(b as {'hugeint' if d == 'duckdb' else 'numeric'}), h{', t' + kind if pg else ''} "
                       f"from p where {cond} order by b, h limit {SAMPLE_ROWS}) x{kind}")
    if plan.floats:
        # Buckets holding a left-unmatched and a right-unmatched group with the same exact
        # columns and rounded floats within two tolerances (each value is within half of one of
        # its rounding): only there may rows pair.
        near = " and ".join(f"(l.r{i} is not distinct from r.r{i} or abs(l.r{i} - r.r{i}) <= "
                            f"{2.01 * t!r} * greatest(abs(l.r{i}), abs(r.r{i}), 1))" for i, (_c, t) in enumerate(plan.floats))
        num = "hugeint" if d == "duckdb" else "numeric"
        sql += (f", c as (select l.b as lb, r.b as rb from p l join p r on l.nh = r.nh "
                f"where l.lc > l.rc and r.rc > r.lc and {near}) ")
        selects.append(f"select * from (select 'c', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, cast(x as {num}), "
                       f"cast(null as {ht}){nt} from (select lb as x from c union select rb from c) cb "
                       f"limit {MAX_LISTED_BUCKETS + 1}) xc")
    rows = plan.left.con.fetchall(sql + " union all ".join(selects))
    out = dict.fromkeys(_COUNT_FIELDS, 0)
    lsample, rsample, near_buckets = [], [], []
    for kind, a1, a2, a3, a4, a5, a6, a7, a8, a9, b, h, *tid in rows:
        if kind == "c":
            near_buckets.append(int(b))
        elif kind == "rows":
            out.update(only_l=int(a1), only_r=int(a2), copies_r=int(a3))
        elif kind == "keys":
            out.update(keys_only_l=int(a4), keys_only_r=int(a5), changed_rows=int(a6), changed_keys=int(a7),
                       dup_l=int(a8), dup_r=int(a9))
        elif kind == "l":
            lsample.append((int(b), int(h), *tid))
        else:
            rsample.append((int(b), int(h), *tid))
    if near_buckets:
        within = buckets if len(near_buckets) > MAX_LISTED_BUCKETS else near_buckets
        loose = _loose_rows_same(plan, within)
        if loose is not None:
            lrest, rrest = _pair_floats(plan, loose, out)
            # samples: the rows that stay unmatched, also those outside the buckets read here
            seen = set(within) if within is not None else None
            lsample, rsample = (sorted([p for p in picks if seen is not None and p[0] not in seen] + rest,
                                       key=lambda p: p[:2])[:SAMPLE_ROWS]
                                for picks, rest in ((lsample, lrest), (rsample, rrest)))
    return out, lsample, rsample


def _loose_rows_same(plan: _Plan, buckets: list[int] | None) -> list[_Loose] | None:
    """The rows left unmatched by the row hash, with their exact floats (None: too many).

    Within a (bucket, key, row hash) group the rows on the side with more of them are numbered in
    float order; those past the other side's count are the unmatched ones.
    """
    d = plan.dialect
    ks = plan.keys_sql
    kcols = "".join(f", {k} as k{i}" for i, k in enumerate(ks))
    knames = "".join(f"k{i}, " for i in range(len(ks)))
    fcols = ", ".join(f"{_q(c, d)} as f{i}" for i, (c, _t) in enumerate(plan.floats))
    fnames = ", ".join(f"f{i}" for i in range(len(plan.floats)))
    pg = d == "postgres"
    parts = []
    for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh), (1, plan.right, plan.rb, plan.rh, plan.rnh)):
        cond = _in_list(b, buckets, d) if buckets is not None else None
        tid = (", cast(ctid as text) as t" if _is_base_table(side) else ", cast(null as text) as t") if pg else ""
        parts.append(f"select {s} as s, {b} as b, {h} as h, {nh} as nh{kcols}, {fcols}{tid} from {plan.src(side, cond)}")
    group = f"partition by b, {knames}h"
    per_key = (f"sum(1 - s) over (partition by b, {knames.rstrip(', ')}) as kl, "
               f"sum(s) over (partition by b, {knames.rstrip(', ')}) as kr" if ks else "0 as kl, 0 as kr")
    sql = (f"with u as ({parts[0]} union all {parts[1]}), w as (select *, sum(1 - s) over ({group}) as lc, "
           f"sum(s) over ({group}) as rc, {per_key}, row_number() over ({group}, s order by {fnames}) as rn from u) "
           f"select s, b, h, nh, lc, kl, kr, {knames}{fnames}{', t' if pg else ''} from w "
           f"where (s = 0 and rn > rc) or (s = 1 and rn > lc) limit {MAX_TOLERANCE_ROWS + 1}")
    rows = plan.left.con.fetchall(sql)
    if len(rows) > MAX_TOLERANCE_ROWS:
        return None
    nk, nf = len(ks), len(plan.floats)
    return [_Loose(int(r[0]), int(r[1]), int(r[2]), tuple(r[7:7 + nk]), int(r[3]), tuple(r[7 + nk:7 + nk + nf]),
                   int(r[4]), int(r[5]), int(r[6]), r[7 + nk + nf] if pg else None) for r in rows]


@dataclass
class _Loose:
    """A row unmatched by the row hash: side (0 left), bucket, row hash, key, hash of the exact
    columns, floats, left rows of its row-hash group, rows of its key per side, PostgreSQL ctid."""
    s: int
    b: int
    h: int
    key: tuple
    nh: int
    floats: tuple
    lc: int
    kl: int
    kr: int
    tid: str | None = None


def _float_class(v) -> object:
    """Values that only equal themselves (NULL, NaN, infinities) form their own class; finite is one."""
    if v is None:
        return None
    v = float(v)
    return "finite" if math.isfinite(v) else ("nan" if v != v else v)


def _pair_floats(plan: _Plan, rows: list[_Loose], out: dict) -> tuple[list, list]:
    """Pair unmatched left and right rows whose exact columns agree and floats are within tolerance.

    Adjusts the counts in `out` for every pair and returns the picks (bucket, row hash[, ctid]) of
    the rows that stay unmatched, left and right. Candidates are found by the first float (sorted, searched within its tolerance),
    then every float is checked.
    """
    import bisect

    tols = [t for _c, t in plan.floats]
    t0 = tols[0]
    groups: dict[tuple, tuple[list, list]] = {}
    for r in rows:
        groups.setdefault((r.key, r.nh, _float_class(r.floats[0])), ([], []))[r.s].append(r)
    rest: list[_Loose] = []
    for (_k, _nh, cls), (ls, rs) in groups.items():
        if not ls or not rs:
            rest += ls + rs
            continue
        if cls == "finite":
            rs.sort(key=lambda r: float(r.floats[0]))
            firsts = [float(r.floats[0]) for r in rs]
        used = [False] * len(rs)
        for lrow in ls:
            if cls == "finite":
                a = float(lrow.floats[0])
                width = t0 * max(abs(a), FLOAT_ABS_FLOOR) / (1 - t0) * (1 + 1e-9)
                lo, hi = bisect.bisect_left(firsts, a - width), bisect.bisect_right(firsts, a + width)
            else:
                lo, hi = 0, len(rs)
            for j in range(lo, hi):
                if not used[j] and all(floats_close(x, y, t) for x, y, t in zip(lrow.floats, rs[j].floats, tols)):
                    used[j] = True
                    out["only_l"] -= 1
                    out["only_r"] -= 1
                    out["copies_r"] -= rs[j].lc > 0
                    break
            else:
                rest.append(lrow)
        rest += [r for j, r in enumerate(rs) if not used[j]]
    if plan.key:
        open_keys = {r.key for r in rest}
        for key, (kl, kr) in {r.key: (r.kl, r.kr) for r in rows}.items():
            if key not in open_keys:  # every row of the key found its pair: the key is unchanged
                out["changed_rows"] -= kl == 1 and kr == 1
                out["changed_keys"] -= kl == kr
    rest.sort(key=lambda r: (r.b, r.h))
    picks = [[(r.b, r.h) if r.tid is None else (r.b, r.h, r.tid) for r in rest if r.s == s] for s in (0, 1)]
    return picks[0], picks[1]


def _chunks(listed: list[tuple]) -> Iterable[list]:
    chunk, rows = [], 0
    for b, _p, lc, rc in listed:
        if chunk and rows + max(lc, rc) > CHUNK_ROWS:
            yield chunk
            chunk, rows = [], 0
        chunk.append(b)
        rows += max(lc, rc)
    if chunk:
        yield chunk


def _rows_across(plan: _Plan, listed: list[tuple]) -> tuple[dict, list, list]:
    """Two connections: per chunk of differing buckets, (bucket, key, row hash) counts from each side."""
    d = plan.dialect
    ks = plan.keys_sql
    kcols = "".join(f"{k}, " for k in ks)
    out = dict.fromkeys(_COUNT_FIELDS, 0)
    lsample: list[tuple[int, int]] = []
    rsample: list[tuple[int, int]] = []
    unmatched: dict[tuple, tuple[int, int]] = {}  # (bucket, key..., row hash) -> (lc, rc), for the floats
    key_rows: dict[tuple, tuple[int, int]] = {}
    for chunk in _chunks(listed):
        def fetch(side: Side, b: str, h: str, chunk=chunk) -> Counter:
            sql = (f"select {b} as b, {kcols}{h} as h, count(*) from {plan.src(side, _in_list(b, chunk, d))} "
                   f"group by {', '.join(str(i + 1) for i in range(len(ks) + 2))}")
            return Counter({tuple(r[:-1]): int(r[-1]) for r in side.con.fetchall(sql)})

        lcount, rcount = _pair(plan, lambda: fetch(plan.left, plan.lb, plan.lh),
                               lambda: fetch(plan.right, plan.rb, plan.rh))
        per_key: dict[tuple, list[int]] = {}
        for item in set(lcount) | set(rcount):
            lc, rc = lcount.get(item, 0), rcount.get(item, 0)
            if lc > rc:
                out["only_l"] += lc - rc
                if len(lsample) < SAMPLE_ROWS:
                    lsample.append((int(item[0]), int(item[-1])))
            elif rc > lc:
                out["only_r"] += rc - lc
                out["copies_r"] += rc - lc if lc > 0 else 0
                if len(rsample) < SAMPLE_ROWS:
                    rsample.append((int(item[0]), int(item[-1])))
            if lc != rc and plan.floats and len(unmatched) <= MAX_TOLERANCE_ROWS:
                unmatched[item] = (lc, rc)
            if ks:
                acc = per_key.setdefault(item[:-1], [0, 0, 0])
                acc[0] += lc
                acc[1] += rc
                acc[2] |= lc != rc
        if plan.floats:
            key_rows.update({k: (v[0], v[1]) for k, v in per_key.items() if v[2]})
        for kl, kr, dif in per_key.values():
            out["keys_only_l"] += kr == 0
            out["keys_only_r"] += kl == 0
            out["changed_rows"] += bool(dif and kl == 1 and kr == 1)
            out["changed_keys"] += bool(dif and kl == kr)
            out["dup_l"] += kl > 1 and kl > kr
            out["dup_r"] += kr > 1 and kr > kl
    if plan.floats and out["only_l"] and out["only_r"] and len(unmatched) <= MAX_TOLERANCE_ROWS:
        loose = _loose_rows_across(plan, unmatched, key_rows)
        if loose is not None:
            lsample, rsample = (picks[:SAMPLE_ROWS] for picks in _pair_floats(plan, loose, out))
    return out, lsample, rsample


def _loose_rows_across(plan: _Plan, unmatched: dict[tuple, tuple[int, int]],
                       key_rows: dict[tuple, tuple[int, int]]) -> list[_Loose] | None:
    """Two connections: the unmatched rows of `_loose_rows_same`, read per side and picked in Python."""
    d, nk = plan.dialect, len(plan.key)
    kcols = "".join(f"{k}, " for k in plan.keys_sql)
    fcols = ", ".join(_q(c, d) for c, _t in plan.floats)
    width = nk + 3 + len(plan.floats)
    buckets = sorted({item[0] for item in unmatched})

    def fetch(side: Side, b: str, h: str, nh: str) -> dict[tuple, list]:
        sql = (f"select {b} as b, {kcols}{h} as h, {nh} as nh, {fcols}, count(*) "
               f"from {plan.src(side, _in_list(b, buckets, d))} group by {', '.join(str(i + 1) for i in range(width))}")
        found: dict[tuple, list] = {}
        for r in side.con.fetchall(sql):
            found.setdefault(tuple(r[:nk + 2]), []).extend([(int(r[nk + 2]), tuple(r[nk + 3:width]))] * int(r[-1]))
        return found

    lrows, rrows = _pair(plan, lambda: fetch(plan.left, plan.lb, plan.lh, plan.lnh),
                         lambda: fetch(plan.right, plan.rb, plan.rh, plan.rnh))
    out: list[_Loose] = []
    for item, (lc, rc) in unmatched.items():
        s, found, n = (0, lrows, lc - rc) if lc > rc else (1, rrows, rc - lc)
        b, key, h = int(item[0]), tuple(item[1:-1]), int(item[-1])
        kl, kr = key_rows.get(item[:-1], (0, 0))
        # in float order, as the one-connection query numbers them
        for nh, floats in sorted(found.get(tuple(item), []), key=lambda x: [_sort_key(v) for v in x[1]])[-n:]:
            out.append(_Loose(s, b, h, key, nh, floats, lc, kl, kr))
        if len(out) > MAX_TOLERANCE_ROWS:
            return None
    return out


def _sort_key(v) -> tuple:
    return (v is None, v is not None and v != v, 0.0 if v is None or v != v else float(v))


def _fetch_sample(plan: _Plan, side: Side, b: str, h: str, picks: list[tuple], label: str) -> list[dict]:
    """Rows of `side` with the picked (bucket, row hash); (bucket, hash, ctid) picks are read by address."""
    if not picks:
        return []
    d = plan.dialect
    cols = ", ".join(_q(c, d) for c in plan.columns) or "*"
    bucket, hashed = _in_list(b, {p[0] for p in picks}, d), _in_list(h, {p[1] for p in picks}, d)
    tids = [p[2] for p in picks if len(p) > 2 and p[2] is not None and _TID.match(p[2])]
    # One row per row hash (json has no `=`, so no DISTINCT over the columns on PostgreSQL).
    distinct = f"distinct on ({h})" if d == "postgres" else "distinct"
    rows = []
    if d == "postgres" and len(tids) == len(picks):
        # A row that moved since (a concurrent update) is not found there, or fails the bucket
        # and hash conditions: then the scan below finds the rows.
        addr = f"ctid = any(array[{', '.join(repr(t) for t in tids)}]::tid[])"
        rows = side.con.fetch_dicts(f"select {distinct} {cols} from {plan.src(side, f'{addr} and {bucket}', hashed)} "
                                    f"limit {SAMPLE_ROWS}")
    if len(rows) < len({p[:2] for p in picks}):
        rows = side.con.fetch_dicts(f"select {distinct} {cols} from {plan.src(side, bucket, hashed)} "
                                    f"limit {SAMPLE_ROWS}")
    return [{"_diff": label, **{k: _jsonable(v) for k, v in r.items()}} for r in rows]


def _sample_columns(sample: list[dict], key: tuple[str, ...], columns: list[str],
                    floats: dict[str, float] | None = None) -> list[str]:
    """Columns that differ between the sampled left and right rows of the same key (floats beyond tolerance)."""
    floats = floats or {}
    if not key:
        return []
    left = {tuple(r.get(k) for k in key): r for r in sample if r["_diff"] == "missing"}
    found: set[str] = set()
    for r in sample:
        other = left.get(tuple(r.get(k) for k in key)) if r["_diff"] == "extra" else None
        if other:
            found.update(c for c in columns if (not floats_close(r.get(c), other.get(c), floats[c]) if c in floats
                                                else r.get(c) != other.get(c)))
    return [c for c in columns if c in found]


# ----------------------------------------------------------------------------- entry points

def compare(left: Side, right: Side, *, key: Sequence[str] = (), ignore_columns: Sequence[str] = (),
            bucket_column: str | None = None, strict: bool = True,
            float_tolerance: float | None = None) -> DiffResult:
    """Compare two sides; on one connection everything runs in the warehouse.

    Float columns are equal within `float_tolerance` (relative; None: DEFAULT_FLOAT_TOLERANCE,
    0: exact), see the module's docstring.
    """
    same = left.con is right.con
    if left.con.dialect != right.con.dialect:
        raise DiffError(f"cannot compare a {left.con.dialect} relation with a {right.con.dialect} relation")
    plan = _plan(left, right, key, ignore_columns, bucket_column, strict, float_tolerance)
    d = plan.dialect
    if d == "postgres":
        # Bucket aggregates with the default 4MB spill to disk; a read-only session may SET.
        for con in {id(left.con): left.con, id(right.con): right.con}.values():
            con.execute("set work_mem = '128MB'")
    if plan.mode in ("hash", "rowhash"):
        # Identical tables cost one checksum scan: a plain count(*), sum(row hash) of both sides
        # first. On PostgreSQL range buckets are as cheap as that scan (a parallel aggregate), so
        # they go first there; on DuckDB grouping 10M rows into range buckets costs ~1.8x the
        # scan, so the plain totals (and only then the min/max of the candidate keys) come first.
        ranged = False if d == "duckdb" else _set_range_buckets(plan)
        if not ranged:
            lt, rt, ls, rs = _totals(plan, same)
            plan.counts = (lt, rt)
            if lt == rt and ls == rs and not plan.schema_message:
                return DiffResult(lt, rt, True, keyed=bool(plan.key), type_changes=plan.type_changes,
                                  bucketing=plan.mode, buckets=1, float_tolerance=plan.tolerance)
            if d != "duckdb" or not _set_range_buckets(plan):
                _set_hash_buckets(plan)
    lt, rt, nj, listed = (_differing_buckets_same if same else _differing_buckets_across)(plan)
    result = dict(reference_rows=lt, rows=rt, keyed=bool(plan.key), schema_message=plan.schema_message,
                  type_changes=plan.type_changes, bucketing=plan.mode, buckets=plan.buckets, buckets_differing=nj,
                  float_tolerance=plan.tolerance)
    if nj == 0:
        return DiffResult(identical=not plan.schema_message, **result)
    if plan.mode == "column":
        parts = sorted((("NULL" if p is None else str(p)), lc, rc) for _b, p, lc, rc in listed)
        result["differing_partitions"] = tuple(parts[:MAX_PARTITIONS])
    if same:
        counts, lpick, rpick = _rows_same(plan, [b for b, *_ in listed] if nj <= MAX_LISTED_BUCKETS else None)
    else:
        counts, lpick, rpick = _rows_across(plan, listed)  # every differing bucket is listed
    sample = (_fetch_sample(plan, plan.right, plan.rb, plan.rh, rpick, "extra")
              + _fetch_sample(plan, plan.left, plan.lb, plan.lh, lpick, "missing"))
    result.update(
        identical=False, extra_rows=counts["only_r"], missing_rows=counts["only_l"], extra_copies=counts["copies_r"],
        sample=tuple(sample), differing_columns=tuple(_sample_columns(sample, plan.key, plan.columns,
                                                                      dict(plan.floats))))
    if plan.key:
        result.update(duplicate_keys=counts["dup_r"], reference_duplicate_keys=counts["dup_l"],
                      missing_keys=counts["keys_only_l"], extra_keys=counts["keys_only_r"],
                      changed_rows=counts["changed_rows"], changed_keys=counts["changed_keys"])
    else:
        result["changed_rows"] = min(counts["only_r"] - counts["copies_r"], counts["only_l"])
    if not plan.schema_message and not counts["only_l"] and not counts["only_r"]:
        result["identical"] = True  # only possible on a 64-bit checksum collision between buckets
    return DiffResult(**result)


def diff_relations(con: Connection, reference: tuple[str, ...], current: tuple[str, ...], *,
                   key: tuple[str, ...] = (), ignore_columns: tuple[str, ...] = (),
                   partition_column: str | None = None, column_detail: bool = False,
                   where: str | exp.Expression | None = None, bucket_column: str | None = None,
                   float_tolerance: float | None = None) -> DiffResult:
    """Compare `current` with `reference` ((schema, table) or (catalog, schema, table)) on one connection.

    A key that is not a column of both sides is ignored (the comparison is then unkeyed).
    `partition_column` adds rows per partition of both sides; `column_detail` lists the columns
    whose values differ anywhere (one more scan). Float columns are equal within
    `float_tolerance` (relative; None: DEFAULT_FLOAT_TOLERANCE, 0: exact).
    """
    d = con.dialect
    cond = parse_where(where, d) if isinstance(where, str) else where
    left, right = Side(con, _table(reference), cond), Side(con, _table(current), cond)
    result = compare(left, right, key=key, ignore_columns=ignore_columns, bucket_column=bucket_column,
                     strict=False, float_tolerance=float_tolerance)
    if result.identical:
        return result
    extra: dict = {}
    ltypes = dict(columns_of(con, left.table))
    rtypes = dict(columns_of(con, right.table))
    cols = [c for c in ltypes if c.lower() not in {i.lower() for i in ignore_columns} and c in rtypes]
    if column_detail or result.changed_rows:
        loose = {c: t for c in cols if ltypes[c].lower() == rtypes[c].lower()
                 and (t := float_tolerance_of(ltypes[c], result.float_tolerance)) is not None}
        extra["differing_columns"] = tuple(_differing_columns(con, left, right, cols, loose))
    if partition_column:
        types = {c.lower(): t.lower() for c, t in columns_of(con, right.table)}
        part = _partition_expr(partition_column, types, d)
        if part:
            extra["partition_column"] = partition_column
            extra["partitions"] = tuple(_partitions(con, left, right, part))
    return replace(result, **extra) if extra else result


def _table(parts: tuple[str, ...]) -> exp.Table:
    if len(parts) == 3:
        return exp.Table(this=ident(parts[2]), db=ident(parts[1]), catalog=ident(parts[0]))
    schema, name = parts
    return exp.Table(this=ident(name), db=ident(schema) if schema else None)


def _differing_columns(con: Connection, left: Side, right: Side, columns: list[str],
                       floats: dict[str, float]) -> list[str]:
    """Columns whose sum of value hashes differs (floats rounded as in the row hash)."""
    d = con.dialect
    if not columns:
        return []
    parts = []
    for i, c in enumerate(columns):
        hc = _hash_sql([round_float_sql(_q(c, d), d, floats[c])], d) if c in floats else row_hash([c], d)
        parts.append(f"(select {_int_sum(hc, d)} from {_src(left, d)}) as r{i}, "
                     f"(select {_int_sum(hc, d)} from {_src(right, d)}) as c{i}")
    row = con.fetchone("select " + ", ".join(parts))
    return [c for i, c in enumerate(columns) if row[2 * i] != row[2 * i + 1]]


def _src(side: Side, d: str) -> str:
    where = f" where {side.where.sql(dialect=d)}" if side.where is not None else ""
    return f"{side.table.sql(dialect=d)}{where}"


def _partition_expr(column: str, types: dict[str, str], dialect: str) -> str | None:
    ctype = types.get(column.lower())
    if ctype is None:
        return None
    q = _q(column, dialect)
    if any(t in ctype for t in _TEMPORAL):
        return f"cast(cast({q} as date) as varchar)"
    return f"cast({q} as varchar)"


def _partitions(con: Connection, left: Side, right: Side, part: str) -> list[tuple[str, int, int]]:
    d = con.dialect
    rows = con.fetchall(
        f"select p, sum(1 - rs_side), sum(rs_side) from ("
        f"select 0 as rs_side, {part} as p from {_src(left, d)} union all "
        f"select 1 as rs_side, {part} as p from {_src(right, d)}) u group by p order by p limit {MAX_PARTITIONS}")
    return [("NULL" if p is None else str(p), int(r), int(c)) for p, r, c in rows]


__all__ = ["DEFAULT_FLOAT_TOLERANCE", "DiffError", "DiffResult", "Side", "check_float_tolerance", "columns_of",
           "compare", "diff_relations", "floats_close", "parse_where", "round_float_sql", "row_hash"]
