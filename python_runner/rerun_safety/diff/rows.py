"""Row level: the rows of the differing buckets compared as multisets, and the sample rows."""

from __future__ import annotations

import heapq
import uuid
from collections import Counter
from typing import Iterable

from sqlglot import exp

from . import limits
from .floats import LooseRow, pair_floats, float_sort_key
from .plan import both_sides, DiffPlan
from .results import Side
from ..warehouse.base import ident
from .sql import TID, in_list, is_base_table, relation_kinds, quote_id, rows_of_keys


_COUNT_FIELDS = ("only_l", "only_r", "copies_r", "keys_only_l", "keys_only_r", "changed_rows",
                 "changed_keys", "dup_l", "dup_r")


# Over groups `p` (bucket b, row hash h, exact columns' hash nh, rows per side lc/rc): the buckets
# holding a left-unmatched and a right-unmatched group with the same exact columns, where rows may
# pair within the float tolerance.
_NEAR_CTE = "c as (select l.b as lb, r.b as rb from p l join p r on l.nh = r.nh where l.lc > l.rc and r.rc > r.lc)"


def _near_buckets_from_c() -> str:
    return f"(select lb as x from c union select rb from c) cb limit {limits.MAX_LISTED_BUCKETS + 1}"


def rows_same(plan: DiffPlan, buckets: list[int] | None) -> tuple[dict, list, list]:
    """Row-level multiset comparison of the differing buckets, in one query in the warehouse."""
    d, ht = plan.dialect, plan.dialect.hash_type
    ks = plan.keys_sql
    kcols = "".join(f", {k} as k{i}" for i, k in enumerate(ks))
    knames = "".join(f"k{i}, " for i in range(len(ks)))
    # Base tables with row addresses (PostgreSQL's ctid): keep one per differing (bucket, key, hash),
    # so that the sample rows are then fetched by address instead of by another scan.
    addressed = d.row_addresses
    # Floats: the hash of the exact (non-float) columns rides along (it follows from the row hash,
    # so the groups stay the same): unmatched rows on both sides with equal exact columns may
    # pair within the tolerance, and only their buckets are read again with the floats' values.
    # (Carrying each rounded float through the grouping cost ~4x on a wide table.) Not on DuckDB
    # with a single integer key: there the rows of the unmatched keys are copied aside anyway
    # (_narrow_to_keys), and pair there; the hash is computed only if they are too many to list.
    int_key = _int_key(plan)
    carry = bool(plan.floats) and not (d.keyed_comparison == "key_join" and int_key)
    fnames = ", nh" if carry else ""
    parts = []
    for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh), (1, plan.right, plan.rb, plan.rh, plan.rnh)):
        cond = in_list(b, buckets, d) if buckets is not None else None
        tid = d.address_item(is_base_table(side))
        fcols = f", {nh} as nh" if carry else ""
        parts.append(f"select {s} as s, {b} as b, {h} as h{kcols}{fcols}{tid} from {plan.src(side, cond)}")
    nb = f"cast(null as {d.wide_type})"
    z = "cast(0 as bigint)"
    nt = ", cast(null as text)" if addressed else ""

    def i(x: str) -> str:
        return f"cast(coalesce(sum({x}), 0) as bigint)"

    tids = ", min(t) filter (where s = 0) as tl, min(t) filter (where s = 1) as tr" if addressed else ""
    sql = (f"with u as ({parts[0]} union all {parts[1]}), "
           f"p as {d.materialized}(select b, {knames}h{fnames}, sum(1 - s) as lc, sum(s) as rc{tids} from u "
           f"group by b, {knames}h{fnames}) ")
    counts = (f"select 'rows' as kind, {i('case when lc > rc then lc - rc else 0 end')} as a1, "
              f"{i('case when rc > lc then rc - lc else 0 end')} as a2, "
              f"{i('case when lc > 0 and rc > lc then rc - lc else 0 end')} as a3, "
              f"{z} as a4, {z} as a5, {z} as a6, {z} as a7, {z} as a8, {z} as a9, "
              f"{nb} as b, cast(null as {ht}) as h{nt} from p")
    selects = [counts]
    if ks:
        sql += (f", k as (select {knames}sum(lc) as kl, sum(rc) as kr, "
                f"max(case when lc <> rc then 1 else 0 end) as dif from p group by {knames.rstrip(', ')}) ")
        selects.append(
            f"select 'keys', {z}, {z}, {z}, {i('case when kr = 0 then 1 else 0 end')}, "
            f"{i('case when kl = 0 then 1 else 0 end')}, "
            f"{i('case when dif = 1 and kl = 1 and kr = 1 then 1 else 0 end')}, "
            f"{i('case when dif = 1 and kl = kr then 1 else 0 end')}, "
            f"{i('case when kl > 1 and kl > kr then 1 else 0 end')}, "
            f"{i('case when kr > 1 and kr > kl then 1 else 0 end')}, {nb}, cast(null as {ht}){nt} from k")
    for kind, cond in (("l", "lc > rc"), ("r", "rc > lc")):
        selects.append(f"select * from (select '{kind}', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, "
                       f"cast(b as {d.wide_type}), h{', t' + kind if addressed else ''} "
                       f"from p where {cond} order by b, h limit {limits.SAMPLE_ROWS}) x{kind}")
    if int_key:
        # A single integer key: the keys of the unmatched groups (a few thousand at most) filter
        # the float pairing and the column search below far better than their buckets do.
        selects.append(f"select * from (select distinct 'u', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, "
                       f"cast(k0 as {d.wide_type}), cast(null as {ht}){nt} from p where lc <> rc "
                       f"limit {limits.MAX_LISTED_KEYS + 1}) xu")
    if addressed:
        # PostgreSQL: the address of a row of every unmatched group (when they are few), so that
        # the column search reads those rows by address instead of scanning both sides again
        for kind, cond in (("tl", "lc > rc"), ("tr", "rc > lc")):
            selects.append(f"select * from (select '{kind}', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, "
                           f"{nb}, cast(null as {ht}), t{kind[1]} from p where {cond} "
                           f"limit {limits.MAX_LISTED_KEYS + 1}) x{kind}")
    if carry:
        # Buckets holding a left-unmatched and a right-unmatched group with the same exact
        # columns: only there may rows pair (their floats are then compared one by one).
        num = d.wide_type
        sql += f", {_NEAR_CTE} "
        selects.append(f"select * from (select 'c', {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, {z}, cast(x as {num}), "
                       f"cast(null as {ht}){nt} from {_near_buckets_from_c()}) xc")
    rows = plan.left.con.fetchall(sql + " union all ".join(selects))
    out = dict.fromkeys(_COUNT_FIELDS, 0)
    lsample, rsample, near_buckets, keys = [], [], [], []
    tids: dict[str, list] = {"tl": [], "tr": []}
    for kind, a1, a2, a3, a4, a5, a6, a7, a8, a9, b, h, *tid in rows:
        if kind in tids:
            tids[kind].append(tid[0])
        elif kind == "c":
            near_buckets.append(int(b))
        elif kind == "u":
            keys.append(None if b is None else int(b))
        elif kind == "rows":
            out.update(only_l=int(a1), only_r=int(a2), copies_r=int(a3))
        elif kind == "keys":
            out.update(keys_only_l=int(a4), keys_only_r=int(a5), changed_rows=int(a6), changed_keys=int(a7),
                       dup_l=int(a8), dup_r=int(a9))
        elif kind == "l":
            lsample.append((int(b), int(h), *tid))
        else:
            rsample.append((int(b), int(h), *tid))
    # the keys of every unmatched group, when they are few (see _int_key)
    # (a NULL key matches no list: then the buckets filter)
    plan.extra["unmatched_keys"] = (keys if int_key and len(keys) <= limits.MAX_LISTED_KEYS and None not in keys
                                    else None)
    found = [tids["tl"], tids["tr"]]
    plan.extra["unmatched_tids"] = (found if all(len(t) <= limits.MAX_LISTED_KEYS and
                                                 all(x is not None and TID.match(x) for x in t) for t in found)
                                    else None)
    listed = plan.extra["unmatched_keys"]
    narrowed = d.keyed_comparison == "key_join" and bool(listed)
    if narrowed:
        _narrow_to_keys(plan, listed)
    elif plan.floats and not carry and out["only_l"] and out["only_r"]:
        near_buckets = _near_buckets(plan, buckets)  # too many unmatched keys to copy aside
    if near_buckets or (narrowed and plan.floats and out["only_l"] and out["only_r"]):
        # narrowed: the tables hold exactly the rows of the unmatched keys, all read here
        within = None if narrowed else buckets if len(near_buckets) > limits.MAX_LISTED_BUCKETS else near_buckets
        loose = _loose_rows_same(plan, within, None if narrowed else listed)
        if loose is not None:
            lrest, rrest = pair_floats(plan, loose, out)
            # samples: the rows that stay unmatched, also those outside the buckets read here
            seen = set(within) if within is not None else None
            lsample, rsample = (sorted([p for p in picks if seen is not None and p[0] not in seen] + rest,
                                       key=lambda p: p[:2])[:limits.SAMPLE_ROWS]
                                for picks, rest in ((lsample, lrest), (rsample, rrest)))
    return out, lsample, rsample


def _narrow_to_keys(plan: DiffPlan, keys: list[int]) -> None:
    """DuckDB, a single integer key whose unmatched keys are all listed: copy every row of those
    keys, of both sides, into a temporary table per side (one scan of each), and point the plan at
    them. The float pairing, the samples, the other halves of changed keys and the column search
    then read those few rows instead of scanning both sides again each (10M rows, 1,000
    differences: 0.35 s of scans -> 0.1 s). `compare` drops the tables."""
    con = plan.left.con
    made = plan.extra.setdefault("temp_tables", [])
    tag = uuid.uuid4().hex[:12]
    # each row's bucket and hashes are computed once, here, and kept beside it (a wide row's hash
    # is a long expression: each query that computed it again paid for it, planning included)
    kept = {name: quote_id(f"rs_diff_{name}_{tag}", "duckdb") for name in ("b", "h", "nh")}
    for attr, b, h, nh in (("left", "lb", "lh", "lnh"), ("right", "rb", "rh", "rnh")):
        side = getattr(plan, attr)
        temp = exp.Table(this=ident(f"rs_diff_{attr}_{tag}"), db=ident("main"), catalog=ident("temp"))
        extra = f", {getattr(plan, b)} as {kept['b']}, {getattr(plan, h)} as {kept['h']}"
        if plan.floats:
            extra += f", {getattr(plan, nh)} as {kept['nh']}"
        con.execute_temp(f"create temp table {temp.sql(dialect='duckdb')} as select *{extra} from "
                         f"{rows_of_keys(plan.src(side), plan.keys_sql[0], keys)}")
        made.append(temp)
        # a few rows: filtered directly, no late materialization (and no catalog query to know)
        relation_kinds(con)[temp.sql(dialect="duckdb")] = False
        setattr(plan, attr, Side(con, temp, None, side.label))
        setattr(plan, b, kept["b"])
        setattr(plan, h, kept["h"])
        if plan.floats:
            setattr(plan, nh, kept["nh"])
    plan.extra["narrowed"] = True


def _near_buckets(plan: DiffPlan, buckets: list[int] | None) -> list[int]:
    """Buckets holding a left-unmatched and a right-unmatched group whose exact (non-float)
    columns are equal: only there may rows pair within the float tolerance (what `rows_same`
    finds on the way when it carries the hash of the exact columns)."""
    d = plan.dialect
    parts = [f"select {s} as s, {b} as b, {h} as h, {nh} as nh from "
             f"{plan.src(side, in_list(b, buckets, d) if buckets is not None else None)}"
             for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh),
                                       (1, plan.right, plan.rb, plan.rh, plan.rnh))]
    rows = plan.left.con.fetchall(
        f"with p as {d.materialized}(select b, h, nh, sum(1 - s) as lc, sum(s) as rc from "
        f"({parts[0]} union all {parts[1]}) u group by b, h, nh), {_NEAR_CTE} select x from {_near_buckets_from_c()}")
    return [int(r[0]) for r in rows]


def _int_key(plan: DiffPlan) -> bool:
    """Keyed on one integer column (as range buckets are): its values fit the bucket column."""
    return len(plan.key) == 1 and plan.key[0] in (plan.extra.get("range_candidates") or ())


def _loose_rows_same(plan: DiffPlan, buckets: list[int] | None, keys: list[int] | None = None) -> list[LooseRow] | None:
    """The rows left unmatched by the row hash, with their exact floats (None: too many).

    Within a (bucket, key, row hash) group the rows on the side with more of them are numbered in
    float order; those past the other side's count are the unmatched ones. `keys`: the keys of
    every unmatched group (a single integer key), read instead of whole buckets: every row of an
    unmatched group, and of its key, has one of them.
    """
    d = plan.dialect
    ks = plan.keys_sql
    kcols = "".join(f", {k} as k{i}" for i, k in enumerate(ks))
    knames = "".join(f"k{i}, " for i in range(len(ks)))
    fcols = ", ".join(f"{quote_id(c, d)} as f{i}" for i, (c, _t) in enumerate(plan.floats))
    fnames = ", ".join(f"f{i}" for i in range(len(plan.floats)))
    addressed = d.row_addresses
    parts = []
    for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh), (1, plan.right, plan.rb, plan.rh, plan.rnh)):
        cond = (in_list(ks[0], keys, d) if keys is not None else
                in_list(b, buckets, d) if buckets is not None else None)
        tid = d.address_item(is_base_table(side))
        parts.append(f"select {s} as s, {b} as b, {h} as h, {nh} as nh{kcols}, {fcols}{tid} from {plan.src(side, cond)}")
    group = f"partition by b, {knames}h"
    per_key = (f"sum(1 - s) over (partition by b, {knames.rstrip(', ')}) as kl, "
               f"sum(s) over (partition by b, {knames.rstrip(', ')}) as kr" if ks else "0 as kl, 0 as kr")
    by_key = f"partition by {knames.rstrip(', ')}" if ks else ""
    # A row can pair only with a row of the other side of its key and exact columns (nh) whose first
    # float is within reach of its own (or, not finite, of the same side of that test): the others
    # come back only as the first SAMPLE_ROWS of each side (the samples), and their keys as open
    # (10M rows, 1,000 changed floats beyond the tolerance: 4,000 rows paired here for nothing).
    dbl = d.double_type
    f0, t0 = f"cast(f0 as {dbl})", plan.floats[0][1]
    fin = f"abs({f0}) < cast('Infinity' as {dbl})"
    other = f"partition by {knames}nh"  # as the pairing groups them: not by bucket (a float may be the bucket column)
    reach = f"cast({t0 * 1.000001 / (1 - t0)!r} as {dbl}) * greatest(abs({f0}), cast(1 as {dbl}))"
    ext = "".join(f", {fn}(case when s = {side} and {fin} then {f0} end) over ({other}) as {fn}{side}"
                  for fn in ("min", "max") for side in (0, 1))
    can = (f"coalesce(case when s = 0 then r_n > 0 and (not coalesce({fin}, false) or (min1 <= {f0} + {reach} and max1 >= {f0} - {reach})) "
           f"else l_n > 0 and (not coalesce({fin}, false) or (min0 <= {f0} + {reach} and max0 >= {f0} - {reach})) end, false)")
    sql = (f"with u as ({parts[0]} union all {parts[1]}), w as (select *, sum(1 - s) over ({group}) as lc, "
           f"sum(s) over ({group}) as rc, {per_key}, row_number() over ({group}, s order by {fnames}) as rn from u), "
           f"x as (select * from w where (s = 0 and rn > rc) or (s = 1 and rn > lc)), "
           f"y as (select *, {can} as can from (select *, sum(s) over ({other}) as r_n, sum(1 - s) over ({other}) as l_n{ext} "
           f"from x) x1), "
           f"z as (select *, max(case when can then 0 else 1 end) over ({by_key}) as op, "
           f"row_number() over (partition by s, can order by b, h) as pick from y) "
           f"select s, b, h, nh, lc, kl, kr, {knames}{fnames}, can, op{', t' if addressed else ''} from z "
           f"where can or pick <= {limits.SAMPLE_ROWS} limit {limits.MAX_TOLERANCE_ROWS + 1}")
    rows = plan.left.con.fetchall(sql)
    if len(rows) > limits.MAX_TOLERANCE_ROWS:
        return None
    nk, nf = len(ks), len(plan.floats)
    e = 7 + nk + nf
    return [LooseRow(int(r[0]), int(r[1]), int(r[2]), tuple(r[7:7 + nk]), int(r[3]), tuple(r[7 + nk:e]),
                   int(r[4]), int(r[5]), int(r[6]), r[e + 2] if addressed else None, not r[e], bool(r[e + 1])) for r in rows]


def _chunks(listed: list[tuple], size: int | None = None) -> Iterable[list]:
    size = limits.CHUNK_ROWS if size is None else size
    chunk, rows = [], 0
    for b, _p, lc, rc in listed:
        if chunk and rows + max(lc, rc) > size:
            yield chunk
            chunk, rows = [], 0
        chunk.append(b)
        rows += max(lc, rc)
    if chunk:
        yield chunk


def rows_across(plan: DiffPlan, listed: list[tuple]) -> tuple[dict, list, list]:
    """Two connections: per chunk of differing buckets, (bucket, key, row hash) counts from each side."""
    d = plan.dialect
    ks = plan.keys_sql
    kcols = "".join(f"{k}, " for k in ks)
    out = dict.fromkeys(_COUNT_FIELDS, 0)
    lsample: list[tuple[int, int]] = []
    rsample: list[tuple[int, int]] = []
    unmatched: dict[tuple, tuple[int, int]] = {}  # (bucket, key..., row hash) -> (lc, rc), for the floats
    key_rows: dict[tuple, tuple[int, int]] = {}
    spark = d.costly_queries
    # Spark: the exact floats of the unmatched groups come with the group counts (see below)
    loose_rows: tuple[dict, dict] | None = ({}, {}) if spark and plan.floats else None
    for chunk in _chunks(listed, limits.SPARK_CHUNK_ROWS if spark else None):
        def fetch(side: Side, b: str, h: str, chunk=chunk) -> Counter:
            sql = (f"select {b} as b, {kcols}{h} as h, count(*) from {plan.src(side, in_list(b, chunk, d))} "
                   f"group by {', '.join(str(i + 1) for i in range(len(ks) + 2))}")
            return Counter({tuple(r[:-1]): int(r[-1]) for r in side.con.fetchall(sql)})

        if spark:
            lcount, rcount = _spark_group_counts(plan, None if len(chunk) == len(listed) > limits.MAX_LISTED_BUCKETS
                                                 else chunk, loose_rows)
        else:
            lcount, rcount = both_sides(plan, lambda: fetch(plan.left, plan.lb, plan.lh),
                                   lambda: fetch(plan.right, plan.rb, plan.rh))
        per_key: dict[tuple, list[int]] = {}
        for item in set(lcount) | set(rcount):
            lc, rc = lcount.get(item, 0), rcount.get(item, 0)
            if lc > rc:
                out["only_l"] += lc - rc
                if len(lsample) < limits.SAMPLE_ROWS:
                    lsample.append((int(item[0]), int(item[-1])))
            elif rc > lc:
                out["only_r"] += rc - lc
                out["copies_r"] += rc - lc if lc > 0 else 0
                if len(rsample) < limits.SAMPLE_ROWS:
                    rsample.append((int(item[0]), int(item[-1])))
            if lc != rc and plan.floats and len(unmatched) <= limits.MAX_TOLERANCE_ROWS:
                unmatched[item] = (lc, rc)
            if ks:
                acc = per_key.setdefault(item[:-1], [0, 0, 0])
                acc[0] += lc
                acc[1] += rc
                acc[2] |= lc != rc
        if plan.floats:
            key_rows.update({k: (v[0], v[1]) for k, v in per_key.items() if v[2]})
        for kl, kr, dif in per_key.values():
            out["keys_only_l"] += kr == 0
            out["keys_only_r"] += kl == 0
            out["changed_rows"] += bool(dif and kl == 1 and kr == 1)
            out["changed_keys"] += bool(dif and kl == kr)
            out["dup_l"] += kl > 1 and kl > kr
            out["dup_r"] += kr > 1 and kr > kl
    if spark and "spark_picks" in plan.extra:
        lsample, rsample = plan.extra["spark_picks"]  # the groups whose rows came with the counts
    if plan.floats and out["only_l"] and out["only_r"] and len(unmatched) <= limits.MAX_TOLERANCE_ROWS:
        loose = _loose_rows_across(plan, unmatched, key_rows, loose_rows)
        if loose is not None:
            lsample, rsample = (picks[:limits.SAMPLE_ROWS] for picks in pair_floats(plan, loose, out))
    return out, lsample, rsample


def _spark_group_counts(plan: DiffPlan, buckets: list | None,
                        loose_rows: tuple[dict, dict] | None = None) -> tuple[Counter, Counter]:
    """Spark: the (bucket, key, row hash) counts of both sides that `rows_across` needs, in one
    query, grouped and matched in Spark: only groups whose counts differ come back (keyed: every
    group of a key that has one), not every row of the differing buckets (each query costs ~0.3 s
    before any work, and rows cross into Python slowly). `buckets` None: every bucket.

    With float columns the groups are cut finer, by the hash of the exact columns and the exact
    floats, and `loose_rows` (left, right) receives, per unmatched group, its rows' (hash of the
    exact columns, floats) as `_loose_rows_across` reads them, so that it needs no query of its own.

    Every group comes with its rows' values (the compared columns are grouped on as well: equal
    within a group, but for a 64-bit hash collision); those of the first SAMPLE_ROWS unmatched
    groups of each side (by bucket and row hash) are kept in `plan.extra` for `_spark_samples`,
    which then needs no scan of its own. They are picked here rather than numbered in Spark, where
    a window over the unmatched groups costs a shuffle and a sort of its own.
    """
    d = plan.dialect
    ks = plan.keys_sql
    kcols = "".join(f", {k} as k{i}" for i, k in enumerate(ks))
    knames = "".join(f"k{i}, " for i in range(len(ks)))
    nf = len(plan.floats) if loose_rows is not None else 0
    fnames = "".join(f", f{i}" for i in range(nf))
    fine = f", nh{fnames}" if nf else ""
    # the sample rows' values; not where the sides' types differ (then read by `_fetch_sample`)
    inline = not plan.type_changes and bool(plan.columns)
    vnames = "".join(f", v{i}" for i in range(len(plan.columns))) if inline else ""
    vcols = "".join(f", {quote_id(c, d)} as v{i}" for i, c in enumerate(plan.columns)) if inline else ""
    fine += vnames
    parts = []
    for s, side, b, h, nh in ((0, plan.left, plan.lb, plan.lh, plan.lnh), (1, plan.right, plan.rb, plan.rh, plan.rnh)):
        fcols = (f", {nh} as nh" + "".join(f", {quote_id(c, d)} as f{i}" for i, (c, _t) in enumerate(plan.floats))) if nf else ""
        parts.append(f"select {s} as s, {b} as b{kcols}, {h} as h{fcols}{vcols} from "
                     f"{plan.src(side, in_list(b, buckets, d) if buckets is not None else None)}")
    group = f"b, {knames}h"
    grouped = (f"select {group}{fine}, sum(1 - s) as lc, sum(s) as rc from ({parts[0]} union all {parts[1]}) u "
               f"group by {group}{fine}")
    if nf:  # the counts of the (bucket, key, row hash) group (values of one group are one row)
        # partitioned by (bucket, key) and ordered by row hash rather than partitioned by all three:
        # the window over each key below then needs no second shuffle
        by = (f"partition by b{', ' + knames.rstrip(', ') if ks else ''} order by h "
              f"range between current row and current row")
        grouped = f"select *, sum(lc) over ({by}) as glc, sum(rc) over ({by}) as grc from ({grouped}) fg"
        glc, grc = "glc", "grc"
    else:
        glc, grc = "lc", "rc"
    if ks:
        sql = (f"select * from (select *, max(case when {glc} <> {grc} then 1 "
               f"else 0 end) over (partition by b, {knames.rstrip(', ')}) as dif from ({grouped}) g) x where dif = 1")
    else:
        sql = f"select * from ({grouped}) g where {glc} <> {grc}"
    sql = f"select {group}{fine}, lc, rc, {glc}, {grc} from ({sql}) y"
    lcount, rcount = Counter(), Counter()
    width = len(ks) + 2
    unmatched: tuple[list, list] = ([], [])  # per side: (bucket, row hash, the row's values)
    # Spark infers constraints through every alias: with each compared column aliased beside the
    # row hash over all of them, their number doubles per column (a 67-column model ran a 1 GB
    # driver out of memory while planning). They serve only to push filters down; this query has none.
    with plan.left.con.session_conf("spark.sql.constraintPropagation.enabled", "false"):
        found = plan.left.con.fetchall(sql)
    for r in found:
        item = tuple(r[:width])
        lc, rc, group_lc, group_rc = (int(v) for v in r[-4:])
        lcount[item] += lc
        rcount[item] += rc
        if inline and group_lc != group_rc and (lc if group_lc > group_rc else rc):
            row = tuple(r[-4 - len(plan.columns):-4])
            unmatched[0 if group_lc > group_rc else 1].append((int(item[0]), int(item[-1]), row))
        if nf and group_lc != group_rc:
            fine_row = (int(r[width]), tuple(r[width + 1:width + 1 + nf]))
            for side, n in ((0, lc), (1, rc)):
                if n:
                    loose_rows[side].setdefault(item, []).extend([fine_row] * n)
    if inline:
        picks: tuple[list, list] = plan.extra.setdefault("spark_picks", ([], []))
        values: dict = plan.extra.setdefault("spark_sample_rows", {})
        for side, found in enumerate(unmatched):
            for b, h, row in heapq.nsmallest(limits.SAMPLE_ROWS, found, key=lambda t: t[:2]):
                if (b, h) not in values.setdefault(side, {}) and len(picks[side]) < limits.SAMPLE_ROWS:
                    picks[side].append((b, h))
                values[side].setdefault((b, h), []).append(row)
    return +lcount, +rcount


def _loose_rows_across(plan: DiffPlan, unmatched: dict[tuple, tuple[int, int]],
                       key_rows: dict[tuple, tuple[int, int]],
                       fetched: tuple[dict, dict] | None = None) -> list[LooseRow] | None:
    """Two connections: the unmatched rows of `_loose_rows_same`, read per side and picked in Python
    (`fetched`: both sides' rows, read already)."""
    d, nk = plan.dialect, len(plan.key)
    kcols = "".join(f"{k}, " for k in plan.keys_sql)
    fcols = ", ".join(quote_id(c, d) for c, _t in plan.floats)
    width = nk + 3 + len(plan.floats)
    buckets = sorted({item[0] for item in unmatched})
    hashes = sorted({item[-1] for item in unmatched})

    def fetch(side: Side, b: str, h: str, nh: str) -> dict[tuple, list]:
        # only the rows of the unmatched groups: their buckets, then their row hashes
        sql = (f"select {b} as b, {kcols}{h} as h, {nh} as nh, {fcols}, count(*) "
               f"from {plan.src(side, in_list(b, buckets, d), in_list(h, hashes, d))} "
               f"group by {', '.join(str(i + 1) for i in range(width))}")
        found: dict[tuple, list] = {}
        for r in side.con.fetchall(sql):
            found.setdefault(tuple(r[:nk + 2]), []).extend([(int(r[nk + 2]), tuple(r[nk + 3:width]))] * int(r[-1]))
        return found

    if fetched is not None:
        lrows, rrows = fetched
    else:
        lrows, rrows = both_sides(plan, lambda: fetch(plan.left, plan.lb, plan.lh, plan.lnh),
                             lambda: fetch(plan.right, plan.rb, plan.rh, plan.rnh))
    out: list[LooseRow] = []
    for item, (lc, rc) in unmatched.items():
        s, found, n = (0, lrows, lc - rc) if lc > rc else (1, rrows, rc - lc)
        b, key, h = int(item[0]), tuple(item[1:-1]), int(item[-1])
        kl, kr = key_rows.get(item[:-1], (0, 0))
        # in float order, as the one-connection query numbers them
        for nh, floats in sorted(found.get(tuple(item), []), key=lambda x: [float_sort_key(v) for v in x[1]])[-n:]:
            out.append(LooseRow(s, b, h, key, nh, floats, lc, kl, kr))
        if len(out) > limits.MAX_TOLERANCE_ROWS:
            return None
    return out
