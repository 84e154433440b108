"""Bucket checksums of both sides, and the buckets whose checksums differ."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

from . import limits
from .plan import both_sides, DiffPlan
from .results import Side



def _bucket_query(plan: DiffPlan, side: Side, b: str, h: str, p: str) -> str:
    d = plan.dialect
    if plan.mode == "column":
        return (f"select {d.row_hash(['p'])} as b, p, c, s from (select {p} as p, count(*) as c, "
                f"{d.int_sum(h)} as s from {plan.src(side)} group by 1) g")
    if plan.mode == "range" and d.perfect_hash_setting:
        # the bare range expression (NULL coalesced after the aggregate) keeps the perfect hash
        return (f"select coalesce(b, -1) as b, null as p, c, s from (select {plan.extra['range_raw']} as b, "
                f"count(*) as c, {d.int_sum(h)} as s from {plan.src(side)} group by 1) g")
    return (f"select {b} as b, null as p, count(*) as c, {d.int_sum(h)} as s "
            f"from {plan.src(side)} group by 1")


def _union_bucket_groups(plan: DiffPlan, sides: Sequence[tuple[int, Side, str, str, str]]) -> str:
    """Bucket checksums (Dialect.union_bucket_aggregate: PostgreSQL) of one or both sides in one aggregate that can run in parallel.

    The sides are one UNION ALL: its output column has no statistics, so the planner expects few
    buckets and picks a Partial HashAggregate under a Gather (a GROUP BY on an expression of a
    unique key is estimated at one group per row, and that plan is never parallel). One side alone
    gets an empty second branch (`and false`) for the same reason.
    """
    col = plan.mode == "column"
    branches = [f"select {s} as s, {p if col else b} as g, {h} as h from {plan.src(side)}"
                for s, side, b, h, p in sides]
    if len(sides) == 1:
        s, side, b, h, p = sides[0]
        branches.append(f"select {s}, {p if col else b}, {h} from {plan.src(side, 'false')}")
    grouped = (f"select g, count(*) filter (where s = 0) as lc, count(*) filter (where s = 1) as rc, "
               f"sum(h) filter (where s = 0) as ls, sum(h) filter (where s = 1) as rs "
               f"from ({' union all '.join(branches)}) u group by g")
    if col:
        return f"select {plan.dialect.row_hash(['g'])} as b, cast(g as text) as p, lc, rc, ls, rs from ({grouped}) x"
    return f"select g as b, cast(null as text) as p, lc, rc, ls, rs from ({grouped}) x"


def _union_differing_buckets_same(plan: DiffPlan) -> tuple[int, int, int, list[tuple]]:
    g = _union_bucket_groups(plan, ((0, plan.left, plan.lb, plan.lh, plan.lp), (1, plan.right, plan.rb, plan.rh, plan.rp)))
    differ = "lc <> rc or ls is distinct from rs"
    rows = plan.left.con.fetchall(
        f"with g as materialized ({g}) select t.lt, t.rt, t.nb, t.nj, j.b, j.p, j.lc, j.rc from "
        f"(select coalesce(sum(lc), 0) as lt, coalesce(sum(rc), 0) as rt, count(*) as nb, "
        f"count(*) filter (where {differ}) as nj from g) t left join "
        f"(select b, p, lc, rc from g where {differ} order by b limit {limits.MAX_LISTED_BUCKETS + 1}) j on true")
    lt, rt, nb, nj = (int(v) for v in rows[0][:4])
    if plan.mode == "column":
        plan.buckets = nb
    return lt, rt, nj, [(r[4], r[5], int(r[6]), int(r[7])) for r in rows if r[4] is not None]


@contextmanager
def _perfect_hash(plan: DiffPlan, con):
    """Range buckets (Dialect.perfect_hash_setting: DuckDB): let the bucket aggregate use a perfect hash table (an array indexed
    by the bucket, whose range DuckDB knows from the key's statistics) instead of a hash table:
    0.22 s against 0.24-0.30 s per 10M rows. DuckDB does so only for ranges of up to
    `perfect_ht_threshold` bits (12 by default: 4,096 buckets); the setting is raised for this
    query (at most MAX_BUCKETS, 2^18 entries of a few dozen bytes) and put back."""
    bits = max(1, plan.buckets).bit_length() + 1
    setting = plan.dialect.perfect_hash_setting
    if not setting or plan.mode != "range" or bits <= 12:
        yield
        return
    before = con.fetchone(f"select current_setting('{setting}')")[0]
    con.execute(f"set {setting} = {max(int(before), bits)}")
    try:
        yield
    finally:
        con.execute(f"set {setting} = {int(before)}")


def differing_buckets_same(plan: DiffPlan) -> tuple[int, int, int, list[tuple]]:
    """One query: both sides' bucket checksums, joined in the warehouse; returns the differing ones."""
    if plan.dialect.union_bucket_aggregate:
        return _union_differing_buckets_same(plan)
    lq = _bucket_query(plan, plan.left, plan.lb, plan.lh, plan.lp)
    rq = _bucket_query(plan, plan.right, plan.rb, plan.rh, plan.rp)
    label = f"cast(coalesce(l.p, r.p) as {plan.dialect.text_type})"
    m = plan.dialect.materialized
    sql = (f"with l as {m}({lq}), r as {m}({rq}), "
           f"j as (select coalesce(l.b, r.b) as b, {label} as p, coalesce(l.c, 0) as lc, coalesce(r.c, 0) as rc "
           f"from l full outer join r on l.b = r.b where l.c is distinct from r.c or l.s is distinct from r.s) "
           f"select t.lt, t.rt, t.nb, t.nj, j.b, j.p, j.lc, j.rc from (select "
           f"(select coalesce(sum(c), 0) from l) as lt, (select coalesce(sum(c), 0) from r) as rt, "
           f"(select count(*) from l) + (select count(*) from r) as nb, (select count(*) from j) as nj) t "
           f"left join (select * from j order by b limit {limits.MAX_LISTED_BUCKETS + 1}) j on true")
    with _perfect_hash(plan, plan.left.con):
        rows = plan.left.con.fetchall(sql)
    lt, rt, nb, nj = (int(v) for v in rows[0][:4])
    if plan.mode == "column":
        plan.buckets = nb // 2
    listed = [(r[4], r[5], int(r[6]), int(r[7])) for r in rows if r[4] is not None]
    return lt, rt, nj, listed


def differing_buckets_across(plan: DiffPlan) -> tuple[int, int, int, list[tuple]]:
    def fetch(side: Side, b: str, h: str, p: str):
        if plan.dialect.union_bucket_aggregate:
            sql = f"select b, p, lc, ls from ({_union_bucket_groups(plan, [(0, side, b, h, p)])}) x"
        else:
            sql = _bucket_query(plan, side, b, h, p)
        with _perfect_hash(plan, side.con):
            found = side.con.fetchall(sql)
        return {r[0]: (r[1], int(r[2]), r[3]) for r in found}

    if plan.dialect.costly_queries:
        return _batched_differing_buckets(plan)
    lmap, rmap = both_sides(plan, lambda: fetch(plan.left, plan.lb, plan.lh, plan.lp),
                       lambda: fetch(plan.right, plan.rb, plan.rh, plan.rp))
    if plan.mode == "column":
        plan.buckets = len(set(lmap) | set(rmap))
    listed = []
    for b in set(lmap) | set(rmap):
        lv, rv = lmap.get(b), rmap.get(b)
        if lv is None or rv is None or lv[1:] != rv[1:]:
            label = (lv or rv)[0]
            listed.append((b, None if label is None else str(label), lv[1] if lv else 0, rv[1] if rv else 0))
    listed.sort(key=lambda t: t[0])
    return (sum(v[1] for v in lmap.values()), sum(v[1] for v in rmap.values()), len(listed), listed)


def _batched_differing_buckets(plan: DiffPlan) -> tuple[int, int, int, list[tuple]]:
    """Spark: both sides' bucket checksums compared in one query, which returns only the differing
    buckets. Spark would compute a CTE of the checksums again for each reference, so the buckets are
    one aggregate over the rows of both sides."""
    if plan.mode == "column":
        return _batched_differing_partitions(plan)
    rows = " union all ".join(f"select {s} as side, {b} as b, {h} as h from {plan.src(side)}"
                              for s, side, b, h in ((0, plan.left, plan.lb, plan.lh), (1, plan.right, plan.rb, plan.rh)))
    # The totals are known (`_totals` ran first): each bucket's row counts per side and the difference
    # of its hash sums, exact as three signed bigint sums of 21-22-bit parts (see sql._int_sum)
    sums = ", ".join(f"sum(case when side = 0 then {x} else -{x} end) as d{i}"
                     for i, x in enumerate(p.format("h") for p in plan.dialect.sum_parts))
    found = plan.left.con.fetchall(
        f"select b, lc, rc from (select b, sum(1 - side) as lc, sum(side) as rc, {sums} from ({rows}) u "
        f"group by b) g where lc <> rc or {plan.dialect.combine_sums(['d0', 'd1', 'd2'])} <> 0")
    listed = sorted((r[0], None, int(r[1]), int(r[2])) for r in found)
    return plan.counts[0], plan.counts[1], len(listed), listed


def _batched_differing_partitions(plan: DiffPlan) -> tuple[int, int, int, list[tuple]]:
    """Spark, a bucket per partition value: the differing partitions, and the totals on every row
    (as window sums over the groups); the first bucket also comes back, so that there is a row when
    none differs."""
    per_side = " union all ".join(
        f"select {s} as side, b, p, c, s from ({_bucket_query(plan, side, b, h, p)}) x{s}"
        for s, side, b, h, p in ((0, plan.left, plan.lb, plan.lh, plan.lp), (1, plan.right, plan.rb, plan.rh, plan.rp)))
    grouped = (f"select b, first(p, true) as p, coalesce(sum(case when side = 0 then c end), 0) as lc, "
               f"coalesce(sum(case when side = 1 then c end), 0) as rc, max(case when side = 0 then s end) as ls, "
               f"max(case when side = 1 then s end) as rs from ({per_side}) u group by b")
    rows = plan.left.con.fetchall(
        f"select lt, rt, nb, b, p, lc, rc, d from (select b, p, lc, rc, "
        f"case when lc <> rc or not (ls <=> rs) then 1 else 0 end as d, sum(lc) over () as lt, "
        f"sum(rc) over () as rt, count(*) over () as nb, min(b) over () as b0 from ({grouped}) g) w "
        f"where d = 1 or b = b0")
    if not rows:
        return 0, 0, 0, []
    if plan.mode == "column":
        plan.buckets = int(rows[0][2])
    listed = sorted((r[3], None if r[4] is None else str(r[4]), int(r[5]), int(r[6])) for r in rows if r[7])
    return int(rows[0][0]), int(rows[0][1]), len(listed), listed
