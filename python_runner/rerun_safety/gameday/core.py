"""The game day: snapshot the sources, replay the project in sandboxes, diff, judge."""
from __future__ import annotations

import datetime as dt
import shutil
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .. import clock
from ..confine import statement_guard_on
from ..dbt_invoke import StatementWatch, scrub_dbt_environment, scrub_note, selection_terms
from ..errors import ConfigError, RerunSafetyError, SandboxError, first_line
from ..partial_parse import read_partial_parse
from ..project import Project
from ..results import GamedayReport, ScenarioResult, Verdict
from ..select_names import unmatched
from ..warehouse.base import (PARSE_PREFIX, SNAPSHOT_SCHEMA, Engine, Sandbox, check_writable_dir, make_locked_dir,
                              private_work_root, snapshot_table)
from ..warehouse.dialect import Dialect
from ..warehouse.engines import engine_for
from . import cost, reference, side_effects
from .assemble import build_report
from .by_name import copy_read_by_name
from .judge import failed
from .options import GamedayOptions  # noqa: F401 - the public import path
from .plan import Lateness, Plan, ScenarioJob, make_plan
from .preflight import check_config
from .replay import JobResult, NoProgress, Replay
from .runs import branches, node_errors, sharing_first_build
from .scenarios import chains as scenario_chains
from .scenarios import count_runs, delaying, not_applicable, replayed, scenario_steps
from .scenarios import scenario as scenario_kind
from .timeline import cut_slice, plan_timeline
from .verdict import Isolation, differs, levels, nondeterminism_shown
from .workers import SecondRun, kill_pool, run_parallel, start_pool

@dataclass(frozen=True)
class Finished:
    """What a finished game day leaves for the fix search: its report, its frozen plan (with what the
    data taught), the parsed project and what it ran with."""

    report: GamedayReport
    plan: Plan
    project: Project
    options: GamedayOptions
    dialect: Dialect
    run_id: str
    parse_state: bytes | None  # dbt's partial-parse state after the parse (with options.fix)
    progress: Any
    # scenario -> the side relations that differed at its end (side_effects.judge): what the fault-free
    # schedule (replay) wrote where a one-shot build writes otherwise
    side_found: Mapping[str, tuple[dict, ...]] = field(default_factory=dict)


class Gameday:
    """A game day: the reference, then every scenario and the isolation replays (its `replay`), judged."""

    def __init__(self, options: GamedayOptions, progress=None, run_id: str | None = None):
        self.options = options
        self.progress = progress or NoProgress()
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.engine: Engine | None = None
        self.plan: Plan | None = None  # once prepared (what fix/ reads after the run)
        self.project: Project | None = None
        self.replay: Replay | None = None  # once the engine is open: dbt in the run's sandboxes, the scenarios
        self.notes: list[str] = []  # about the whole run, in the order found (the report's run notes)
        self.side_found: dict[str, tuple[dict, ...]] = {}  # once judged: scenario -> side relations differing
        self.invocations: list = []  # dbt's results, one per invocation (the report's cost split)
        self.parse_state: bytes | None = None  # dbt's partial-parse state after the parse (with options.fix)
        self._job_cost: dict[str, float] = {}  # what the scenario jobs spent, per phase (cost.py)
        # statements timed in the reference build, stopped past a limit in the scenarios after it
        self.watch = StatementWatch()

    # ---------------------------------------------------------------- the reference
    def _build_reference(self, plan: Plan, snapshot: Sandbox) -> tuple[Plan, Sandbox, dict[str, str], list]:
        """Full refresh on all data; keep its outputs in the reference schema of a template that
        every scenario clones, then drop the built relations so no scenario can inherit them. The plan
        with what the reference taught (reference.py)."""
        assert self.engine and plan.facts.timeline
        with cost.spent("copies"):
            sb = self.engine.clone(snapshot, "reference")
        profiles = self.replay.profiles_dir(sb)
        self.progress.scenario("reference")
        with self.engine.connect(sb) as con:
            side, existing = side_effects.before_reference(con, plan, self.project.manifest)
        self.watch.limit_s = None
        res = self.replay.dbt(plan, sb, profiles, scenario_steps("reference", plan.facts.timeline)[0])
        self.watch.limit_s = self.watch.limit_from_reference()
        self.progress.advance("reference: full refresh")
        errors = node_errors(res, plan)
        plan = reference.learn_from_sql(plan, res, self.project.compare_audit_columns, self.engine.dialect)
        with self.engine.connect(sb) as con:
            plan = reference.keep_outputs(con, plan, errors, self.options)
            side_effects.after_reference(con, plan, side, existing)
            if self.options.fingerprints:  # what a fixed hook's clean build must reproduce (fix/)
                side_effects.fingerprint_relations(con, side, self.options.float_tolerance)
            con.drop_relations([(m.schema, m.identifier) for m in reversed(plan.build)])
        return plan.learned(side=side), sb, errors, [res]

    # ---------------------------------------------------------------- main
    def run_finished(self) -> Finished:
        """The game day (`run`), and what the fix search reads of it afterwards."""
        report = self.run()
        return Finished(report, self.plan, self.project, self.options, self.engine.dialect, self.run_id,
                        self.parse_state, self.progress, self.side_found)

    def run(self) -> GamedayReport:
        """The stages: prepare (project, engine, plan), snapshot, reference, scenarios, isolation, report."""
        started = time.perf_counter()
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        # before any work: reports that cannot be written would lose the whole run, and the work
        # root holds copies of production (private to this user)
        o = self.options = replace(self.options, work_root=private_work_root(self.options.work_root))
        cost.take()  # what an earlier game day in this process left untold (one that failed)
        confined = o.confinement is not None and o.confinement.confined
        if not confined:  # (a confined run's command checked it: only it writes there)
            check_writable_dir(o.output_dir, "the output directory")
        parse_dir = o.work_root / f"{PARSE_PREFIX}{self.run_id}"
        parse_lock = make_locked_dir(parse_dir)  # a run killed while parsing leaves it to the sweep
        pool = None
        failure: BaseException | None = None
        try:
            plan, chains = self._prepare(parse_dir, confined)
            pool = self._start_workers(chains)
            report = self._stages(pool, plan, chains, started, started_at)
            return replace(report, cost=cost.cost_of(report.wall_time, cost.add(cost.take(), self._job_cost),
                                                     [*self.invocations]))
        except BaseException as err:
            failure = err
            if pool is not None:
                kill_pool(pool)  # before cleanup, which drops the workers' sandboxes too
                pool = None
            over = self.engine.budget_tripped() if self.engine is not None else None
            if over and not isinstance(err, KeyboardInterrupt) and str(err) != over:
                failure = SandboxError(over)  # the budget's stop, not the errors it caused, is the news
                raise failure from err
            raise
        finally:
            try:
                if pool is not None:
                    pool.shutdown(wait=True)
                if self.engine is not None and not o.keep_sandboxes:
                    self._cleanup(failure)
            finally:
                if self.engine is not None:
                    self.engine.close()
                shutil.rmtree(parse_dir, ignore_errors=True)
                parse_lock.close()

    def _stages(self, pool, plan: Plan, chains: list[str], started: float, started_at: str) -> GamedayReport:
        """Snapshot, reference, scenarios, isolation, report (`self.plan` is the plan each stage made)."""
        o = self.options
        snapshot, plan = self._snapshot(plan)
        branched = branches(chains, self.engine, plan.facts.timeline)
        gone = {b for bs in branched.values() for b, _ in bs}  # (they run in the job they branch from)
        chains = [c for c in chains if c not in gone]
        shared = sharing_first_build(chains, self.engine, plan.facts.timeline)
        self.progress.start(1 + sum(self._runs(c, branched, plan) for c in chains) - max(len(shared) - 1, 0),
                            "game day")
        plan, template, ref_errors, self.invocations = self._build_reference(plan, snapshot)
        self.plan = plan
        with cost.spent("copies"):
            self.engine.drop(snapshot)  # the reference sandbox holds the snapshot's tables too
        by_model, side_found = self._scenarios(pool, plan, chains, shared, branched, template, ref_errors)
        self.side_found = {name: tuple(found) for name, found in side_found.items()}
        isolated = self._isolate(pool, plan, by_model, template, ref_errors)
        over = self.engine.budget_tripped()
        if over:
            raise SandboxError(over)
        if o.keep_sandboxes:
            kept = self.engine.keep()
            self.notes.append(f"--keep-sandboxes: {len(kept)} sandbox(es) kept for a day (a later game day's "
                              f"sweep removes them after that): {', '.join(kept)}")
        with cost.spent("reports"):
            return build_report(o, self.project, plan, by_model, isolated, self.invocations, started, started_at,
                                notes=self.notes, side_found=side_found)

    def _prepare(self, parse_dir, confined: bool) -> tuple[Plan, list[str]]:
        """Parse the project, open the engine (sweeping what dead runs left), plan; the scenario chains."""
        o = self.options
        ignored = scrub_note(scrub_dbt_environment())
        if not o.state:
            # a typo in --select, told before the parse (a minute on a large project)
            unknown = unmatched(Path(o.project_dir), o.select)
            if unknown:
                raise ConfigError(f"the selection matches no model ({selection_terms(o.select, o.exclude)}): {unknown}")
        with cost.spent("parse"):
            self.project = project = Project(o.project_dir, o.profiles_dir, o.target, o.vars_yaml, parse_dir)
        if o.fix:  # the fix search's game days parse copies of this project: from this parse's state
            self.parse_state = read_partial_parse(parse_dir / "dbt_target")
        self.engine = engine = engine_for(project.target_output, o.work_root, self.run_id, confined=confined,
                                          max_sandbox_size=o.max_sandbox_size, statement_guard=statement_guard_on())
        project.session.work_dir = engine.run_dir
        if confined and engine.confinement_gap:
            raise ConfigError(f"cannot confine the project's code: {engine.confinement_gap}; pass --unconfined "
                              "to run without that protection (the reports will say so)")
        engine.learn_project(project.manifest)
        engine.sweep()
        self.plan = plan = make_plan(project, o.select, o.exclude, o.state, columns_of=self._user_columns,
                                     late=Lateness(o.late_fraction, o.late_by), stateless=o.verifying)
        self.notes = list(plan.notes)
        if ignored:
            self.notes.append(ignored)
        if confined and engine.unconfined_part:
            self.notes.append(f"not confined by the game day: {engine.unconfined_part}")
        check_config(plan.build, project.target_output, project.target_name)
        chains = self._chains()
        self.replay = Replay(engine, project, self.options, self.progress, self.watch, SecondRun)
        return plan, chains

    def _user_columns(self, sources) -> dict[str, list[tuple[str, str]]]:
        """Source id -> its columns in the user's target (read-only), for the hints of a missing time column."""
        assert self.engine
        found = self.engine.user_columns([(s.schema, s.identifier) for s in sources])
        return {s.unique_id: found.get((s.schema, s.identifier), []) for s in sources}

    def _chains(self) -> list[str]:
        """The scenarios to replay, as chains sharing a sandbox ("replay+backfill"); the late scenario
        is left out (with a note) without a share of late rows."""
        o = self.options
        unfit = not_applicable(o.scenarios, self.engine.dialect)
        for name, why in unfit.items():
            self.notes.append(f"{name}: not applicable on {self.engine.dialect.display_name}: {why}")
        dropped = delaying(o.scenarios) if not o.late_fraction else []
        scenarios = [s for s in replayed(o.scenarios) if s not in dropped and s not in unfit]
        if unfit and not scenarios:
            raise ConfigError(f"--scenarios {','.join(unfit)}: not applicable on {self.engine.dialect.display_name} "
                              f"({next(iter(unfit.values()))}): choose other scenarios")
        if unfit:
            self.options = o = replace(o, scenarios=tuple(s for s in o.scenarios if s not in unfit))
        chains = ["+".join(c) for c in scenario_chains(scenarios)]
        if dropped:
            self.options = replace(o, scenarios=tuple(s for s in o.scenarios if s not in dropped))
            self.notes.append("late: not run; --late-fraction/--late-by make a share of the rows of inputs "
                              "without a load time arrive late (inputs with one arrive by it in every scenario)")
            if not chains:  # nothing would run but the reference: never "safe to run twice"
                raise ConfigError("--scenarios late runs nothing without --late-fraction or --late-by (inputs "
                                  "with a load time arrive by it in every other scenario): add one, or choose "
                                  "other scenarios")
        return chains

    def _start_workers(self, chains: list[str]):
        """Worker processes for two or more chains (None: the scenarios run here)."""
        threads = self.options.threads
        if threads > 1 and len(chains) > 1 and not self.engine.parallel_ok:
            self.notes.append(f"--threads {threads}: scenarios ran one after another, in the one Spark of "
                              "this process (method: session; its catalog admits one process)")
        elif threads > 1 and len(chains) > 1:
            # workers start now: their start-up overlaps the snapshot and the reference build
            return start_pool(self, min(threads, len(chains)))
        return None

    def _snapshot(self, plan: Plan) -> tuple[Sandbox, Plan]:
        """The inputs copied read-only from the user's target, the clock set up, the schedule planned."""
        engine, o = self.engine, self.options
        if plan.from_hooks:
            plan, note = plan.without_absent_hook_sources(engine.user_relations())
            self.notes += [note] if note else []
        with cost.spent("copies"):
            snapshot = engine.create_snapshot([*plan.timed_sources, *plan.static_sources])
        plan, notes = copy_read_by_name(engine, self.project, plan, snapshot, self.replay.profiles_dir)
        self.notes += notes
        self.notes.extend(engine.notes)  # what the snapshot could not copy as it is
        if plan.seeds:
            self._seed(plan, snapshot)
        with engine.connect(snapshot) as con:
            con.create_schema(clock.CLOCK_SCHEMA)
            for statement in clock.setup_sql(con.dialect):
                con.execute(statement)
            if o.since or o.until:
                cut_slice(con, plan, o.since, o.until)
            plan, notes = plan_timeline(con, plan, o.batch_size, o.steps)
        self.notes += notes
        return snapshot, plan

    @staticmethod
    def _runs(chain: str, branched: dict[str, list[tuple[str, int]]], plan: Plan) -> int:
        """The runs of a chain's job: its last scenario's (which continues the others) and those of the
        scenarios branching from it after their steps in common."""
        assert plan.facts.timeline
        return (count_runs([chain.split("+")[-1]], plan.facts.timeline)
                + sum(count_runs([b], plan.facts.timeline, after=k) for b, k in branched.get(chain, ())))

    def _scenarios(self, pool, plan: Plan, chains: list[str], shared: list[str],
                   branched: dict[str, list[tuple[str, int]]], template: Sandbox, ref_errors: dict[str, str]
                   ) -> tuple[dict[str, dict[str, ScenarioResult]], dict[str, list]]:
        """Every chain replayed (in the workers, with two or more), judged: model -> scenario -> result;
        and scenario -> the side relations that differ."""
        by_model: dict[str, dict[str, ScenarioResult]] = {m.unique_id: {} for m in plan.judged}
        for m in plan.judged:
            uid = m.unique_id
            rows = plan.facts.reference_rows.get(uid, 0)
            by_model[uid]["reference"] = (
                failed(plan, uid, "reference", ref_errors[uid]) if uid in ref_errors else
                ScenarioResult("reference", Verdict.SAFE, reference_rows=rows, rows=rows))
        start = None
        if shared:
            start, first = self.replay.first_build(plan, template)
            self.invocations.append(first)
        jobs = [self._job(plan, c, template, ref_errors, start=start if c in shared else None,
                          branches=tuple(branched.get(c, ())))
                for c in sorted(chains, key=lambda n: -self._runs(n, branched, plan))]
        side_found: dict[str, list] = {}
        for job in self._execute(pool, plan, jobs).values():
            self.invocations += job.results
            side_found.update(job.side_found)
            for scenario, rs in job.judged.items():
                for uid, r in rs.items():
                    by_model[uid][scenario] = r
        if not self.options.keep_sandboxes:
            with cost.spent("copies"):
                for sb in self.replay.shared:
                    self.engine.drop(sb)
        return by_model, side_found

    def _cleanup(self, failure: BaseException | None) -> None:
        """Remove the run's sandboxes. When that fails after an error (a Spark that ran out of
        memory cannot drop anything either), the error comes first: it is what to act on."""
        assert self.engine
        try:
            self.engine.cleanup()
        except SandboxError as err:
            if failure is None or isinstance(failure, KeyboardInterrupt):
                raise  # an interrupt: the sandbox that stays is the news (the CLI says so)
            cause = (str(failure) if isinstance(failure, RerunSafetyError)
                     else f"{type(failure).__name__}: {first_line(failure)}")
            raise SandboxError(f"{cause}; then {err}") from failure

    def _job(self, plan: Plan, chain: str, template: Sandbox, ref_errors: dict[str, str],
             isolate: dict | None = None, start: dict | None = None,
             branches: tuple[tuple[str, int], ...] = ()) -> ScenarioJob:
        key = chain if not isolate else f"{chain} (isolation {isolate['level'] + 1})"
        return ScenarioJob(key, chain, template, ref_errors, plan.detached(), self.watch.limit_s, isolate, start,
                           branches)

    def _execute(self, pool, plan: Plan, jobs: list[ScenarioJob]) -> dict[str, JobResult]:
        """The jobs in worker processes (two or more, with a pool), else here, on this plan."""
        if pool is not None and len(jobs) > 1:
            done = run_parallel(pool, jobs, self.progress)
        else:
            done = {j.key: self.replay.run_scenario(j.scenario, plan, j.template, j.ref_errors, isolate=j.isolate,
                                             start=j.start, branches=j.branches) for j in jobs}
        for job in done.values():
            cost.add(job.cost, self._job_cost)
        return done

    def _isolate(self, pool, plan: Plan, by_model: dict[str, dict[str, ScenarioResult]], template: Sandbox,
                 ref_errors: dict[str, str]) -> Isolation:
        """A model that differs below a differing parent is replayed again with its broken
        ancestors kept right (rebuilt in full, or their reference output): if it still differs while
        its parents match, the defect is its own; if it matches, its difference came from them (shown).
        When a parent still differs there (a hook of another model writes it, say), the replay could
        not show either: see `Isolation`."""
        parents = {m.unique_id: plan.parents_in_judged(m) for m in plan.judged}
        ancestors = {m.unique_id: plan.project.ancestors([m.unique_id]) for m in plan.judged}
        jobs: list[ScenarioJob] = []
        for scenario in replayed(self.options.scenarios):
            bad = {u for u, rs in by_model.items() if differs(rs.get(scenario, ScenarioResult(scenario, Verdict.SAFE)).verdict)}
            # A table or view is rebuilt from its parents at the end of every scenario, at the same
            # clock as the reference: with right parents it is right, unless it is nondeterministic,
            # which the determinism scenario shows. Only incremental models keep state of their own.
            candidates = sorted(u for u in bad if any(p in bad for p in parents[u])
                                and scenario_kind(scenario).isolates(plan.project.models[u]))
            # A candidate that is also upstream of another candidate must not be rebuilt in full
            # while it is itself checked: candidates are replayed by depth, each level with only the
            # broken models above it kept right.
            for level in levels(candidates, ancestors):
                broken = sorted({a for u in level for a in ancestors[u] if a in bad})
                models = sorted(set(level) | {a for u in level for a in ancestors[u]})
                judge = sorted(set(level) | {p for u in level for p in parents[u]})
                jobs.append(self._job(plan, scenario, template, ref_errors,
                                      {"broken": broken, "models": models, "judge": judge,
                                       "candidates": level, "level": len(jobs)}))
        out = Isolation()
        if not jobs:
            return out
        shown = {u: found for u, rs in by_model.items() if (found := nondeterminism_shown(rs.values()))}
        self.progress.start(count_runs([j.scenario for j in jobs], plan.facts.timeline), "isolation")
        candidates_of = {j.key: j.isolate["candidates"] for j in jobs if j.isolate}
        for key, job in self._execute(pool, plan, jobs).items():
            self.invocations += job.results
            for scenario, rs in job.judged.items():
                for uid in candidates_of[key]:
                    if uid in rs:
                        out.add(plan, uid, scenario, rs, parents[uid], shown)
        return out

    def _seed(self, plan: Plan, snapshot: Sandbox) -> None:
        """Load the seeds into the snapshot; a timed seed's rows are kept aside to arrive batch by batch."""
        assert self.engine and self.project
        profiles = self.replay.profiles_dir(snapshot)
        self.engine.prepare_manifest(self.project.manifest, snapshot)
        res = self.project.session.invoke(["seed", "--select", *[s.selector for s in plan.seeds]],
                                          profiles_dir=profiles, dialect=self.engine.dialect,
                                          rewrite_sql=self.engine.sql_rewriter(snapshot),
                                          context=self.engine.invocation_context(snapshot))
        if not res.success:
            # the copy holds no seed before this: a seed's table there is one dbt loaded now
            with self.engine.connect(snapshot) as con:
                missing = [s.name for s in plan.seeds if not con.relation_kind(s.schema, s.identifier)]
            if missing or any(n.status != "success" for n in res.nodes if n.unique_id.startswith("seed.")):
                raise ConfigError(f"dbt seed failed in the input copy: {res.error}")
            # every seed loaded; the project's on-run-end hooks failed after them (a run-log package
            # writing tables that only the model builds create): they run again with every build
            self.notes.append("dbt seed's on-run-start/end hooks failed in the game day's copy of the inputs after "
                              f"every seed loaded ({first_line(res.error or 'a hook failed')[:200]}); they run again "
                              "with every build of the models")
        timed = [s for s in plan.inputs if s.seed]
        if timed:
            with self.engine.connect(snapshot) as con:
                for s in timed:
                    con.copy_table(s.schema, s.identifier, SNAPSHOT_SCHEMA, snapshot_table(s))


def run_gameday(options: GamedayOptions, progress=None) -> GamedayReport:
    return Gameday(options, progress).run()
