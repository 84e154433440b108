"""Which output column of a model carries the time of its inputs, read from its compiled SQL.

The game day charts rows per day for every model whose time column it can trace, not only for
models with an `event_time` or `partition_key` config. `output_time_column` answers that from
the compiled SQL alone (no warehouse, no catalog), with sqlglot's parser and a walk of our own
over the query's scopes: `sqlglot.lineage` needs every output column named up front and a schema
to expand `select *`, which compiled dbt models often lack; the walk below carries "this column
holds the time" through stars, aliases, casts, truncations, CTEs, subqueries, joins and set
operations without knowing any other column.

Relations are matched by table name only: the last part of the name as written in the SQL
(`"db"."main"."stg_orders"` -> `stg_orders`), lower-cased. Two inputs with the same table name
in different schemas cannot be told apart; the caller passes one time column per name.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..lint.clock_stamps import stamps_the_clock
from ..warehouse.dialects import dialect_for

__all__ = ["audit_columns", "computed_columns", "output_time_column", "row_columns", "window_columns"]

# How directly an output column carries the input's time. Lower wins.
DIRECT = 0     # the column itself, renamed, cast to a date/timestamp, truncated, shifted
AGGREGATE = 1  # min(ts) / max(ts): a time per group (e.g. last_seen), still a time column

_TIME_TYPES = exp.DataType.TEMPORAL_TYPES - {exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ}

# Functions that keep a value on the time axis, and the argument that holds the time.
_KEEPS_TIME: dict[type[exp.Expression], str] = {
    exp.TimestampTrunc: "this", exp.DateTrunc: "this", exp.DatetimeTrunc: "this",
    exp.Date: "this", exp.DateBin: "expression", exp.AtTimeZone: "this", exp.Coalesce: "this",
    exp.Paren: "this", exp.Alias: "this", exp.TsOrDsToDate: "this", exp.TsOrDsToTimestamp: "this",
}
# Unparsed (Anonymous) functions that truncate or bucket a time, by lower-case name.
_ANONYMOUS_TIME_FUNCTIONS = frozenset({"date_trunc", "datetrunc", "time_bucket", "date_bin", "to_date",
                                       "timezone", "date"})


@dataclass(frozen=True)
class _Rel:
    """What a relation in a FROM clause offers: its time-carrying columns (lower-case name ->
    (name as written, rank)), and whether it was resolved at all."""

    times: dict[str, tuple[str, int]]


def output_time_column(sql: str, dialect: str, input_time_columns: Mapping[str, str]) -> str | None:
    """The output column of a model that carries its inputs' time, or None.

    sql: the model's compiled SQL (one select statement; a trailing semicolon is fine).
    dialect: "duckdb" or "postgres" (any sqlglot dialect name works).
    input_time_columns: for each relation the model reads, keyed by its table name as written in
        the SQL, lower-case (the last part of a qualified name: "stg_orders" for
        "db"."main"."stg_orders"; a dotted key is reduced to its last part), the name of that
        relation's time column.

    The column may be passed on directly, renamed, cast to a date or timestamp, truncated
    (date_trunc, time_bucket, date()), shifted by an interval or to a time zone, and carried
    through CTEs, subqueries, joins (from either side) and union all. A min() or max() of the
    time (e.g. `max(ts) as last_seen`) counts when nothing more direct is there; count(ts),
    extract(...) or a string format do not. When several output columns qualify, the most direct
    one wins, then the first in select order. Returns the output name as the warehouse stores
    it (Postgres folds unquoted names to lower case; DuckDB keeps them as written). SQL that
    does not parse, or a time that cannot be traced, gives None; an unknown dialect name raises
    ValueError.
    """
    sqlglot.Dialect.get_or_raise(dialect)  # a dialect name sqlglot does not know is the caller's bug: ValueError
    inputs = {_table_key(k): v for k, v in input_time_columns.items() if k and v}
    try:
        tree = sqlglot.parse_one(sql.strip().rstrip(";"), read=dialect)
    except (SqlglotError, ValueError):
        return None
    if not isinstance(tree, exp.Query):
        return None
    try:
        cols = _query_times(tree, inputs, {}, dialect)
    except RecursionError:
        return None
    if not cols:
        return None
    best = min(cols, key=lambda c: c[1])  # stable: first in select order among the most direct
    return best[0]


def _outermost(sql: str, dialect: str) -> tuple[exp.Expression | None, exp.Select | None]:
    """The parsed SQL and its outermost select (the one that names the output columns); (None, None)
    for SQL that does not parse or selects nothing."""
    try:
        tree = sqlglot.parse_one(sql.strip().rstrip(";"), read=dialect)
    except (SqlglotError, ValueError):
        return None, None
    return tree, _leftmost_select(tree) if isinstance(tree, exp.Query) else None


def _table_key(name: str) -> str:
    return name.strip().strip('"`[]').split(".")[-1].strip('"`[]').lower()


def _ident_name(ident: exp.Expression | str | None, dialect: str) -> str:
    """An identifier as the warehouse names the column (Postgres folds unquoted names)."""
    if ident is None:
        return ""
    if isinstance(ident, str):
        return ident
    if isinstance(ident, exp.Identifier):
        if dialect_for(dialect).folds_unquoted_to_lower and not ident.quoted:
            return ident.name.lower()
        return ident.name
    return ident.name


def _query_times(q: exp.Expression, inputs: Mapping[str, str], ctes: Mapping[str, _Rel],
                 dialect: str) -> list[tuple[str, int]]:
    """The time-carrying output columns of a query, in select order: [(name, rank)]."""
    ctes = dict(ctes)
    with_ = q.args.get("with_") or q.args.get("with")
    if isinstance(with_, exp.With):
        for cte in with_.expressions:
            body = cte.this
            ctes[cte.alias_or_name.lower()] = _rel_of(_query_times(body, inputs, ctes, dialect))
    if isinstance(q, exp.Subquery):
        return _query_times(q.this, inputs, ctes, dialect)
    if isinstance(q, exp.SetOperation):
        return _set_operation_times(q, inputs, ctes, dialect)
    if isinstance(q, exp.Select):
        return _select_times(q, inputs, ctes, dialect)
    return []


def _rel_of(cols: list[tuple[str, int]]) -> _Rel:
    times: dict[str, tuple[str, int]] = {}
    for name, rank in cols:
        key = name.lower()
        if key not in times or rank < times[key][1]:
            times[key] = (name, rank)
    return _Rel(times)


def _set_operation_times(q: exp.SetOperation, inputs, ctes, dialect) -> list[tuple[str, int]]:
    """Columns are named by the left branch. A union matches branches by position: a position
    carries the time when any branch carries it there (the time of some rows); positions are only
    known where both branches list their columns (no star). intersect / except: the left's."""
    left, right = q.this, q.expression
    left_cols = _query_times(left, inputs, ctes, dialect)
    if q.args.get("by_name"):  # DuckDB's `union all by name`: matched by name, not position
        return list(_rel_of(left_cols + _query_times(right, inputs, ctes, dialect)).times.values())
    if not isinstance(q, exp.Union):
        return left_cols  # intersect / except: every row comes from the left branch
    left_sel, right_sel = _leftmost_select(left), _leftmost_select(right)
    if left_sel is None or right_sel is None or _has_star(left_sel) or _has_star(right_sel):
        return left_cols
    names = [_output_name(p, dialect) for p in left_sel.expressions]
    right_cols = dict(_query_times(right, inputs, ctes, dialect))
    right_names = [_output_name(p, dialect) for p in right_sel.expressions]
    out: dict[str, int] = {n: r for n, r in left_cols}
    for pos, rname in enumerate(right_names):
        if rname in right_cols and pos < len(names):
            name = names[pos]
            out[name] = min(out.get(name, right_cols[rname]), right_cols[rname])
    return [(n, out[n]) for n in names if n in out]


def _leftmost_select(q: exp.Expression) -> exp.Select | None:
    while isinstance(q, (exp.SetOperation, exp.Subquery)):
        q = q.this
    return q if isinstance(q, exp.Select) else None


def _has_star(sel: exp.Select) -> bool:
    return any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
               for p in sel.expressions)


def _output_name(p: exp.Expression, dialect: str) -> str:
    if isinstance(p, exp.Alias):
        return _ident_name(p.args.get("alias"), dialect)
    if isinstance(p, exp.Column):
        return _ident_name(p.this, dialect)
    return p.alias_or_name


def _sources(sel: exp.Select, inputs, ctes, dialect) -> dict[str, _Rel]:
    """The relations of a select's FROM and JOINs, by the name its columns use (alias or table)."""
    out: dict[str, _Rel] = {}
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = [from_.this] if isinstance(from_, exp.From) else []
    items += [j.this for j in sel.args.get("joins") or ()]
    for item in items:
        rel = _source_rel(item, inputs, ctes, dialect)
        if rel is None:
            continue
        alias = item.alias_or_name.lower() if not isinstance(item, exp.Table) else (item.alias or item.name).lower()
        out[alias] = rel
    return out


def _source_rel(item: exp.Expression, inputs, ctes, dialect) -> _Rel | None:
    if isinstance(item, exp.Table):
        if not isinstance(item.this, exp.Identifier):
            return None  # a table function (unnest, read_csv, generate_series): nothing known
        name = item.name.lower()
        if not item.args.get("db") and name in ctes:
            return ctes[name]  # an unqualified name is the CTE, which shadows any table
        col = inputs.get(name)
        return _Rel({col.lower(): (col, DIRECT)}) if col else _Rel({})
    if isinstance(item, exp.Subquery):
        return _rel_of(_query_times(item.this, inputs, ctes, dialect))
    return None


def _select_times(sel: exp.Select, inputs, ctes, dialect) -> list[tuple[str, int]]:
    sources = _sources(sel, inputs, ctes, dialect)
    out: list[tuple[str, int]] = []
    for p in sel.expressions:
        if isinstance(p, exp.Star):
            out += _star_times(p, list(sources.values()), inputs, ctes, sources, dialect)
            continue
        if isinstance(p, exp.Column) and isinstance(p.this, exp.Star):
            rel = sources.get(p.table.lower())
            out += _star_times(p.this, [rel] if rel else [], inputs, ctes, sources, dialect)
            continue
        rank = _carried(p, sources)
        if rank is not None:
            out.append((_output_name(p, dialect), rank))
    # one entry per output name, the most direct
    seen: dict[str, int] = {}
    ordered: list[str] = []
    for name, rank in out:
        if name.lower() not in seen:
            ordered.append(name)
            seen[name.lower()] = rank
        else:
            seen[name.lower()] = min(seen[name.lower()], rank)
    return [(n, seen[n.lower()]) for n in ordered]


def _star_times(star: exp.Star, rels: list[_Rel], inputs, ctes, sources, dialect) -> list[tuple[str, int]]:
    """Columns a `*` passes on: every time column of its relations, minus EXCLUDE/EXCEPT, with
    REPLACE applied (DuckDB's `* replace (expr as ts)`)."""
    excluded = {_ident_name(c.this if isinstance(c, exp.Column) else c, dialect).lower()
                for c in (star.args.get("except_") or star.args.get("except") or ())}
    replaced = {}
    for r in star.args.get("replace") or ():
        if isinstance(r, exp.Alias):
            replaced[_ident_name(r.args.get("alias"), dialect).lower()] = r
    out = []
    for rel in rels:
        for key, (name, rank) in rel.times.items():
            if key in excluded:
                continue
            if key in replaced:
                continue
            out.append((name, rank))
    for key, alias in replaced.items():
        rank = _carried(alias, sources)
        if rank is not None:
            out.append((_output_name(alias, dialect), rank))
    return out


def _carried(e: exp.Expression, sources: Mapping[str, _Rel]) -> int | None:
    """The rank with which an expression carries a source's time, or None."""
    if isinstance(e, exp.Column):
        if isinstance(e.this, exp.Star):
            return None
        name = e.name.lower()
        table = e.table.lower()
        if table:
            rel = sources.get(table)
            hit = rel.times.get(name) if rel else None
            return hit[1] if hit else None
        ranks = [rel.times[name][1] for rel in sources.values() if name in rel.times]
        return min(ranks) if ranks else None
    if isinstance(e, (exp.Cast, exp.TryCast)):
        to = e.args.get("to")
        if isinstance(to, exp.DataType) and to.this in _TIME_TYPES:
            return _carried(e.this, sources)
        return None
    if isinstance(e, (exp.Add, exp.Sub)):
        if isinstance(e.expression, exp.Interval):
            return _carried(e.this, sources)
        if isinstance(e, exp.Add) and isinstance(e.this, exp.Interval):
            return _carried(e.expression, sources)
        return None
    if isinstance(e, (exp.Max, exp.Min)) and not e.args.get("expressions"):
        inner = _carried(e.this, sources)
        return None if inner is None else max(inner, AGGREGATE)
    if isinstance(e, exp.Window):
        return None
    for cls, arg in _KEEPS_TIME.items():
        if type(e) is cls:
            inner = e.args.get(arg)
            return _carried(inner, sources) if isinstance(inner, exp.Expression) else None
    if isinstance(e, exp.Anonymous) and e.name.lower() in _ANONYMOUS_TIME_FUNCTIONS:
        ranks = [r for r in (_carried(a, sources) for a in e.expressions) if r is not None]
        return min(ranks) if ranks else None
    return None


def audit_columns(sql: str, dialect: str, run_clock: dt.datetime) -> tuple[str, ...]:
    """The output columns of a model that only stamp the run's clock: `now()`, `current_timestamp`,
    `run_started_at` (compiled to a literal of the run's clock, `run_clock`), through casts, coalesce
    and truncation, with no column of any input in them. They differ between a full build and a replay
    by design. A clock read used in logic (a filter, a join, a window bound, a CASE over a column) is
    not one: only the select list of the outermost query is read. SQL that does not parse gives ()."""
    tree, sel = _outermost(sql, dialect)
    if sel is None:
        return ()
    return tuple(_output_name(p, dialect) for p in sel.expressions
                 if not isinstance(p, exp.Star) and stamps_the_clock(p.this if isinstance(p, exp.Alias) else p, run_clock))


def computed_columns(sql: str, dialect: str) -> dict[str, frozenset[str]]:
    """The output columns a model computes itself, each with the names of the columns it reads
    (lower-case): every column of the outermost select that is not an input's column passed on as it
    is (renamed or cast), followed through CTEs and subqueries. A column left out is passed on from an
    input, or not known (a `*` over a table). SQL that does not parse gives {}."""
    try:
        tree = sqlglot.parse_one(sql.strip().rstrip(";"), read=dialect)
    except (SqlglotError, ValueError):
        return {}
    ctes = {c.alias_or_name.lower(): c.this for c in tree.find_all(exp.CTE)}
    sel = _leftmost_select(tree) if isinstance(tree, exp.Query) else None
    return _computed_in(sel, ctes, dialect, 0) if sel is not None else {}


def _computed_in(sel: exp.Select, ctes: Mapping[str, exp.Expression], dialect: str,
                 depth: int) -> dict[str, frozenset[str]]:
    if depth > 16:  # a recursive CTE
        return {}
    inner: dict[str, exp.Select] = {}  # FROM and JOIN items that are queries, by the name columns use
    from_ = sel.args.get("from_") or sel.args.get("from")
    for item in ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in sel.args.get("joins") or ()]:
        query = (ctes.get(item.name.lower()) if isinstance(item, exp.Table) and not item.args.get("db")
                 else item.this if isinstance(item, exp.Subquery) else None)
        inner_sel = _leftmost_select(query) if isinstance(query, exp.Expression) else None
        if inner_sel is not None:
            inner[item.alias_or_name.lower()] = inner_sel

    def through(name: str, table: str) -> dict[str, frozenset[str]]:
        rels = [inner[table]] if table in inner else list(inner.values()) if not table else []
        found: dict[str, frozenset[str]] = {}
        for rel in rels:
            found.update(_computed_in(rel, ctes, dialect, depth + 1))
        return {name: found[name]} if name in found else {}

    out: dict[str, frozenset[str]] = {}
    for p in sel.expressions:
        if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
            for rel in ([inner[p.table.lower()]] if isinstance(p, exp.Column) and p.table.lower() in inner
                        else inner.values()):
                out.update(_computed_in(rel, ctes, dialect, depth + 1))
            continue
        name = _output_name(p, dialect).lower()
        e = p.this if isinstance(p, exp.Alias) else p
        while isinstance(e, (exp.Cast, exp.TryCast, exp.Paren)):
            e = e.this
        if isinstance(e, exp.Column):
            carried = through(e.name.lower(), e.table.lower())
            if carried:
                out[name] = carried[e.name.lower()]
            continue
        out[name] = frozenset(c.name.lower() for c in e.find_all(exp.Column) if not isinstance(c.this, exp.Star))
    return out


def window_columns(sql: str, dialect: str) -> tuple[str, ...]:
    """The output columns (lower case) a window function computes (`row_number() over (...)`, `lag`,
    a running sum), defined in the outermost select or under the same name in a CTE or subquery it
    reads: over a re-read window such a number is counted anew, so a row that differs in it alone was
    renumbered, not lost. SQL that does not parse gives ()."""
    tree, sel = _outermost(sql, dialect)
    if sel is None:
        return ()
    windowed = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias and a.this.find(exp.Window)}
    out = [n for n in (_output_name(p, dialect).lower() for p in sel.expressions) if n in windowed]
    return tuple(dict.fromkeys(out))


def row_columns(sql: str, dialect: str) -> frozenset[str] | None:
    """The columns (lower case) a model's SQL uses to decide which rows come out and how they pair: in a
    WHERE, a JOIN's ON or USING, GROUP BY, HAVING, QUALIFY, the projection of a SELECT DISTINCT, the
    ORDER BY of a LIMIT, at any depth. A column used only to compute output values is not among them
    (`computed_columns` has those). None: not known (SQL that does not parse, a UNION that drops
    copies, which decides by every column)."""
    try:
        tree = sqlglot.parse_one(sql.strip().rstrip(";"), read=dialect)
    except (SqlglotError, ValueError):
        return None
    if any(u.args.get("distinct") for u in tree.find_all(exp.Union)):
        return None

    def names(node) -> set[str]:
        return {c.name.lower() for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)} \
            if isinstance(node, exp.Expression) else set()

    out: set[str] = set()
    # an output column computed in a select and used by another to decide (`row_number() over (...) as
    # rn` ... `where rn = 1`): the columns it is computed from decide too (by name, at any depth: a
    # wider set than the truth, never a narrower one)
    aliases: dict[str, set[str]] = {}
    for sel in tree.find_all(exp.Select):
        for p in sel.expressions:
            if isinstance(p, exp.Alias):
                aliases.setdefault(p.alias.lower(), set()).update(names(p.this))
    for sel in tree.find_all(exp.Select):
        if sel.args.get("distinct"):
            for p in sel.expressions:
                out |= names(p)
        for key in ("where", "group", "having", "qualify"):
            out |= names(sel.args.get(key))
        for join in sel.args.get("joins") or ():
            out |= names(join.args.get("on"))
            out |= {i.name.lower() for i in join.args.get("using") or () if isinstance(i, exp.Expression)}
        if sel.args.get("limit") or sel.args.get("offset") or sel.args.get("fetch"):
            out |= names(sel.args.get("order"))
    todo = [n for n in out if n in aliases]
    while todo:
        for n in aliases.pop(todo.pop(), ()):
            if n not in out:
                out.add(n)
                if n in aliases:
                    todo.append(n)
    return frozenset(out)


def key_candidates(key: tuple[str, ...], columns: list[str], time_columns: list[str]) -> list[tuple[str, ...]]:
    """Keys an output might have, most likely first: its configured or tested key, then each column
    named like an id (`id`, `*_id`, `*_key`), then each of those with a time column of the output
    (`time_columns`, most likely first: the grain of a per-day aggregate). At most eight."""
    out: list[tuple[str, ...]] = [tuple(key)] if key else []
    ids = [c for c in columns if c.lower() == "id" or c.lower().endswith(("_id", "_key"))]
    out += [(c,) for c in ids]
    by_name = {c.lower(): c for c in columns}
    times = [by_name[t.lower()] for t in time_columns if t and t.lower() in by_name]
    out += [(c, t) for t in times for c in ids if c != t]
    seen: list[tuple[str, ...]] = []
    for k in out:
        if k not in seen:
            seen.append(k)
    return seen[:8]
