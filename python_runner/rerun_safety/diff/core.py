"""The entry points: `compare` two sides, `diff_relations` on one connection (the game day's)."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from sqlglot import exp

from ..warehouse.base import Connection, ident
from . import keyed, limits
from .buckets import differing_buckets_across, differing_buckets_same
from .floats import float_tolerance_of, round_float_sql
from .plan import DiffPlan, make_diff_plan, set_hash_buckets, set_range_buckets, checksum_totals
from .results import DiffError, DiffResult, Side, jsonable
from .rows import rows_across, rows_same
from .samples import batched_samples, fetch_sample, sample_columns, ordered
from .sql import (TEMPORAL_TYPES, hash_sql, in_list, int_sum, is_base_table, quote_id, side_source, columns_of_pair,
                  parse_where, row_hash, text_type)


def compare(left: Side, right: Side, *, key: Sequence[str] = (), ignore_columns: Sequence[str] = (),
            bucket_column: str | None = None, strict: bool = True,
            float_tolerance: float | None = None, whole_samples: bool = True) -> DiffResult:
    """Compare two sides; on one connection everything runs in the warehouse.

    Float columns are equal within `float_tolerance` (relative; None: DEFAULT_FLOAT_TOLERANCE,
    0: exact), see the module's docstring. The sample rows are whole rows; with `whole_samples`
    False, a changed key of a wide keyed table (bucketing 'key') is sampled as its key and the
    columns that differ, which that path has read already.
    """
    # One connection: both sides' checksums joined in the warehouse. Not on Spark, which computes
    # a CTE again for every reference to it: there each side's bucket checksums come back here
    # (at most MAX_BUCKETS rows) and are compared as with two connections.
    same = left.con is right.con and left.con.dialect.materialized_ctes
    if left.con.dialect != right.con.dialect:
        raise DiffError(f"cannot compare a {left.con.dialect} relation with a {right.con.dialect} relation")
    plan = make_diff_plan(left, right, key, ignore_columns, bucket_column, strict, float_tolerance)
    d = plan.dialect
    for con in {id(left.con): left.con, id(right.con): right.con}.values():
        for statement in d.diff_session_settings():
            con.execute(statement)
    if keyed.usable(plan, same):
        try:
            found = keyed.compare_keyed(plan, whole_samples)
        finally:
            _drop_temp_tables(plan)
        if found is not None:
            return DiffResult(keyed=True, type_changes=plan.type_changes, bucketing="key",
                              float_tolerance=plan.tolerance, **found)
    if plan.mode in ("hash", "rowhash"):
        # Identical tables cost one checksum scan: a plain count(*), sum(row hash) of both sides
        # first. Where the key has an integer range, range buckets go first instead and decide
        # identity in that one pass: on PostgreSQL they are as cheap as the plain scan (a parallel
        # aggregate); on DuckDB their range (from its metadata, ~1 ms for 10M rows) lets the
        # aggregate use a perfect hash table (buckets.py), 1.1-1.3x the plain scan, and a
        # difference then costs no second full pass (10M rows, 1,000 differences: 1.25 s -> 0.9 s).
        # (Spark reads the key's range with the totals.)
        tried = not d.costly_queries
        ranged = set_range_buckets(plan) if tried else False
        if not ranged:
            lt, rt, ls, rs = checksum_totals(plan, same)
            plan.counts = (lt, rt)
            if lt == rt and ls == rs and not plan.schema_message:
                return DiffResult(lt, rt, True, keyed=bool(plan.key), type_changes=plan.type_changes,
                                  bucketing=plan.mode, buckets=1, float_tolerance=plan.tolerance)
            if tried or not set_range_buckets(plan):
                set_hash_buckets(plan)
    lt, rt, nj, listed = (differing_buckets_same if same else differing_buckets_across)(plan)
    result = dict(reference_rows=lt, rows=rt, keyed=bool(plan.key), schema_message=plan.schema_message,
                  type_changes=plan.type_changes, bucketing=plan.mode, buckets=plan.buckets, buckets_differing=nj,
                  float_tolerance=plan.tolerance)
    if nj == 0:
        return DiffResult(identical=not plan.schema_message, **result)
    if plan.mode == "column":
        parts = sorted((("NULL" if p is None else str(p)), lc, rc) for _b, p, lc, rc in listed)
        result["differing_partitions"] = tuple(parts[:limits.MAX_PARTITIONS])
    try:
        return _row_level(plan, same, nj, listed, result)
    finally:
        _drop_temp_tables(plan)


def _drop_temp_tables(plan: DiffPlan) -> None:
    for temp in plan.extra.pop("temp_tables", []):
        plan.left.con.execute_temp(f"drop table if exists {temp.sql(dialect=plan.dialect)}")
    plan.extra.pop("keyed_table", None)


def _row_level(plan, same: bool, nj: int, listed: list[tuple], result: dict) -> DiffResult:
    """The rows behind the differing buckets: counts, samples, differing columns."""
    d = plan.dialect
    # the differing buckets, listed; None: read every row (too many to list, or most of them: then
    # a filter costs more than the rows it leaves out)
    within = [b for b, *_ in listed] if nj <= limits.MAX_LISTED_BUCKETS and nj * 2 <= plan.buckets else None
    if same:
        counts, lpick, rpick = rows_same(plan, within)
    else:
        counts, lpick, rpick = rows_across(plan, listed)  # every differing bucket is listed
    sample = batched_samples(plan, lpick, rpick) if d.costly_queries else None
    if sample is None:
        sample = (fetch_sample(plan, plan.right, plan.rb, plan.rh, rpick, "extra")
                  + fetch_sample(plan, plan.left, plan.lb, plan.lh, lpick, "missing"))
    if plan.key and counts["changed_rows"]:
        sample = [*sample, *_other_halves(plan, sample)]
    if same and plan.key and counts["changed_rows"]:
        # the columns that differ in every changed key, not only in the sampled ones
        changed = _changed_columns(plan, within)
    else:
        changed = sample_columns(sample, plan.key, plan.columns, dict(plan.floats))
    result.update(
        identical=False, extra_rows=counts["only_r"], missing_rows=counts["only_l"], extra_copies=counts["copies_r"],
        sample=tuple(sample), differing_columns=tuple(changed))
    if plan.key:
        result.update(duplicate_keys=counts["dup_r"], reference_duplicate_keys=counts["dup_l"],
                      missing_keys=counts["keys_only_l"], extra_keys=counts["keys_only_r"],
                      changed_rows=counts["changed_rows"], changed_keys=counts["changed_keys"])
    else:
        result["changed_rows"] = min(counts["only_r"] - counts["copies_r"], counts["only_l"])
    if not plan.schema_message and not counts["only_l"] and not counts["only_r"]:
        # every row found its pair: floats within the tolerance that rounded apart (or a 64-bit
        # checksum collision between buckets)
        result.update(identical=True, differing_partitions=(), differing_columns=())
    return DiffResult(**result)


def diff_relations(con: Connection, reference: tuple[str, ...], current: tuple[str, ...], *,
                   key: tuple[str, ...] = (), ignore_columns: tuple[str, ...] = (),
                   partition_column: str | None = None, column_detail: bool = False,
                   where: str | exp.Expression | None = None, bucket_column: str | None = None,
                   float_tolerance: float | None = None, whole_samples: bool = False) -> DiffResult:
    """Compare `current` with `reference` ((schema, table) or (catalog, schema, table)) on one connection.

    A key that is not a column of both sides is ignored (the comparison is then unkeyed).
    `partition_column` adds rows per partition of both sides; `column_detail` lists the columns
    whose values differ anywhere (one more scan). Float columns are equal within
    `float_tolerance` (relative; None: DEFAULT_FLOAT_TOLERANCE, 0: exact). A sampled changed key
    of a wide keyed table is its key and the columns that differ, unless `whole_samples`.
    """
    d = con.dialect
    cond = parse_where(where, d) if isinstance(where, str) else where
    left, right = Side(con, _table(reference), cond), Side(con, _table(current), cond)
    result = compare(left, right, key=key, ignore_columns=ignore_columns, bucket_column=bucket_column,
                     strict=False, float_tolerance=float_tolerance, whole_samples=whole_samples)
    if result.identical:
        return result
    extra: dict = {}
    search = column_detail or (result.changed_rows and not result.keyed)
    if search or partition_column:  # both sides' columns in one catalog query, read once
        lcols, rcols = columns_of_pair(con, left.table, right.table)
    if search:
        ltypes, rtypes = dict(lcols), dict(rcols)
        cols = [c for c in ltypes if c.lower() not in {i.lower() for i in ignore_columns} and c in rtypes]
        loose = {c: t for c in cols if ltypes[c].lower() == rtypes[c].lower()
                 and (t := float_tolerance_of(ltypes[c], result.float_tolerance)) is not None}
        # a column's sum of hashes misses values that moved between rows (ties numbered the other way
        # round): the keyed comparison's own columns are kept beside it
        found = set(_differing_columns(con, left, right, cols, loose)) | set(result.differing_columns)
        extra["differing_columns"] = tuple(c for c in cols if c in found)
    if partition_column:
        types = {c.lower(): t.lower() for c, t in rcols}
        part = _partition_expr(partition_column, types, d)
        if part:
            extra["partition_column"] = partition_column
            extra["partitions"] = tuple(_partitions(con, left, right, part))
    return replace(result, **extra) if extra else result


def _table(parts: tuple[str, ...]) -> exp.Table:
    if len(parts) == 3:
        return exp.Table(this=ident(parts[2]), db=ident(parts[1]), catalog=ident(parts[0]))
    schema, name = parts
    return exp.Table(this=ident(name), db=ident(schema) if schema else None)


def _other_halves(plan, sample: list[dict]) -> list[dict]:
    """The other side's row of each sampled key that the sample holds on one side only, where that
    side has exactly one row of the key and it differs: a changed key is then shown as a pair."""
    d = plan.dialect
    out: list[dict] = []
    cols = ", ".join(quote_id(c, d) for c in plan.columns)
    for label, side, mine in (("missing", plan.left, "extra"), ("extra", plan.right, "missing")):
        have = {tuple(r.get(k) for k in plan.key) for r in sample if r["_diff"] == label}
        want = {tuple(r.get(k) for k in plan.key): r for r in sample if r["_diff"] == mine}
        want = {k: r for k, r in want.items() if k not in have and all(isinstance(v, (int, str)) for v in k)}
        if not want:
            continue
        cond = exp.or_(*[exp.and_(*[exp.column(k, quoted=True).eq(exp.convert(v)) for k, v in zip(plan.key, values)])
                         for values in want])
        rows = side.con.fetch_dicts(f"select {cols} from {plan.src(side, cond.sql(dialect=d))} "
                                    f"limit {2 * len(want) + 1}")
        found: dict[tuple, list[dict]] = {}
        for r in rows:
            row = {c: jsonable(r[c]) for c in plan.columns}
            found.setdefault(tuple(row.get(k) for k in plan.key), []).append(row)
        mine_out = [{"_diff": label, **rs[0]} for k, rs in found.items()
                    if len(rs) == 1 and k in want and rs[0] != {c: want[k].get(c) for c in plan.columns}]
        out += ordered(mine_out, plan.key, plan.columns)
    return out


def _differing_columns(con: Connection, left: Side, right: Side, columns: list[str],
                       floats: dict[str, float]) -> list[str]:
    """Columns whose sum of value hashes differs (floats rounded as in the row hash): one pass
    over each side, whatever the number of columns."""
    d = con.dialect
    if not columns:
        return []
    sums = []
    for i, c in enumerate(columns):
        hc = hash_sql([round_float_sql(quote_id(c, d), d, floats[c])], d) if c in floats else row_hash([c], d)
        sums.append(f"{int_sum(hc, d)} as s{i}")
    row = con.fetchone(f"select * from (select {', '.join(sums)} from {side_source(left, d)}) rs_l "
                       f"cross join (select {', '.join(sums)} from {side_source(right, d)}) rs_r")
    n = len(columns)
    return [c for i, c in enumerate(columns) if row[i] != row[n + i]]


def _changed_columns(plan, buckets: list[int] | None) -> list[str]:
    """The non-key columns that differ between the two rows of a changed key, over every changed
    key: one keyed join of the differing buckets' rows (both sides on one connection). DuckDB and
    Spark keep the joined pairs whose row hashes differ; PostgreSQL compares every pair's columns,
    which costs less there than hashing every row again (a wide table: 0.85 s against 2.1 s)."""
    d = plan.dialect
    cols = [c for c in plan.columns if c not in plan.key]
    if not cols:
        return []
    exprs = plan.extra["column_exprs"]
    keys = ", ".join(f"{k} as k{i}" for i, k in enumerate(plan.keys_sql))
    hashed = d.cheap_row_hash

    listed = plan.extra.get("unmatched_keys")  # every changed key is among them (rows.rows_same)
    # PostgreSQL: a row of every unmatched group, by address (rows.rows_same), when few
    tids = plan.extra.get("unmatched_tids") if d.row_addresses else None

    def side(s: Side, b: str, h: str, which: int, by_address: bool) -> str:
        cond = (d.at_addresses(tids[which]) if by_address and tids else
                None if plan.extra.get("narrowed") else  # rows.py: only the unmatched keys' rows
                in_list(plan.keys_sql[0], listed, d) if listed is not None else
                in_list(b, buckets, d) if buckets is not None else None)
        values = ", ".join(f"{exprs[c][which]} as c{j}" for j, c in enumerate(cols))
        return f"select {keys}, {f'{h} as h, ' if hashed else ''}{values} from {plan.src(s, cond)}"

    def differs(j: int) -> str:
        return d.is_distinct(f"l.c{j}", f"r.c{j}")

    on = " and ".join(f"l.k{i} = r.k{i}" for i in range(len(plan.key))) + (" and l.h <> r.h" if hashed else "")
    flags = ", ".join(f"max(case when {differs(j)} then 1 else 0 end) as f{j}" for j in range(len(cols)))
    if tids and all(tids) and all(is_base_table(s) for s in (plan.left, plan.right)):
        # the rows at those addresses, unless one moved since (a concurrent update): then a scan
        row = plan.left.con.fetchone(
            f"with l as ({side(plan.left, plan.lb, plan.lh, 0, True)}), "
            f"r as ({side(plan.right, plan.rb, plan.rh, 1, True)}) "
            f"select {flags}, (select count(*) from l), (select count(*) from r) from l join r on {on}")
        if row and (row[-2], row[-1]) == (len(tids[0]), len(tids[1])):
            return [c for j, c in enumerate(cols) if row[j]]
    row = plan.left.con.fetchone(f"select {flags} from ({side(plan.left, plan.lb, plan.lh, 0, False)}) l join "
                                 f"({side(plan.right, plan.rb, plan.rh, 1, False)}) r on {on}")
    return [c for j, c in enumerate(cols) if row and row[j]]


def _partition_expr(column: str, types: dict[str, str], dialect: str) -> str | None:
    ctype = types.get(column.lower())
    if ctype is None:
        return None
    q = quote_id(column, dialect)
    if any(t in ctype for t in TEMPORAL_TYPES):
        return f"cast(cast({q} as date) as {text_type(dialect)})"
    return f"cast({q} as {text_type(dialect)})"


def _partitions(con: Connection, left: Side, right: Side, part: str) -> list[tuple[str, int, int]]:
    d = con.dialect
    rows = con.fetchall(
        f"select p, sum(1 - rs_side), sum(rs_side) from ("
        f"select 0 as rs_side, {part} as p from {side_source(left, d)} union all "
        f"select 1 as rs_side, {part} as p from {side_source(right, d)}) u group by p order by p limit {limits.MAX_PARTITIONS}")
    return [("NULL" if p is None else str(p), int(r), int(c)) for p, r, c in rows]
