"""Rules on determinism: functions that differ between builds (the clock, random, uuid), filters
on the clock, and picks of one row by an order that can tie (dedup, first_value, limit)."""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from ..clock_stamps import is_clock_read, stamps_the_clock
from ..context import ModelContext
from ..findings import ERROR, INFO, WARNING
from ..grain import Typer
from .base import FILTER_CLAUSES, Hit, clause_of, column_names, needle, output_column, sql_text
from .keys import ATTRIBUTE, attribute_like, select_keys


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


def _nondet_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        return name if name in _NONDET_NAMES else None
    if _NONDET_CLASSES and isinstance(node, _NONDET_CLASSES):
        return node.sql().split("(")[0].strip().lower() or type(node).__name__.lower()
    return None


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
                column = output_column(node)
                where = clause_of(node)
                if column is not None and column in ignored and where.startswith("column"):
                    continue
                clock = is_clock_read(node, name)
                if clock and ctx.rerun_scope and where in FILTER_CLAUSES:
                    continue  # clock-window
                text = sql_text(node, ctx, 40)
                needles = tuple(needle(n) for n in _NONDET_NEEDLES.get(name, (name,)))
                if clock and not ctx.rerun_scope:
                    hits.append(Hit("nondeterministic-function",
                                    f"`{text}` in {where} reads the clock; the model is rebuilt in full and feeds "
                                    "no incremental model, so reruns do not change it", branch, needles,
                                    severity=INFO, key=f"{text}|{where}"))
                    continue
                if clock and column is not None and where.startswith("column") and ctx.read_below is not None \
                        and ctx.materialized in ("table", "view", "ephemeral") and column.lower() not in ctx.read_below:
                    hits.append(Hit("nondeterministic-function",
                                    f"`{text}` in {where} reads the clock; the model is rebuilt in full and no model "
                                    f"below it reads column {column}, so no rerun carries it", branch, needles,
                                    severity=INFO, key=f"{text}|{where}"))
                    continue
                if clock and column is not None and where.startswith("column") and not ctx.compare_audit_columns \
                        and (stamp := _projection(node)) is not None and stamps_the_clock(stamp):
                    hits.append(Hit("nondeterministic-function",
                                    f"`{text}` stamps column {column} with the run's clock: an audit column, which the "
                                    "game day leaves out of its comparison (meta.rerun_safety.compare_audit_columns: "
                                    "true compares it)", branch, needles, severity=INFO, key=f"{text}|{where}"))
                    continue
                hits.append(Hit("nondeterministic-function",
                                f"`{text}` in {where} is non-deterministic: two builds of the same input differ",
                                branch, needles, key=f"{text}|{where}"))
    return hits


def _projection(node: exp.Expression) -> exp.Expression | None:
    """The whole projection of the outermost select list that `node` is part of (its alias taken
    off), or None when it is not in that list."""
    child, parent = node, node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        child, parent = parent, parent.parent
    if parent is None or child.arg_key != "expressions" or parent.find_ancestor(exp.Select) is not None:
        return None
    return child.this if isinstance(child, exp.Alias) else child


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
    backfill reads a different window than the run it replaces. In the incremental branch of a
    keyed write (merge or delete+insert on a unique_key, partition_overwrite, microbatch) a rerun
    reads the same or a larger window and replaces by key: a warning about gaps and backfills."""
    if not ctx.rerun_scope:
        return []
    hits = []
    if ctx.clock_rendered:
        now, later = (" ".join(s.split()) for s in ctx.clock_rendered)
        what = "an incremental model" if ctx.is_incremental else "a model that feeds an incremental one"
        keyed = ctx.is_incremental and ctx.keyed_write
        hits.append(Hit("clock-window",
                        f"its Jinja renders the clock into the SQL of {what} (compiled now: `{now[:90]}`; compiled "
                        f"at another time: `{later[:90]}`): the rows of a batch depend on when it runs, so a rerun, "
                        "a late run or a backfill reads a different window" +
                        ("; its keyed write replaces what a failed run wrote, but a gap longer than the window "
                         "or a backfill of older days is missed" if keyed else ""),
                        "full", (r"modules\.datetime", r"run_started_at", r"modules\.time"),
                        severity=WARNING if keyed else ERROR, key="clock-rendered"))
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for node in stmt.walk():
                name = _nondet_name(node)
                if name is None or not is_clock_read(node, name):
                    continue
                where = clause_of(node)
                if where not in FILTER_CLAUSES:
                    continue
                cond = node
                while cond.parent is not None and not isinstance(cond.parent, (exp.Where, exp.Join, exp.Having,
                                                                                  exp.Qualify, exp.And, exp.Or)):
                    cond = cond.parent
                text = sql_text(cond, ctx, 90)
                what = "an incremental model" if ctx.is_incremental else "a model that feeds an incremental one"
                needles = tuple(needle(n) for n in _NONDET_NEEDLES.get(name, (name,)))
                if not _clock_starts_window(node):
                    hits.append(Hit("clock-window",
                                    f"`{text}` in {where} of {what} bounds the batch by the clock from above: rows "
                                    "stamped later than the run wait for a later run",
                                    branch, needles, severity=WARNING, key=f"{text}|{where}"))
                elif branch == "incremental" and ctx.keyed_write:
                    hits.append(Hit("clock-window",
                                    f"`{text}` in {where} of an incremental model whose '{ctx.strategy}' write "
                                    "replaces rows by key: a rerun reads the same or a larger window and replaces "
                                    "what the failed run wrote, but rows are missed when the gap between two runs "
                                    "is longer than the window, and a backfill of older days reads nothing",
                                    branch, needles, severity=WARNING, key=f"{text}|{where}"))
                else:
                    hits.append(Hit("clock-window",
                                    f"`{text}` in {where} of {what}: the rows of a batch depend on when it runs, so "
                                    "a rerun, a late run or a backfill reads a different window",
                                    branch, needles, key=f"{text}|{where}"))
    return hits


# rank()/dense_rank() = 1 keeps every tied row (the same rows on every run): only row_number picks one.
_RANKING = (exp.RowNumber,)
# Numbering that differs between tied rows wherever it is used: a row_number or ntile column.
_NUMBERING = tuple(c for c in (getattr(exp, n, None) for n in ("RowNumber", "Ntile")) if isinstance(c, type))
# Aggregates whose result is ordered: without an order by, the order of the values is arbitrary.
_ORDERED_AGGS = tuple(c for c in (getattr(exp, n, None) for n in ("GroupConcat", "ArrayAgg")) if isinstance(c, type))


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


def _equated(select: exp.Select, cols: set, typer: Typer, ctx: ModelContext) -> set:
    """`cols` and the columns a join's `on a.x = b.y` makes equal to one of them (a window partitioned by
    a.x is partitioned by b.y too)."""
    out = set(cols)
    pairs = []
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        for eq in (on.find_all(exp.EQ) if on is not None else ()):
            if isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Column) and \
                    eq.find_ancestor(exp.Or) is None:
                pairs.append((_qualified([eq.this], select, typer, ctx), _qualified([eq.expression], select, typer, ctx)))
    for _ in range(3):
        for a, b in pairs:
            if a & out:
                out |= b
            if b & out:
                out |= a
    return out


def _grouped_order_total(select: exp.Select, nodes: list[exp.Expression]) -> bool:
    """A window runs after its select's GROUP BY, so the grouped values are unique in the rows it
    orders: an order (with the partition) that covers every grouped value is total (`lag(sum(x)) over
    (order by month) ... group by month`). A grouped value is covered by the same expression, the same
    column, or the alias of the projection that computes it. Grouping sets, rollup and cube repeat
    values with nulls, so only a plain GROUP BY counts."""
    group = select.args.get("group")
    if group is None or not group.expressions or any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube")):
        return False

    def unwrap(node):
        return node.this if isinstance(node, (exp.Alias, exp.Ordered)) else node

    def covered(g) -> bool:
        names = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias) and p.this == g}
        if isinstance(g, exp.Column):
            names.add(g.name.lower())
        for n in map(unwrap, nodes):
            if n == g or (isinstance(n, exp.Column) and n.name.lower() in names and
                          (not n.table or not isinstance(g, exp.Column) or not g.table or n.table == g.table)):
                return True
        return False

    for g in group.expressions:
        if isinstance(g, exp.Literal) and not g.is_string and g.name.isdigit():  # group by 1
            i = int(g.name) - 1
            if i >= len(select.expressions):
                return False
            g = unwrap(select.expressions[i])
        elif isinstance(g, exp.Column) and not g.table:  # group by an output alias
            named = [p for p in select.expressions if isinstance(p, exp.Alias) and p.alias.lower() == g.name.lower()]
            if named and not covered(g):
                g = named[0].this
        if not covered(g):
            return False
    return True


# columns a loader stamps on every row it delivers (Fivetran, Airbyte, Stitch/Singer, dlt, the usual
# hand-written names): two copies of a row with the same update time and the same load time are one delivery
LOAD_TIME_COLUMNS = frozenset({
    "_loaded_at", "loaded_at", "_load_time", "_loaded_time", "_etl_loaded_at", "_ingested_at", "ingested_at",
    "_fivetran_synced", "_airbyte_emitted_at", "_airbyte_extracted_at", "_airbyte_normalized_at",
    "_sdc_batched_at", "_sdc_received_at", "_sdc_extracted_at", "_dlt_load_id", "_synced_at", "_batched_at"})


def _load_time_tiebreak(order_nodes: list[exp.Expression], ctx: ModelContext) -> str | None:
    """The load-time column an order by ends with, after at least one other column (`order by
    updated_at desc, _loaded_at desc`): rows tied on both differ in nothing the source delivered. A
    load-time column is one a source upstream declares (loaded_at_field, meta.rerun_safety.loaded_at) or
    one of LOAD_TIME_COLUMNS. None otherwise (ordered by the load time alone: one sync delivers two
    versions of a row with the same stamp)."""
    if len(order_nodes) < 2 or not isinstance(order_nodes[-1], exp.Column):
        return None
    declared = {load.lower() for _, _, load in ctx.load_times if load}
    name = order_nodes[-1].name.lower()
    if name not in LOAD_TIME_COLUMNS and name not in declared:
        return None
    if not any(c.name.lower() != name for n in order_nodes[:-1] for c in
               ([n] if isinstance(n, exp.Column) else n.find_all(exp.Column))):
        return None
    return name


def _keeps_only_numbers(select: exp.Select, win: exp.Window) -> bool:
    """A numbering whose select keeps no column of the rows it numbers (`select row_number() over (order
    by 1) as n from p`, the numbers of a date spine): whatever order ties take, the output is the same
    numbers. Its partition must not be kept either (nothing outside the window names a column)."""
    for proj in select.expressions:
        if isinstance(proj, exp.Star) or (isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)):
            return False
        for col in proj.find_all(exp.Column):
            if col.find_ancestor(exp.Window) is None:
                return False
        for other in proj.find_all(exp.Window):
            if other is not win and not isinstance(other.this, _NUMBERING):
                return False
    return select.args.get("distinct") is None


def unordered_aggregates(ctx: ModelContext) -> list[Hit]:
    """string_agg / listagg / array_agg (and DuckDB's list) without an order by: the order of the
    values in the result is whatever order the rows were read in."""
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            for agg in stmt.find_all(*_ORDERED_AGGS):
                if agg.find_ancestor(exp.Window) is not None or isinstance(agg.this, exp.Order) or \
                        agg.find(exp.Order) is not None:
                    continue
                text = sql_text(agg, ctx, 60)
                word = agg.sql(dialect=ctx.dialect).split("(")[0].lower()
                hits.append(Hit("dedup-order-not-total",
                                f"`{text}` has no order by: the values come in the order the rows were read, "
                                "which can change from one run to the next", branch, (needle(word),), key=text))
    return hits


def dedup_order_not_total(ctx: ModelContext) -> list[Hit]:
    """row_number()/rank() = 1 whose order by is not a total order: ties pick an arbitrary row.
    Keys are traced through joins: unique on both sides of a cross join, broken by a
    one-to-many join; ordering by every column of the source is total too."""
    hits = []
    for branch, parsed in ctx.branches():
        for stmt in parsed.statements:
            typer = Typer(stmt, ctx.relation_types)
            picks = []  # (construct, partition expressions, order by or None, its select, label)
            dedups = _dedup_windows(stmt)
            for win in dedups:
                picks.append((win, list(win.args.get("partition_by") or []), win.args.get("order"),
                              win.find_ancestor(exp.Select), f"dedup `{sql_text(win, ctx, 90)}` = 1"))
            for win in stmt.find_all(exp.Window):
                if isinstance(win.this, _NUMBERING) and not any(win is d for d in dedups):
                    picks.append((win, list(win.args.get("partition_by") or []), win.args.get("order"),
                                  win.find_ancestor(exp.Select), f"`{sql_text(win, ctx, 90)}`"))
            for win in stmt.find_all(exp.Window):
                if isinstance(win.this, _VALUE_PICKS):
                    arg_cols = {c.name.lower() for c in win.this.find_all(exp.Column)}
                    ordered = {c.name.lower() for n in [*(win.args.get("partition_by") or []),
                                                        *((win.args.get("order") or exp.Order()).expressions)]
                               for c in n.find_all(exp.Column)}
                    if arg_cols and arg_cols <= ordered:
                        continue  # tied rows share the value picked
                    picks.append((win, list(win.args.get("partition_by") or []), win.args.get("order"),
                                  win.find_ancestor(exp.Select), f"`{sql_text(win, ctx, 90)}`"))
            for select in stmt.find_all(exp.Select):
                distinct = select.args.get("distinct")
                on = distinct.args.get("on") if distinct is not None else None
                if on is not None:
                    exprs = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
                    picks.append((distinct, exprs, select.args.get("order"), select,
                                  f"`{sql_text(distinct, ctx, 60)}`"))
            for select in stmt.find_all(exp.Select):  # `order by x limit n`: ties at the cut keep arbitrary rows
                limit, order = select.args.get("limit"), select.args.get("order")
                count = limit.args.get("expression") if limit is not None else None
                if order is None or limit is None or select.find_ancestor(exp.Exists) is not None or (
                        isinstance(count, exp.Literal) and count.name == "0"):
                    continue
                if not select_keys(select, ctx, typer):
                    continue  # nothing known unique in what it reads: `order by id limit 10` is not judged
                picks.append((limit, [], order, select, f"`{sql_text(order, ctx, 60)} {sql_text(limit, ctx, 30)}`"))
            for node, part_nodes, order, select, label in picks:
                partition = column_names(part_nodes)
                order_nodes = [o.this if isinstance(o, exp.Ordered) else o for o in (order.expressions if order else [])]
                order_cols = column_names(order.expressions) if order is not None else set()
                joined = select is not None and bool(select.args.get("joins"))
                total = False
                attributes = None  # a key the order covers but for columns grouped beside it
                if select is not None and _grouped_order_total(select, order_nodes + part_nodes):
                    continue
                if select is not None:
                    keys = select_keys(select, ctx, typer)
                    only_part = _qualified(part_nodes, select, typer, ctx)
                    both = _equated(select, _qualified(order_nodes, select, typer, ctx) | only_part, typer, ctx)
                    only_part = _equated(select, only_part, typer, ctx)
                    # a key of what the select reads within the order, or the partition itself a key (one
                    # row per partition: a dedup by a connector's primary key, a source's unique id)
                    # (not the model's own keys, which the tests' contexts fall back to: a dedup makes them)
                    total = any(k <= both and (bool(ctx.relation_keys) or not k <= only_part) for k in keys)
                    ordered = _qualified(order_nodes, select, typer, ctx)
                    for k in keys:
                        rest = k - both
                        if rest and k & ordered and k & only_part and all(attribute_like(c) for _, c in rest):
                            attributes = sorted(c.lstrip(ATTRIBUTE) for _, c in rest)
                            break
                    everything = _source_columns(select, ctx, typer)
                    mentioned = {c.name.lower() for n in order_nodes + part_nodes
                                 for c in ([n] if isinstance(n, exp.Column) else n.find_all(exp.Column))}
                    if everything and everything <= mentioned and order is not None:
                        total = True  # rows equal on every column are interchangeable
                if not total and not joined:
                    total = any(s <= (order_cols | partition) and not s <= partition for s in ctx.unique_sets)
                if total:
                    continue
                if select is not None and isinstance(node, exp.Window) and isinstance(node.this, _NUMBERING) \
                        and not any(node is d for d in dedups) and _keeps_only_numbers(select, node):
                    continue  # `select row_number() over (order by 1) as n from p` (a date spine): the same numbers
                word = "distinct" if isinstance(node, exp.Distinct) else "limit" if isinstance(node, exp.Limit) else \
                    node.this.sql().split("(")[0].lower()
                why = "has no order by" if order is None else \
                    f"orders by {', '.join(sorted(order_cols)) or 'expressions'}, which is not a total order " \
                    "(no column known to be unique within the partition" + \
                    (", after its joins" if joined else "") + ")"
                if attributes is not None and not isinstance(node, exp.Distinct):
                    hits.append(Hit("dedup-order-not-total",
                                    f"{label} orders by {', '.join(sorted(order_cols))} over rows unique on those "
                                    f"with {', '.join(attributes)}: ties only where {', '.join(attributes)} takes "
                                    "two values for one partition and order value (an attribute of the partition "
                                    "key, as a grouped name usually is, never does)", branch, (needle(word),),
                                    severity="warning", key=sql_text(node, ctx)))
                    continue
                load = _load_time_tiebreak(order_nodes, ctx)
                if load is not None:
                    hits.append(Hit("dedup-order-not-total",
                                    f"{label} orders by {', '.join(sorted(order_cols))}, ending with the load time "
                                    f"{load}: rows tied on both are copies of one delivery, so the pick does not "
                                    "change the output (a note)", branch, (needle(word),), severity="info",
                                    key=sql_text(node, ctx)))
                    continue
                hits.append(Hit("dedup-order-not-total", f"{label} {why}: ties keep an arbitrary row",
                                branch, (needle(word),), key=sql_text(node, ctx)))
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
                text = sql_text(limit, ctx, 40)
                hits.append(Hit("limit-without-order",
                                f"`{text}` without order by returns an arbitrary subset of rows",
                                branch, (r"\blimit\b", r"\bfetch\b"), key=text))
    return hits


def order_not_total(ctx: ModelContext) -> list[Hit]:
    """The dedup-order-not-total rule: picks and numbering over ties, and unordered ordered aggregates."""
    return dedup_order_not_total(ctx) + unordered_aggregates(ctx)
