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

from ..results import ScenarioResult, Verdict
from ..warehouse.dialects import dialect_for
from ..warehouse.base import REFERENCE_SCHEMA, Connection, table

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
    found = dialect_for(dialect).sorted_values(column, sep)
    assert found is not None  # sorted_view asked first
    return found


def sorted_view(con: Connection, schema: str, source: tuple[str, str], name: str,
                aggs: dict[str, str | None]) -> bool:
    """A view `schema.name` over `source` with the aggregate columns' values sorted. False when
    none of `aggs` is a column of `source` or the engine has no such functions here."""
    if con.dialect.sorted_values(exp.column("x"), None) is None:
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


def unordered_in_results(results: Any, plan: Any, dialect: str) -> dict[str, dict[str, str | None]]:
    """Per judged model, its columns gathered without ORDER BY, read from the SQL a dbt invocation
    (the reference build) ran."""
    judged = {m.unique_id for m in plan.judged}
    out = {}
    for r in getattr(results, "results", None) or ():
        node = getattr(r, "node", None)
        uid = getattr(node, "unique_id", "")
        if uid in judged and getattr(node, "language", "sql") == "sql" and getattr(node, "compiled_code", None):
            found = unordered_agg_columns(node.compiled_code, dialect)
            if found:
                out[uid] = found
    return out


def _sorted_diff(con: Connection, plan: Any, m: Any, aggs: dict[str, str | None], compare):
    """The model's output against its reference with the values these columns list sorted on both sides
    (`compare(left, right)` diffs two relations); None where the engine cannot sort them here."""
    ref = plan.ref_names[m.unique_id]
    names = (f"rerun_safety_sorted_ref_{ref}", f"rerun_safety_sorted_{ref}")
    try:
        if not (sorted_view(con, m.schema, (REFERENCE_SCHEMA, ref), names[0], aggs)
                and sorted_view(con, m.schema, (m.schema, m.identifier), names[1], aggs)):
            return None
        return compare((m.schema, names[0]), (m.schema, names[1]))
    except Exception:  # noqa: BLE001 - a column the sorting cannot read (another type): not shown sorted
        return None
    finally:
        for name in names:
            con.drop_relation(m.schema, name)


def judge(con: Connection, plan: Any, m: Any, r: ScenarioResult, compare) -> ScenarioResult:
    """A difference that vanishes once the values of the model's unordered aggregates are sorted is
    the model's own nondeterminism, not a rerun defect. `compare(left, right)` diffs two relations."""
    from dataclasses import replace

    aggs = plan.facts.unordered.get(m.unique_id)
    if not aggs or r.verdict in (Verdict.SAFE, Verdict.UNTESTED, Verdict.ERROR, Verdict.SKIPPED, Verdict.NONDETERMINISTIC):
        return r
    if r.differing_columns and not {c.lower() for c in r.differing_columns} <= set(aggs):
        return r  # other columns differ too
    d = _sorted_diff(con, plan, m, aggs, compare)
    if d is None or not d.identical:
        return r
    cols = ", ".join(sorted(c for c in aggs if c in {x.lower() for x in r.differing_columns}) or sorted(aggs))
    return replace(r, verdict=Verdict.NONDETERMINISTIC, volatile_columns=tuple(r.differing_columns),
                   message=f"differs only in the order of the values gathered by an aggregate without ORDER BY "
                           f"({cols}): they come in the order the rows are read")


_TEXT = ("char", "text", "string")


def list_separators(plan: Any, m: Any) -> set[str | None]:
    """The separators of the unordered aggregates in a model's SQL and in every judged model above it
    (None: an array): the lists its columns may carry or pick from."""
    judged = {j.unique_id: j for j in plan.judged}
    seps: set[str | None] = set()
    stack, seen = [m.unique_id], set()
    while stack:
        uid = stack.pop()
        if uid in seen:
            continue
        seen.add(uid)
        seps |= set((plan.facts.unordered.get(uid) or {}).values())
        if uid in judged:
            stack.extend(plan.parents_in_judged(judged[uid]))
    return seps


def order_only_columns(con: Connection, plan: Any, m: Any, r: ScenarioResult, compare) -> tuple[str, ...]:
    """The columns whose difference in a scenario vanishes once the values they list are sorted: a list
    gathered without ORDER BY, here or above (`list_separators`), read in another order. Only these
    columns' differences can be that list's nondeterminism; a list with other values (`4` against
    `1, 3, 4`) is a defect, whatever two clean builds showed. Asked of a difference in values only."""
    if r.verdict not in (Verdict.DRIFT, Verdict.NONDETERMINISTIC) or not r.differing_columns:
        return ()
    seps = list_separators(plan, m)
    if not seps or con.dialect.sorted_values(exp.column("x"), None) is None:
        return ()
    types = {c.lower(): t.lower() for c, t in con.columns(m.schema, m.identifier)}
    differing = {c.lower() for c in r.differing_columns}
    found: set[str] = set()
    for sep in sorted(seps, key=lambda x: (x is None, x or ""))[:3]:
        listed = {c: sep for c in differing - found
                  if (sep is None and ("[]" in types.get(c, "") or "array" in types.get(c, "")))
                  or (sep is not None and any(t in types.get(c, "") for t in _TEXT))}
        d = _sorted_diff(con, plan, m, listed, compare) if listed else None
        if d is None:
            continue
        still = {c.lower() for c in d.differing_columns}
        if d.identical or still:  # what still differs is named (else no column is known apart)
            found |= {c for c in listed if c not in still}
    return tuple(c for c in r.differing_columns if c.lower() in found)
