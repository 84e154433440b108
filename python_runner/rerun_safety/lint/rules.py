"""Lint rules: one function per rule, each with a stable id. Rules read a `ModelContext` and
return `Hit`s; `lint_model` turns hits into findings and applies the model's suppressions."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from sqlglot import exp

from .context import ModelContext
from .findings import ERROR, INFO, WARNING, Finding
from .grain import INSTANT, Typer, aligned, constant_within, type_grain


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

def _sql(node: exp.Expression, ctx: ModelContext, limit: int = 120) -> str:
    """Short SQL of a construct, with the model's own relation shown as {{ this }}."""
    shown = node.copy().transform(
        lambda n: exp.Var(this="{{ this }}") if isinstance(n, exp.Table) and _is_this(n, ctx) and not n.alias
        else n)
    text = " ".join(shown.sql(dialect=ctx.dialect).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_this(table: exp.Table, ctx: ModelContext) -> bool:
    _, schema, identifier = ctx.this
    if not identifier or table.name.lower() != identifier.lower():
        return False
    return not table.db or not schema or table.db.lower() == schema.lower()


def _reads_this_tables(node: exp.Expression, ctx: ModelContext) -> bool:
    return any(_is_this(t, ctx) for t in node.find_all(exp.Table))


class _Scope:
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
            if _is_this(table, ctx):
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
    scope = _Scope(root, ctx)
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


def _anti_joins_this(root: exp.Expression, ctx: ModelContext) -> bool:
    """True when rows already in `{{ this }}` are filtered out (NOT IN / NOT EXISTS / anti join)."""
    scope = _Scope(root, ctx)
    for node in root.find_all(exp.Not):
        inner = node.this
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, (exp.In, exp.Exists)) and scope.reads_this(inner):
            return True
    for join in root.find_all(exp.Join):
        target = join.this
        reads = (isinstance(target, exp.Table) and (_is_this(target, ctx) or target.name.lower() in scope.sources)) \
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


def _column_names(nodes: Iterable[exp.Expression]) -> set[str]:
    names = set()
    for n in nodes:
        if isinstance(n, exp.Ordered):
            n = n.this
        if isinstance(n, exp.Column):
            names.add(n.name.lower())
    return names


def _clause_of(node: exp.Expression) -> str:
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


def _output_column(node: exp.Expression) -> str | None:
    """The name of the projection a node feeds (at any select level), or None if it is not in one."""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.Select):
            return child.alias_or_name.lower() if child.arg_key == "expressions" else None
        child, parent = parent, parent.parent
    return None


def _needle(word: str) -> str:
    return r"\b" + re.escape(word) + r"\b"


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------

def append_reread(ctx: ModelContext) -> list[Hit]:
    """append (or the default strategy without unique_key) whose incremental filter re-reads
    rows already written: every run appends them again."""
    if not ctx.is_incremental or ctx.strategy != "append" or ctx.incremental is None or not ctx.incremental.ok:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        if _anti_joins_this(stmt, ctx):
            continue
        marks = watermarks(stmt, ctx)
        for w in marks:
            if w.op == ">=" or not w.bare_max:
                how = "`>=` on the watermark" if w.bare_max else "a lookback from the watermark"
                hits.append(Hit("append-reread",
                                f"incremental filter `{_sql(w.node, ctx)}` re-reads rows already written "
                                f"({how} of {{{{ this }}}}); strategy '{ctx.strategy}' inserts them again",
                                "incremental", (r"\{\{\s*this\s*\}\}", _needle(w.column.sql().split(".")[-1].strip('"'))),
                                key=_sql(w.node, ctx)))
        if not marks and not _mentions_window(stmt, ctx) and not _Scope(stmt, ctx).sources:
            hits.append(Hit("append-reread",
                            f"no incremental filter on {{{{ this }}}}: with strategy '{ctx.strategy}' every run "
                            "appends all selected rows again",
                            "incremental", (r"\bselect\b",), key="no-filter"))
    return hits


def unique_key_ignored(ctx: ModelContext) -> list[Hit]:
    """unique_key configured with the append strategy, which ignores it."""
    if ctx.is_incremental and ctx.unique_key and (ctx.incremental_strategy or "") == "append":
        key = ", ".join(ctx.unique_key)
        return [Hit("unique-key-ignored",
                    f"unique_key '{key}' is configured but incremental_strategy 'append' ignores it: "
                    "re-read rows are inserted again, not replaced",
                    "config", (r"unique_key", r"append"))]
    return []


def watermark_strict_gt(ctx: ModelContext) -> list[Hit]:
    """`col > (select max(col) from {{ this }})`: loses rows after a half-committed batch."""
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        for w in watermarks(stmt, ctx):
            if w.op == ">" and w.bare_max:
                hits.append(Hit("watermark-strict-gt",
                                f"watermark filter `{_sql(w.node, ctx)}` skips for good the rows a half-committed "
                                "batch (or a late or tied event) left behind once max() has moved past them",
                                "incremental", (r"\{\{\s*this\s*\}\}",), key=_sql(w.node, ctx)))
    return hits


_GRAIN_ALIGNED = {  # a truncation to <key> starts a partition of each grain in the set
    "second": {"second"},
    "minute": {"second", "minute"},
    "hour": {"second", "minute", "hour"},
    "day": {"second", "minute", "hour", "day"},
    "week": {"second", "minute", "hour", "day", "week"},
    "month": {"second", "minute", "hour", "day", "month"},
    "quarter": {"second", "minute", "hour", "day", "month", "quarter"},
    "year": {"second", "minute", "hour", "day", "month", "quarter", "year"},
}


def _trunc_unit(node: exp.Expression) -> str | None:
    """The grain an expression is truncated to (date_trunc / cast as date), or None."""
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, exp.DatetimeTrunc)):
        unit = node.args.get("unit")
        return (unit.name if unit is not None else "").lower() or None
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("date_trunc", "datetrunc") and node.expressions:
        lit = next((e for e in node.expressions if isinstance(e, exp.Literal) and e.is_string), None)
        return lit.name.lower() if lit is not None else None
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(exp.DataType.Type.DATE):
        return "day"
    if isinstance(node, exp.Date):
        return "day"
    return None


def _interval_unit(node: exp.Expression) -> str | None:
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    text = unit.name if unit is not None else str(node.this.name if node.this is not None else "")
    word = text.strip().split()[-1].lower() if text.strip() else ""
    return word[:-1] if word.endswith("s") else word or None


def _shifted_trunc_unit(node: exp.Expression, grain: str | None) -> str | None:
    """`date_trunc(u, x) - interval 'n <v>'`: the truncation unit, when <v> keeps the grain."""
    while isinstance(node, (exp.Sub, exp.Add)):
        shift = _interval_unit(node.expression)
        if shift is None or (grain is not None and grain not in _GRAIN_ALIGNED.get(shift, set())):
            return None
        node = _unwrap(node.this)
    return _trunc_unit(node)


def _unwrap(node: exp.Expression) -> exp.Expression:
    while isinstance(node, (exp.Paren, exp.Alias)):
        node = node.this
    return node


def _partition_spec(ctx: ModelContext) -> tuple[set[str], str | None]:
    """(partition columns, grain) from partition_key: a column, a list, or {'field', 'granularity'}."""
    key = ctx.partition_key
    if isinstance(key, dict):
        field = str(key.get("field") or "").lower()
        return ({field} if field else set()), str(key.get("granularity") or "day").lower()
    if isinstance(key, str):
        return {key.lower()}, None
    if isinstance(key, (list, tuple)):
        return {str(k).lower() for k in key}, None
    return set(), None


def _projection_grain(stmt: exp.Expression, column: str) -> tuple[str | None, str | None]:
    """For an output column defined as date_trunc(g, src) / cast(src as date): (g, src)."""
    if not isinstance(stmt, exp.Select):
        return None, None
    for proj in stmt.expressions:
        if proj.alias_or_name.lower() == column:
            inner = _unwrap(proj)
            grain = _trunc_unit(inner)
            if grain is None and isinstance(inner, (exp.Cast, exp.TryCast)):
                grain = _trunc_unit(inner.this)
            src = next((c.name.lower() for c in inner.find_all(exp.Column)), None)
            return grain, src
    return None, None


def _partition_grain(ctx: ModelContext, stmt: exp.Expression, typer: Typer, columns: set[str],
                     declared: str | None) -> str | None:
    """The grain of the partitions: the declared granularity, else the partition column's grain
    in the model's output (its definition, else its type in the scratch catalog)."""
    if declared:
        return declared
    outer = stmt if isinstance(stmt, exp.Select) else next(stmt.find_all(exp.Select), None)
    for col in sorted(columns):
        g = None
        if isinstance(outer, exp.Select):
            g = typer._from_source(outer, col, 0)
        if g is None and ctx.columns and col in ctx.columns:
            g = type_grain(ctx.columns[col])
        if g is not None:
            return g
    return None


def partition_lookback_unaligned(ctx: ModelContext) -> list[Hit]:
    """partition_overwrite whose batch starts inside a partition: that partition is replaced by
    its tail only, and the rest of it is lost. Grains come from types and expressions: a filter on
    a column constant within each partition (a date for day partitions) selects whole partitions;
    otherwise the bound must be a partition boundary (`>=`)."""
    if not ctx.is_incremental or ctx.strategy != "partition_overwrite" or ctx.partitions:
        return []
    if ctx.incremental is None or not ctx.incremental.ok:
        return []
    columns, declared = _partition_spec(ctx)
    hits = []
    for stmt in ctx.incremental.statements:
        typer = Typer(stmt, ctx.relation_types, lambda t: _is_this(t, ctx))
        part = _partition_grain(ctx, stmt, typer, columns, declared)
        if part is None or part == INSTANT:
            continue  # unknown grain, or one partition per timestamp: nothing to misalign
        for w in watermarks(stmt, ctx):
            col = w.column.name.lower() if isinstance(w.column, exp.Column) else ""
            cg = typer.grain(w.column)
            if cg is None and col in columns and not w.column.table:
                cg = part  # the filter is on the partition column itself
            if constant_within(part, cg):
                continue  # one value per partition: whole partitions either way
            bg = typer.grain(w.bound)
            if bg is None:
                continue  # cannot tell: no error on a guess
            if aligned(part, bg) and (w.op == ">=" or cg is None):
                continue
            why = (f"`>` skips the first instant of the {part} it starts" if aligned(part, bg) else
                   f"its bound has {bg} grain, finer than the {part} partitions" if bg != INSTANT else
                   f"its bound is not truncated to the {part} grain")
            hits.append(Hit("partition-lookback-unaligned",
                            f"lookback `{_sql(w.node, ctx)}` starts inside a partition ({why}): the oldest "
                            f"{part} in the batch is replaced by its tail and loses the rest of its rows",
                            "incremental", (r"\{\{\s*this\s*\}\}",), key=_sql(w.node, ctx)))
    return hits


_NONDET_CLASSES = tuple(c for c in (getattr(exp, n, None) for n in (
    "CurrentTimestamp", "CurrentDate", "CurrentTime", "CurrentDatetime", "Localtimestamp", "Localtime",
    "CurrentTimestampLTZ", "Rand", "Randn", "Uuid", "GenerateUuid")) if isinstance(c, type))
_NONDET_NAMES = frozenset({
    "now", "getdate", "sysdate", "systimestamp", "clock_timestamp", "statement_timestamp",
    "transaction_timestamp", "timeofday", "get_current_timestamp", "get_current_time", "today",
    "current_timestamp", "current_date", "localtimestamp", "random", "rand", "random_normal", "setseed",
    "uuid", "uuidv4", "uuidv7", "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v4", "newid",
    "random_uuid", "generate_uuid", "gen_random_bytes",
})
_NONDET_NEEDLES = {  # how a function may be spelled in the model's source
    "current_timestamp": ("now", "current_timestamp", "getdate", "current_timestamp"),
    "random": ("random", "rand"),
    "rand": ("random", "rand"),
    "gen_random_uuid": ("gen_random_uuid", "uuid"),
    "uuid": ("uuid", "gen_random_uuid"),
    "today": ("today", "current_date"),
    "current_date": ("current_date", "today"),
}


_CLOCK_CLASSES = tuple(c for c in (getattr(exp, n, None) for n in (
    "CurrentTimestamp", "CurrentDate", "CurrentTime", "CurrentDatetime", "Localtimestamp", "Localtime",
    "CurrentTimestampLTZ")) if isinstance(c, type))
_CLOCK_NAMES = frozenset({
    "now", "getdate", "sysdate", "systimestamp", "clock_timestamp", "statement_timestamp",
    "transaction_timestamp", "timeofday", "get_current_timestamp", "get_current_time", "today",
    "current_timestamp", "current_date", "current_time", "localtimestamp", "localtime"})
_FILTER_CLAUSES = ("WHERE", "JOIN", "HAVING", "QUALIFY")


def _nondet_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        return name if name in _NONDET_NAMES else None
    if _NONDET_CLASSES and isinstance(node, _NONDET_CLASSES):
        return node.sql().split("(")[0].strip().lower() or type(node).__name__.lower()
    return None


def _is_clock(node: exp.Expression, name: str) -> bool:
    return (bool(_CLOCK_CLASSES) and isinstance(node, _CLOCK_CLASSES)) or name in _CLOCK_NAMES


def nondeterministic_function(ctx: ModelContext) -> list[Hit]:
    """Clock, random and uuid functions make two builds of the same input differ, unless the
    column they feed is declared in meta.rerun_safety.ignore_columns. The clock in a model rebuilt
    in full that feeds no incremental model is a note (no rerun hazard); the clock in a filter of
    a model where reruns matter is `clock-window`."""
    hits = []
    ignored = ctx.ignore_columns
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.walk():
                name = _nondet_name(node)
                if name is None:
                    continue
                column = _output_column(node)
                where = _clause_of(node)
                if column is not None and column in ignored and where.startswith("column"):
                    continue
                clock = _is_clock(node, name)
                if clock and ctx.rerun_scope and where in _FILTER_CLAUSES:
                    continue  # clock-window
                text = _sql(node, ctx, 40)
                needles = tuple(_needle(n) for n in _NONDET_NEEDLES.get(name, (name,)))
                if clock and not ctx.rerun_scope:
                    hits.append(Hit("nondeterministic-function",
                                    f"`{text}` in {where} reads the clock; the model is rebuilt in full and feeds "
                                    "no incremental model, so reruns do not change it", branch, needles,
                                    severity=INFO, key=f"{text}|{where}"))
                    continue
                hits.append(Hit("nondeterministic-function",
                                f"`{text}` in {where} is non-deterministic: two builds of the same input differ",
                                branch, needles, key=f"{text}|{where}"))
    return hits


def _clock_starts_window(node: exp.Expression) -> bool:
    """The clock sets where the batch starts (`col >= clock - 14`, `clock - 14 <= col`,
    `between clock - 14 and ...`), not only an upper bound (`col < now()`)."""
    child, parent = node, node.parent
    while parent is not None and not isinstance(parent, (exp.Where, exp.Join, exp.Having, exp.Qualify)):
        if isinstance(parent, exp.Between):
            return child.arg_key == "low"
        if isinstance(parent, (exp.GT, exp.GTE)):
            return child.arg_key == "expression"
        if isinstance(parent, (exp.LT, exp.LTE)):
            return child.arg_key == "this"
        if isinstance(parent, (exp.EQ, exp.In)):
            return True  # one day picked by the clock
        child, parent = parent, parent.parent
    return True


def clock_window(ctx: ModelContext) -> list[Hit]:
    """A filter on the clock (`where day >= current_date - 14`) in an incremental model or one
    that feeds it: which rows a batch holds depends on when it runs, so a rerun, a late run or a
    backfill reads a different window than the run it replaces."""
    if not ctx.rerun_scope:
        return []
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.walk():
                name = _nondet_name(node)
                if name is None or not _is_clock(node, name):
                    continue
                where = _clause_of(node)
                if where not in _FILTER_CLAUSES:
                    continue
                cond = node
                while cond.parent is not None and not isinstance(cond.parent, (exp.Where, exp.Join, exp.Having,
                                                                                  exp.Qualify, exp.And, exp.Or)):
                    cond = cond.parent
                text = _sql(cond, ctx, 90)
                what = "an incremental model" if ctx.is_incremental else "a model that feeds an incremental one"
                start = _clock_starts_window(node)
                hits.append(Hit("clock-window",
                                f"`{text}` in {where} of {what}: the rows of a batch depend on when it runs, so "
                                "a rerun, a late run or a backfill reads a different window" if start else
                                f"`{text}` in {where} of {what} bounds the batch by the clock from above: rows "
                                "stamped later than the run wait for a later run",
                                branch, tuple(_needle(n) for n in _NONDET_NEEDLES.get(name, (name,))),
                                severity="" if start else WARNING, key=f"{text}|{where}"))
    return hits


def _alias_output(select: exp.Select, alias: str, root: exp.Expression, depth: int) -> bool:
    """Columns of `alias` reach the projections of `select`, and from there the model's output."""
    sources = [j.this for j in select.args.get("joins") or []]
    if select.args.get("from_"):
        sources.append(select.args["from_"].this)
    only = len(sources) == 1
    for proj in select.expressions:
        for node in [proj, *proj.find_all(exp.Column, exp.Star)]:
            if isinstance(node, exp.Star) and (only or isinstance(node.parent, exp.Select)):
                return _flows_to_output(select, root, depth + 1)
            if isinstance(node, exp.Column):
                if isinstance(node.this, exp.Star) and (node.table or "").lower() in ("", alias):
                    return _flows_to_output(select, root, depth + 1)
                if (node.table or "").lower() == alias or (only and not node.table):
                    if node.find_ancestor(exp.Subquery) not in (None,) and \
                            node.find_ancestor(exp.Subquery).find_ancestor(exp.Select) is select:
                        continue  # inside a nested subquery of the projection: its own scope
                    return _flows_to_output(select, root, depth + 1)
    return False


def _flows_to_output(sel: exp.Expression, root: exp.Expression, depth: int = 0) -> bool:
    """The rows or values a select produces reach the model's output (not only a filter)."""
    if depth > 20:
        return False
    parent = sel.parent
    if parent is None or isinstance(parent, (exp.Create, exp.Insert)):
        return True
    if isinstance(parent, (exp.Union, exp.Paren)):
        return _flows_to_output(parent, root, depth + 1)
    if isinstance(parent, (exp.In, exp.Exists)):
        return False
    if isinstance(parent, exp.CTE):
        name = parent.alias_or_name.lower()
        for table in root.find_all(exp.Table):
            if table.name.lower() == name and not table.db:
                user = table.find_ancestor(exp.Select)
                if user is not None and _alias_output(user, (table.alias or table.name).lower(), root, depth + 1):
                    return True
        return False
    if isinstance(parent, exp.Subquery):
        clause = _clause_of(parent)
        if clause.startswith("column"):
            return True
        if clause in _FILTER_CLAUSES:
            return False
        outer = parent.find_ancestor(exp.Select)
        if outer is None:
            return True
        if parent.alias:
            return _alias_output(outer, parent.alias.lower(), root, depth + 1)
        return _flows_to_output(outer, root, depth + 1)
    outer = sel.find_ancestor(exp.Select)
    return True if outer is None else _flows_to_output(outer, root, depth + 1)


def self_state(ctx: ModelContext) -> list[Hit]:
    """An incremental model whose output is computed from its own previous output (a running
    total, a "previous day" lookup, a union with {{ this }}): a rerun or a backfill reads state
    that the failed or earlier run already changed, and a window whose day before is missing
    restarts from nothing. Reading {{ this }} only to filter (a watermark, `not exists`) is fine."""
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        for table in stmt.find_all(exp.Table):
            if not _is_this(table, ctx):
                continue
            sel = table.find_ancestor(exp.Select)
            if sel is None:
                continue
            alias = (table.alias or table.name).lower()
            if not _alias_output(sel, alias, stmt, 0):
                continue
            text = _sql(sel, ctx, 90)
            hits.append(Hit("self-state",
                            f"values read from {{{{ this }}}} reach the output (`{text}`): the model carries state "
                            "from its own previous output, so a rerun or backfill of a window builds on rows the "
                            "failed or earlier run already changed",
                            "incremental", (r"\{\{\s*this\s*\}\}",), key=f"self-state|{alias}"))
            break
    return hits


def _output_names(ctx: ModelContext) -> set[str] | None:
    """The model's output columns: its relation in the scratch catalog, else the outer select's
    projections when they name every column (no `*`)."""
    if ctx.columns is not None:
        return set(ctx.columns)
    for _, parsed in ctx.branches():
        stmt = parsed.statements[-1]
        outer = stmt if isinstance(stmt, exp.Select) else None
        if outer is None or any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
                                for p in outer.expressions):
            return None
        return {p.alias_or_name.lower() for p in outer.expressions}
    return None


def config_columns(ctx: ModelContext) -> list[Hit]:
    """partition_key and unique_key must name columns of the compiled model: a misspelt key makes
    the strategy fail at run time, or (unique_key on some adapters) match nothing."""
    if not ctx.is_incremental:
        return []
    names = _output_names(ctx)
    if not names:
        return []
    hits = []
    part_cols, _ = _partition_spec(ctx)
    for label, cols in (("partition_key", sorted(part_cols)), ("unique_key", [c.lower() for c in ctx.unique_key])):
        for col in cols:
            if col and re.fullmatch(r"[a-z_][a-z0-9_$]*", col) and col not in names:  # expressions: not checked
                shown = ", ".join(sorted(names)[:12]) + (", ..." if len(names) > 12 else "")
                hits.append(Hit("config-column-missing",
                                f"{label} names column '{col}', which model {ctx.name} does not have "
                                f"(its columns: {shown})", "config", (_needle(col), label), key=f"{label}|{col}"))
    return hits


_RANKING = (exp.RowNumber, *(c for c in (getattr(exp, "Rank", None), getattr(exp, "DenseRank", None))
                             if isinstance(c, type)))


def _is_first_rank(cmp: exp.Expression, target: Callable[[exp.Expression], bool]) -> bool:
    """`x = n`, `x <= n`, `x < n` (or mirrored) for a positive integer n, where target(x): the
    first row(s) of each partition are kept (n = 1 deduplicates, n > 1 keeps a top n)."""
    if not isinstance(cmp, (exp.EQ, exp.LTE, exp.LT, exp.GTE, exp.GT)):
        return False
    left, right = cmp.this, cmp.expression

    def positive(node, minimum):
        return isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit() and \
            int(node.name) >= minimum

    upper_right = {exp.EQ: 1, exp.LTE: 1, exp.LT: 2}  # x op n
    upper_left = {exp.EQ: 1, exp.GTE: 1, exp.GT: 2}  # n op x
    if target(left) and type(cmp) in upper_right and positive(right, upper_right[type(cmp)]):
        return True
    return target(right) and type(cmp) in upper_left and positive(left, upper_left[type(cmp)])


_VALUE_PICKS = tuple(c for c in (getattr(exp, n, None) for n in ("FirstValue", "LastValue", "NthValue", "Lag", "Lead"))
                     if isinstance(c, type))


def _dedup_windows(stmt: exp.Expression) -> list[exp.Window]:
    found = []
    comparisons = list(stmt.find_all(exp.EQ, exp.LTE, exp.LT, exp.GTE, exp.GT))
    for win in stmt.find_all(exp.Window):
        if not isinstance(win.this, _RANKING):
            continue
        alias = win.parent.alias_or_name.lower() if isinstance(win.parent, exp.Alias) else None
        used = any(_is_first_rank(c, lambda n: n is win) for c in comparisons)
        if not used and alias:
            used = any(_is_first_rank(c, lambda n: isinstance(n, exp.Column) and n.name.lower() == alias)
                       for c in comparisons)
        if used:
            found.append(win)
    return found


def _source_columns(select: exp.Select, ctx: ModelContext, typer: Typer) -> set[str] | None:
    """All columns of a select's single row source (a relation or a subquery without `*`)."""
    sources = typer.sources(select)
    if len(sources) != 1:
        return None
    src = next(iter(sources.values()))
    if isinstance(src, exp.Table):
        types = ctx.relation_types(src)
        return set(types) if types else None
    if isinstance(src, exp.Select) and not any(isinstance(p, exp.Star) or isinstance(p.this, exp.Star)
                                               for p in src.expressions):
        return {p.alias_or_name.lower() for p in src.expressions}
    return None


def _keys_of(src: exp.Expression, alias: str, ctx: ModelContext, typer: Typer, depth: int) -> list[frozenset]:
    """Column sets unique in a row source, as (alias, column) pairs."""
    if depth > 10:
        return []
    if isinstance(src, exp.Table):
        rel = (src.db.lower() if src.db else "", src.name.lower())
        sets = ctx.relation_keys.get(rel) or (ctx.relation_keys.get(("", rel[1])) if not src.db else None)
        if sets is None and not ctx.relation_keys:
            sets = list(ctx.unique_sets)  # no per-relation keys known: the model's and its parents'
        return [frozenset((alias, c) for c in key) for key in sets or ()]
    if isinstance(src, exp.Select):
        out = []
        for key in _select_keys(src, ctx, typer, depth + 1):
            names = set()
            for proj in src.expressions:
                inner = proj.this if isinstance(proj, exp.Alias) else proj
                if isinstance(inner, exp.Column) and (inner.table.lower(), inner.name.lower()) in key:
                    names.add((alias, proj.alias_or_name.lower()))
                elif isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)):
                    names |= {(alias, c) for _, c in key}
            if len(names) >= len(key):
                out.append(frozenset(names))
        group = src.args.get("group")
        if group is not None and not src.args.get("joins"):
            cols = {(alias, p.alias_or_name.lower()) for p in src.expressions
                    if any(p.alias_or_name.lower() == g.alias_or_name.lower() or
                           (isinstance(p, exp.Alias) and p.this == g) for g in group.expressions)}
            if cols:
                out.append(frozenset(cols))
        return out
    return []


def _select_keys(select: exp.Select, ctx: ModelContext, typer: Typer, depth: int = 0) -> list[frozenset]:
    """Unique column sets of the rows a select's FROM and JOINs produce, as (alias, column)
    pairs: a cross join keeps the pair of both sides' keys (unique on unique); a join that matches
    at most one row of the joined side (its key equated) keeps the left side's keys; any other join
    (one-to-many) keeps only the combined keys."""
    frm = select.args.get("from_")
    if frm is None:
        return []
    def item(node):
        if isinstance(node, exp.Table):
            name = node.name.lower()
            target = typer.ctes.get(name) if not node.db and name in typer.ctes else node
            return (node.alias or node.name).lower(), target
        if isinstance(node, exp.Subquery):
            return (node.alias or "").lower(), node.this
        return "", None
    alias, src = item(frm.this)
    keys = _keys_of(src, alias, ctx, typer, depth) if src is not None else []
    for join in select.args.get("joins") or []:
        j_alias, j_src = item(join.this)
        j_keys = _keys_of(j_src, j_alias, ctx, typer, depth) if j_src is not None else []
        combined = [a | b for a in keys for b in j_keys]
        on = join.args.get("on")
        matched = set()
        if on is not None:
            for eq in on.find_all(exp.EQ):
                for side in (eq.this, eq.expression):
                    if isinstance(side, exp.Column) and side.table.lower() == j_alias:
                        matched.add((j_alias, side.name.lower()))
        using = join.args.get("using") or []
        matched |= {(j_alias, u.name.lower()) for u in using}
        if any(k <= matched for k in j_keys):
            keys = keys + combined  # many-to-one: each left row matches at most one joined row
        else:
            keys = combined
    return keys


def _qualified(cols: list[exp.Expression], select: exp.Select, typer: Typer, ctx: ModelContext) -> set:
    out = set()
    sources = typer.sources(select)
    for node in cols:
        for col in ([node] if isinstance(node, exp.Column) else list(node.find_all(exp.Column))):
            name = col.name.lower()
            if col.table:
                out.add((col.table.lower(), name))
                continue
            for alias, src in sources.items():
                types = ctx.relation_types(src) if isinstance(src, exp.Table) else None
                if len(sources) == 1 or (types and name in types):
                    out.add((alias, name))
    return out


def dedup_order_not_total(ctx: ModelContext) -> list[Hit]:
    """row_number()/rank() = 1 whose order by is not a total order: ties pick an arbitrary row.
    Keys are traced through joins: unique on both sides of a cross join, broken by a
    one-to-many join; ordering by every column of the source is total too."""
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            typer = Typer(stmt, ctx.relation_types)
            picks = []  # (construct, partition expressions, order by or None, its select, label)
            for win in _dedup_windows(stmt):
                picks.append((win, list(win.args.get("partition_by") or []), win.args.get("order"),
                              win.find_ancestor(exp.Select), f"dedup `{_sql(win, ctx, 90)}` = 1"))
            for win in stmt.find_all(exp.Window):
                if isinstance(win.this, _VALUE_PICKS):
                    arg_cols = {c.name.lower() for c in win.this.find_all(exp.Column)}
                    ordered = {c.name.lower() for n in [*(win.args.get("partition_by") or []),
                                                        *((win.args.get("order") or exp.Order()).expressions)]
                               for c in n.find_all(exp.Column)}
                    if arg_cols and arg_cols <= ordered:
                        continue  # tied rows share the value picked
                    picks.append((win, list(win.args.get("partition_by") or []), win.args.get("order"),
                                  win.find_ancestor(exp.Select), f"`{_sql(win, ctx, 90)}`"))
            for select in stmt.find_all(exp.Select):
                distinct = select.args.get("distinct")
                on = distinct.args.get("on") if distinct is not None else None
                if on is not None:
                    exprs = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
                    picks.append((distinct, exprs, select.args.get("order"), select,
                                  f"`{_sql(distinct, ctx, 60)}`"))
            for node, part_nodes, order, select, label in picks:
                partition = _column_names(part_nodes)
                order_nodes = [o.this if isinstance(o, exp.Ordered) else o for o in (order.expressions if order else [])]
                order_cols = _column_names(order.expressions) if order is not None else set()
                joined = select is not None and bool(select.args.get("joins"))
                total = False
                if select is not None:
                    keys = _select_keys(select, ctx, typer)
                    only_part = _qualified(part_nodes, select, typer, ctx)
                    both = _qualified(order_nodes, select, typer, ctx) | only_part
                    total = any(k <= both and not k <= only_part for k in keys)
                    everything = _source_columns(select, ctx, typer)
                    mentioned = {c.name.lower() for n in order_nodes + part_nodes
                                 for c in ([n] if isinstance(n, exp.Column) else n.find_all(exp.Column))}
                    if everything and everything <= mentioned and order is not None:
                        total = True  # rows equal on every column are interchangeable
                if not total and not joined:
                    total = any(s <= (order_cols | partition) and not s <= partition for s in ctx.unique_sets)
                if total:
                    continue
                word = "distinct" if isinstance(node, exp.Distinct) else node.this.sql().split("(")[0].lower()
                why = "has no order by" if order is None else \
                    f"orders by {', '.join(sorted(order_cols)) or 'expressions'}, which is not a total order " \
                    "(no column known to be unique within the partition" + \
                    (", after its joins" if joined else "") + ")"
                hits.append(Hit("dedup-order-not-total", f"{label} {why}: ties keep an arbitrary row",
                                branch, (_needle(word),), key=_sql(node, ctx)))
    return hits


def limit_without_order(ctx: ModelContext) -> list[Hit]:
    """`limit` / `fetch first` without `order by` returns an arbitrary subset."""
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.find_all(exp.Select, exp.Union):
                limit = node.args.get("limit")
                if limit is None or node.args.get("order") is not None:
                    continue
                if isinstance(node.parent, exp.Union) and node.parent.args.get("order") is not None:
                    continue
                count = limit.args.get("expression") or limit.args.get("count")
                if isinstance(count, exp.Literal) and count.name == "0":
                    continue
                if node.find_ancestor(exp.Exists) is not None:
                    continue  # existence does not depend on which rows
                text = _sql(limit, ctx, 40)
                hits.append(Hit("limit-without-order",
                                f"`{text}` without order by returns an arbitrary subset of rows",
                                branch, (r"\blimit\b", r"\bfetch\b"), key=text))
    return hits


def _mentions_window(node: exp.Expression, ctx: ModelContext) -> bool:
    return any(_has_window_literal(node, lit) for lit in ctx.window_literals if lit)


def _has_window_literal(node: exp.Expression, prefix: str) -> bool:
    return bool(prefix) and any(lit.is_string and prefix in lit.name for lit in node.find_all(exp.Literal))


def inclusive_window_bound(ctx: ModelContext) -> list[Hit]:
    """Inclusive `between` on a window var (or `>= start and <= end`): the boundary row belongs
    to two consecutive windows."""
    start, end = ctx.window_literals
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.find_all(exp.Between):
                low, high = node.args.get("low"), node.args.get("high")
                if any(x is not None and (_has_window_literal(x, start) or _has_window_literal(x, end))
                       for x in (low, high)):
                    hits.append(Hit("inclusive-window-bound",
                                    f"`{_sql(node, ctx)}` includes both window bounds: a row at the boundary "
                                    "is read by two consecutive windows",
                                    branch, (r"\bbetween\b",), key=_sql(node, ctx)))
            lows = {n.this.sql().lower() for n in stmt.find_all(exp.GTE)
                    if _has_window_literal(n.expression, start)}
            for node in stmt.find_all(exp.LTE):
                if _has_window_literal(node.expression, end) and node.this.sql().lower() in lows:
                    hits.append(Hit("inclusive-window-bound",
                                    f"`{_sql(node, ctx)}` closes the window at its end as well as its start: "
                                    "a row at the boundary is read by two consecutive windows",
                                    branch, (r"<=",), key=_sql(node, ctx)))
    return hits


def microbatch_postgres(ctx: ModelContext) -> list[Hit]:
    """microbatch on dbt-postgres runs a MERGE upsert: rows deleted upstream stay."""
    if ctx.is_incremental and ctx.adapter_type == "postgres" and ctx.strategy == "microbatch":
        return [Hit("microbatch-postgres",
                    "incremental_strategy 'microbatch' on dbt-postgres upserts each batch with MERGE "
                    "(unique_key required): rows deleted or re-keyed upstream stay in the table",
                    "config", (r"microbatch",))]
    return []


def adapter_trap(ctx: ModelContext) -> list[Hit]:
    """Config that dbt-duckdb / dbt-postgres reject or silently ignore."""
    if not ctx.is_incremental and not ctx.config.get("partition_by") and not ctx.config.get("partitioned_by"):
        return []
    hits = []
    adapter = ctx.adapter_type
    native = adapter in ("duckdb", "postgres")
    if ctx.is_incremental and native and ctx.strategy == "insert_overwrite":
        hits.append(Hit("adapter-trap",
                        f"dbt-{adapter} rejects incremental_strategy 'insert_overwrite' (reserved for adapters "
                        "that implement it)", "config", (r"insert_overwrite",)))
    if ctx.is_incremental and ctx.strategy == "partition_overwrite":
        if not ctx.partition_key:
            hits.append(Hit("adapter-trap", "incremental_strategy 'partition_overwrite' without partition_key: "
                            "the strategy cannot tell which partitions to replace", "config", (r"partition_overwrite",)))
        if ctx.root_macros and "get_incremental_partition_overwrite_sql" not in ctx.root_macros:
            hits.append(Hit("adapter-trap",
                            "incremental_strategy 'partition_overwrite' but the root project has no "
                            "get_incremental_partition_overwrite_sql shim: dbt only finds strategy macros there",
                            "config", (r"partition_overwrite",)))
    if ctx.is_incremental and adapter == "duckdb" and ctx.strategy == "microbatch" and ctx.unique_key:
        hits.append(Hit("adapter-trap", "dbt-duckdb's microbatch refuses unique_key (it replaces each batch "
                        "window with delete+insert)", "config", (r"unique_key",)))
    if adapter == "duckdb" and (ctx.config.get("partition_by") or ctx.config.get("partitioned_by")):
        hits.append(Hit("adapter-trap", "dbt-duckdb reads partition_by/partitioned_by for DuckLake only and "
                        "ignores it on a plain table; rerun_safety's partition_overwrite reads partition_key",
                        "config", (r"partition(ed)?_by",), severity=WARNING))
    return hits


RULES: dict[str, Rule] = {r.id: r for r in (
    Rule("append-reread", ERROR,
         "append (or the default strategy without unique_key) whose incremental filter re-reads rows already "
         "written: a lookback or `>=` on a watermark from {{ this }}, or no filter at all",
         "Use delete+insert or merge with unique_key (or partition_overwrite) so re-read rows replace "
         "themselves, or drop already-loaded rows with `not exists` against {{ this }}.", append_reread),
    Rule("unique-key-ignored", ERROR, "unique_key configured with incremental_strategy 'append', which ignores it",
         "Switch to delete+insert or merge, or remove unique_key if rows really are append-only.", unique_key_ignored),
    Rule("watermark-strict-gt", ERROR,
         "watermark filter `col > (select max(col) from {{ this }})`: after a half-committed batch, or with "
         "late or tied events, rows below the new max are never loaded",
         "Re-read a lookback (`>=` max minus an interval, aligned to a grain) with delete+insert/merge on "
         "unique_key, or use rerun_safety.window_filter / microbatch.", watermark_strict_gt),
    Rule("partition-lookback-unaligned", ERROR,
         "partition_overwrite whose lookback starts inside a partition (not truncated to the partition_key "
         "granularity): the oldest partition is replaced by its tail",
         "Start the batch at a partition boundary: `date_trunc('<grain>', max(col)) - interval '<n> <grain>'`, "
         "or use rerun_safety.window_filter(col, grain='<grain>').", partition_lookback_unaligned),
    Rule("nondeterministic-function", ERROR,
         "now()/current_timestamp/current_date/getdate, random(), uuid functions and the like: two builds "
         "of the same input differ",
         "Derive the value from the data or pass it in as a var (e.g. the window end); for an audit column, "
         "list it in meta.rerun_safety.ignore_columns.", nondeterministic_function),
    Rule("clock-window", ERROR,
         "a filter on the clock (`current_date - 14`, `now() - interval ...`) in an incremental model or one "
         "that feeds it: the batch depends on when it runs",
         "Bound the batch by the data, not the clock: a lookback from the watermark of {{ this }} "
         "(`>= (select max(day) - 14 from {{ this }})`) or the window vars (rerun_safety.window_filter).",
         clock_window),
    Rule("self-state", ERROR,
         "an incremental model whose output reads its own previous output ({{ this }} beyond a watermark or "
         "`not exists` filter): running totals, previous-day lookups, unions with {{ this }}",
         "Compute the value from the sources alone (a window function over the source history, or re-read "
         "the whole lookback), or rebuild the model in full; filter on {{ this }} only for a watermark.",
         self_state),
    Rule("config-column-missing", ERROR, "partition_key or unique_key names a column the compiled model lacks",
         "Fix the spelling in config(), or add the column to the model's select.", config_columns),
    Rule("dedup-order-not-total", ERROR,
         "a row picked by an order that can tie: row_number()/rank() = 1 or <= n, DISTINCT ON, "
         "first_value/last_value/lag/lead of another column (no order by, or no column known to be unique "
         "after the joins)",
         "End the order by with a unique column (declared as unique_key or with a unique test), e.g. "
         "`order by updated_at desc, event_id`.", dedup_order_not_total),
    Rule("limit-without-order", ERROR, "`limit` / `fetch first` without `order by`: an arbitrary subset",
         "Add an order by over a unique column, or filter instead of limiting.", limit_without_order),
    Rule("inclusive-window-bound", ERROR,
         "inclusive `between` (or `>=` start and `<=` end) on the window vars: the boundary row is in two windows",
         "Use the half-open window `col >= start and col < end`, e.g. rerun_safety.window_filter(col).",
         inclusive_window_bound),
    Rule("microbatch-postgres", ERROR,
         "microbatch on dbt-postgres: a MERGE upsert per batch keeps rows deleted upstream",
         "Use delete+insert over the window (rerun_safety.window_filter) or rerun_safety's partition_overwrite.",
         microbatch_postgres),
    Rule("adapter-trap", ERROR,
         "config dbt-duckdb/dbt-postgres reject or ignore: insert_overwrite, partition_overwrite without "
         "partition_key or without the root shim, microbatch with unique_key on DuckDB, partition_by on a "
         "plain DuckDB table (warning)",
         "Use partition_overwrite with partition_key and run `rerun-safety init` for the shim; drop unique_key "
         "from DuckDB microbatch models.", adapter_trap),
    Rule("compile-error", WARNING, "the model could not be compiled (full-refresh or incremental branch); "
         "the message says why",
         "Fix the model so `dbt compile` succeeds (or, if it needs data the scratch catalog lacks, declare the "
         "source's columns in YAML); the other rules could not check it."),
    Rule("python-model", INFO, "a Python model: the SQL rules do not apply to it",
         "Nothing to do; the game day replays Python models like the others."),
    Rule("sql-parse-error", WARNING, "sqlglot could not parse the compiled SQL in the target's dialect",
         "Check the SQL; if it is valid for the warehouse, suppress with a reason. The other rules skipped "
         "this branch."),
    Rule("incremental-branch-unchecked", WARNING,
         "the incremental branch could not be compiled without writing to the target, so only the "
         "full-refresh SQL was checked",
         "Grant CREATEDB to the lint user (a scratch database is created and dropped), or lint against DuckDB."),
    Rule("suppression-missing-reason", ERROR, "a lint_ignore entry without a reason (it suppresses nothing)",
         "Write `{rule: <id>, reason: <why this is safe>}`."),
    Rule("suppression-unknown-rule", WARNING, "a lint_ignore entry names a rule that does not exist",
         "Use one of the rule ids in the table."),
)}


# ---------------------------------------------------------------------------------------------
# Running rules on one model
# ---------------------------------------------------------------------------------------------

def locate(raw_code: str, needles: Iterable[str]) -> int | None:
    """1-based line of the first match of the first needle that matches, skipping comment lines."""
    lines = raw_code.splitlines()
    for pattern in needles:
        rx = re.compile(pattern, re.IGNORECASE)
        for i, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped.startswith("--") or stripped.startswith("{#"):
                continue
            if rx.search(line):
                return i
    return None


def make_finding(ctx: ModelContext, rule_id: str, message: str, *, branch: str = "", line: int | None = None,
                 severity: str = "") -> Finding:
    rule = RULES[rule_id]
    where = f"{ctx.path}:{line}" if ctx.path and line else ctx.path
    text = f"{message} ({where})" if where else message
    return Finding(rule=rule_id, model=ctx.name, severity=severity or rule.severity, message=text,
                   hint=rule.fix, unique_id=ctx.unique_id, path=ctx.path, line=line, branch=branch)


def run_rules(ctx: ModelContext) -> list[Finding]:
    """Every rule on one model, each construct reported once (full-refresh branch first)."""
    findings, seen = [], set()
    for rule in RULES.values():
        if rule.check is None:
            continue
        for hit in rule.check(ctx):
            ident = (hit.rule, hit.key or hit.message)
            if ident in seen:
                continue
            seen.add(ident)
            findings.append(make_finding(ctx, hit.rule, hit.message, branch=hit.branch,
                                         line=locate(ctx.raw_code, hit.needles), severity=hit.severity))
    return findings


def suppressions(ctx: ModelContext) -> tuple[dict[str, str], list[Finding]]:
    """The model's `meta.rerun_safety.lint_ignore` as {rule: reason}, plus findings for bad entries."""
    entries = ctx.rerun_safety_meta.get("lint_ignore") or []
    if isinstance(entries, (str, dict)):
        entries = [entries]
    allowed, problems = {}, []
    for entry in entries:
        rule = entry.get("rule") if isinstance(entry, dict) else entry
        reason = entry.get("reason") if isinstance(entry, dict) else None
        rule = str(rule or "").strip()
        if rule and rule not in RULES:
            problems.append(make_finding(ctx, "suppression-unknown-rule",
                                         f"lint_ignore names unknown rule '{rule}'", branch="config",
                                         line=locate(ctx.raw_code, (r"lint_ignore",))))
            continue
        if not rule or not str(reason or "").strip():
            problems.append(make_finding(ctx, "suppression-missing-reason",
                                         f"lint_ignore entry for rule '{rule or '?'}' has no reason, so it "
                                         "suppresses nothing", branch="config",
                                         line=locate(ctx.raw_code, (r"lint_ignore",))))
            continue
        allowed[rule] = str(reason).strip()
    return allowed, problems


def lint_model(ctx: ModelContext, extra: Iterable[Finding] = (), run: bool = True) -> tuple[list[Finding], list[Finding]]:
    """(findings, suppressed findings) for one model; `extra` are findings made outside the rules
    (compile and parse errors), subject to the same suppressions."""
    allowed, problems = suppressions(ctx)
    kept, suppressed = [], []
    for f in [*extra, *(run_rules(ctx) if run else [])]:
        (suppressed if f.rule in allowed else kept).append(f)
    return kept + problems, suppressed
