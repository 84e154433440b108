"""The sample rows a diff shows, and the columns that differ between a sampled pair."""

from __future__ import annotations

from . import limits
from .floats import floats_close
from .plan import DiffPlan
from .results import Side, jsonable
from .sql import TID, in_list, quote_id


def ordered(rows: list[dict], key, columns) -> list[dict]:
    """Sampled rows in a fixed order (by the key, then by every column), whatever order the engine
    returned them in: a report is the same at every run of the same data."""
    def value(v) -> tuple:
        return (v is None, type(v).__name__, v if v is not None else 0)

    return sorted(rows, key=lambda r: tuple(value(r.get(c)) for c in (*key, *columns)))


def batched_samples(plan: DiffPlan, lpick: list[tuple], rpick: list[tuple]) -> list[dict] | None:
    """Spark: both sides' sample rows, as the group counts brought them, else in one query; None where
    the sides' column types differ."""
    d = plan.dialect
    if plan.type_changes or not (lpick or rpick):
        return None
    found = plan.extra.get("spark_sample_rows", {})
    if all((p[0], p[1]) in found.get(s, {}) for s, picks in ((0, lpick), (1, rpick)) for p in picks):
        # every picked group's rows came with the group counts
        out = []
        for s, label, picks in ((1, "extra", rpick), (0, "missing", lpick)):
            rows = [r for p in picks for r in found[s][(p[0], p[1])]][:limits.SAMPLE_ROWS]
            out += ordered([{"_diff": label, **{c: jsonable(v) for c, v in zip(plan.columns, r)}} for r in rows],
                           plan.key, plan.columns)
        return out
    cols = ", ".join(quote_id(c, d) for c in plan.columns)
    parts = []
    for s, side, b, h, picks in ((1, plan.right, plan.rb, plan.rh, rpick), (0, plan.left, plan.lb, plan.lh, lpick)):
        if picks:
            cond = in_list(b, {p[0] for p in picks}, d)
            parts.append(f"select * from (select distinct {s} as s, {cols} from "
                         f"{plan.src(side, cond, in_list(h, {p[1] for p in picks}, d))} limit {limits.SAMPLE_ROWS}) x{s}")
    rows = plan.left.con.fetchall(" union all ".join(parts))
    out = []
    for s, label in ((1, "extra"), (0, "missing")):
        out += ordered([{"_diff": label, **{c: jsonable(v) for c, v in zip(plan.columns, r[1:])}}
                        for r in rows if r[0] == s], plan.key, plan.columns)
    return out


def fetch_sample(plan: DiffPlan, side: Side, b: str, h: str, picks: list[tuple], label: str) -> list[dict]:
    """Rows of `side` with the picked (bucket, row hash); (bucket, hash, ctid) picks are read by address."""
    if not picks:
        return []
    d = plan.dialect
    cols = ", ".join(quote_id(c, d) for c in plan.columns) or "*"
    bucket, hashed = in_list(b, {p[0] for p in picks}, d), in_list(h, {p[1] for p in picks}, d)
    tids = [p[2] for p in picks if len(p) > 2 and p[2] is not None and TID.match(p[2])]
    # One row per row hash (json has no `=`, so no DISTINCT over the columns on PostgreSQL).
    distinct = f"distinct on ({h})" if d.distinct_on else "distinct"
    rows = []
    if d.row_addresses and len(tids) == len(picks):
        # A row that moved since (a concurrent update) is not found there, or fails the bucket
        # and hash conditions: then the scan below finds the rows.
        addr = d.at_addresses(tids)
        rows = side.con.fetch_dicts(f"select {distinct} {cols} from {plan.src(side, f'{addr} and {bucket}', hashed)} "
                                    f"limit {limits.SAMPLE_ROWS}")
    if len(rows) < len({p[:2] for p in picks}):
        rows = side.con.fetch_dicts(f"select {distinct} {cols} from {plan.src(side, bucket, hashed)} "
                                    f"limit {limits.SAMPLE_ROWS}")
    return ordered([{"_diff": label, **{k: jsonable(v) for k, v in r.items()}} for r in rows], plan.key, plan.columns)


def sample_columns(sample: list[dict], key: tuple[str, ...], columns: list[str],
                    floats: dict[str, float] | None = None) -> list[str]:
    """Columns that differ between the sampled left and right rows of the same key (floats beyond tolerance)."""
    floats = floats or {}
    if not key:
        return []
    left = {tuple(r.get(k) for k in key): r for r in sample if r["_diff"] == "missing"}
    found: set[str] = set()
    for r in sample:
        other = left.get(tuple(r.get(k) for k in key)) if r["_diff"] == "extra" else None
        if other:
            found.update(c for c in columns if (not floats_close(r.get(c), other.get(c), floats[c]) if c in floats
                                                else r.get(c) != other.get(c)))
    return [c for c in columns if c in found]
