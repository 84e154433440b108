"""Multiset diff of two relations inside one warehouse connection.

Checksums first (one scan of each side); detail only when they differ. Every comparison is a
multiset comparison: a row present twice is two rows. Row identity is a hash over all compared
columns (DuckDB `hash(...)`, PostgreSQL the first 64 bits of `md5(row(...)::text)`), so NULLs
are values, a float is its exact value, and a timestamp keeps its precision.
"""
from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass


from .sandbox.base import Connection, ident

SAMPLE_ROWS = 5
MAX_PARTITIONS = 400
_TEMPORAL = ("date", "timestamp", "datetime")


@dataclass(frozen=True)
class DiffResult:
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


def _q(name: str, dialect: str) -> str:
    return ident(name).sql(dialect=dialect)


def _rel(schema: str, name: str, dialect: str) -> str:
    return f"{_q(schema, dialect)}.{_q(name, dialect)}"


def row_hash(columns: list[str], dialect: str, alias: str | None = None) -> str:
    cols = [(f"{alias}." if alias else "") + _q(c, dialect) for c in columns]
    if dialect == "duckdb":
        return f"hash({', '.join(cols)})"
    return f"('x' || substr(md5(row({', '.join(cols)})::text), 1, 16))::bit(64)::bigint"


def _sum_type(dialect: str) -> str:
    return "hugeint" if dialect == "duckdb" else "numeric"


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)


def diff_relations(con: Connection, reference: tuple[str, str], current: tuple[str, str], *,
                   key: tuple[str, ...] = (), ignore_columns: tuple[str, ...] = (),
                   partition_column: str | None = None, column_detail: bool = False) -> DiffResult:
    d = con.dialect
    ref_cols = con.columns(*reference)
    cur_cols = con.columns(*current)
    ignore = {c.lower() for c in ignore_columns}
    ref_names = [c for c, _ in ref_cols if c.lower() not in ignore]
    cur_names = {c for c, _ in cur_cols if c.lower() not in ignore}
    types = {c.lower(): t.lower() for c, t in cur_cols}
    schema_message = ""
    if set(ref_names) != cur_names:
        added = sorted(cur_names - set(ref_names))
        removed = sorted(set(ref_names) - cur_names)
        schema_message = "columns differ:" + "".join(f" +{c}" for c in added) + "".join(f" -{c}" for c in removed)
    columns = [c for c in ref_names if c in cur_names]
    ref_rel, cur_rel = _rel(*reference, d), _rel(*current, d)
    h = row_hash(columns, d)
    st = _sum_type(d)
    totals = con.fetchone(
        f"select (select count(*) from {ref_rel}), "
        f"(select coalesce(sum(cast({h} as {st})), 0) from {ref_rel}), "
        f"(select count(*) from {cur_rel}), "
        f"(select coalesce(sum(cast({h} as {st})), 0) from {cur_rel})")
    ref_rows, ref_sum, rows, cur_sum = int(totals[0]), totals[1], int(totals[2]), totals[3]
    if ref_rows == rows and ref_sum == cur_sum and not schema_message:
        return DiffResult(ref_rows, rows, True)

    both = (f"select 0 as rs_side, {h} as rs_h{''.join(', ' + _q(k, d) for k in key)} from {ref_rel} "
            f"union all select 1 as rs_side, {h} as rs_h{''.join(', ' + _q(k, d) for k in key)} from {cur_rel}")
    grouped = (f"select rs_h, sum(1 - rs_side) as rn, sum(rs_side) as sn from ({both}) b group by rs_h")
    extra, missing, copies = con.fetchone(
        f"select coalesce(sum(case when sn > rn then sn - rn else 0 end), 0), "
        f"coalesce(sum(case when rn > sn then rn - sn else 0 end), 0), "
        f"coalesce(sum(case when rn > 0 and sn > rn then sn - rn else 0 end), 0) from ({grouped}) g")
    result = dict(reference_rows=ref_rows, rows=rows, identical=False, extra_rows=int(extra),
                  missing_rows=int(missing), extra_copies=int(copies), schema_message=schema_message)

    if key and all(k in cur_names and k in ref_names for k in key):
        keys = ", ".join(_q(k, d) for k in key)
        per_key = (f"select {keys}, sum(1 - rs_side) as rn, sum(rs_side) as sn, "
                   f"min(case when rs_side = 0 then rs_h end) as rh, min(case when rs_side = 1 then rs_h end) as sh "
                   f"from ({both}) b group by {keys}")
        dup, miss, ext, changed = con.fetchone(
            f"select coalesce(sum(case when sn > 1 and sn > rn then 1 else 0 end), 0), "
            f"coalesce(sum(case when sn = 0 then 1 else 0 end), 0), "
            f"coalesce(sum(case when rn = 0 then 1 else 0 end), 0), "
            f"coalesce(sum(case when rn = 1 and sn = 1 and rh <> sh then 1 else 0 end), 0) from ({per_key}) k")
        result.update(keyed=True, duplicate_keys=int(dup), missing_keys=int(miss), extra_keys=int(ext),
                      changed_rows=int(changed))
    else:
        result["changed_rows"] = min(int(extra) - int(copies), int(missing))

    if column_detail or result["changed_rows"]:
        result["differing_columns"] = tuple(_differing_columns(con, ref_rel, cur_rel, columns))
    result["sample"] = tuple(_sample(con, ref_rel, cur_rel, h, grouped))
    part = _partition_expr(partition_column, types, d) if partition_column else None
    if part:
        result["partition_column"] = partition_column
        result["partitions"] = tuple(_partitions(con, ref_rel, cur_rel, part))
    return DiffResult(**result)


def _differing_columns(con: Connection, ref_rel: str, cur_rel: str, columns: list[str]) -> list[str]:
    d, st = con.dialect, _sum_type(con.dialect)
    if not columns:
        return []
    parts = []
    for i, c in enumerate(columns):
        hc = row_hash([c], d)
        parts.append(f"(select coalesce(sum(cast({hc} as {st})), 0) from {ref_rel}) as r{i}, "
                     f"(select coalesce(sum(cast({hc} as {st})), 0) from {cur_rel}) as c{i}")
    row = con.fetchone("select " + ", ".join(parts))
    return [c for i, c in enumerate(columns) if row[2 * i] != row[2 * i + 1]]


def _sample(con: Connection, ref_rel: str, cur_rel: str, h: str, grouped: str) -> list[dict]:
    out: list[dict] = []
    for label, rel, cond in (("extra", cur_rel, "sn > rn"), ("missing", ref_rel, "rn > sn")):
        rows = con.fetch_dicts(
            f"select * from {rel} where {h} in (select rs_h from ({grouped}) g where {cond}) "
            f"limit {SAMPLE_ROWS}")
        for r in rows:
            out.append({"_diff": label, **{k: _jsonable(v) for k, v in r.items()}})
    return out


def _partition_expr(column: str, types: dict[str, str], dialect: str) -> str | None:
    ctype = types.get(column.lower())
    if ctype is None:
        return None
    q = _q(column, dialect)
    if any(t in ctype for t in _TEMPORAL):
        return f"cast(cast({q} as date) as varchar)"
    return f"cast({q} as varchar)"


def _partitions(con: Connection, ref_rel: str, cur_rel: str, part: str) -> list[tuple[str, int, int]]:
    rows = con.fetchall(
        f"select p, sum(1 - rs_side), sum(rs_side) from ("
        f"select 0 as rs_side, {part} as p from {ref_rel} union all "
        f"select 1 as rs_side, {part} as p from {cur_rel}) u group by p order by p limit {MAX_PARTITIONS}")
    return [("NULL" if p is None else str(p), int(r), int(c)) for p, r, c in rows]


__all__ = ["DiffResult", "diff_relations", "row_hash"]
