"""A wide keyed table: its differing keys found by one join of both sides, their columns compared here.

On a wide table the row hash is most of what a scan costs. The bucket path hashes every row of a
differing bucket a second time; when the differences are spread over every bucket (1,000 changed
rows among 200,000, one per bucket) that is a second full pass, and the column search a third.
Here each side is hashed once, in groups of columns: one join on the key keeps the keys whose row
hashes differ, with each group's hash of both sides. Only the columns of the groups that differ
are then read, and only for those keys, and compared here (floats within their tolerance, as the
pairing of the bucket path does).

It answers only when the answer is complete: every key has one row a side (on DuckDB the join's
rows with a left key number the left side's rows, and so on the right; a key on one side only
shows once per row), at most MAX_LISTED_KEYS keys differ, and none is NULL. Otherwise (duplicate
keys, many differences) the bucket path runs as before.
"""

from __future__ import annotations

import math
import uuid
from typing import NamedTuple

from sqlglot import exp

from ..warehouse.base import ident
from . import limits
from .floats import floats_close
from .plan import DiffPlan
from .results import jsonable
from .sql import TID, INTEGER_TYPES, is_base_table, quote_id, rows_joined, rows_of_keys


class _Key(NamedTuple):
    """A key whose rows differ: on which sides it has a row, their addresses (PostgreSQL), and the
    groups of columns whose hashes differ (bit i: group i)."""
    key: object
    left: bool
    right: bool
    ltid: str | None
    rtid: str | None
    groups: int


def usable(plan: DiffPlan, same: bool) -> bool:
    """Keyed on one column, many columns, the same columns and types on both sides, one connection:
    DuckDB with an integer key (its rows read back by key), PostgreSQL base tables (by address)."""
    if not (same and plan.mode == "hash" and len(plan.key) == 1 and len(plan.columns) >= limits.WIDE_COLUMNS
            and not plan.type_changes and not plan.schema_message):
        return False
    key_type = plan.extra["types"][plan.key[0]]
    if plan.dialect.keyed_comparison == "key_join":
        return key_type in INTEGER_TYPES
    # a key PostgreSQL can group by with `=` (not json, not a type without a hash opclass)
    return (plan.dialect.keyed_comparison == "address" and (key_type in INTEGER_TYPES or key_type in _PG_KEY_TYPES)
            and is_base_table(plan.left) and is_base_table(plan.right))


_PG_KEY_TYPES = ("text", "character varying", "character", "uuid", "date", "numeric",
                 "timestamp without time zone", "timestamp with time zone")


def _groups(plan: DiffPlan) -> list[list[str]]:
    cols = [c for c in plan.columns if c not in plan.key]
    if plan.dialect.keyed_comparison == "address":  # one hash per row: its groups are read back by address
        return [cols]
    n = max(1, math.ceil(len(cols) / limits.WIDE_GROUP_COLUMNS))
    size = math.ceil(len(cols) / n)
    return [cols[i:i + size] for i in range(0, len(cols), size)]


def _group_hash(plan: DiffPlan, cols: list[str]) -> str:
    """Values as they are, floats too (a float that moved within its tolerance is compared here)."""
    d, types = plan.dialect, plan.extra["types"]
    return d.group_hash([quote_id(c, d) for c in cols], [(quote_id(c, d), types[c]) for c in cols])


def _row_hash(plan: DiffPlan, n: int) -> str:
    """DuckDB: the row's hash from its key and its groups' hashes (the join compares it)."""
    return plan.dialect.row_hash(["k"] + [f"g{i}" for i in range(n)])


def compare_keyed(plan: DiffPlan, whole_samples: bool = True) -> dict | None:
    """The row-level fields of the DiffResult, or None: the bucket path must answer. With
    `whole_samples` False a sampled changed key shows its key and the differing columns, as read for
    the comparison (no further read: reading five whole rows of 150 columns back costs a fifth of
    a checksum scan of both sides)."""
    groups = _groups(plan)
    found = (_keys_by_address if plan.dialect.keyed_comparison == "address" else _keys_by_key_join)(plan, groups)
    if found is None:
        return None
    found, ltotal, rtotal = found
    changed = {k.key: k for k in found if k.left and k.right}
    # the columns of the groups that differ, of the keys on both sides
    differ = 0
    for k in changed.values():
        differ |= k.groups
    wanted = [c for i, g in enumerate(groups) if differ >> i & 1 for c in g]
    values = _read(plan, changed, wanted) if changed else ({}, {})
    floats = dict(plan.floats)
    keys = list(changed)
    lrows = [values[0].get(k) for k in keys]
    rrows = [values[1].get(k) for k in keys]
    if None in lrows or None in rrows:
        return None  # a row moved or went since the join (a concurrent write)
    differing: set[str] = set()
    moved = [False] * len(keys)
    for c, lcol, rcol in zip(wanted, zip(*lrows), zip(*rrows)):
        if lcol == rcol:
            continue
        for i, (a, b) in enumerate(zip(lcol, rcol)):
            if not (a == b or _same(a, b, floats.get(c))):
                differing.add(c)
                moved[i] = True
    for k, m in zip(keys, moved):
        if not m:
            del changed[k]  # floats within their tolerance
    missing = sorted((k for k in found if not k.right), key=lambda k: k.key)
    extra = sorted((k for k in found if not k.left), key=lambda k: k.key)
    if not (missing or extra or changed):
        return {"identical": True, "reference_rows": ltotal, "rows": rtotal}
    shown = [c for c in wanted if c in differing]
    sample = _sample(plan, missing, extra, changed,
                     None if whole_samples else (shown, [wanted.index(c) for c in shown], values))
    nc = len(changed)
    return {
        "identical": False, "reference_rows": ltotal, "rows": rtotal,
        "extra_rows": len(extra) + nc, "missing_rows": len(missing) + nc, "extra_copies": 0,
        "missing_keys": len(missing), "extra_keys": len(extra), "changed_rows": nc, "changed_keys": nc,
        "duplicate_keys": 0, "reference_duplicate_keys": 0,
        "differing_columns": tuple(c for c in plan.columns if c in differing), "sample": tuple(sample)}


def _keys_by_key_join(plan: DiffPlan, groups: list[list[str]]) -> tuple[list[_Key], int, int] | None:
    """DuckDB: both sides' key, group hashes and row hash, joined on the key (1.3x a checksum scan
    of both sides, against 1.9x for the same grouped by key); the join's rows with a left and with a
    right key counted in the same aggregate that lists the differing keys."""
    n = len(groups)
    # both sides' keys and hashes are held for the join: not for a big table (the buckets hold less)
    counts = plan.left.con.fetchone(f"select (select count(*) from {plan.src(plan.left)}), "
                                    f"(select count(*) from {plan.src(plan.right)})")
    ltotal, rtotal = int(counts[0]), int(counts[1])
    if max(ltotal, rtotal) > limits.WIDE_MAX_ROWS:
        return None
    gsel = ", ".join(f"{_group_hash(plan, g)} as g{i}" for i, g in enumerate(groups))
    gnames = ", ".join(f"g{i}" for i in range(n))

    def side(s) -> str:
        inner = f"select {plan.keys_sql[0]} as k, {gsel} from {plan.src(s)}"
        return f"select k, {gnames}, {_row_hash(plan, n)} as h from ({inner}) x"

    # the groups whose hashes differ, as bits of one integer
    mask = " + ".join(f"(l.g{i} is distinct from r.g{i})::bigint * {1 << i}" for i in range(n))
    # The join carries the key and row hash alone (its hash table holds less: 8% off the pass); one
    # aggregate over it counts its rows with a left and with a right key and lists the differing
    # ones (5% less than a LIMIT over the join and the sides' counts and hash sums apart). The
    # differing keys' group hashes are then looked up in the two sides.
    sql = (f"with l as materialized ({side(plan.left)}), r as materialized ({side(plan.right)}), "
           f"d as materialized (select count(l.k) as lc, count(r.k) as rc, "
           f"list({{'k': coalesce(l.k, r.k), 'a': l.h, 'b': r.h}}) filter (where l.h is distinct from r.h) as x "
           f"from (select k, h from l) l full join (select k, h from r) r on l.k = r.k), "
           f"u as (select unnest(x[1:{limits.MAX_LISTED_KEYS + 1}], recursive := true) from d) "
           f"select 0 as kind, u.k, u.a, u.b, null as lc, null as rc, null as nx, {mask} as m from u "
           f"left join l on l.k = u.k and l.h = u.a left join r on r.k = u.k and r.h = u.b union all "
           f"select 1, null, null, null, lc, rc, coalesce(len(x), 0), null from d")
    # Kept in a temporary table (dropped by `compare`): the columns of the changed keys are read back
    # by a join with it, 0.013 s for both sides against 0.022 s with the keys written out as a
    # list (DuckDB parses a list of 1,000 numbers in 3.6 ms, each side).
    con = plan.left.con
    temp = exp.Table(this=ident(f"rs_keyed_{uuid.uuid4().hex[:12]}"), db=ident("main"), catalog=ident("temp"))
    con.execute_temp(con.sql(f"create temp table {temp.sql(dialect='duckdb')} as {sql}"))
    plan.extra.setdefault("temp_tables", []).append(temp)
    plan.extra["keyed_table"] = temp.sql(dialect="duckdb")
    rows = con.fetchall(f"select * from {plan.extra['keyed_table']}")
    lc, rc, listed = (int(v) for v in next(r for r in rows if r[0] == 1)[4:7])
    found = [r for r in rows if r[0] == 0]
    keys = [r[1] for r in found]
    if listed > limits.MAX_LISTED_KEYS or None in keys or len(set(keys)) < len(keys):
        return None
    # Every key once a side: the join's rows with a left key are the left side's rows (a key with
    # two rows left and one right shows twice there; a NULL key, never), and so on the right. A key
    # on one side only shows as many times as it has rows, and is listed: twice is seen above.
    if (lc, rc) != (ltotal, rtotal):
        return None
    return [_Key(r[1], r[2] is not None, r[3] is not None, None, None, r[7]) for r in found], ltotal, rtotal


def _keys_by_address(plan: DiffPlan, groups: list[list[str]]) -> tuple[list[_Key], int, int] | None:
    """PostgreSQL: both sides' group hashes aggregated by key in one parallel aggregate (a join there
    runs in one process): per key its rows on each side, one row's address and the XOR of each
    group's hashes. A key with more than one row on a side shows, so nothing needs to balance."""
    n = len(groups)
    gsel = ", ".join(f"{_group_hash(plan, g)} as g{i}" for i, g in enumerate(groups))
    branches = " union all ".join(f"select {s} as s, {plan.keys_sql[0]} as k, {plan.dialect.address_text()} as t, {gsel} "
                                  f"from {plan.src(side)}" for s, side in ((0, plan.left), (1, plan.right)))
    aggs = "".join(f", bit_xor(g{i}) filter (where s = {s}) as {'lr'[s]}{i}" for s in (0, 1) for i in range(n))
    differ = " or ".join(f"l{i} is distinct from r{i}" for i in range(n))
    lg = ", ".join(f"l{i}" for i in range(n))
    rg = ", ".join(f"r{i}" for i in range(n))
    # the groups materialized (their aggregate still runs in parallel inside), then the differing
    # ones and the totals read from them: 6% less than a window over every group
    nulls = ", ".join(["null"] * (2 * n))
    sql = (f"with g as materialized (select k, count(*) filter (where s = 0) as lc, count(*) filter (where s = 1) as rc, "
           f"min(t) filter (where s = 0) as tl, min(t) filter (where s = 1) as tr{aggs} from ({branches}) u group by k) "
           f"select * from (select 0 as kind, k, tl, tr, lc, rc, {lg}, {rg} from g where lc <> 1 or rc <> 1 or {differ} "
           f"limit {limits.MAX_LISTED_KEYS + 1}) d union all "
           f"select 1, null, null, null, coalesce(sum(lc), 0), coalesce(sum(rc), 0), {nulls} from g")
    found = plan.left.con.fetchall(sql)
    totals = next(r for r in found if r[0] == 1)
    ltotal, rtotal = int(totals[4]), int(totals[5])
    rows = [r[1:] for r in found if r[0] == 0]
    if len(rows) > limits.MAX_LISTED_KEYS or any(r[0] is None or r[3] > 1 or r[4] > 1 for r in rows):
        return None
    if not all(TID.match(t) for r in rows for t in r[1:3] if t is not None):
        return None
    return ([_Key(r[0], bool(r[3]), bool(r[4]), r[1], r[2],
                  sum(1 << i for i in range(n) if r[5 + i] != r[5 + n + i])) for r in rows], ltotal, rtotal)


def _same(a, b, tolerance: float | None) -> bool:
    if tolerance is not None:
        return floats_close(a, b, tolerance)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN equals NaN, as the engines compare them
    return a == b


def _rows_of(plan: DiffPlan, which: int, keys: list[_Key], cols: list[str]) -> str:
    """SELECT of `cols` (and the side's number first) from the rows of these keys on one side: by
    address on PostgreSQL; on DuckDB joined to the keys (0.010 s for 1,000 keys of 200,000 rows,
    against 0.015 s as an IN filter, 0.043 s as a short constant list on 150 columns)."""
    d = plan.dialect
    side = (plan.left, plan.right)[which]
    sel = ", ".join(quote_id(c, d) for c in cols)
    if d.row_addresses:
        rows = plan.src(side, d.at_addresses([k.rtid if which else k.ltid for k in keys]))
    else:
        rows = rows_of_keys(plan.src(side), plan.keys_sql[0], [k.key for k in keys])
    return f"select {which} as rs_side, {sel} from {rows}"


def _read(plan: DiffPlan, keys: dict, cols: list[str]) -> tuple[dict, dict]:
    """Per side, key -> the values of `cols`, for `keys`, the keys on both sides (both sides in one
    query; on DuckDB joined to the differing keys as the join kept them)."""
    out: tuple[dict, dict] = ({}, {})
    if "keyed_table" in plan.extra:
        sel = ", ".join(quote_id(c, plan.dialect) for c in [plan.key[0], *cols])
        both = f"select k as rs_k from {plan.extra['keyed_table']} where kind = 0 and a is not null and b is not null"
        sql = " union all ".join(f"select {which} as rs_side, {sel} from {rows_joined(plan.src(side), plan.keys_sql[0], both)}"
                                 for which, side in ((0, plan.left), (1, plan.right)))
    else:
        sql = " union all ".join(_rows_of(plan, which, list(keys.values()), [plan.key[0], *cols]) for which in (0, 1))
    found = plan.left.con.fetchall(sql)
    for r in found:
        out[r[0]][r[1]] = r[2:]
    return out


def _sample(plan: DiffPlan, missing: list, extra: list, changed: dict, read: tuple | None = None) -> list[dict]:
    """The first SAMPLE_ROWS rows by key of each side that the other lacks, and the other side's
    row of a changed key sampled on one side: whole rows, as the bucket path shows them. With
    `read` (the differing columns, their places in the values read, the values per side) a changed
    key's rows are its key and those columns, from what was read."""
    by_key = lambda k: k.key  # noqa: E731
    picks = (sorted([*extra, *changed.values()], key=by_key)[:limits.SAMPLE_ROWS],
             sorted([*missing, *changed.values()], key=by_key)[:limits.SAMPLE_ROWS])
    shown = ({k.key for k in picks[0]}, {k.key for k in picks[1]})
    # the other halves: changed keys sampled on one side only
    need_left = [k for k in picks[0] if k.key in changed and k.key not in shown[1]]
    need_right = [k for k in picks[1] if k.key in changed and k.key not in shown[0]]
    got: tuple[dict, dict] = ({}, {})
    sides = ((0, [*picks[1], *need_left]), (1, [*picks[0], *need_right]))
    if read is not None:  # a changed key's rows from what was read, the rest read whole below
        cols, places, values = read
        for which, rows in sides:
            for k in (k.key for k in rows if k.key in changed):
                row = values[which][k]
                got[which][k] = {plan.key[0]: jsonable(k), **{c: jsonable(row[i]) for c, i in zip(cols, places)}}
    parts = [_rows_of(plan, which, todo, plan.columns) for which, rows in sides
             if (todo := [k for k in rows if k.key not in got[which]])]
    if parts:
        for r in plan.left.con.fetch_dicts(" union all ".join(parts)):
            got[r["rs_side"]][r[plan.key[0]]] = {c: jsonable(r[c]) for c in plan.columns}
    out = []
    for label, which, rows in (("extra", 1, picks[0]), ("missing", 0, picks[1]),
                               ("missing", 0, need_left), ("extra", 1, need_right)):
        out += [{"_diff": label, **got[which][k.key]} for k in rows if k.key in got[which]]
    return out
