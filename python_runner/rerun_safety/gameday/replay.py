"""Replaying scenarios in a sandbox: dbt invoked at the simulated clock, step by step, then judged.

`Replay` is the object the game day (core.Gameday) holds, and a worker process holds one too: it runs
dbt in a sandbox at the simulated clock, and one chain of scenarios in a sandbox cloned from the
reference's template, its state (`ChainState`) carried from run to run, and the judging at its end.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import yaml

from .. import clock
from ..diff import diff_relations
from ..results import ScenarioResult, Verdict
from ..secrets import secrets_through_env
from ..warehouse.base import REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, Connection, Sandbox
from . import cost, side_effects
from .judge import judge
from .plan import Plan
from .rebuild import final_rebuild, first_ids
from .runs import tally_run, run_args
from .sandbox_data import apply_step, place_reference, snapshot_versions
from .scenarios import Overlap, Reset, Run, scenario_steps
from .scenarios import scenario as scenario_kind
from .verdict import differs

# the longest either run of an Overlap waits for the other at one model before it goes on alone
OVERLAP_WAIT_S = 120.0
# what a scenario's sandbox only reads of the one it is cloned from
READ_ONLY = (REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, side_effects.PREHOOK_SCHEMA)


@dataclass(frozen=True)
class JobResult:
    """What one scenario job (a chain, or a scenario in isolation) hands back, wherever it ran."""

    judged: dict[str, dict[str, ScenarioResult]]  # scenario -> model -> its result
    side_found: dict[str, list]  # scenario -> the side relations that differ (side_effects.judge)
    cost: dict[str, float]  # what the job spent, per phase (cost.py)
    results: list  # dbt's results, one per invocation

    def without_raw(self) -> "JobResult":
        """For the trip back from a worker: dbt's raw results stay there."""
        return replace(self, results=[replace(r, raw=None) for r in self.results])


@dataclass
class ChainState:
    """What a chain of scenarios carries from run to run in its sandbox."""

    errors: dict[str, str] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)  # successful runs of each model (log tables: a row each)
    skipped: dict[str, str] = field(default_factory=dict)  # models dbt skipped in a run, and where
    stopped: set[str] = field(default_factory=set)  # models whose statement ran past the limit (StatementWatch)
    done: int = 0  # steps of the chain's first scenario done already (a shared first build)
    results: list = field(default_factory=list)  # dbt's results, one per invocation
    reopened: dict[str, int] = field(default_factory=dict)  # snapshot -> versions reruns of an unchanged batch added
    alone: dict[str, str] = field(default_factory=dict)  # model -> why two runs at once never overlapped in it

    @classmethod
    def after(cls, start: dict | None) -> "ChainState":
        """The state after a shared first build (see Replay.first_build), or a fresh one."""
        return start["state"].branch(start["state"].done) if start else cls()

    def branch(self, done: int) -> "ChainState":
        """What a copy of the sandbox taken now, `done` steps in, carries on (its own invocations only)."""
        return ChainState(dict(self.errors), dict(self.runs), dict(self.skipped), set(self.stopped), done,
                          reopened=dict(self.reopened))

    def tally(self, res, plan: Plan, label: str) -> None:
        self.results.append(res)
        tally_run(res, plan, label, self.errors, self.runs, self.skipped, self.stopped)


@dataclass(frozen=True)
class _Scope:
    """What an isolation replay builds and judges (all of it otherwise)."""

    only: set[str] | None  # the models to build
    broken: set[str]  # rebuilt in full at every run (or, in determinism, replaced by their reference output)
    judge_ids: set[str] | None  # the models to judge
    snapshots: list  # the snapshots among what is built

    @classmethod
    def of(cls, plan: Plan, isolate: dict | None) -> "_Scope":
        only = set(isolate["models"]) if isolate else None
        return cls(only, set(isolate["broken"]) if isolate else set(), set(isolate["judge"]) if isolate else None,
                   [m for m in plan.judged if m.snapshot and (only is None or m.unique_id in only)])


class NoProgress:
    """Progress told to nobody (a game day without a terminal; a worker without a queue)."""

    def start(self, total: int, description: str) -> None: ...
    def advance(self, description: str) -> None: ...
    def scenario(self, name: str) -> None: ...


class Replay:
    """dbt in a run's sandboxes, and scenarios replayed there (what a game day and its workers share)."""

    def __init__(self, engine, project, options, progress, watch, second_runs=None):
        """`second_runs(replay)`: the process the second of an Overlap's two runs goes to (workers.SecondRun)."""
        self.engine = engine
        self.second_runs = second_runs
        self.project = project
        self.options = options
        self.progress = progress
        self.watch = watch  # statements timed in the reference build, stopped past a limit after it
        self.clocks: dict[str, dt.datetime] = {}  # sandbox -> the time its clock row holds
        self.shared: list[Sandbox] = []  # sandboxes scenarios clone (the shared first build), dropped at the end
        # sandbox -> what dbt's statements go through there beside the engine's rewrite (Scenario.write_rewrite)
        self.rewrites: dict[str, object] = {}

    # ---------------------------------------------------------------- dbt in a sandbox
    def profiles_dir(self, sandbox: Sandbox, other_threads: bool = False) -> str:
        """`other_threads`: DuckDB runs with another thread count than the reference (1 where it
        used more, else 2), so that a result depending on how rows are split between threads differs
        in the determinism scenario."""
        assert self.engine and self.project
        output = self.engine.profile_output(sandbox)
        if other_threads and self.engine.dialect.thread_count_setting:
            settings = dict(output.get("settings") or {})
            try:
                reference = int(settings.get("threads") or os.cpu_count() or 1)
            except (TypeError, ValueError):
                reference = 1
            output["settings"] = {**settings, "threads": 1 if reference > 1 else 2}
        # every secret (password, pass, DuckDB settings and secrets) through the environment
        out = secrets_through_env(output)
        folder = self.engine.run_dir / "profiles" / sandbox.name
        folder.mkdir(parents=True, exist_ok=True)
        doc = {self.project.profile_name: {"target": self.project.target_name,
                                           "outputs": {self.project.target_name: out}}}
        path = folder / "profiles.yml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return str(folder)

    def dbt(self, plan: Plan, sandbox: Sandbox, profiles_dir: str, step: Run, final: bool = True,
             only: set[str] | None = None, exclude: set[str] | None = None, models: list | None = None,
             hold=None, one_thread: bool = False):
        """`hold`: what the statements wait for (one of the two runs of an Overlap); `one_thread`: dbt's
        --threads 1 (the two runs of an Overlap meet the models in the same order)."""
        assert self.engine and self.project
        self.engine.prepare_manifest(self.project.manifest, sandbox)
        if self.clocks.get(sandbox.name) != step.clock:
            with self.engine.connect(sandbox) as con:
                self.set_clock(con, sandbox, step.clock)
        args, vars_yaml = run_args(plan, step, final, self.project.cli_vars, only, exclude, models)
        if one_thread:
            args += ["--threads", "1"]
        return self.project.session.invoke(args, profiles_dir=profiles_dir, vars_yaml=vars_yaml or "",
                                           clock=step.clock, dialect=self.engine.dialect,
                                           rewrite_sql=self._rewriter(sandbox),
                                           context=self.engine.invocation_context(sandbox), watch=self.watch,
                                           hold=hold)

    def overlap(self, plan: Plan, sandbox: Sandbox, profiles_dir: str, step: Run, final: bool,
                only: set[str] | None, exclude: set[str] | None, models: list | None
                ) -> tuple[list[tuple[str, object]], dict[str, str]]:
        """Two runs of `step` at once (an Overlap): the second in a process of its own (dbt runs one
        invocation at a time per process), the first here, each model's writes of the first held
        uncommitted until the second run of that model has started and blocked or written (the engine's
        coordinator: warehouse/postgres/overlap.py). Returns each dbt run as (label, result): the models no
        stateful one feeds (built once, first), the first run, the second; and the models that keep state
        the two runs never overlapped in, with why."""
        assert self.engine and self.project and self.second_runs is not None
        chosen = models if models is not None else (plan.build if final else plan.stateful)
        chosen = [m for m in chosen if (only is None or m.unique_id in only) and m.unique_id not in (exclude or ())]
        # the views and tables no model that keeps state feeds are built once, first (two runs rebuilding
        # one view at once collide on its backup's name, whatever the strategies): both runs are the rest
        stateful = {m.unique_id for m in chosen if m.keeps_state}
        before = [m for m in chosen if m.unique_id not in stateful and not stateful & plan.project.ancestors([m.unique_id])]
        both = [m for m in chosen if m not in before]
        results = [("the models no stateful one feeds, first", self.dbt(plan, sandbox, profiles_dir, step, final=final,
                                                                          models=before))] if before else []
        ids = [m.unique_id for m in both]
        coordinator, first, second = self.engine.overlap(sandbox, {u: i for i, u in enumerate(ids)}, OVERLAP_WAIT_S)
        if self.clocks.get(sandbox.name) != step.clock:
            with self.engine.connect(sandbox) as con:
                self.set_clock(con, sandbox, step.clock)
        process = self.second_runs(self)
        try:
            with coordinator:
                later = process.start(plan.detached(), sandbox, profiles_dir, step, final, ids, second)
                coordinator.second_ended = later.done
                res = self.dbt(plan, sandbox, profiles_dir, step, final=final, models=both, hold=first, one_thread=True)
                coordinator.release_all()
                again = later.result()
        except BaseException:
            process.kill()
            raise
        process.close()
        alone = {u: why for u, why in coordinator.alone.items() if u in stateful}
        if coordinator.error is not None:
            alone.update({u: f"the overlap's watch failed: {coordinator.error}" for u in stateful if u not in alone})
        return [*results, ("first run", res), ("second run", again)], alone

    def manifest_file(self) -> Path:
        """The parsed manifest in a file of the run's folder, for a process of this run to load (the
        scenario workers' when they were started, else written now)."""
        from ..dbt_invoke import dump_manifest

        assert self.engine and self.project
        path = self.engine.run_dir / "worker_manifest.pickle"
        if not path.exists():
            part = path.with_name(f"{path.name}.{os.getpid()}")
            part.write_bytes(dump_manifest(self.project.manifest))
            part.replace(path)
        return path

    def _rewriter(self, sandbox: Sandbox):
        """What dbt's statements go through in `sandbox`: the engine's rewrite, and in a shuffled sandbox
        every table written in another row order (Dialect.shuffled_write), so that a model that reads an
        intermediate model's ties breaks them otherwise than in the reference build."""
        own = self.engine.sql_rewriter(sandbox)
        shuffle = self.rewrites.get(sandbox.name)
        if shuffle is None:
            return own
        return shuffle if own is None else (lambda sql: own(shuffle(sql)))

    def set_clock(self, con: Connection, sandbox: Sandbox, when: dt.datetime) -> None:
        con.execute(clock.set_sql(when, con.dialect))
        self.clocks[sandbox.name] = when

    # ---------------------------------------------------------------- scenarios
    def run_scenario(self, name: str, plan: Plan, template: Sandbox, ref_errors: dict[str, str],
                     isolate: dict | None = None, start: dict | None = None,
                     branches: tuple[tuple[str, int], ...] = ()) -> JobResult:
        """Run one chain of scenarios ('replay+backfill' or one name) in one sandbox and judge each.
        `isolate`: {'broken': uids rebuilt in full at every run (or, in determinism, replaced by
        their reference output), 'models': the uids to build, 'judge': the uids to judge}.
        `start`: the first build shared by the scenarios that begin alike (see first_build): its
        sandbox is cloned instead of the template, and its steps, errors and runs count as done.
        `branches`: (scenario, steps in common with the chain's first one): each goes on, after the
        chain, from a copy of the sandbox taken when those steps were done (runs.branches)."""
        assert self.engine and plan.facts.timeline
        names = name.split("+")
        self.progress.scenario(name if not isolate else f"{name} (isolation)")
        outer = cost.take()  # what this job spends goes back with its verdicts (JobResult.cost), wherever it runs
        # the template outlives every scenario, which only reads its reference outputs and the rows
        # inputs arrive from
        with cost.spent("copies"):
            sb = self.engine.clone(start["sandbox"] if start else template,
                                   name.replace("+", "_") if not isolate else f"iso{isolate['level']}_{names[-1]}",
                                   read_only=READ_ONLY)
        judged_all: dict[str, dict[str, ScenarioResult]] = {}
        side_found: dict[str, list] = {}
        spent: dict[str, float] = {}
        copies: list[tuple[str, Sandbox, ChainState]] = []  # the branches' sandboxes, when taken
        rewrite = next((r for n in names if (r := scenario_kind(n).write_rewrite(self.engine.dialect))), None)
        if rewrite is not None:
            self.rewrites[sb.name] = rewrite
        try:
            for n in names:
                scenario_kind(n).prepare_sandbox(self.engine, plan, sb)
            profiles = self.profiles_dir(sb, other_threads=any(scenario_kind(n).other_threads for n in names))
            state, scope = ChainState.after(start), _Scope.of(plan, isolate)
            at = {k: [b for b, j in branches if j == k] for _, k in branches}

            def branch(done: int) -> None:
                for b in at.get(done, ()):
                    with cost.spent("copies"):
                        copies.append((b, self.engine.clone(sb, b, read_only=READ_ONLY), state.branch(done)))

            for i, scenario in enumerate(names):
                judged_all[scenario] = self._replay_one(plan, sb, profiles, scenario, state, scope, isolate,
                                                        ref_errors, side_found, branch if i == 0 else None)
            self._drop(sb)  # judged: the branches go on from their copies
            for b, copy, own in copies:
                self.progress.scenario(b)
                judged_all[b] = self._replay_one(plan, copy, self.profiles_dir(copy), b, own, scope, isolate,
                                                 ref_errors, side_found)
                state.results += own.results
                self._drop(copy)
        finally:
            for _, copy, _ in copies:
                self._drop(copy)
            self._drop(sb)
            self.rewrites.pop(sb.name, None)
            spent.update(cost.take())
            cost.add(outer)
        return JobResult(judged_all, side_found, spent, state.results)

    def _drop(self, sb: Sandbox) -> None:
        """A scenario's sandbox, once judged (kept with --keep-sandboxes)."""
        assert self.engine
        if not self.options.keep_sandboxes and sb in self.engine.sandboxes:
            with cost.spent("copies"):
                self.engine.drop(sb)

    def _replay_one(self, plan: Plan, sb: Sandbox, profiles: str, scenario: str, state: ChainState, scope: _Scope,
                    isolate: dict | None, ref_errors: dict[str, str], side_found: dict[str, list],
                    branch=None) -> dict[str, ScenarioResult]:
        """One scenario of a chain: its steps not done yet, then its judgement. `branch(done)` is
        called after each step (with the number of the scenario's steps done)."""
        kind = scenario_kind(scenario)
        steps = scenario_steps(scenario, plan.facts.timeline)
        done = state.done
        todo = steps[done:]
        last_run = max(i for i, st in enumerate(todo) if isinstance(st, Run))
        # lean (see rebuild.py): stateful models (and what they read, in the first build) at every run,
        # the models below them at the end where their output differs; in determinism the models whose
        # SQL may depend on row order, and what they read
        lean = isolate is None
        # a table no run can change is built once, in the first build (see frozen_ids)
        between = [m for m in plan.stateful if m.unique_id not in plan.facts.frozen] if lean else plan.stateful
        current, first = kind.lean_models(plan) if lean else (set(), set())
        for i, step in enumerate(todo):
            if isinstance(step, Run):
                models = None
                if lean:
                    models = [m for m in plan.build if m.unique_id in first] if step.full_refresh else between
                repeat = i > 0 and isinstance(todo[i - 1], Run) and todo[i - 1].clock == step.clock
                self._run_step(plan, sb, profiles, step, state, scope, isolate, kind.isolation_by_reference, models,
                               final=(i == last_run), repeat=repeat)
                self.progress.advance(f"{scenario}: {step.label}")
            else:
                with self.engine.connect(sb) as con:
                    apply_step(con, plan, step)
                    following = todo[i + 1] if i + 1 < len(todo) else None
                    if isinstance(following, Run):  # one connection for the rows and the clock
                        self.set_clock(con, sb, following.clock)
            if branch is not None:
                branch(done + i + 1)
        state.done = len(steps)
        judged = {}
        if lean:
            final_step = todo[last_run]
            assert isinstance(final_step, Run)
            judged = self._judge_lean(plan, sb, profiles, scenario, final_step, current, first, state, ref_errors)
        with self.engine.connect(sb) as con, cost.spent("judging"):
            if not lean:
                judged = judge(con, scenario, plan, state.errors, ref_errors, self.options.float_tolerance,
                               scope.judge_ids, state.skipped)
            for uid, added in state.reopened.items():
                r = judged.get(uid)
                if r is not None and r.verdict in (Verdict.SAFE, Verdict.UNTESTED, Verdict.DRIFT):
                    judged[uid] = replace(r, verdict=Verdict.DUPLICATES, extra_rows=max(r.extra_rows, added),
                                          message=f"a rerun of an unchanged batch added {added} version(s) to the snapshot")
            for uid, why in state.alone.items():  # two runs at once that never met: nothing exercised
                r = judged.get(uid)
                if r is not None and r.verdict == Verdict.SAFE:
                    judged[uid] = replace(r, verdict=Verdict.UNTESTED, message=f"{scenario}: {why}")
            if not isolate and plan.facts.side is not None:
                found = side_effects.judge(con, plan.facts.side, state.runs, lambda a, b: diff_relations(
                    con, a, b, float_tolerance=self.options.float_tolerance))
                side_effects.attribute(judged, found)
                side_found[scenario] = found
        return judged

    def _run_step(self, plan: Plan, sb: Sandbox, profiles: str, step: Run, state: ChainState, scope: _Scope,
                  isolate: dict | None, by_reference: bool, models: list | None, final: bool, repeat: bool) -> None:
        """One dbt run of a scenario; a rerun at the same clock also counts the versions it adds to snapshots.
        `by_reference`: in isolation, the broken ancestors' reference outputs stand in for them (else they
        are rebuilt in full)."""
        before = snapshot_versions(self.engine, sb, scope.snapshots) if repeat else {}
        with self._isolation(plan, scope.broken, full=not by_reference):
            exclude = scope.broken if (isolate and by_reference) else None
            if state.stopped:  # a statement stopped at the limit: not run again in this sandbox
                exclude = (exclude or set()) | state.stopped
            if exclude:
                place_reference(self.engine, plan, sb, scope.broken)
            if models == []:
                results = []
            elif isinstance(step, Overlap):
                results, alone = self.overlap(plan, sb, profiles, step, final, scope.only, exclude, models)
                results = [(f"{step.label} ({label})", res) for label, res in results]
                for uid, why in alone.items():
                    state.alone.setdefault(uid, f"{step.label}: {why}")
            else:
                results = [(step.label, self.dbt(plan, sb, profiles, step, final=final, only=scope.only,
                                                 exclude=exclude, models=models))]
        for label, res in results:
            state.tally(res, plan, label)
        for uid, count in snapshot_versions(self.engine, sb, scope.snapshots).items() if repeat else ():
            if uid in before and count > before[uid]:
                state.reopened[uid] = state.reopened.get(uid, 0) + count - before[uid]

    def _judge_lean(self, plan: Plan, sb: Sandbox, profiles: str, scenario: str, step: Run, current: set[str],
                    first: set[str], state: ChainState, ref_errors: dict[str, str]) -> dict[str, ScenarioResult]:
        """The end of a lean scenario: judge the models its last run built (`current`), build what
        reads the ones that differ (and the models with hooks), judge those and the rest of what it
        built (`first`: its first build), and judge the others from the reference."""
        assert self.engine and self.project
        errors, skipped = state.errors, state.skipped
        with self.engine.connect(sb) as con, cost.spent("judging"):
            out = judge(con, scenario, plan, errors, ref_errors, self.options.float_tolerance, current, skipped)
        differing = {u for u, r in out.items() if differs(r.verdict)}
        failed = {**ref_errors, **skipped, **errors}
        kind = scenario_kind(scenario)
        opaque = kind.opaque(plan, current)
        rebuild, blocked = final_rebuild(plan, differing, failed, current, opaque, step.label)
        if rebuild:
            res = self.dbt(plan, sb, profiles, step, models=[self.project.models[u] for u in rebuild],
                            exclude=set(state.stopped) or None)
            state.tally(res, plan, f"{step.label} (the models below)")
        built = set(rebuild) | (first - current)
        rest = {m.unique_id for m in plan.judged} - current
        with self.engine.connect(sb) as con, cost.spent("judging"):
            out.update(judge(con, scenario, plan, errors, ref_errors, self.options.float_tolerance,
                             {u for u in rest if u in built or u in ref_errors or u in errors}, skipped))
        for uid in sorted(rest - set(out)):
            if uid in blocked:
                out[uid] = ScenarioResult(scenario, Verdict.UNTESTED, message=blocked[uid])
            else:
                rows = plan.facts.reference_rows.get(uid, 0)
                out[uid] = ScenarioResult(scenario, Verdict.SAFE, reference_rows=rows, rows=rows,
                                          message=kind.carried())
        return out

    def first_build(self, plan: Plan, template: Sandbox) -> tuple[dict, object]:
        """The first build (the data before the first replayed batch, built in full at its start)
        is the same in replay, rerun and partial: it runs once, in a sandbox of its own that those
        scenarios clone (a file copy on DuckDB, CREATE DATABASE ... TEMPLATE on PostgreSQL)."""
        assert self.engine and plan.facts.timeline
        steps = scenario_steps("replay", plan.facts.timeline)
        reset, run = steps[0], steps[1]
        assert isinstance(reset, Reset) and isinstance(run, Run) and run.full_refresh
        self.progress.scenario("first build")
        with cost.spent("copies"):
            sb = self.engine.clone(template, "first_build", read_only=READ_ONLY)
        self.shared.append(sb)
        with self.engine.connect(sb) as con:
            apply_step(con, plan, reset)
            self.set_clock(con, sb, run.clock)
        res = self.dbt(plan, sb, self.profiles_dir(sb), run, final=False,
                        models=[m for m in plan.build if m.unique_id in first_ids(plan)])
        state = ChainState()
        state.tally(res, plan, run.label)
        self.engine.release(sb)  # worker processes copy it next
        self.progress.advance(f"first build: {run.label}")
        # what the scenarios cloning it carry on (its invocation is counted once, by the caller)
        return {"sandbox": sb, "state": state.branch(2)}, res

    @contextlib.contextmanager
    def _isolation(self, plan: Plan, broken: set[str], full: bool) -> Iterator[None]:
        """Broken models rebuilt in full at every run, so what they pass on is right for the data
        that has arrived (dbt's `full_refresh` config wins over the run's flag)."""
        assert self.project
        nodes = [self.project.manifest.nodes[u] for u in broken if u in self.project.manifest.nodes] if full else []
        saved = [n.config.full_refresh for n in nodes]
        for n in nodes:
            n.config.full_refresh = True
        try:
            yield
        finally:
            for n, value in zip(nodes, saved):
                n.config.full_refresh = value

