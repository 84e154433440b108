"""What the rules share: the `Rule` and `Hit` records, and helpers on sqlglot trees (the model's
own relation, watermarks read from it, clauses and needles that locate a construct)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from sqlglot import exp

from ..context import ModelContext

FILTER_CLAUSES = ("WHERE", "JOIN", "HAVING", "QUALIFY")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    what: str
    fix: str
    check: Callable[[ModelContext], list] | None = None


@dataclass(frozen=True)
class Hit:
    rule: str
    message: str
    branch: str = ""
    needles: tuple[str, ...] = ()  # regexes that locate the construct in the model's file
    severity: str = ""  # overrides the rule's default
    key: str = ""  # identity of the construct, to report it once across both branches


# ---------------------------------------------------------------------------------------------
# Helpers on sqlglot trees
# ---------------------------------------------------------------------------------------------

def sql_text(node: exp.Expression, ctx: ModelContext, limit: int = 120) -> str:
    """Short SQL of a construct, with the model's own relation shown as {{ this }}."""
    shown = node.copy().transform(
        lambda n: exp.Var(this="{{ this }}") if isinstance(n, exp.Table) and is_this(n, ctx) and not n.alias
        else n)
    text = " ".join(shown.sql(dialect=ctx.dialect).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_this(table: exp.Table, ctx: ModelContext) -> bool:
    _, schema, identifier = ctx.this
    if not identifier or table.name.lower() != identifier.lower():
        return False
    return not table.db or not schema or table.db.lower() == schema.lower()


def _reads_this_tables(node: exp.Expression, ctx: ModelContext) -> bool:
    return any(is_this(t, ctx) for t in node.find_all(exp.Table))


class Scope:
    """Names (CTEs, derived tables) whose rows come from `{{ this }}`, with their projections."""

    def __init__(self, root: exp.Expression, ctx: ModelContext):
        self.ctx = ctx
        self.sources: dict[str, exp.Expression] = {}
        for cte in root.find_all(exp.CTE):
            if _reads_this_tables(cte.this, ctx):
                self.sources[cte.alias_or_name.lower()] = cte.this
        for sub in root.find_all(exp.Subquery):
            if sub.alias and _reads_this_tables(sub.this, ctx):
                self.sources[sub.alias.lower()] = sub.this
        for table in root.find_all(exp.Table):
            if is_this(table, ctx):
                self.sources[(table.alias or table.name).lower()] = table

    def reads_this(self, node: exp.Expression) -> bool:
        if isinstance(node, exp.Column):
            return bool(node.table) and node.table.lower() in self.sources and \
                not isinstance(self.sources[node.table.lower()], exp.Table)
        for sub in node.find_all(exp.Subquery, exp.Select):
            if _reads_this_tables(sub, self.ctx) or any(
                    t.name.lower() in self.sources for t in sub.find_all(exp.Table)):
                return True
        return any(self.reads_this(c) for c in node.find_all(exp.Column) if c is not node)

    def value_of(self, node: exp.Expression, keep_cast: bool = False) -> exp.Expression:
        """The expression a watermark bound computes: through subqueries, CTE columns, aliases,
        casts and coalesce, down to e.g. `max(ts)` or `max(ts) - interval '1 hour'`."""
        for _ in range(20):
            if isinstance(node, (exp.Paren, exp.Alias)) or \
                    (not keep_cast and isinstance(node, (exp.Cast, exp.TryCast))):
                node = node.this
            elif isinstance(node, exp.Coalesce):
                node = node.this
            elif isinstance(node, exp.Subquery):
                node = node.this
            elif isinstance(node, exp.Select):
                if len(node.expressions) != 1:
                    return node
                node = node.expressions[0]
            elif isinstance(node, exp.Column) and node.table and node.table.lower() in self.sources:
                source = self.sources[node.table.lower()]
                match = None
                if isinstance(source, exp.Select):
                    match = next((p for p in source.expressions if p.alias_or_name.lower() == node.name.lower()), None)
                if match is None:
                    return node
                node = match
            else:
                return node
        return node


@dataclass(frozen=True)
class Watermark:
    """A lower bound on a column read from `{{ this }}`: `column op bound`."""

    column: exp.Expression
    op: str  # ">" or ">="
    bound: exp.Expression
    value: exp.Expression
    node: exp.Expression

    @property
    def bare_max(self) -> bool:
        return isinstance(self.value, exp.Max)


def watermarks(root: exp.Expression, ctx: ModelContext) -> list[Watermark]:
    scope = Scope(root, ctx)
    out = []
    for node in root.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between):
        if isinstance(node, exp.Between):
            low = node.args.get("low")
            if low is not None and scope.reads_this(low) and not scope.reads_this(node.this):
                out.append(Watermark(node.this, ">=", low, scope.value_of(low), node))
            continue
        left, right = node.this, node.expression
        lt, rt = scope.reads_this(left), scope.reads_this(right)
        if rt and not lt and isinstance(node, (exp.GT, exp.GTE)):
            out.append(Watermark(left, ">" if isinstance(node, exp.GT) else ">=", right, scope.value_of(right), node))
        elif lt and not rt and isinstance(node, (exp.LT, exp.LTE)):
            out.append(Watermark(right, ">" if isinstance(node, exp.LT) else ">=", left, scope.value_of(left), node))
    return out


def anti_joins_this(root: exp.Expression, ctx: ModelContext) -> bool:
    """True when rows already in `{{ this }}` are filtered out (NOT IN / NOT EXISTS / anti join)."""
    scope = Scope(root, ctx)
    for node in root.find_all(exp.Not):
        inner = node.this
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, (exp.In, exp.Exists)) and scope.reads_this(inner):
            return True
    for join in root.find_all(exp.Join):
        target = join.this
        reads = (isinstance(target, exp.Table) and (is_this(target, ctx) or target.name.lower() in scope.sources)) \
            or (isinstance(target, exp.Subquery) and scope.reads_this(target))
        if not reads:
            continue
        if (join.kind or "").upper() == "ANTI":
            return True
        alias = (target.alias_or_name or "").lower()
        # a left join to {{ this }} filters re-read rows only with `where <this>.col is null`
        if (join.side or "").upper() == "LEFT" and any(
                isinstance(i.this, exp.Column) and i.this.table.lower() == alias and isinstance(i.expression, exp.Null)
                for i in root.find_all(exp.Is)):
            return True
    return False


def column_names(nodes: Iterable[exp.Expression]) -> set[str]:
    names = set()
    for n in nodes:
        if isinstance(n, exp.Ordered):
            n = n.this
        if isinstance(n, exp.Column):
            names.add(n.name.lower())
    return names


def clause_of(node: exp.Expression) -> str:
    """Where a node sits: `column x` for a projection, else the clause name (WHERE, JOIN, ...)."""
    child, parent = node, node.parent
    while parent is not None:
        key = child.arg_key
        if isinstance(parent, exp.Select):
            if key == "expressions":
                return f"column {child.alias_or_name or _short(child)}"
            if key in ("where", "having", "qualify", "group", "order", "joins", "limit"):
                return {"joins": "JOIN"}.get(key, key.upper())
        if isinstance(parent, exp.Join) and key == "on":
            return "JOIN"
        child, parent = parent, parent.parent
    return "query"


def _short(node: exp.Expression) -> str:
    return " ".join(node.sql().split())[:40]


def output_column(node: exp.Expression) -> str | None:
    """The name of the projection a node feeds (at any select level), or None if it is not in one."""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.Select):
            return child.alias_or_name.lower() if child.arg_key == "expressions" else None
        child, parent = parent, parent.parent
    return None


def needle(word: str) -> str:
    return r"\b" + re.escape(word) + r"\b"


def comparison_needle(column: exp.Expression, op: str) -> str | None:
    """A regex for `column op` as a person writes it (`o.ds >`, `"o"."ds">`), so that a finding points at
    its own filter when a model has two on {{ this }} (a CTE's and the outer query's). None for what is
    not a column."""
    if not isinstance(column, exp.Column) or not column.parts:
        return None
    name = r"\s*\.\s*".join(rf'"?{re.escape(part.name)}"?' for part in column.parts)
    return rf'(?<![\w."]){name}\s*' + (r">(?!=)" if op == ">" else re.escape(op))


def unwrap(node: exp.Expression) -> exp.Expression:
    while isinstance(node, (exp.Paren, exp.Alias)):
        node = node.this
    return node


def mentions_window(node: exp.Expression, ctx: ModelContext) -> bool:
    return any(has_window_literal(node, lit) for lit in ctx.window_literals if lit)


def has_window_literal(node: exp.Expression, prefix: str) -> bool:
    return bool(prefix) and any(lit.is_string and prefix in lit.name for lit in node.find_all(exp.Literal))
