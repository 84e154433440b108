"""Planning: which columns are hashed how, and how both sides are cut into buckets."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence


from . import limits
from .floats import check_float_tolerance, float_tolerance_of, round_float_sql
from .results import DiffError, Side
from .sql import INTEGER_TYPES, TEMPORAL_TYPES, is_base_table, quote_id, columns_of, columns_of_pair
from ..warehouse.dialect import Dialect


@dataclass
class DiffPlan:
    dialect: Dialect
    left: Side
    right: Side
    columns: list[str]
    key: tuple[str, ...]
    lh: str = ""  # row hash over the compared columns, per side
    rh: str = ""
    mode: str = "hash"
    lb: str = ""  # bucket expression per side
    rb: str = ""
    lp: str = ""  # partition label (column mode)
    rp: str = ""
    buckets: int = 0
    schema_message: str = ""
    type_changes: tuple[str, ...] = ()
    counts: tuple[int, int] = (0, 0)
    extra: dict = field(default_factory=dict)
    tolerance: float = 0.0
    floats: list[tuple[str, float]] = field(default_factory=list)  # (column, its tolerance), compared loosely
    lnh: str = ""  # hash of the columns compared exactly (not the floats), per side
    rnh: str = ""

    def src(self, side: Side, extra_cond: str | None = None, after: str | None = None) -> str:
        """FROM ... WHERE for a side; `extra_cond` selects buckets, `after` filters the selected rows."""
        if after:
            if self.dialect.row_addresses:
                # The fence makes PostgreSQL pick the bucket's rows before hashing any of them.
                return f"(select * from {self.src(side, extra_cond)} offset 0) as picked where {after}"
            return f"{self.src(side, extra_cond)} and {after}"
        if extra_cond and self.dialect.late_materialization and is_base_table(side):
            # Late materialization: find the rowids reading only the bucket's columns, then fetch
            # whole rows for those alone (about half the cost of filtering whole rows).
            inner = self.src(side)
            return self.dialect.late_materialized(side.table.sql(dialect=self.dialect), inner,
                                                  f"{' and ' if side.where is not None else ' where '}{extra_cond}")
        conds = []
        if side.where is not None:
            conds.append(f"({side.where.sql(dialect=self.dialect)})")
        if extra_cond:
            conds.append(extra_cond)
        where = f" where {' and '.join(conds)}" if conds else ""
        return f"{side.table.sql(dialect=self.dialect)}{where}"

    @property
    def keys_sql(self) -> list[str]:
        return [quote_id(k, self.dialect) for k in self.key]


def make_diff_plan(left: Side, right: Side, key: Sequence[str], ignore_columns: Sequence[str],
          bucket_column: str | None, strict: bool, float_tolerance: float | None = None) -> DiffPlan:
    d = left.con.dialect
    tolerance = check_float_tolerance(float_tolerance)
    lcols, rcols = (columns_of_pair(left.con, left.table, right.table) if left.con is right.con
                    else (columns_of(left.con, left.table), columns_of(right.con, right.table)))
    for side, cols in ((left, lcols), (right, rcols)):
        if not cols:
            raise DiffError(f"relation {side.label} does not exist (or has no columns)")
    ignore = {c.lower() for c in ignore_columns}
    ltypes = {c: t.lower() for c, t in lcols}
    rtypes = {c: t.lower() for c, t in rcols}
    lnames = [c for c, _ in lcols if c.lower() not in ignore]
    rnames = {c for c, _ in rcols if c.lower() not in ignore}
    schema_message = ""
    if set(lnames) != rnames:
        added = sorted(rnames - set(lnames))
        removed = sorted(set(lnames) - rnames)
        schema_message = "columns differ:" + "".join(f" +{c}" for c in added) + "".join(f" -{c}" for c in removed)
    columns = [c for c in lnames if c in rnames]
    type_changes = tuple(f"{c}: {ltypes[c]} -> {rtypes[c]}" for c in columns if ltypes[c] != rtypes[c])
    key = tuple(key)
    if key and not all(k in ltypes and k in rtypes for k in key):
        if strict:
            bad = next(k for k in key if k not in ltypes or k not in rtypes)
            where = left.label if bad not in ltypes else right.label
            raise DiffError(f"key column '{bad}' is not a column of {where}")
        key = ()
    if bucket_column and not (bucket_column in ltypes and bucket_column in rtypes):
        if strict:
            where = left.label if bucket_column not in ltypes else right.label
            raise DiffError(f"partition column '{bucket_column}' is not a column of {where}")
        bucket_column = None

    # Floats of the same type on both sides are compared within their tolerance (keys exactly).
    loose = {c: t for c in columns if c not in key and ltypes[c] == rtypes[c]
             and (t := float_tolerance_of(ltypes[c], tolerance)) is not None}

    def col(c: str, types: dict[str, str], rounded: bool = True) -> tuple[str, str]:
        q = quote_id(c, d)
        if rounded and c in loose:
            return round_float_sql(q, d, loose[c]), "double precision"
        if ltypes[c] != rtypes[c]:
            return f"cast({q} as {d.text_type})", "text"
        if d.hashed_as_text(types[c]):
            return f"cast({q} as text)", "text"
        return q, types[c]

    def hashed(cols: Sequence[str], types: dict[str, str], rounded: bool = True) -> str:
        items = [col(c, types, rounded) for c in cols]
        return d.typed_row_hash(items)

    plan = DiffPlan(d, left, right, columns, key, schema_message=schema_message, type_changes=type_changes,
                 tolerance=tolerance, floats=list(loose.items()))
    plan.extra["types"] = ltypes
    plan.lh = hashed(columns, ltypes)
    plan.rh = hashed(columns, rtypes)
    # each column as both sides compare it (floats rounded, differing types as text)
    plan.extra["column_exprs"] = {c: (col(c, ltypes)[0], col(c, rtypes)[0]) for c in columns}
    if loose:
        exact = [c for c in columns if c not in loose]
        plan.lnh, plan.rnh = hashed(exact, ltypes), hashed(exact, rtypes)
    if bucket_column:
        plan.mode = "column"
        q = quote_id(bucket_column, d)
        temporal = any(t in ltypes[bucket_column] for t in TEMPORAL_TYPES) and any(t in rtypes[bucket_column] for t in TEMPORAL_TYPES)
        plan.lp = plan.rp = f"cast({q} as date)" if temporal else q
        if ltypes[bucket_column] != rtypes[bucket_column] and not temporal:
            plan.lp = plan.rp = f"cast({q} as {d.text_type})"
        plan.lb = plan.rb = d.row_hash([plan.lp])
    else:
        # Range buckets need a column whose equal rows (or keys) always share a value: a key
        # column when keyed, any compared column otherwise; integers only.
        pool = key if key else tuple(columns)
        plan.extra["range_candidates"] = [c for c in pool if ltypes[c] in INTEGER_TYPES and rtypes[c] in INTEGER_TYPES]
        if key:
            plan.mode = "hash"
            plan.lb = plan.rb = hashed(key, ltypes, rounded=False)
        else:
            plan.mode = "rowhash"
            plan.lb, plan.rb = plan.lh, plan.rh
    return plan


def both_sides(plan: DiffPlan, left, right) -> tuple:
    """Call `left()` and `right()`; two connections run at the same time where the engine can."""
    if plan.dialect.concurrent_sides and plan.left.con is not plan.right.con:
        with ThreadPoolExecutor(max_workers=1) as pool:
            later = pool.submit(right)
            return left(), later.result()
    return left(), right()


def checksum_totals(plan: DiffPlan, same: bool) -> tuple[int, int, object, object]:
    d = plan.dialect
    if d.costly_queries:
        return _batched_totals(plan)
    parts = {}
    for name, side, h in (("l", plan.left, plan.lh), ("r", plan.right, plan.rh)):
        parts[name] = f"select count(*) as c, {d.int_sum(h)} as s from {plan.src(side)}"
    if same:
        row = plan.left.con.fetchone(f"select l.c, l.s, r.c, r.s from ({parts['l']}) l, ({parts['r']}) r")
        return int(row[0]), int(row[2]), row[1], row[3]
    a, b = both_sides(plan, lambda: plan.left.con.fetchone(parts["l"]), lambda: plan.right.con.fetchone(parts["r"]))
    return int(a[0]), int(b[0]), a[1], b[1]


def _batched_totals(plan: DiffPlan) -> tuple[int, int, object, object]:
    """Both sides' count(*), sum(row hash) in one query (on Spark a query costs ~0.3 s before any
    work), with the min/max of the range candidates on the same scan for `set_range_buckets`."""
    d = plan.dialect
    cands = plan.extra.get("range_candidates") or []
    minmax = "".join(f", min({quote_id(c, d)}), max({quote_id(c, d)})" for c in cands)
    rows = plan.left.con.fetchall(" union all ".join(
        f"select {s} as side, count(*) as c, {d.int_sum(h)} as s{minmax} from {plan.src(side)}"
        for s, side, h in ((0, plan.left, plan.lh), (1, plan.right, plan.rh))))
    rows.sort(key=lambda r: r[0])
    plan.extra["range_rows"] = [(r[1], *r[3:]) for r in rows]
    return int(rows[0][1]), int(rows[1][1]), rows[0][2], rows[1][2]


def _stats_row(side: Side, cands: Sequence[str]) -> tuple | None:
    """(rows, min, max per candidate) of a side from the planner's statistics, or None: only for a
    plain table without a filter (see Dialect.table_stats). The numbers only size the buckets, and
    any cut into buckets gives the same answer."""
    if side.where is not None or not is_base_table(side):
        return None
    return side.con.dialect.table_stats(side.con, side.table.db or side.con.dialect.default_schema, side.table.name, cands)


def set_range_buckets(plan: DiffPlan) -> bool:
    """Pick an integer column whose range spreads the rows over enough buckets; False if none."""
    d, cands = plan.dialect, plan.extra.get("range_candidates") or []
    if not cands:
        return False
    rows = None
    if d.planner_statistics:
        rows = list(both_sides(plan, lambda: _stats_row(plan.left, cands), lambda: _stats_row(plan.right, cands)))
        rows = None if None in rows else rows
    from_stats = rows is not None
    if rows is None:
        rows = plan.extra.pop("range_rows", None)  # read with the totals (_batched_totals)
    if rows is None:
        sel = ", ".join(f"min({quote_id(c, d)}), max({quote_id(c, d)})" for c in cands)
        lq, rq = (f"select count(*), {sel} from {plan.src(side)}" for side in (plan.left, plan.right))
        if d.concurrent_sides and plan.left.con is plan.right.con:
            both = plan.left.con.fetchone(f"select * from ({lq}) l cross join ({rq}) r")
            rows = [both[:len(both) // 2], both[len(both) // 2:]]
        else:
            rows = list(both_sides(plan, lambda: plan.left.con.fetchone(lq), lambda: plan.right.con.fetchone(rq)))
    plan.counts = (int(rows[0][0]), int(rows[1][0]))
    per_bucket = limits.RANGE_ROWS_PER_BUCKET if d.narrow_range_buckets else limits.PG_RANGE_ROWS_PER_BUCKET
    wanted = max(1, min(limits.MAX_BUCKETS, -(-max(plan.counts) // per_bucket)))
    for i, c in enumerate(cands):
        mins = [r[1 + 2 * i] for r in rows if r[1 + 2 * i] is not None]
        maxs = [r[2 + 2 * i] for r in rows if r[2 + 2 * i] is not None]
        lo, hi = (int(min(mins)), int(max(maxs))) if mins else (0, 0)
        if hi - lo + 1 < wanted and len(cands) > 1 and i < len(cands) - 1:
            continue  # too few distinct values to cut the rows finely: try the next column
        if hi - lo + 1 < wanted and wanted > 1:
            return False
        span = hi - lo + 1
        # Aim at per_bucket values per bucket (a dense unique key puts one row on each
        # value), so a sparse region of the key does not widen the buckets of a dense one.
        width = max(1, -(-span // limits.MAX_BUCKETS),
                    min(per_bucket, -(-span * per_bucket // max(1, max(plan.counts)))))
        plan.buckets = -(-(hi - lo + 1) // width) + 1
        q = quote_id(c, d)
        # Integers computed here, not user text; NULL gets its own bucket.
        # Values lie in [lo, hi]: `q - lo` cannot overflow when the span fits 31 bits. A bare
        # column expression keeps DuckDB's statistics, so its aggregate stays cheap.
        operand = q if hi - lo < 2**31 else f"cast({q} as {d.wide_type})"
        raw = d.bucket_division(operand, lo, width, widened=operand != q)
        if from_stats:
            # Values may lie outside the sampled range: no offset, so nothing can overflow (and
            # NULL may share bucket -1 with values just below zero, which changes no answer).
            raw = f"{q} / {width}"
        plan.extra["range_raw"] = raw
        plan.lb = plan.rb = f"coalesce({raw}, -1)"
        plan.mode = "range"
        plan.extra["range_column"] = c
        return True
    return False


def set_hash_buckets(plan: DiffPlan) -> None:
    n = 1
    while n < limits.MAX_BUCKETS and n * limits.HASH_ROWS_PER_BUCKET < max(plan.counts):
        n *= 2
    plan.buckets = n
    plan.lb, plan.rb = f"(({plan.lb}) & {n - 1})", f"(({plan.rb}) & {n - 1})"
