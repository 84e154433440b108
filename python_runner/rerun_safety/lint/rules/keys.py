"""Which column sets are unique in the rows a select reads or returns: through its FROM and joins (a
join that matches at most one row keeps the left side's keys), CTEs and derived tables, a GROUP BY, and the
keys known of the relations it reads (ModelContext.relation_keys: unique_key, unique tests, constraints, and
the output keys of the models above, carried through ref()). The rules that judge an ordering's ties use it."""
from __future__ import annotations

from sqlglot import exp

from ..context import ModelContext
from ..grain import Typer


def keys_of(src: exp.Expression, alias: str, ctx: ModelContext, typer: Typer, depth: int) -> list[frozenset]:
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
        for key in select_keys(src, ctx, typer, depth + 1):
            names = set()
            for proj in src.expressions:
                inner = proj.this if isinstance(proj, exp.Alias) else proj
                if isinstance(inner, exp.Column) and ((inner.table.lower(), inner.name.lower()) in key or (
                        not inner.table and len(typer.sources(src)) == 1 and inner.name.lower() in {c for _, c in key})):
                    names.add((alias, proj.alias_or_name.lower()))
                elif isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)):
                    names |= {(alias, c) for _, c in key}
            if len(names) >= len(key):
                out.append(frozenset(names))
            elif names and all(attribute_like(c) for _, c in key if (alias, c) not in names):
                # a grouped name or type dropped: unique but for it (see determinism's warning)
                out.append(frozenset(names | {(alias, ATTRIBUTE + c) for _, c in key if (alias, c) not in names}))
        group = group_key(src, alias)
        if group:
            out.append(group)
        distinct = src.args.get("distinct")
        if distinct is not None and not distinct.args.get("on"):
            named = [p.alias_or_name.lower() for p in src.expressions]
            if named and all(named) and not any(isinstance(p, exp.Star) or isinstance(p.this, exp.Star)
                                                for p in src.expressions):
                out.append(frozenset((alias, n) for n in named))
        out += [frozenset({(alias, n)}) for n in numbered_columns(src)]
        return out
    return []


def group_key(select: exp.Select, alias: str) -> frozenset | None:
    """The output columns a plain GROUP BY makes unique, whatever its FROM joins: every grouped
    expression must be projected (by position, by name or alias, or as the same expression), else
    the projected ones alone are not unique. Grouping sets, rollup and cube repeat values."""
    group = select.args.get("group")
    if group is None or not group.expressions or any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube")):
        return None
    cols = set()
    for g in group.expressions:
        found = None
        if isinstance(g, exp.Literal) and not g.is_string and g.name.isdigit():
            i = int(g.name) - 1
            found = select.expressions[i] if 0 <= i < len(select.expressions) else None
        else:
            name = g.alias_or_name.lower()
            found = next((p for p in select.expressions if (name and p.alias_or_name.lower() == name) or
                          (isinstance(p, exp.Alias) and p.this == g)), None)
        if found is None or not found.alias_or_name:
            return None
        cols.add((alias, found.alias_or_name.lower()))
    return frozenset(cols)


ATTRIBUTE = "~"  # prefixes a column a key needs but a select dropped (never matches a real column)
_NOT_ATTRIBUTES = ("id", "_id", "_key", "_sk", "_pk", "_date", "_day", "_at", "_ts", "_time", "_timestamp",
                   "_month", "_week", "_year", "_number", "_no", "_seq")


def attribute_like(column: str) -> bool:
    """A column that names or classifies a key (store_name, product_type) rather than being one: grouped
    beside a key, it does not split the key's rows (ids, times and sequence numbers do)."""
    name = column.lstrip(ATTRIBUTE).lower()
    return not name.endswith(_NOT_ATTRIBUTES)


_INJECTIVE = (exp.Add, exp.Sub, exp.Paren, exp.Cast, exp.TryCast, exp.Alias, exp.DateAdd, exp.TsOrDsAdd,
              exp.TimestampAdd, exp.Interval, exp.Literal, exp.Window, exp.RowNumber, exp.Neg)


def _unique_numbering(node: exp.Expression) -> bool:
    """`row_number() over (order by ...)` with no partition, or a shift of it by constants (`start +
    (row_number() over (order by 1) - 1) * interval '1 day'`, a date spine's day): distinct on every row."""
    wins = list(node.find_all(exp.Window))
    if len(wins) != 1 or not isinstance(wins[0].this, exp.RowNumber) or wins[0].args.get("partition_by"):
        return False
    for n in node.walk():
        if n is wins[0] or n.find_ancestor(exp.Window) is wins[0]:
            continue  # inside the window: its order by
        if isinstance(n, exp.Mul):
            sides = (n.this, n.expression)
            if not any(isinstance(s, exp.Interval) or (isinstance(s, exp.Literal) and s.name not in ("0", ""))
                       for s in sides):
                return False
            continue
        if isinstance(n, (exp.Identifier, exp.Var, exp.DataType)):
            continue
        if not isinstance(n, _INJECTIVE):
            return False
    return True


def numbered_columns(select: exp.Select) -> list[str]:
    """Output columns a select numbers uniquely (see _unique_numbering)."""
    if not isinstance(select, exp.Select) or select.args.get("group") is not None:
        return []
    return [p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias) and p.alias and
            _unique_numbering(p.this)]


def output_keys(stmt: exp.Expression, ctx: ModelContext) -> list[frozenset]:
    """Column sets unique in what a model's statement returns (a GROUP BY, DISTINCT, or keys carried
    from what it reads): what a model below it may rely on, as it relies on a CTE's (names, lowercased).
    Nothing for a set operation (a UNION ALL repeats rows)."""
    select = stmt
    if not isinstance(select, exp.Select):
        return []
    typer = Typer(stmt, ctx.relation_types)
    keys = [frozenset(c for _, c in key) for key in keys_of(select, "", ctx, typer, 0)]
    if select.args.get("distinct") is not None and not select.args["distinct"].args.get("on"):
        named = [p.alias_or_name.lower() for p in select.expressions]
        if all(named) and not any(isinstance(p, exp.Star) for p in select.expressions):
            keys.append(frozenset(named))
    return [k for i, k in enumerate(keys) if k and k not in keys[:i]]


def select_keys(select: exp.Select, ctx: ModelContext, typer: Typer, depth: int = 0) -> list[frozenset]:
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
    keys = keys_of(src, alias, ctx, typer, depth) if src is not None else []
    for join in select.args.get("joins") or []:
        j_alias, j_src = item(join.this)
        j_keys = keys_of(j_src, j_alias, ctx, typer, depth) if j_src is not None else []
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
