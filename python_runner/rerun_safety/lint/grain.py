"""The time grain of an expression: to what boundary its values are aligned, from column types
(the scratch catalog's, through CTEs and subqueries) and expressions (casts to date, date_trunc,
date and interval arithmetic), in the DuckDB and PostgreSQL dialects.

A grain is one of GRAINS, or "instant" (a timestamp with no alignment), or None (unknown).
"""
from __future__ import annotations

import re
from typing import Callable

from sqlglot import exp

GRAINS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year")
INSTANT = "instant"

# a value truncated to <key> is a boundary of each grain in the set
ALIGNED = {
    INSTANT: set(),
    "second": {"second"},
    "minute": {"second", "minute"},
    "hour": {"second", "minute", "hour"},
    "day": {"second", "minute", "hour", "day"},
    "week": {"second", "minute", "hour", "day", "week"},
    "month": {"second", "minute", "hour", "day", "month"},
    "quarter": {"second", "minute", "hour", "day", "month", "quarter"},
    "year": {"second", "minute", "hour", "day", "month", "quarter", "year"},
}
_UNITS = {"s": "second", "sec": "second", "secs": "second", "seconds": "second", "second": "second",
          "min": "minute", "mins": "minute", "minutes": "minute", "minute": "minute", "m": "minute",
          "h": "hour", "hr": "hour", "hrs": "hour", "hours": "hour", "hour": "hour",
          "d": "day", "days": "day", "day": "day", "w": "week", "weeks": "week", "week": "week",
          "mon": "month", "mons": "month", "months": "month", "month": "month",
          "quarters": "quarter", "quarter": "quarter", "y": "year", "years": "year", "year": "year",
          "millisecond": "instant", "milliseconds": "instant", "microsecond": "instant",
          "microseconds": "instant", "ms": "instant", "us": "instant"}
_DATE_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]00:00(:00(\.0+)?)?([+-]00(:?00)?|Z)?)?$")
_TS_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}")


def unit_grain(text: str | None) -> str | None:
    if not text:
        return None
    word = str(text).strip().lower().split()[-1]
    return _UNITS.get(word)


def type_grain(type_text: str | None) -> str | None:
    """DATE -> day, TIMESTAMP/DATETIME -> instant, anything else unknown."""
    if not type_text:
        return None
    t = type_text.lower()
    if t == "date":
        return "day"
    if t.startswith(("timestamp", "datetime")):
        return INSTANT
    return None


def aligned(partition: str, value: str | None) -> bool:
    """A value of grain `value` is a boundary of partitions of grain `partition`."""
    if value is None:
        return False
    return partition in ALIGNED.get(value, set())


def constant_within(partition: str, column: str | None) -> bool:
    """A column of grain `column` has one value per partition of grain `partition`."""
    return column is not None and column != INSTANT and partition in ALIGNED.get(column, set())


def common(a: str | None, b: str | None) -> str | None:
    """The coarsest grain both values are aligned to (a day shifted by an hour: hour)."""
    if a is None or b is None:
        return None
    if INSTANT in (a, b):
        return INSTANT
    both = ALIGNED[a] & ALIGNED[b]
    for g in reversed(GRAINS):
        if g in both:
            return g
    return INSTANT


def _interval(node: exp.Expression) -> str | None:
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    if unit is not None and unit.name:
        return unit_grain(unit.name)
    this = node.this
    return unit_grain(this.name if isinstance(this, exp.Literal) else None)


def _literal(node: exp.Literal) -> str | None:
    if not node.is_string:
        return None
    text = node.name.strip()
    if _DATE_LITERAL.match(text):
        return "day"
    if _TS_LITERAL.match(text):
        return INSTANT
    return None


def _is_integer(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string and node.name.lstrip("-").isdigit() or \
        isinstance(node, exp.Neg) and _is_integer(node.this)


_CLOCK_DAY = tuple(c for c in (getattr(exp, "CurrentDate", None),) if isinstance(c, type))


class Typer:
    """Grains of expressions inside one statement. `relation_types(table)` gives a Table's
    {column: type} (the scratch catalog's), or None when unknown."""

    def __init__(self, root: exp.Expression, relation_types: Callable[[exp.Table], dict | None],
                 is_this: Callable[[exp.Table], bool] | None = None):
        """`is_this`: tells the model's own relation, whose columns are defined by the outer select
        (`date_trunc('hour', ts) as hour` has hour grain, whatever its type)."""
        self.root = root
        self.relation_types = relation_types
        self.is_this = is_this
        self.outer = root if isinstance(root, exp.Select) else None
        self.ctes: dict[str, exp.Expression] = {}
        for cte in root.find_all(exp.CTE):
            self.ctes[cte.alias_or_name.lower()] = cte.this

    # -- expressions
    def grain(self, node: exp.Expression | None, depth: int = 0) -> str | None:
        if node is None or depth > 40:
            return None
        d = depth + 1
        if isinstance(node, (exp.Paren, exp.Alias)):
            return self.grain(node.this, d)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            to = node.to
            if to.is_type(exp.DataType.Type.DATE):
                return "day"
            if to.is_type(*exp.DataType.TEMPORAL_TYPES):
                return self.grain(node.this, d)
            return None
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, getattr(exp, "DatetimeTrunc", exp.DateTrunc))):
            unit = node.args.get("unit")
            return unit_grain(unit.name if unit is not None else None)
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("date_trunc", "datetrunc") and node.expressions:
            lit = next((e for e in node.expressions if isinstance(e, exp.Literal) and e.is_string), None)
            return unit_grain(lit.name) if lit is not None else None
        if isinstance(node, (exp.Date, exp.TsOrDsToDate, exp.StrToDate, exp.DateFromParts)) or \
                (_CLOCK_DAY and isinstance(node, _CLOCK_DAY)):
            return "day"
        if isinstance(node, (exp.Max, exp.Min, exp.AnyValue, exp.First, exp.Last)):
            return self.grain(node.this, d)
        if isinstance(node, exp.Coalesce):
            grains = [self.grain(a, d) for a in [node.this, *node.expressions]]
            known = [g for g in grains if g is not None]
            if not known:
                return None
            out = known[0]
            for g in known[1:]:
                out = common(out, g)
            return out
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = node.this, node.expression
            if isinstance(node, exp.Add) and isinstance(left, exp.Interval):
                left, right = right, left
            shift = _interval(right)
            base = self.grain(left, d)
            if shift is not None:
                if base is None:  # a shift finer than a day is finer whatever it shifts
                    return shift if shift in ("second", "minute", "hour", INSTANT) else None
                return common(base, shift)
            if _is_integer(right) and base == "day":
                return "day"  # date +/- integer days is a date
            return None
        if isinstance(node, (exp.DateAdd, exp.DateSub, exp.TsOrDsAdd, exp.TimestampAdd, exp.TimestampSub)):
            base = self.grain(node.this, d)
            shift = _interval(node.expression) if isinstance(node.expression, exp.Interval) else \
                unit_grain(node.args.get("unit").name if node.args.get("unit") is not None else "day")
            if base is None:
                return shift if shift in ("second", "minute", "hour", INSTANT) else None
            return common(base, shift)
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Subquery):
            return self.grain(node.this, d)
        if isinstance(node, exp.Select):
            return self.grain(node.expressions[0], d) if len(node.expressions) == 1 else None
        if isinstance(node, exp.Column):
            return self.column_grain(node, d)
        if isinstance(node, (exp.CurrentTimestamp,)) or (isinstance(node, exp.Anonymous) and node.name.lower() == "now"):
            return INSTANT
        return None

    # -- columns
    def sources(self, select: exp.Select) -> dict[str, exp.Expression]:
        """alias -> Table or Select for the FROM and JOINs of one select."""
        out: dict[str, exp.Expression] = {}
        items = []
        if select.args.get("from_"):
            items.append(select.args["from_"].this)
        items += [j.this for j in select.args.get("joins") or []]
        for item in items:
            if isinstance(item, exp.Table):
                name = item.name.lower()
                target = self.ctes.get(name) if not item.db and name in self.ctes else item
                out[(item.alias or item.name).lower()] = target
            elif isinstance(item, exp.Subquery):
                out[(item.alias or "").lower()] = item.this
        return out

    def column_grain(self, col: exp.Column, depth: int) -> str | None:
        select = col.find_ancestor(exp.Select)
        if select is None:
            return None
        return self._lookup(select, col.table.lower() if col.table else "", col.name.lower(), depth)

    def _lookup(self, select: exp.Select, table: str, name: str, depth: int) -> str | None:
        if depth > 40:
            return None
        sources = self.sources(select)
        candidates = [sources[table]] if table and table in sources else ([] if table else list(sources.values()))
        for src in candidates:
            g = self._from_source(src, name, depth + 1)
            if g is not None:
                return g
        return None

    def _from_source(self, src: exp.Expression, name: str, depth: int) -> str | None:
        if isinstance(src, exp.Table):
            if self.is_this is not None and self.outer is not None and self.is_this(src) and depth < 20:
                g = self._from_source(self.outer, name, depth + 20)
                if g is not None:
                    return g
            types = self.relation_types(src)
            if types and name in types:
                return type_grain(types[name])
            return None
        while isinstance(src, (exp.Union,)):
            src = src.this  # the first branch names the columns
        if isinstance(src, exp.Subquery):
            src = src.this
        if not isinstance(src, exp.Select):
            return None
        for proj in src.expressions:
            if isinstance(proj, exp.Star) or (isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)):
                g = self._lookup(src, proj.table.lower() if isinstance(proj, exp.Column) and proj.table else "",
                                 name, depth + 1)
                if g is not None:
                    return g
            elif proj.alias_or_name.lower() == name:
                return self.grain(proj, depth + 1)
        return None
