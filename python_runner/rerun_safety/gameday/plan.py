"""What a game day will do: the models it builds and judges, the timed inputs, the schedule.

`make_plan` needs only the parsed project; `plan_timeline` reads the snapshot once (each timed
input's time range and how many of its rows each replayed batch brings).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlglot import exp

from ..dbt_invoke import selection_terms, selects_by_state
from ..errors import ConfigError, NothingToCheck, first_line
from ..project import Model, Project, SourceTable
from ..sandbox.base import SNAPSHOT_SCHEMA, Connection, snapshot_table, table, ts_literal
from .scenarios import Batch, Timeline, make_timeline


@dataclass(frozen=True)
class Lateness:
    """How rows arrive in the `late` scenario where an input declares no load time: a fixed,
    deterministic share of its rows (chosen by a hash of the row) arrives `by` later."""

    fraction: float = 0.05
    by: Batch | None = None  # None: two batches of the schedule


@dataclass
class Plan:
    project: Project
    judged: list[Model]  # in topological order
    build: list[Model]  # every model dbt builds (judged + ephemeral/other upstream)
    seeds: list[Model]
    inputs: list[SourceTable]  # timed sources and timed seeds: rows arrive batch by batch
    static_sources: list[SourceTable]
    timeline: Timeline | None
    ref_names: dict[str, str]  # model unique_id -> table name in the reference schema
    stateful: list[Model] = field(default_factory=list)  # incremental models, the tables and views they read
    reference_rows: dict[str, int] = field(default_factory=dict)
    # input id -> rows before the first replayed batch, then rows of each replayed batch
    arrivals: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # input id -> rows of each replayed batch (index 0 unused) in the half the partial scenario commits first
    first_halves: dict[str, tuple[int, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # about the whole run
    exercised: dict[str, bool] = field(default_factory=dict)  # model -> its inputs received new rows
    empty_first: dict[str, str] = field(default_factory=dict)  # model -> why its first build saw no rows
    time_columns: dict[str, str] = field(default_factory=dict)  # model -> its output's time column
    late: Lateness = field(default_factory=Lateness)
    late_rows: dict[str, int] = field(default_factory=dict)  # input id -> rows arriving after a later batch
    # input id -> (rows of its fullest batch before the replayed ones, that batch's start): a bulk load
    bulk: dict[str, tuple[int, dt.datetime | None]] = field(default_factory=dict)
    side: Any = None  # side_effects.SidePlan, once the reference has run
    side_found: dict[str, list] = field(default_factory=dict)  # scenario -> side relations that differ
    kinds: dict[str, tuple[str, str]] = field(default_factory=dict)  # input id -> (kind, why)
    # model -> its output columns gathered by an aggregate without ORDER BY (see order_only)
    unordered: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # static sources no model reads, copied because a hook names them (may be absent: see gameday)
    from_hooks: set[str] = field(default_factory=set)
    # built models whose output may depend on the order of their inputs' rows (rebuild.order_sensitive)
    order_sensitive: set[str] = field(default_factory=set)

    @property
    def timed_sources(self) -> list[SourceTable]:
        return [s for s in self.inputs if not s.seed]

    def parents_in_judged(self, m: Model) -> tuple[str, ...]:
        judged = {j.unique_id for j in self.judged}
        out: list[str] = []
        stack = list(m.parents)
        seen: set[str] = set()
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            if p in judged:
                out.append(p)
            elif p in self.project.models:
                stack.extend(self.project.models[p].parents)  # look through ephemeral models
        return tuple(sorted(out))

    def inputs_of(self, m: Model) -> list[SourceTable]:
        ids = self.project.timed_inputs_of([m.unique_id])
        return [s for s in self.inputs if s.unique_id in ids]

    def exercise(self, m: Model) -> tuple[bool, str]:
        """Whether the model's inputs received new rows in the replayed batches, and a note
        when its first build ran on no input rows at all."""
        assert self.timeline is not None
        inputs = self.inputs_of(m)
        if not inputs:
            return False, ""
        arrived = sum(sum(self.arrivals.get(s.unique_id, (0,))[1:]) for s in inputs)
        note = ""
        if all(self.arrivals.get(s.unique_id, (0,))[0] == 0 for s in inputs):
            firsts = ", ".join(f"{s.name} before {self.timeline.bounds_for(s.unique_id)[0]}" for s in inputs)
            note = (f"its first build ran on empty input (no rows of {firsts}): a watermark read from an "
                    "empty table is NULL, so a model that filters on it may never load; replay more of the "
                    "history (--steps) or check the first run's filter")
        return arrived > 0, note


    def judge_exercise(self) -> None:
        for m in self.judged:
            self.exercised[m.unique_id], note = self.exercise(m)
            if note:
                self.empty_first[m.unique_id] = note

    def input_relations(self) -> list[tuple[str, str]]:
        """(schema, name) of every input table in a sandbox: sources and seeds."""
        out = [(s.schema, s.identifier) for s in [*self.inputs, *self.static_sources]]
        out += [(m.schema, m.identifier) for m in self.seeds]
        return list(dict.fromkeys(out))

    def make_static(self, input_ids) -> None:
        """Move inputs to the static ones (found from the data here, and in a worker process, which
        plans from the manifest alone, from the parent's finding)."""
        for src in [s for s in self.inputs if s.unique_id in set(input_ids)]:
            self.inputs.remove(src)
            self.static_sources.append(src)

    def add_read_by_name(self, found) -> None:
        """Inputs the compiled SQL reads by name (by_name.ByName): copied like sources, planned by
        their config (a declared source's time column; an undeclared relation is static)."""
        for src in found.inputs:
            if src.unique_id in self.kinds:  # added already (a worker runs many payloads)
                continue
            self.project.sources.setdefault(src.unique_id, src)
            for uid in found.readers[src.unique_id]:
                self.project.read_by_name.setdefault(uid, set()).add(src.unique_id)
            self.kinds[src.unique_id] = _input_kind(src, self.project.time_columns_origin)
            (self.inputs if self.kinds[src.unique_id][0] in ("event_log", "loaded_log") else
             self.static_sources).append(src)

    def input_notes(self) -> list[str]:
        """Every input the built models read, by kind, with why."""
        read = {s for m in self.build for s in self.project.sources_of(m.unique_id)} | {m.unique_id for m in self.seeds}
        groups: dict[str, list[str]] = {}
        for uid, (kind, why) in sorted(self.kinds.items(), key=lambda kv: self.project.input(kv[0]).name):
            if uid in read:
                groups.setdefault(kind, []).append(f"{self.project.input(uid).name} ({why})")
        text = {
            "event_log": "event logs (rows arrive batch by batch by their time column)",
            "loaded_log": "loaded logs (rows arrive batch by batch by their load time)",
            "static": ("static inputs (present in full at every build; no rows arrive in them during a replay, so "
                       "a model that reads only them is judged on its rebuilds, never on new rows)"),
            "current_state": ("current-state inputs (one row per key, updated in place: present in full at every "
                              "build; their history cannot be replayed)"),
        }
        return [f"{text[k]}: {'; '.join(groups[k])}" for k in text if k in groups]

    def rows_in_batch(self, inputs: list[SourceTable], i: int) -> int:
        """Rows the inputs bring in replayed batch i (1-based)."""
        return sum(counts[i] for s in inputs if len(counts := self.arrivals.get(s.unique_id, ())) > i)

    def halves_in_batch(self, inputs: list[SourceTable], i: int) -> tuple[int, int]:
        """Rows the inputs bring in replayed batch i in the half committed first and in the rest."""
        first = sum(h[i] for s in inputs if len(h := self.first_halves.get(s.unique_id, ())) > i)
        return first, self.rows_in_batch(inputs, i) - first

    def unexercised(self, m: Model, scenario: str) -> str:
        """Why a scenario's decisive step touched none of the model's input rows ('' when it did):
        the half-committed batch, the backfilled batch, the late rows. A model that saw no new
        rows there was not tested by that scenario, whatever its output."""
        assert self.timeline is not None
        inputs = self.inputs_of(m)
        if not inputs or scenario in ("replay", "rerun", "determinism", "reference"):
            return ""
        names = ", ".join(s.name for s in inputs)
        if scenario == "partial":
            i = self.timeline.half_committed
            first, rest = self.halves_in_batch(inputs, i)
            if not first or not rest:
                return (f"the half-committed batch (batch {i}) held {first + rest} row(s) of its inputs ({names}), "
                        f"{first} in the half committed first and {rest} in the rest: no half of it could be "
                        "left behind")
        elif scenario == "backfill":
            if not self.rows_in_batch(inputs, 1):
                return f"the backfilled batch (batch 1) held no rows of its inputs ({names})"
        elif scenario == "late":
            if not sum(self.late_rows.get(s.unique_id, 0) for s in inputs):
                return f"no row of its inputs ({names}) arrived after a later batch than its event time"
        return ""

    def drop_absent_hook_sources(self, engine: Any) -> None:
        """A declared source that only a hook names (no model reads it) is copied if the target holds
        it; if not (the hook creates it, or the name is a coincidence), there is nothing to copy."""
        if not self.from_hooks or not hasattr(engine, "user_relations"):
            return
        present = engine.user_relations()
        absent = [s for s in self.static_sources if s.unique_id in self.from_hooks
                  and (s.schema.lower(), s.identifier.lower()) not in present]
        if absent:
            self.static_sources = [s for s in self.static_sources if s not in absent]
            self.notes.append("sources a hook names, not in the target (nothing to copy): "
                              + ", ".join(s.name for s in absent))

    def decisive_rows(self, m: Model, scenario: str) -> int | None:
        """Rows of the model's timed inputs in the scenario's decisive step: every replayed batch
        (replay, rerun), the half-committed batch (partial), batch 1 (backfill), the rows arriving
        late (late). None for reference and determinism, and for a model with no timed input."""
        inputs = self.inputs_of(m) if self.timeline is not None else []
        if not inputs:
            return None
        if scenario in ("replay", "rerun"):
            return sum(self.rows_in_batch(inputs, i) for i in range(1, self.timeline.steps + 1))
        if scenario == "partial":
            return self.rows_in_batch(inputs, self.timeline.half_committed)
        if scenario == "backfill":
            return self.rows_in_batch(inputs, 1)
        if scenario == "late":
            return sum(self.late_rows.get(s.unique_id, 0) for s in inputs)
        return None

    def untested_reason(self, m: Model) -> str:
        inputs = self.inputs_of(m)
        if not inputs:
            return ("no timed input feeds it (no source or seed with a time column upstream), so no new rows "
                    "arrived in any replayed batch")
        names = ", ".join(s.name for s in inputs)
        return f"its inputs ({names}) received no new rows in any replayed batch, so its incremental runs changed nothing"


def partition_column(m: Model) -> str | None:
    pk = m.partition_key
    if isinstance(pk, dict) and pk.get("field"):
        return str(pk["field"])
    if isinstance(pk, str):
        return pk
    if isinstance(pk, (list, tuple)) and pk:
        return str(pk[0])
    return m.event_time


def _missing_time_columns(project: Project, build: list[Model]) -> None:
    """Every incremental model needs new rows to arrive: report every source that lacks a time
    column (one line each, with the fix), all at once."""
    missing: dict[str, list[str]] = {}
    for m in build:
        if not m.incremental:  # a snapshot may read a current-state table only
            continue
        ids = {m.unique_id} | project.ancestors([m.unique_id])
        sources = {s for u in ids for s in project.models[u].sources}
        if project.timed_inputs_of([m.unique_id]) or not sources:
            continue
        for s in sorted(sources):
            missing.setdefault(s, []).append(m.name)
    if not missing:
        return
    lines = [f"{len(missing)} source(s) read by incremental models have no time column, so no rows can arrive "
             "batch by batch:"]
    for s, models in sorted(missing.items(), key=lambda kv: project.sources[kv[0]].name):
        name = project.sources[s].name
        lines.append(f"  source {name} (read by {', '.join(sorted(set(models)))}): set `config: {{event_time: "
                     f"<column>}}` on it in its sources .yml, or `time_columns: {{{name}: <column>}}` in "
                     "rerun_safety.yml")
    raise ConfigError("\n".join(lines))


def make_plan(project: Project, select: tuple[str, ...], exclude: tuple[str, ...], state: str | None = None) -> Plan:
    selected = project.select(select, exclude, state)
    terms = selection_terms(select, exclude)
    by_state = selects_by_state(select, state)
    if not selected:
        if by_state:
            raise NothingToCheck(f"the selection matches no model ({terms})")
        raise ConfigError(f"the selection matches no model ({terms})" if (select or exclude)
                          else "the project has no models")
    if not any(project.models[u].keeps_state for u in selected):
        if by_state:
            raise NothingToCheck(f"no incremental model among the {len(selected)} selected ({terms}): "
                                 "nothing to replay")
        raise ConfigError("no incremental model is selected: the game day replays incremental models "
                          "(select at least one, e.g. --select config.materialized:incremental+)")
    build_ids = set(selected) | project.ancestors(selected)
    order = project.topo_order(build_ids)
    build = [project.models[u] for u in order if project.models[u].resource_type in ("model", "snapshot")]
    seeds = [project.models[u] for u in order if project.models[u].resource_type == "seed"]
    judged = [m for m in build if m.judged]
    source_ids = sorted({s for m in build for s in m.sources})
    sources = [project.sources[s] for s in source_ids]
    hooked = _hook_sources(project, build, set(source_ids))
    sources += hooked
    attached = _attached_databases(project.target_output)
    in_place = [s for s in sources if s.database and s.database.lower() in attached]
    sources = [s for s in sources if s not in in_place]
    timed_seeds = [project.seed_inputs[s.unique_id] for s in seeds if s.unique_id in project.seed_inputs]
    kinds = {s.unique_id: _input_kind(s, project.time_columns_origin) for s in [*sources, *timed_seeds]}
    timed = [s for s in [*sources, *timed_seeds] if kinds[s.unique_id][0] in ("event_log", "loaded_log")]
    _missing_time_columns(project, build)
    incremental = [m.unique_id for m in build if m.keeps_state]
    feeding = project.ancestors(incremental)
    # A view that an incremental model reads is made again at every run too, as a user's every run
    # makes it (its SQL may hold the invocation's id or start time; and dbt-postgres drops dependent
    # views, CASCADE, when it rebuilds a table under them).
    rebuilt = ("table", "external", "view")
    stateful = [m for m in build if m.keeps_state or (m.unique_id in feeding and m.materialized in rebuilt)]
    plan = Plan(project, judged, build, seeds, timed, [s for s in sources if s not in timed], None,
                {m.unique_id: f"m{i}" for i, m in enumerate(judged)}, stateful, kinds=kinds,
                from_hooks={s.unique_id for s in hooked})
    empty = sorted(project.models[u].name for u in selected if project.models[u].empty)
    if empty:
        plan.notes.append("models with no SQL, which dbt builds nothing for (not judged): " + ", ".join(empty))
    if in_place:
        names = ", ".join(f"{s.database}.{s.schema}.{s.identifier}" for s in in_place)
        plan.notes.append(f"inputs in databases the profile attaches: {names}; read where they are, read-only, "
                          "in every sandbox; no rows arrive in them during a replay")
    return plan


def _input_kind(src: SourceTable, config_origin: str) -> tuple[str, str]:
    """(kind, why) of an input from its config; the data may still make a log static (see
    _loaded_at_once)."""
    if src.kind:
        return src.kind, f"declared in {config_origin}"
    if not src.time_column:
        return "static", "no time column"
    if src.load_column:
        return "event_log", f"by the load time {src.load_column}, beside the event time {src.time_column}"
    if src.time_origin == "loaded_at_field":
        return "loaded_log", f"by {src.time_column}, from loaded_at_field"
    return "event_log", f"by {src.time_column}, from {src.time_origin}"


def _loaded_at_once(plan: Plan, timeline: Timeline) -> Timeline:
    """An input most of whose rows were loaded in one batch before the replayed ones was loaded at
    once, not logged over time: a reference table a connector synced a while ago is *static*;
    one whose rows keep being re-synced after that (a dimension updated in place, which carries only
    its last sync time) is *current state*. Both are present in full at every build. Replaying them
    by their time column would leave the first build without them, or without the keys updated
    since (a false loss of those keys). A declared kind (rerun_safety.yml) is left as it is."""
    own = dict(timeline.own_bounds)
    static = []
    for src in list(plan.inputs):
        counts = plan.arrivals.get(src.unique_id, ())
        total = sum(counts)
        if src.kind or not total:
            continue
        top, start = plan.bulk.get(src.unique_id, (0, None))
        since = sum(counts[1:])
        if src.unique_id in own and counts[-1] * 2 >= total:
            top, start, since = counts[-1], own[src.unique_id][-2], 0
        elif top * 2 < total or start is None:
            continue
        static.append(src.unique_id)
        share = f"{top * 100 // total}% of its rows were loaded in one {timeline.batch.label} ({start:%Y-%m-%d %H:%M})"
        plan.kinds[src.unique_id] = (
            ("static", f"{share}, before the replayed batches: a table loaded at once") if not since else
            ("current_state", f"{share}, before the replayed batches, and {since} since: a table loaded at once "
                              "and updated in place (declare it `inputs: {name}: loaded_log` in rerun_safety.yml "
                              "if its later rows are new ones)".replace("{name}", src.name)))
    plan.make_static(static)
    return replace(timeline, own_bounds=tuple((i, b) for i, b in timeline.own_bounds if i not in static))


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


def _attached_databases(target_output: dict) -> set[str]:
    """The names of the databases a dbt-duckdb profile attaches (`attach:`; an entry without an
    alias is named after its file): the sandboxes attach them read-only and read them in place."""
    out = set()
    for entry in target_output.get("attach") or ():
        if isinstance(entry, dict) and entry.get("path"):
            alias = entry.get("alias") or Path(str(entry["path"]).split("?")[0]).stem
            out.add(str(alias).lower())
    return out


def _hook_sources(project: Project, build: list[Model], known: set[str]) -> list[SourceTable]:
    """Declared sources that no model reads but a hook names (an audit table written by a
    post-hook): copied into the sandboxes too, so that the hook writes there."""
    from .side_effects import _mentions, hook_texts

    hooks, project_hooks = hook_texts(project.manifest, [m.unique_id for m in build])
    text = "\n".join([*hooks.values(), project_hooks])
    if not text.strip():
        return []
    # a file read through external_location is not a table a hook can write
    return [s for uid, s in sorted(project.sources.items())
            if uid not in known and not s.time_column and not s.external and _mentions(text, s.identifier)]


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


def row_order(dialect: str) -> exp.Expression:
    """An order of the rows of a table aliased `rs_row` unrelated to how they were written: a hash
    of the whole row (DuckDB, PostgreSQL)."""
    if dialect == "duckdb":
        return exp.func("hash", exp.column("rs_row"))
    return exp.func("md5", exp.cast(exp.column("rs_row"), exp.DataType.build("text")))


def row_hash_predicate(dialect: str, modulus: int, below: int) -> exp.Expression:
    """A deterministic share (below/modulus) of the rows of a table aliased `rs_row`, independent
    of time order (parallel writers commit in any order; late rows are any rows)."""
    if dialect == "duckdb":
        return exp.condition(f"hash(rs_row) % {int(modulus)} < {int(below)}")
    if dialect == "spark":
        return exp.condition(f"pmod(xxhash64(rs_row.*), {int(modulus)}) < {int(below)}", dialect="spark")
    return exp.condition(f"abs(hashtext(rs_row::text)) % {int(modulus)} < {int(below)}", dialect="postgres")


def _delay(batch: Batch) -> exp.Expression:
    if batch.months:
        return exp.Interval(this=exp.Literal.string(str(batch.months)), unit=exp.Var(this="MONTH"))
    assert batch.delta is not None
    return exp.Interval(this=exp.Literal.string(str(int(batch.delta.total_seconds()))), unit=exp.Var(this="SECOND"))


def late_delay(plan: "Plan") -> Batch:
    assert plan.timeline is not None
    if plan.late.by is not None:
        return plan.late.by
    b = plan.timeline.batch
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


def plan_timeline(con: Connection, plan: Plan, batch: Batch, steps: int) -> Timeline:
    """The replayed batches from the inputs' time ranges; counts the rows each batch brings."""
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
    if not ranges and not plan.inputs:
        timed = {s.unique_id for s in plan.inputs}
        static = ", ".join([*(f"source {s.name}" for s in plan.static_sources),
                            *(f"seed {m.name}" for m in plan.seeds if m.unique_id not in timed)])
        raise ConfigError("no input of the selected models has a time column, so no rows can arrive batch by "
                          "batch and there is nothing to replay" + (f" (inputs without one: {static})" if static else
                                                                      " (they read no source or seed)") +
                          ": name the column rows arrive by, `config: {event_time: <column>}` on a source or "
                          "seed, or `time_columns: {<name>: <column>}` in rerun_safety.yml")
    if not ranges:
        names = ", ".join(f"{'seed' if s.seed else 'source'} {s.name}" for s in plan.inputs)
        raise ConfigError(f"every timed input is empty, so there is nothing to replay (timed inputs: {names})")
    tmin = min(lo for lo, _ in ranges.values())
    tmax = max(hi for _, hi in ranges.values())
    timeline = plan.timeline = make_timeline(tmin, tmax, steps, batch, ranges)
    for src in plan.inputs:
        b = timeline.bounds_for(src.unique_id)
        col = time_expr(src)
        when = arrival_expr(src, plan, con.dialect, late=False)
        counts = [_count_where(when < ts_literal(b[0]))]
        counts += [_count_where(batch_condition(when, b, i)) for i in range(1, len(b))]
        # the half of each batch the partial scenario commits first (gameday._apply: the same predicate)
        half = row_hash_predicate(con.dialect, 2, 1)
        counts += [_count_where(exp.and_(batch_condition(when, b, i), half)) for i in range(1, len(b))]
        # rows that arrive (by load time, or in the `late` scenario) after a later batch than their event's
        counts.append(_count_where(_batch_index(arrival_expr(src, plan, con.dialect), b) > _batch_index(col, b)))
        row = con.fetchone(exp.select(*counts).from_(table(SNAPSHOT_SCHEMA, snapshot_table(src)).as_("rs_row")))
        values = [int(x or 0) for x in row[:-1]]
        plan.arrivals[src.unique_id] = tuple(values[:len(b)])
        plan.first_halves[src.unique_id] = (0, *values[len(b):])
        plan.late_rows[src.unique_id] = int(row[-1] or 0)
        if not src.kind and values[0] * 2 >= sum(values[:len(b)]):
            plan.bulk[src.unique_id] = _fullest_batch(con, src, plan, timeline.batch, b[0])
    timeline = plan.timeline = _choose_half_committed(plan, _loaded_at_once(plan, timeline))
    if timeline.steps < steps:
        plan.notes.append(f"--steps {steps} asked for more batches than the data holds: {timeline.steps} "
                          f"{batch.label} batches replayed")
    for input_id, bounds in timeline.own_bounds:
        name = plan.project.input(input_id).name
        plan.notes.append(f"{name} ends before the replayed batches of the other inputs: its own last "
                          f"{timeline.steps} batches ({bounds[0]} .. {bounds[-1]}) arrive instead")
    return timeline
