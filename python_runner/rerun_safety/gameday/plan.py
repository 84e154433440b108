"""What a game day will do: the models it builds and judges, the timed inputs, the schedule.

`make_plan` needs only the parsed project; `timeline.plan_timeline` then reads the snapshot once
(each timed input's time range and how many of its rows each replayed batch brings).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..dbt_invoke import selection_terms, selects_by_state
from ..errors import ConfigError, NothingToCheck, folded
from ..project import Model, Project, SourceTable
from ..select_names import closest
from .facts import Facts, FrozenMap, frozen_map
from .scenarios import Batch, Timeline
from .scenarios import scenario as scenario_kind


@dataclass(frozen=True)
class Lateness:
    """How rows arrive in the `late` scenario where an input declares no load time: a fixed,
    deterministic share of its rows (chosen by a hash of the row) arrives `by` later."""

    fraction: float = 0.05
    by: Batch | None = None  # None: two batches of the schedule



@dataclass(frozen=True)
class ScenarioJob:
    """One scenario (or a scenario in isolation) to run: all a worker process needs, pickled whole."""

    key: str
    scenario: str  # a chain of scenarios sharing a sandbox: "replay+backfill"
    template: Any  # the Sandbox cloned for it
    ref_errors: Mapping[str, str]
    plan: "Plan"  # detached from its project (the worker attaches its own)
    statement_limit: float | None
    isolate: Mapping | None = None
    start: Mapping | None = None  # a shared first build to continue from
    # scenarios that go on from a copy of this chain's sandbox: (scenario, steps in common) (runs.branches)
    branches: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Plan:
    """What a game day does, frozen: made by `make_plan` from the parsed project and the options, then
    made anew (never changed) by the stages that learn from the data (`learned`, `scheduled`, ...), all
    here. What the data taught is `facts`."""

    project: Project | None = field(compare=False, repr=False)  # None: on its way to a worker (detached)
    judged: tuple[Model, ...]  # in topological order
    build: tuple[Model, ...]  # every model dbt builds (judged + ephemeral/other upstream)
    seeds: tuple[Model, ...]
    inputs: tuple[SourceTable, ...]  # timed sources and timed seeds: rows arrive batch by batch
    static_sources: tuple[SourceTable, ...]
    ref_names: Mapping[str, str]  # model unique_id -> table name in the reference schema
    stateful: tuple[Model, ...] = ()  # incremental models, the tables and views they read
    kinds: Mapping[str, tuple[str, str]] = field(default_factory=FrozenMap)  # input id -> (kind, why)
    # static sources no model reads, copied because a hook names them (may be absent: see gameday)
    from_hooks: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()  # what make_plan found about the whole run
    late: Lateness = field(default_factory=Lateness)
    facts: Facts = field(default_factory=Facts)

    def __post_init__(self) -> None:
        for name in ("judged", "build", "seeds", "inputs", "static_sources", "stateful", "notes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("ref_names", "kinds"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))
        object.__setattr__(self, "from_hooks", frozenset(self.from_hooks))

    # ---------------------------------------------------------------- new plans
    def learned(self, **facts) -> "Plan":
        """This plan with more of what the data taught (Facts' fields by name)."""
        return replace(self, facts=replace(self.facts, **facts))

    def detached(self) -> "Plan":
        """For the trip to a worker process, which attaches its own parse of the project."""
        return replace(self, project=None)

    def attached(self, project: Project) -> "Plan":
        """A plan sent to this process, on its project (which learns the inputs read by name again)."""
        if self.facts.read_by_name is not None:
            project.add_read_by_name(self.facts.read_by_name)
        return replace(self, project=project)

    def with_static(self, input_ids, kinds: Mapping[str, tuple[str, str]] | None = None) -> "Plan":
        """Inputs moved to the static ones (found from the data: loaded at once), with their kinds."""
        ids = set(input_ids)
        moved = tuple(s for s in self.inputs if s.unique_id in ids)
        return replace(self, inputs=tuple(s for s in self.inputs if s.unique_id not in ids),
                       static_sources=(*self.static_sources, *moved), kinds={**self.kinds, **(kinds or {})})

    def reading_by_name(self, found) -> "Plan":
        """Inputs the compiled SQL reads by name (by_name.ByName): copied like sources, planned by their
        config (a declared source's time column; an undeclared relation is static)."""
        assert self.project is not None
        new = [s for s in found.inputs if s.unique_id not in self.kinds]  # not planned already
        found = type(found)(new, {s.unique_id: found.readers[s.unique_id] for s in new})
        self.project.add_read_by_name(found)
        kinds, inputs, static = dict(self.kinds), list(self.inputs), list(self.static_sources)
        for src in found.inputs:
            kinds[src.unique_id] = _input_kind(src, self.project.time_columns_origin)
            (inputs if kinds[src.unique_id][0] in TIMED_KINDS else static).append(src)
        return replace(self, inputs=inputs, static_sources=static, kinds=kinds).learned(read_by_name=found)

    def without_absent_hook_sources(self, present) -> tuple["Plan", str]:
        """A declared source that only a hook names (no model reads it) is copied if the target holds
        it (`present`: the target's relations, lower case); if not (the hook creates it, or the name is a
        coincidence), there is nothing to copy. The plan without those, and the run note ('' for none)."""
        absent = [s for s in self.static_sources if s.unique_id in self.from_hooks
                  and (s.schema.lower(), s.identifier.lower()) not in present]
        if not absent:
            return self, ""
        return (replace(self, static_sources=tuple(s for s in self.static_sources if s not in absent)),
                "sources a hook names, not in the target (nothing to copy): " + ", ".join(s.name for s in absent))

    def scheduled(self, timeline: Timeline) -> "Plan":
        """With the schedule fixed: which judged models its batches exercise, and which first builds
        see no rows."""
        plan = self.learned(timeline=timeline)
        exercised, empty = {}, {}
        for m in plan.judged:
            exercised[m.unique_id], note = plan.exercise(m)
            if note:
                empty[m.unique_id] = note
        return plan.learned(exercised=exercised, empty_first=empty)

    # ---------------------------------------------------------------- reading
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
        timeline, arrivals = self.facts.timeline, self.facts.arrivals
        assert timeline is not None
        inputs = self.inputs_of(m)
        if not inputs:
            return False, ""
        arrived = sum(sum(arrivals.get(s.unique_id, (0,))[1:]) for s in inputs)
        note = ""
        if all(arrivals.get(s.unique_id, (0,))[0] == 0 for s in inputs):
            firsts = ", ".join(f"{s.name} before {timeline.bounds_for(s.unique_id)[0]}" for s in inputs)
            note = (f"its first build ran on empty input (no rows of {firsts}): a watermark read from an "
                    "empty table is NULL, so a model that filters on it may never load; replay more of the "
                    "history (--steps) or check the first run's filter")
        return arrived > 0, note

    def input_relations(self) -> list[tuple[str, str]]:
        """(schema, name) of every input table in a sandbox: sources and seeds."""
        out = [(s.schema, s.identifier) for s in [*self.inputs, *self.static_sources]]
        out += [(m.schema, m.identifier) for m in self.seeds]
        return list(dict.fromkeys(out))

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
        return sum(counts[i] for s in inputs if len(counts := self.facts.arrivals.get(s.unique_id, ())) > i)

    def halves_in_batch(self, inputs: list[SourceTable], i: int) -> tuple[int, int]:
        """Rows the inputs bring in replayed batch i in the half committed first and in the rest."""
        first = sum(h[i] for s in inputs if len(h := self.facts.first_halves.get(s.unique_id, ())) > i)
        return first, self.rows_in_batch(inputs, i) - first

    def unexercised(self, m: Model, scenario: str) -> str:
        """Why a scenario's decisive step touched none of the model's input rows ('' when it did):
        the half-committed batch, the backfilled batch, the late rows. A model that saw no new
        rows there was not tested by that scenario, whatever its output."""
        assert self.facts.timeline is not None
        inputs = self.inputs_of(m)
        return scenario_kind(scenario).unexercised(self, inputs, ", ".join(s.name for s in inputs)) if inputs else ""

    def decisive_rows(self, m: Model, scenario: str) -> int | None:
        """Rows of the model's timed inputs in the scenario's decisive step: every replayed batch
        (replay, rerun), the half-committed batch (partial), batch 1 (backfill), the rows arriving
        late (late). None for reference and determinism, and for a model with no timed input."""
        inputs = self.inputs_of(m) if self.facts.timeline is not None else []
        return scenario_kind(scenario).decisive_rows(self, inputs) if inputs else None

    def untested_reason(self, m: Model) -> str:
        inputs = self.inputs_of(m)
        if not inputs:
            return ("no timed input feeds it (no source or seed with a time column upstream), so no new rows "
                    "arrived in any replayed batch")
        names = ", ".join(s.name for s in inputs)
        return f"its inputs ({names}) received no new rows in any replayed batch, so its incremental runs changed nothing"


TIMED_KINDS = ("event_log", "loaded_log")


def partition_column(m: Model) -> str | None:
    pk = m.partition_key
    if isinstance(pk, dict) and pk.get("field"):
        return str(pk["field"])
    if isinstance(pk, str):
        return pk
    if isinstance(pk, (list, tuple)) and pk:
        return str(pk[0])
    return m.event_time


def time_column_hint(name: str, columns: list[tuple[str, str]]) -> str:
    """'date or time columns: a, b' for an input's columns (name, type), with the `time_columns` line
    filled in when exactly one is a timestamp (or the only column is a date): ready to copy, never a guess
    among several ('' for none)."""
    from ..lint.grain import INSTANT, type_grain

    dated = [c for c, t in columns if type_grain(t) is not None]
    if not dated:
        return ""
    stamps = [c for c, t in columns if type_grain(t) == INSTANT]
    one = stamps if len(stamps) == 1 else dated if len(dated) == 1 else []
    ready = f"; to replay by it: `time_columns: {{{name}: {one[0]}}}`" if one else ""
    return f"date or time columns: {', '.join(dated)}{ready}"


def _missing_time_columns(project: Project, build: list[Model], columns_of=None) -> dict[str, list[str]]:
    """Sources with no time column that are all an incremental model reads: no rows arrive for it.
    When no incremental model has a timed input there is nothing to replay: every such source is
    reported at once (one line each, with the fix). Otherwise those models are run and judged
    `untested`, and the sources are returned (source id -> the models), for a run note."""
    missing: dict[str, list[str]] = {}
    reached = False
    for m in build:
        if not m.incremental:  # a snapshot may read a current-state table only
            continue
        ids = {m.unique_id} | project.ancestors([m.unique_id])
        sources = {s for u in ids for s in project.models[u].sources}
        if project.timed_inputs_of([m.unique_id]) or not sources:
            reached = reached or bool(sources)
            continue
        for s in sorted(sources):
            missing.setdefault(s, []).append(m.name)
    if not missing or reached:
        return missing
    lines = [f"{len(missing)} source(s) read by incremental models have no time column, so no rows can arrive "
             "batch by batch:"]
    columns = _columns(project, missing, columns_of)
    for s, models in sorted(missing.items(), key=lambda kv: project.sources[kv[0]].name):
        name = project.sources[s].name
        lines.append(f"  source {name} (read by {', '.join(sorted(set(models)))}): set `config: {{event_time: "
                     f"<column>}}` on it in its sources .yml, or `time_columns: {{{name}: <column>}}` in "
                     "rerun_safety.yml" + _parenthesized(time_column_hint(name, columns.get(s, []))))
    raise ConfigError("\n".join(lines))


def _untimed_note(project: Project, untimed: dict[str, list[str]], columns_of) -> str:
    """The run note on incremental models that no timed input reaches (source id -> the models)."""
    columns = _columns(project, untimed, columns_of)
    parts = []
    for uid, models in sorted(untimed.items(), key=lambda kv: project.sources[kv[0]].name):
        name = project.sources[uid].name
        hint = time_column_hint(name, columns.get(uid, []))
        parts.append(f"{', '.join(sorted(set(models)))} (source {name}" + (f"; {hint})" if hint else ")"))
    return ("incremental models that no timed input reaches, run but `untested` (no rows arrive for them): "
            + "; ".join(parts) + "; to replay them name a time column: `config: {event_time: <column>}` on the "
            "source, or `time_columns: {<source>: <column>}` in rerun_safety.yml (`inputs: {<source>: static}` "
            "says it is reference data)")


def _parenthesized(text: str) -> str:
    return f" ({text})" if text else ""


def _columns(project: Project, sources, columns_of) -> dict[str, list[tuple[str, str]]]:
    """Source id -> its columns in the user's target (columns_of: the engine's lookup), for hints."""
    if columns_of is None or not sources:
        return {}
    try:
        return columns_of([project.sources[s] for s in sources])
    except Exception:  # noqa: BLE001 - a hint only: the message stands without it
        return {}


def _unjudged_notes(project: Project, selected, build: list[Model]) -> list[str]:
    """The run's notes on the models it builds and does not judge: those with no SQL, the run logs."""
    notes = []
    empty = sorted(project.models[u].name for u in selected if project.models[u].empty)
    if empty:
        notes.append("models with no SQL, which dbt builds nothing for (not judged): " + ", ".join(empty))
    logs: dict[str, list[str]] = {}
    for m in sorted(build, key=lambda m: m.name):
        if m.run_log:
            logs.setdefault(m.run_log, []).append(m.name)
    if logs:
        notes.append("run logs, built but not judged (their rows record which models each invocation ran, and "
                     "no replay runs the reference build's invocations): " + "; ".join(
                         f"{why}: {folded(names, 8)}" for why, names in sorted(logs.items())))
    return notes


def make_plan(project: Project, select: tuple[str, ...], exclude: tuple[str, ...], state: str | None = None,
              columns_of=None, late: Lateness | None = None, stateless: bool = False) -> Plan:
    """The models to build and judge, their inputs and their kinds. `columns_of(sources)`: source id ->
    its columns in the user's target, to name the date and time columns where none is configured.
    `late`: how rows arrive in the `late` scenario (the options'). `stateless`: a selection without an
    incremental model is judged too (a fix's verifying game day, GamedayOptions.verifying)."""
    selected = project.select(select, exclude, state)
    terms = selection_terms(select, exclude)
    by_state = selects_by_state(select, state)
    if not selected:
        if by_state:
            raise NothingToCheck(f"the selection matches no model ({terms})")
        if not (select or exclude):
            raise ConfigError("the project has no models")
        close = sorted({c for t in select for w in t.replace(",", " ").split()
                        for c in closest(w.strip("+@0123456789"), (m.name for m in project.models.values()))})
        raise ConfigError(f"the selection matches no model ({terms})"
                          + (f"; closest names: {', '.join(close[:5])}" if close else ""))
    if not stateless and not any(project.models[u].keeps_state for u in selected):
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
    timed = [s for s in [*sources, *timed_seeds] if kinds[s.unique_id][0] in TIMED_KINDS]
    untimed = _missing_time_columns(project, build, columns_of)
    incremental = [m.unique_id for m in build if m.keeps_state]
    feeding = project.ancestors(incremental)
    # A view that an incremental model reads is made again at every run too, as a user's every run
    # makes it (its SQL may hold the invocation's id or start time; and dbt-postgres drops dependent
    # views, CASCADE, when it rebuilds a table under them).
    rebuilt = ("table", "external", "view")
    stateful = [m for m in build if m.keeps_state or (m.unique_id in feeding and m.materialized in rebuilt)]
    notes = _unjudged_notes(project, selected, build)
    untimed = {uid: ms for uid, ms in untimed.items() if not project.sources[uid].kind}  # declared: known
    if untimed:
        notes.append(_untimed_note(project, untimed, columns_of))
    if in_place:
        names = ", ".join(f"{s.database}.{s.schema}.{s.identifier}" for s in in_place)
        notes.append(f"inputs in databases the profile attaches: {names}; read where they are, read-only, "
                     "in every sandbox; no rows arrive in them during a replay")
    return Plan(project, judged, build, seeds, timed, [s for s in sources if s not in timed],
                {m.unique_id: f"m{i}" for i, m in enumerate(judged)}, stateful, kinds=kinds,
                from_hooks={s.unique_id for s in hooked}, notes=notes, late=late or Lateness())


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
    from .side_effects import mentions, hook_texts

    hooks, project_hooks = hook_texts(project.manifest, [m.unique_id for m in build])
    text = "\n".join([*hooks.values(), project_hooks])
    if not text.strip():
        return []
    # a file read through external_location is not a table a hook can write
    return [s for uid, s in sorted(project.sources.items())
            if uid not in known and not s.time_column and not s.external and mentions(text, s.identifier)]
