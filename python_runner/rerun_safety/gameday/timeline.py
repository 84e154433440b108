"""The replayed time line: when each input's rows arrive (event or load time, late rows), the
batches cut from the inputs' time ranges and the rows each brings, and the inputs the data shows
were loaded at once."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..errors import ConfigError, folded, first_line

from ..project import SourceTable
from ..warehouse.dialects import dialect_for
from ..warehouse.base import SNAPSHOT_SCHEMA, Connection, snapshot_table, table, ts_literal
from .scenarios import Batch, Timeline, make_timeline
from .plan import time_column_hint

if TYPE_CHECKING:
    from .plan import Plan


def _sets_window(src: SourceTable) -> bool:
    """Whether an input's time column says when what it records happened (or it was declared to arrive
    by it): not a load stamp alone."""
    return bool(src.kind) or not _load_stamp_only(src)


def _loaded_at_once(plan: Plan, timeline: Timeline, ranges: dict[str, tuple[dt.datetime, dt.datetime]],
                    ) -> tuple[Timeline, list[str], dict[str, tuple[str, str]]]:
    """An input most of whose rows were loaded in one batch before the replayed ones was loaded at
    once, not logged over time: a reference table a connector synced a while ago is *static*;
    one whose rows keep being re-synced after that (a dimension updated in place, which carries only
    its last sync time) is *current state*. Both are present in full at every build. Replaying them
    by their time column would leave the first build without them, or without the keys updated
    since (a false loss of those keys). A declared kind (rerun_safety.yml) is left as it is. The timeline
    without them, the inputs found static, and their kinds."""
    own = dict(timeline.own_bounds)
    static, kinds = [], {}
    for src in list(plan.inputs):
        counts = plan.facts.arrivals.get(src.unique_id, ())
        total = sum(counts)
        if src.kind or not total:
            continue
        first = ranges.get(src.unique_id, (None, None))[0]
        if first is not None and first >= timeline.bounds[-1] and _load_stamp_only(src):
            # every row synced after the last event the other inputs hold: rows re-synced in place since
            # (a connector's dimension), the state they are in, not rows arriving in the last batch
            static.append(src.unique_id)
            end = timeline.bounds[-1]
            kinds[src.unique_id] = _synced_apart(src, f"starts after the other inputs' replayed batches "
                                                      f"({first:%Y-%m-%d %H:%M}, the batches end {end:%Y-%m-%d %H:%M})",
                                                 "by that time")
            continue
        top, start = plan.facts.bulk.get(src.unique_id, (0, None))
        since = sum(counts[1:])
        if src.unique_id in own and counts[-1] * 2 >= total:
            top, start, since = counts[-1], own[src.unique_id][-2], 0
        elif top * 2 < total or start is None:
            if src.unique_id in own and _load_stamp_only(src):
                # rows a connector last synced long before the other inputs' batches, over many days: the
                # state those rows are in, present in full at every build (replayed over their own last
                # batches they would be missing from the first build, and the models joining them would
                # lose those keys)
                static.append(src.unique_id)
                kinds[src.unique_id] = _synced_apart(src, "ends before the other inputs' replayed batches "
                                                          f"({own[src.unique_id][-1]:%Y-%m-%d %H:%M})",
                                                     "over its own last batches")
            continue
        static.append(src.unique_id)
        share = f"{top * 100 // total}% of its rows were loaded in one {timeline.batch.label} ({start:%Y-%m-%d %H:%M})"
        kinds[src.unique_id] = (
            ("static", f"{share}, before the replayed batches: a table loaded at once") if not since else
            ("current_state", f"{share}, before the replayed batches, and {since} since: a table loaded at once "
                              "and updated in place (declare it `inputs: {name}: loaded_log` in rerun_safety.yml "
                              "if its later rows are new ones)".replace("{name}", src.name)))
    return replace(timeline, own_bounds=tuple((i, b) for i, b in timeline.own_bounds if i not in static)), static, kinds


def _synced_apart(src: SourceTable, where: str, how: str) -> tuple[str, str]:
    """The kind and reason of a load-stamped input synced apart from the replayed batches: current state."""
    return "current_state", (f"its only time column is a load time ({src.time_column}), which {where}: rows last "
                             f"synced then, not arriving (declare it `inputs: {src.name}: loaded_log` in "
                             f"rerun_safety.yml to replay it {how})")


# column names connectors stamp a row's load or last sync with (Fivetran, Airbyte, Stitch/Singer, dlt, ...)
_LOAD_STAMP = re.compile(r"^_?(fivetran_synced|airbyte_\w*(?:emitted|extracted|loaded)_at|sdc_\w+_at|dlt_load_id|"
                         r"(?:etl_)?loaded_at|synced_at|_?ingested_at|load_ts|batched_at)$", re.IGNORECASE)


def _load_stamp_only(src: SourceTable) -> bool:
    """Whether an input's time column says when its rows were loaded, not when what they record happened:
    declared as dbt's `loaded_at_field` (a freshness column), or named as connectors name a sync stamp."""
    if src.load_column:
        return False  # an event time beside its load time: an event log
    return src.time_origin == "loaded_at_field" or bool(src.time_column and _LOAD_STAMP.match(src.time_column))


def _fullest_batch(con: Connection, src: SourceTable, plan: Plan, batch: Batch,
                   before: dt.datetime) -> tuple[int, dt.datetime | None]:
    """The rows of the input's fullest batch before `before` (by arrival time), and its start."""
    when = arrival_expr(src, plan, con.dialect, late=False)
    if batch.months:
        bucket = exp.Add(this=exp.Mul(this=exp.Year(this=when), expression=exp.Literal.number(12)),
                         expression=exp.Month(this=when))
    else:
        assert batch.delta is not None
        bucket = exp.Floor(this=exp.Div(this=exp.TimeToUnix(this=when),
                                        expression=exp.Literal.number(int(batch.delta.total_seconds()))))
    per = (exp.select(exp.func("count", exp.Star()).as_("rs_n"), exp.func("min", when).as_("rs_at"))
           .from_(table(SNAPSHOT_SCHEMA, snapshot_table(src)).as_("rs_row"))
           .where(when < ts_literal(before)).group_by(bucket))
    q = exp.select("rs_n", "rs_at").from_(per.subquery("rs_b")).order_by(exp.column("rs_n").desc()).limit(1)
    row = con.fetchone(q)
    if not row or row[0] is None:
        return 0, None
    return int(row[0]), batch.floor(_to_datetime(row[1], src.name) or before)


def _to_datetime(value: Any, where: str) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{where} holds values that are not timestamps (e.g. {str(value)[:40]!r})") from None


def time_expr(src: SourceTable) -> exp.Expression:
    return exp.cast(exp.column(src.time_column, quoted=True), exp.DataType.build("timestamp"))


def row_hash_predicate(dialect: str, modulus: int, below: int) -> exp.Expression:
    """A deterministic share (below/modulus) of the rows of a table aliased `rs_row`, independent
    of time order (parallel writers commit in any order; late rows are any rows)."""
    return dialect_for(dialect).row_share(modulus, below)


def _delay(batch: Batch) -> exp.Expression:
    if batch.months:
        return exp.Interval(this=exp.Literal.string(str(batch.months)), unit=exp.Var(this="MONTH"))
    assert batch.delta is not None
    return exp.Interval(this=exp.Literal.string(str(int(batch.delta.total_seconds()))), unit=exp.Var(this="SECOND"))


def late_delay(plan: "Plan") -> Batch:
    assert plan.facts.timeline is not None
    if plan.late.by is not None:
        return plan.late.by
    b = plan.facts.timeline.batch
    return Batch(f"2 x {b.label}", b.delta * 2 if b.delta else None, b.months * 2)


def arrival_expr(src: SourceTable, plan: "Plan", dialect: str, late: bool = True) -> exp.Expression:
    """When a row arrives: its load time where the input declares one (in every scenario: a row
    is never visible before it was loaded); else its event time, in the `late` scenario delayed
    for a deterministic share of the rows."""
    col = time_expr(src)
    if src.load_column:
        load = exp.cast(exp.column(src.load_column, quoted=True), exp.DataType.build("timestamp"))
        return exp.func("coalesce", load, col)
    if not late or not plan.late.fraction:
        return col
    share = row_hash_predicate(dialect, 10_000, round(plan.late.fraction * 10_000))
    return exp.Case(ifs=[exp.If(this=share, true=exp.Add(this=col, expression=_delay(late_delay(plan))))],
                    default=col)


def arrives_out_of_order(src: SourceTable, late: bool) -> bool:
    """Whether rows of this input arrive by something other than their event time."""
    return bool(src.load_column) or late


def late_superset(src: SourceTable, plan: "Plan", b0: dt.datetime) -> exp.Expression:
    """Rows that may arrive at or after b0 in the `late` scenario (a cheap condition without the
    row hash, for the DELETE of the reset)."""
    col = time_expr(src)
    if src.load_column:
        load = exp.cast(exp.column(src.load_column, quoted=True), exp.DataType.build("timestamp"))
        return exp.or_(col >= ts_literal(b0), load >= ts_literal(b0))
    return exp.Add(this=col, expression=_delay(late_delay(plan))) >= ts_literal(b0)


def cut_slice(con: Connection, plan: Plan, since: dt.datetime | None, until: dt.datetime | None) -> None:
    """--since/--until: keep only the slice [since, until) of each timed input, in the sandbox's
    live table and in the copy rows arrive from."""
    conds = []
    for src in plan.inputs:
        col = time_expr(src)
        if since is not None:
            conds.append(col < ts_literal(since))
        if until is not None:
            conds.append(col >= ts_literal(until))
        if not conds:
            return
        outside = exp.or_(*conds)
        con.delete_rows(table(src.schema, src.identifier), outside)
        con.delete_rows(table(SNAPSHOT_SCHEMA, snapshot_table(src)), outside)
        conds = []


SENTINEL_LOW = dt.datetime(1000, 1, 1)
SENTINEL_HIGH = dt.datetime(9000, 1, 1)


def batch_condition(col: exp.Expression, bounds: tuple[dt.datetime, ...], i: int) -> exp.Expression:
    """Rows of replayed batch i; the last batch also takes whatever lies beyond the timeline."""
    lower = col >= ts_literal(bounds[i - 1])
    return lower if i == len(bounds) - 1 else exp.and_(lower, col < ts_literal(bounds[i]))


def _batch_index(col: exp.Expression, bounds: tuple[dt.datetime, ...]) -> exp.Expression:
    """0 before the first replayed batch, i for batch i, the last batch for anything beyond."""
    ifs = [exp.If(this=col < ts_literal(b), true=exp.Literal.number(i)) for i, b in enumerate(bounds[:-1])]
    return exp.Case(ifs=ifs, default=exp.Literal.number(len(bounds) - 1))


def _count_where(cond: exp.Expression) -> exp.Expression:
    return exp.Filter(this=exp.func("count", exp.Star()), expression=exp.Where(this=cond))


def _choose_half_committed(plan: Plan, timeline: Timeline) -> Timeline:
    """The batch the partial scenario commits in halves: one where as many inputs as possible bring
    rows in both halves (a half-committed batch whose rows all fall in one half leaves nothing
    behind), the middle one among equals. Sparse inputs otherwise leave that scenario with nothing
    to test."""
    n = timeline.steps
    middle = n // 2 + 1

    def score(i: int) -> tuple[int, int]:
        return sum(1 for s in plan.inputs if min(plan.halves_in_batch([s], i)) > 0), -abs(i - middle)

    return replace(timeline, partial_at=max(range(1, n + 1), key=score))


def _input_columns(con: Connection, inputs: list[tuple[str, str, str, str]]) -> dict[str, list[tuple[str, str]]]:
    """Input name -> its columns (name, type) as the copy of the inputs holds them (kind, name, schema,
    identifier each), for the error that no time column is named. A lookup that fails names none (the
    error stands without them)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for _, name, schema, identifier in inputs:
        try:
            out[name] = con.columns(schema, identifier)
        except Exception:  # noqa: BLE001 - a hint only
            continue
    return out


def plan_timeline(con: Connection, plan: Plan, batch: Batch, steps: int) -> tuple[Plan, list[str]]:
    """The replayed batches from the inputs' time ranges, and the rows each batch brings: the plan that
    replays them (inputs the data shows loaded at once made static), and the run notes."""
    ranges = _time_ranges(con, plan)
    if not ranges and not plan.inputs:
        _no_time_column(con, plan)
    if not ranges:
        names = ", ".join(f"{'seed' if s.seed else 'source'} {s.name}" for s in plan.inputs)
        raise ConfigError(f"every timed input is empty, so there is nothing to replay (timed inputs: {names})")
    # the window is where things happened: a load stamp of a table synced in place (a connector's
    # dimensions, re-synced months after the events) does not move it while an input has an event time
    timed = {src.unique_id: src for src in plan.inputs}
    window = {uid: r for uid, r in ranges.items() if _sets_window(timed[uid])} or ranges
    tmin = min(lo for lo, _ in window.values())
    tmax = max(hi for _, hi in window.values())
    timeline = make_timeline(tmin, tmax, steps, batch, ranges)
    plan = plan.learned(timeline=timeline)
    counts: dict[str, dict] = {"arrivals": {}, "first_halves": {}, "late_rows": {}, "late_batches": {}, "bulk": {}}
    for src in plan.inputs:
        _count_arrivals(con, plan, src, timeline, counts)
    plan = plan.learned(**counts)
    timeline, static, kinds = _loaded_at_once(plan, timeline, ranges)
    plan = plan.with_static(static, kinds)
    timeline = _choose_half_committed(plan, timeline)
    notes = []
    if timeline.steps < steps:
        notes.append(f"--steps {steps} asked for more batches than the data holds: {timeline.steps} "
                     f"{batch.label} batches replayed")
    for input_id, bounds in timeline.own_bounds:
        name = plan.project.input(input_id).name
        notes.append(f"{name} ends before the replayed batches of the other inputs: its own last "
                     f"{timeline.steps} batches ({bounds[0]} .. {bounds[-1]}) arrive instead")
    return plan.scheduled(timeline), notes


def _time_ranges(con: Connection, plan: Plan) -> dict[str, tuple[dt.datetime, dt.datetime]]:
    """Each timed input's first and last time (inputs without rows left out)."""
    ranges: dict[str, tuple[dt.datetime, dt.datetime]] = {}
    for src in plan.inputs:
        col = time_expr(src)
        # Sentinels ('infinity', 9999-12-31, 0001-01-01) stay in the data but not in the timeline: an
        # early one is in the first build, a late one arrives with the last batch.
        plain = exp.and_(col > ts_literal(SENTINEL_LOW), col < ts_literal(SENTINEL_HIGH))
        q = exp.select(exp.func("min", col), exp.func("max", col)).from_(
            table(SNAPSHOT_SCHEMA, snapshot_table(src))).where(plain)
        kind = "seed" if src.seed else "source"
        where = f"{kind} {src.name}: time column '{src.time_column}'"
        try:
            lo, hi = con.fetchone(q)
        except Exception as err:  # noqa: BLE001 - a cast error: the time column is not a timestamp
            hint = (f"; name a timestamp column of it in rerun_safety.yml (time_columns: {{{src.name}: <column>}}), "
                    "which overrides dbt's configs") if not src.seed else ""
            raise ConfigError(f"{where} cannot be read as a timestamp: "
                              f"{first_line(err).rstrip(';')}{hint}") from None
        lo, hi = _to_datetime(lo, where), _to_datetime(hi, where)
        if lo is not None:
            ranges[src.unique_id] = (lo, hi)
    return ranges


def _no_time_column(con: Connection, plan: Plan) -> None:
    """Stop (ConfigError) a plan with no timed input, naming the inputs' date or time columns (and the
    `time_columns` line, filled in, for an input with exactly one timestamp column)."""
    timed = {s.unique_id for s in plan.inputs}
    untimed = [*(("source", s.name, s.schema, s.identifier) for s in plan.static_sources),
               *(("seed", m.name, m.schema, m.identifier) for m in plan.seeds if m.unique_id not in timed)]
    columns = _input_columns(con, untimed)
    hints = {name: time_column_hint(name, columns.get(name, [])) for _, name, _, _ in untimed}
    # one line however many inputs: those a hint fills in first (what to write), then the others
    named = [f"{kind} {name}" + (f" ({hints[name]})" if hints[name] else "")
             for kind, name, _, _ in sorted(untimed, key=lambda u: not hints[u[1]])]
    static = folded(named, 5)
    failures = [f"{name} (dbt: {message[:120]})" for name, message in plan.facts.compile_failures.items()]
    raise ConfigError("no input of the selected models has a time column, so no rows can arrive batch by "
                      "batch and there is nothing to replay" + (
                          f" ({len(named)} input(s) without one: {static})" if static else " (they read no source or seed)") +
                      ": name the column rows arrive by, `config: {event_time: <column>}` on a source or "
                      "seed, or `time_columns: {<name>: <column>}` in rerun_safety.yml" + (
                          "; models that did not compile, so what they read by name is not known: " + folded(failures, 3)
                          if failures else ""))


def _count_arrivals(con: Connection, plan: Plan, src: SourceTable, timeline: Timeline, out: dict[str, dict]) -> None:
    """The rows of an input before the replayed batches and in each, the half of each the partial
    scenario commits first, and the rows arriving after a later batch than their event's: one query,
    into `out` (Facts' fields by name)."""
    b = timeline.bounds_for(src.unique_id)
    col = time_expr(src)
    when = arrival_expr(src, plan, con.dialect, late=False)
    counts = [_count_where(when < ts_literal(b[0]))]
    counts += [_count_where(batch_condition(when, b, i)) for i in range(1, len(b))]
    # the half of each batch the partial scenario commits first (gameday._apply: the same predicate)
    half = row_hash_predicate(con.dialect, 2, 1)
    counts += [_count_where(exp.and_(batch_condition(when, b, i), half)) for i in range(1, len(b))]
    # rows that arrive (by load time, or in the `late` scenario) after a later batch than their event's
    behind = exp.Sub(this=_batch_index(arrival_expr(src, plan, con.dialect), b), expression=_batch_index(col, b))
    counts.append(_count_where(behind > exp.Literal.number(0)))
    counts.append(exp.func("max", behind))  # the most batches a row arrives after its event's
    row = con.fetchone(exp.select(*counts).from_(table(SNAPSHOT_SCHEMA, snapshot_table(src)).as_("rs_row")))
    values = [int(x or 0) for x in row[:-2]]
    out["arrivals"][src.unique_id] = tuple(values[:len(b)])
    out["first_halves"][src.unique_id] = (0, *values[len(b):])
    out["late_rows"][src.unique_id] = int(row[-2] or 0)
    out["late_batches"][src.unique_id] = max(int(row[-1] or 0), 0)
    if not src.kind and values[0] * 2 >= sum(values[:len(b)]):
        out["bulk"][src.unique_id] = _fullest_batch(con, src, plan, timeline.batch, b[0])
