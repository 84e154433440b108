"""Rules on incremental filters and partitions: watermarks read from {{ this }}, lookbacks against
the partition grain, window bounds, and state carried over from the model's own output."""
from __future__ import annotations

from sqlglot import exp

from ...cadence import SECONDS, duration
from ..context import ModelContext
from ..grain import ALIGNED, INSTANT, Typer, aligned, constant_within, type_grain, unit_grain
from .base import (FILTER_CLAUSES, Hit, anti_joins_this, clause_of, comparison_needle, has_window_literal,
                   is_this, mentions_window, needle, Scope, sql_text, unwrap, watermarks)

_THIS = r"\{\{\s*this\s*\}\}"  # where a finding about {{ this }} points when nothing nearer is written


def append_reread(ctx: ModelContext) -> list[Hit]:
    """append (or the default strategy, delete+insert or merge without unique_key, which append: dbt
    deletes nothing without a key) whose incremental filter re-reads rows already written: every run
    appends them again."""
    appends = ctx.strategy == "append" or (ctx.strategy in ("delete+insert", "merge") and not ctx.unique_key)
    if not ctx.is_incremental or not appends or ctx.incremental is None or not ctx.incremental.ok:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        if anti_joins_this(stmt, ctx):
            continue
        marks = watermarks(stmt, ctx)
        for w in marks:
            if w.op == ">=" or not w.bare_max:
                how = "`>=` on the watermark" if w.bare_max else "a lookback from the watermark"
                hits.append(Hit("append-reread",
                                f"incremental filter `{sql_text(w.node, ctx)}` re-reads rows already written "
                                f"({how} of {{{{ this }}}}); strategy '{ctx.strategy}'{_keyless(ctx)} inserts them "
                                "again",
                                "incremental", _at(w, _THIS, needle(w.column.sql().split(".")[-1].strip('"'))),
                                key=sql_text(w.node, ctx)))
        if not marks and not mentions_window(stmt, ctx) and not Scope(stmt, ctx).sources:
            hits.append(Hit("append-reread",
                            f"no incremental filter on {{{{ this }}}}: with strategy '{ctx.strategy}'{_keyless(ctx)} "
                            "every run appends all selected rows again",
                            "incremental", (r"\bselect\b",), key="no-filter"))
    return hits


def _at(w, *fallback: str) -> tuple[str, ...]:
    """Where a watermark's finding points: its own comparison where the file writes it so (a model may have
    two filters on {{ this }}), else the first of `fallback` that matches."""
    own = comparison_needle(w.column, w.op)
    return (own, *fallback) if own else fallback


def _keyless(ctx: ModelContext) -> str:
    return " without unique_key (dbt deletes nothing, then inserts)" if ctx.strategy != "append" else ""


def watermark_strict_gt(ctx: ModelContext) -> list[Hit]:
    """`col > (select max(col) from {{ this }})`: loses rows after a half-committed batch."""
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        for w in watermarks(stmt, ctx):
            if w.op == ">" and w.bare_max:
                hits.append(Hit("watermark-strict-gt",
                                f"watermark filter `{sql_text(w.node, ctx)}` skips for good the rows a half-committed "
                                "batch (or a late or tied event) left behind once max() has moved past them",
                                "incremental", _at(w, _THIS), key=sql_text(w.node, ctx)))
    return hits


def late_watermark(ctx: ModelContext) -> list[Hit]:
    """A watermark on the event time (`event_ts > / >= (select max(event_ts) from {{ this }})`) over a
    source that declares a separate load time: a row that lands after the watermark has passed its
    event time is never read. A lookback from the watermark is not judged (the lateness is unknown)."""
    if not ctx.is_incremental or not ctx.load_times or ctx.incremental is None or not ctx.incremental.ok:
        return []
    events: dict[str, tuple[str, str]] = {}
    for source, event, load in ctx.load_times:
        if event and load and event.lower() != load.lower():
            events.setdefault(event.lower(), (source, load))
    hits = []
    for stmt in ctx.incremental.statements:
        for w in watermarks(stmt, ctx):
            column = w.column
            while isinstance(column, (exp.Paren, exp.Cast, exp.TryCast)):
                column = column.this
            if not w.bare_max or not isinstance(column, exp.Column) or column.name.lower() not in events:
                continue
            source, load = events[column.name.lower()]
            hits.append(Hit("late-watermark",
                            f"watermark `{sql_text(w.node, ctx)}` is on the event time '{column.name}' of {source}, "
                            f"which declares a load time '{load}': a row loaded after the watermark has passed "
                            "its event time is never read",
                            "incremental", _at(w, _THIS), key=sql_text(w.node, ctx)))
    return hits






def _interval_seconds(node: exp.Expression) -> float | None:
    """`interval '2 hours'` / `interval 2 hour` / `interval '2' hour` in seconds (None: not a known interval)."""
    node = unwrap(node)
    if not isinstance(node, exp.Interval) or node.this is None:
        return None
    parts = str(node.this.name).strip().split()
    unit = node.args.get("unit")
    word = unit.name if unit is not None else (parts[-1] if len(parts) == 2 else "")
    try:
        n = float(parts[0]) if parts else None
    except ValueError:
        return None
    grain = unit_grain(word)
    return None if n is None or grain not in SECONDS else n * SECONDS[grain]


def _truncated(node: exp.Expression) -> exp.Expression | None:
    """The expression a date_trunc / cast-to-date truncates."""
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc, exp.DatetimeTrunc, exp.Cast, exp.TryCast, exp.Date)):
        return node.this
    if isinstance(node, exp.Anonymous) and node.expressions:
        return node.expressions[-1]
    return None


def reach(value: exp.Expression, op: str, grain_of) -> float | None:
    """How far back before the watermark (max() of {{ this }}) a bound lets the incremental filter
    read, in seconds: its intervals subtracted, a truncation to a grain (which reads the grain's
    start), a bare `>=` on a date (the whole last day). `grain_of(max)`: the grain of the watermark's
    column (grain.Typer). None: a shape not understood, or a column of unknown type (no finding then)."""
    node = unwrap(value)
    if isinstance(node, exp.Sub):
        back, inner = _interval_seconds(node.expression), reach(node.this, op, grain_of)
        return None if back is None or inner is None else inner + back
    unit = _trunc_unit(node)
    if unit is not None and unit in SECONDS and (arg := _truncated(node)) is not None:
        inner = reach(arg, op, grain_of)
        return None if inner is None else inner + SECONDS[unit]
    if isinstance(node, exp.Max) and isinstance(unwrap(node.this), exp.Column):
        grain = grain_of(node)
        if grain is None:
            return None
        return SECONDS.get(grain, 0) if op == ">=" and grain != INSTANT else 0.0
    return None


def window_shorter_than_run(ctx: ModelContext) -> list[Hit]:
    """A lookback from the watermark (`col >= (select max(col) - interval ... from {{ this }})`, or a
    bare `>=`) that reaches back less than one run of the schedule: after a half-committed run, the rows
    it did not commit older than the reach are never read again."""
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok:
        return []
    label, run, origin = ctx.schedule
    hits = []
    for stmt in ctx.incremental.statements:
        typer = Typer(stmt, ctx.relation_types, lambda t: is_this(t, ctx))
        for w in watermarks(stmt, ctx):
            if w.op == ">" and w.bare_max:
                continue  # watermark-strict-gt
            left = typer.grain(w.column)
            if left is not None and left != INSTANT and not w.bare_max:
                continue  # a day compared with an instant bound: whole days, not a reach from the watermark
            # the max()'s column in {{ this }}, else the column it bounds (the same quantity, read upstream)
            back = reach(w.value, w.op, lambda n, col=w.column: typer.grain(n) or typer.grain(col))
            if back is None or back >= run:
                continue
            hits.append(Hit("window-shorter-than-run",
                            f"incremental window `{sql_text(w.node, ctx)}` reaches back {duration(back)} before "
                            f"the watermark, less than one run ({label}, {origin}): after a half-committed run, "
                            "the rows it left behind that are older than that are never read again",
                            "incremental", _at(w, _THIS), key=sql_text(w.node, ctx)))
    return hits


def _about(seconds: float) -> str:
    for unit in ("day", "hour", "minute"):
        if seconds >= SECONDS[unit]:
            n = seconds / SECONDS[unit]
            return f"{n:.1f} {unit}s" if round(n, 1) != 1 else f"1 {unit}"
    return f"{seconds:.0f} seconds"


def window_shorter_than_lateness(ctx: ModelContext) -> list[Hit]:
    """lint --with-data: a lookback from the watermark on a source's event time that reaches back less
    than how late that source's rows arrive (the 99th percentile of load time minus event time, read
    from the target): a row loaded after the window has moved past its event time is never read."""
    if not ctx.lateness or not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok:
        return []
    late: dict = {}
    for seen in ctx.lateness:
        if seen.p99 and seen.p99 > 0 and seen.p99 > getattr(late.get(seen.event.lower()), "p99", 0):
            late[seen.event.lower()] = seen
    hits = []
    for stmt in ctx.incremental.statements:
        typer = Typer(stmt, ctx.relation_types, lambda t: is_this(t, ctx))
        for w in watermarks(stmt, ctx):
            column = unwrap(w.column)
            while isinstance(column, (exp.Cast, exp.TryCast)):
                column = unwrap(column.this)
            if w.bare_max or not isinstance(column, exp.Column) or column.name.lower() not in late:
                continue  # a bare max() on the event time: late-watermark's
            seen = late[column.name.lower()]
            back = reach(w.value, w.op, lambda n, col=w.column: typer.grain(n) or typer.grain(col))
            if back is None or back >= seen.p99:
                continue
            hits.append(Hit("window-shorter-than-lateness",
                            f"incremental window `{sql_text(w.node, ctx)}` reaches back {duration(back)} before the "
                            f"watermark on {column.name}, but rows of {seen.source} arrive later than that after "
                            f"their {seen.event}: 99% of its {seen.rows:,} rows within {_about(seen.p99)}, the "
                            f"latest {_about(seen.latest or seen.p99)} (by {seen.load}, read from the target): a row "
                            "loaded after the window has moved past its event time is never read",
                            "incremental", _at(w, _THIS), key=sql_text(w.node, ctx)))
    return hits


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
        if shift is None or (grain is not None and grain not in ALIGNED.get(shift, set())):
            return None
        node = unwrap(node.this)
    return _trunc_unit(node)


def partition_spec(ctx: ModelContext) -> tuple[set[str], str | None]:
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


def projection_grain(stmt: exp.Expression, column: str) -> tuple[str | None, str | None]:
    """For an output column defined as date_trunc(g, src) / cast(src as date): (g, src)."""
    if not isinstance(stmt, exp.Select):
        return None, None
    for proj in stmt.expressions:
        if proj.alias_or_name.lower() == column:
            inner = unwrap(proj)
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
    columns, declared = partition_spec(ctx)
    hits = []
    for stmt in ctx.incremental.statements:
        typer = Typer(stmt, ctx.relation_types, lambda t: is_this(t, ctx))
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
                            f"lookback `{sql_text(w.node, ctx)}` starts inside a partition ({why}): the oldest "
                            f"{part} in the batch is replaced by its tail and loses the rest of its rows",
                            "incremental", _at(w, _THIS), key=sql_text(w.node, ctx)))
    return hits


def inclusive_window_bound(ctx: ModelContext) -> list[Hit]:
    """Inclusive `between` on a window var (or `>= start and <= end`): the boundary row belongs
    to two consecutive windows."""
    start, end = ctx.window_literals
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.find_all(exp.Between):
                low, high = node.args.get("low"), node.args.get("high")
                if any(x is not None and (has_window_literal(x, start) or has_window_literal(x, end))
                       for x in (low, high)):
                    hits.append(Hit("inclusive-window-bound",
                                    f"`{sql_text(node, ctx)}` includes both window bounds: a row at the boundary "
                                    "is read by two consecutive windows",
                                    branch, (r"\bbetween\b",), key=sql_text(node, ctx)))
            lows = {n.this.sql().lower() for n in stmt.find_all(exp.GTE)
                    if has_window_literal(n.expression, start)}
            for node in stmt.find_all(exp.LTE):
                if has_window_literal(node.expression, end) and node.this.sql().lower() in lows:
                    hits.append(Hit("inclusive-window-bound",
                                    f"`{sql_text(node, ctx)}` closes the window at its end as well as its start: "
                                    "a row at the boundary is read by two consecutive windows",
                                    branch, (r"<=",), key=sql_text(node, ctx)))
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
        clause = clause_of(parent)
        if clause.startswith("column"):
            return True
        if clause in FILTER_CLAUSES:
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
            if not is_this(table, ctx):
                continue
            sel = table.find_ancestor(exp.Select)
            if sel is None:
                continue
            alias = (table.alias or table.name).lower()
            if not _alias_output(sel, alias, stmt, 0):
                continue
            text = sql_text(sel, ctx, 90)
            hits.append(Hit("self-state",
                            f"values read from {{{{ this }}}} reach the output (`{text}`): the model carries state "
                            "from its own previous output, so a rerun or backfill of a window builds on rows the "
                            "failed or earlier run already changed",
                            "incremental", (_THIS,), key=f"self-state|{alias}"))
            break
    return hits


def this_in_first_build(ctx: ModelContext) -> list[Hit]:
    """The first build of an incremental model (and a --full-refresh) runs its SQL with
    is_incremental() false. Where that SQL still reads {{ this }}, the first build reads a relation
    that does not exist yet: PostgreSQL fails it even when the read sits in a CTE nothing uses
    (DuckDB leaves an unused CTE unbound, so the model builds there and fails on the first
    PostgreSQL run), and a --full-refresh reads the table it is replacing. The SQL is compiled
    with the model's own relation absent, so a read guarded by `load_relation(this)` or
    `adapter.get_relation` is not in it."""
    if not ctx.is_incremental or ctx.full is None or not ctx.full.ok:
        return []
    for stmt in ctx.full.statements:
        for table in stmt.find_all(exp.Table):
            if not is_this(table, ctx):
                continue
            cte = table.find_ancestor(exp.CTE)
            where = f"in CTE `{cte.alias_or_name}`" if cte is not None else f"in `{sql_text(table.find_ancestor(exp.Select) or table, ctx, 80)}`"
            return [Hit("this-in-first-build",
                        f"the first build reads {{{{ this }}}} ({where}) outside is_incremental(): the relation does "
                        "not exist before that build, so it fails on PostgreSQL (which binds every CTE, used or "
                        "not; DuckDB skips an unused one), and a --full-refresh reads the table it replaces",
                        "full", (_THIS,), key="this-in-first-build")]
    return []
