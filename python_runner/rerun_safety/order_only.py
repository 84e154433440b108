"""Differences in the order of the values an aggregate gathered without ORDER BY.

`string_agg(tag, ',')` or `array_agg(tag)` with no order lists the values in the order the rows were
read, and a replay writes its inputs batch by batch, in another physical order than the reference's
single load. Such a column differs from the reference with no row missing or added. When the two
sides are equal once the values of those columns are sorted, the difference is the model's
nondeterminism (`nondeterministic`), not a rerun defect (`drift`) that would be blamed on the rerun
and contaminate the models below.
"""
from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from .sandbox.base import Connection, table

# string_agg / listagg / group_concat, and array_agg / list
_AGGS = tuple(c for c in (getattr(exp, n, None) for n in ("GroupConcat", "ArrayAgg")) if isinstance(c, type))


def unordered_agg_columns(sql: str, dialect: str) -> dict[str, str | None]:
    """The model's output columns (lower case) computed by an aggregate without ORDER BY, with the
    separator of a text aggregate (None: a list or array). Empty when the SQL does not parse."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return {}
    out: dict[str, str | None] = {}
    for stmt in statements:
        for select in stmt.find_all(exp.Select):
            for proj in select.expressions:
                name = proj.alias_or_name
                for agg in proj.find_all(*_AGGS):
                    if agg.find_ancestor(exp.Window) is not None or agg.find(exp.Order) is not None:
                        continue
                    if isinstance(agg, exp.ArrayAgg):
                        out[name.lower()] = None
                        continue
                    sep = agg.args.get("separator")
                    if sep is None:
                        out[name.lower()] = ","  # DuckDB's default; PostgreSQL requires one
                    elif isinstance(sep, exp.Literal) and sep.is_string:
                        out[name.lower()] = sep.this
    return out


def _sorted_values(column: exp.Expression, sep: str | None, dialect: str) -> exp.Expression:
    """The column with the values it lists in sorted order (a text list split and joined on `sep`)."""
    lit = exp.Literal.string(sep) if sep is not None else None
    if dialect == "duckdb":
        items = column if sep is None else exp.func("string_split", column, lit)
        ordered = exp.func("list_sort", items)
        return ordered if sep is None else exp.func("array_to_string", ordered, lit)
    items = column if sep is None else exp.func("string_to_array", column, lit)
    picked = exp.select("v").from_(exp.Unnest(expressions=[items]).as_("u", table=["v"])).order_by("v")
    ordered = exp.Array(expressions=[picked])
    return ordered if sep is None else exp.func("array_to_string", ordered, lit)


def sorted_view(con: Connection, schema: str, source: tuple[str, str], name: str,
                aggs: dict[str, str | None]) -> bool:
    """A view `schema.name` over `source` with the aggregate columns' values sorted. False when
    none of `aggs` is a column of `source` or the engine has no such functions here."""
    if con.dialect not in ("duckdb", "postgres"):
        return False
    cols = [c for c, _ in con.columns(*source)]
    if not any(c.lower() in aggs for c in cols):
        return False
    projections: list[Any] = []
    for c in cols:
        col = exp.column(c, quoted=True)
        projections.append(_sorted_values(col, aggs[c.lower()], con.dialect).as_(c, quoted=True)
                           if c.lower() in aggs else col)
    query = exp.select(*projections).from_(table(*source))
    con.execute(exp.Create(this=table(schema, name), kind="VIEW", expression=query, replace=True))
    return True
