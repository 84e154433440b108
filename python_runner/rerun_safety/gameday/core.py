"""The game day: snapshot the sources, replay the project in sandboxes, diff, judge."""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
import uuid
from dataclasses import replace
from typing import Iterator

import yaml

from .. import clock

from . import order_only, side_effects
from .assemble import build_report
from .by_name import ByName, copy_read_by_name
from .judge import failed, judge
from .sandbox_data import apply_step, place_reference, reorder_inputs, snapshot_versions
from ..diff import diff_relations
from ..dbt_invoke import StatementWatch, scrub_dbt_environment, scrub_note
from ..errors import ConfigError, RerunSafetyError, SandboxError, first_line
from .options import GamedayOptions  # noqa: F401 - the public import path
from .plan import Lateness, Plan, make_plan, partition_column
from .preflight import check_columns, check_config
from .rebuild import (CARRIED, CARRIED_ORDER, determinism_ids, final_rebuild, first_ids, frozen_ids,
                      order_sensitive)
from ..project import Project
from ..results import GamedayReport, ScenarioResult
from ..sandbox import Engine, Sandbox, engine_for
from ..sandbox.base import (PARSE_PREFIX, REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, Connection, check_writable_dir,
                           make_locked_dir, private_work_root, snapshot_table, table)
from .runs import _chains, _counts, _node_errors, _sharing_first_build, _tally, run_args
from .scenarios import Reset, Run, count_runs, scenario_steps
from .timeline import cut_slice, plan_timeline
from ..secrets import secrets_through_env
from .verdict import differs, levels
from .workers import kill_pool, run_parallel, start_pool

class _NoProgress:
    def start(self, total: int, description: str) -> None: ...
    def advance(self, description: str) -> None: ...
    def scenario(self, name: str) -> None: ...


class Gameday:
    def __init__(self, options: GamedayOptions, progress=None, run_id: str | None = None):
        self.options = options
        self.progress = progress or _NoProgress()
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.engine: Engine | None = None
        self.project: Project | None = None
        self._clocks: dict[str, dt.datetime] = {}  # sandbox -> the time its clock row holds
        self._shared: list[Sandbox] = []  # sandboxes scenarios clone (the shared first build), dropped at the end
        self._read_by_name = ByName()
        # statements timed in the reference build, stopped past a limit in the scenarios after it
        self.watch = StatementWatch()

    # ---------------------------------------------------------------- dbt in a sandbox
    def _profiles_dir(self, sandbox: Sandbox, other_threads: bool = False) -> str:
        """`other_threads`: DuckDB runs with another thread count than the reference (1 where it
        used more, else 2), so that a result depending on how rows are split between threads differs
        in the determinism scenario."""
        assert self.engine and self.project
        output = self.engine.profile_output(sandbox)
        if other_threads and self.engine.dialect == "duckdb":
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

    def _dbt(self, plan: Plan, sandbox: Sandbox, profiles_dir: str, step: Run, final: bool = True,
             only: set[str] | None = None, exclude: set[str] | None = None, models: list | None = None):
        assert self.engine and self.project
        self.engine.prepare_manifest(self.project.manifest, sandbox)
        if self._clocks.get(sandbox.name) != step.clock:
            with self.engine.connect(sandbox) as con:
                self._set_clock(con, sandbox, step.clock)
        args, vars_yaml = run_args(plan, step, final, self.project.cli_vars, only, exclude, models)
        return self.project.session.invoke(args, profiles_dir=profiles_dir, vars_yaml=vars_yaml or "",
                                           clock=step.clock, dialect=self.engine.dialect,
                                           rewrite_sql=self.engine.sql_rewriter(sandbox),
                                           context=self.engine.invocation_context(sandbox), watch=self.watch)

    def _set_clock(self, con: Connection, sandbox: Sandbox, when: dt.datetime) -> None:
        con.execute(clock.set_sql(when, con.dialect))
        self._clocks[sandbox.name] = when

    # ---------------------------------------------------------------- scenarios
    def _build_reference(self, plan: Plan, snapshot: Sandbox) -> tuple[Sandbox, dict[str, str], list]:
        """Full refresh on all data; keep its outputs in the reference schema of a template that
        every scenario clones, then drop the built relations so no scenario can inherit them."""
        assert self.engine and plan.timeline
        sb = self.engine.clone(snapshot, "reference")
        profiles = self._profiles_dir(sb)
        self.progress.scenario("reference")
        with self.engine.connect(sb) as con:
            side, existing = side_effects.before_reference(con, plan, self.project.manifest)
        self.watch.limit_s = None
        res = self._dbt(plan, sb, profiles, scenario_steps("reference", plan.timeline)[0])
        self.watch.limit_s = self.watch.limit_from_reference()
        self.progress.advance("reference: full refresh")
        errors = _node_errors(res, plan)
        compiled = self._trace_time_columns(plan, res)
        plan.order_sensitive = order_sensitive(plan, compiled, self.engine.dialect)
        plan.frozen = frozen_ids(plan)
        plan.unordered = order_only.unordered_in_results(res.raw, plan, self.engine.dialect)
        with self.engine.connect(sb) as con:
            con.create_schema(REFERENCE_SCHEMA)
            with con.catalog_cached():
                built = {m.unique_id: [c for c, _ in con.columns(m.schema, m.identifier)] for m in plan.judged
                         if m.unique_id not in errors and con.relation_kind(m.schema, m.identifier)}
            for m in plan.judged:
                if m.unique_id in built:
                    check_columns(m, built[m.unique_id])
                    con.copy_table(m.schema, m.identifier, REFERENCE_SCHEMA, plan.ref_names[m.unique_id])
                elif m.unique_id not in errors:
                    errors[m.unique_id] = "the reference build did not create it"
            plan.reference_rows.update(_counts(con, {u: table(REFERENCE_SCHEMA, plan.ref_names[u]) for u in built}))
            side_effects.after_reference(con, plan, side, existing)
            con.drop_relations([(m.schema, m.identifier) for m in reversed(plan.build)])
        plan.side = side
        return sb, errors, [res]

    def _trace_time_columns(self, plan: Plan, res) -> dict[str, str]:
        """The time column of each model without an event_time or partition_key config, traced
        through its compiled SQL from its inputs' time columns, for the per-day counts."""
        from .lineage import output_time_column

        compiled = {}
        for r in getattr(res.raw, "results", None) or ():
            node = getattr(r, "node", None)
            if node is not None and getattr(node, "compiled_code", None):
                compiled[node.unique_id] = node.compiled_code
        known: dict[str, str] = {s.identifier.lower(): s.time_column for s in plan.inputs if s.time_column}
        for m in plan.build:
            column = partition_column(m)
            if column is None and m.unique_id in compiled and m.language == "sql":
                column = output_time_column(compiled[m.unique_id], self.engine.dialect, known)
            if column:
                plan.time_columns[m.unique_id] = column
                known[m.identifier.lower()] = column
        return compiled

    def run_scenario(self, name: str, plan: Plan, template: Sandbox, ref_errors: dict[str, str],
                     isolate: dict | None = None, start: dict | None = None) -> tuple[dict, list]:
        """Run one chain of scenarios ('replay+backfill' or one name) in one sandbox and judge each.
        `isolate`: {'broken': uids rebuilt in full at every run (or, in determinism, replaced by
        their reference output), 'models': the uids to build, 'judge': the uids to judge}.
        `start`: the first build shared by the scenarios that begin alike (see _first_build): its
        sandbox is cloned instead of the template, and its steps, errors and runs count as done."""
        assert self.engine and plan.timeline
        names = name.split("+")
        self.progress.scenario(name if not isolate else f"{name} (isolation)")
        # the template outlives every scenario, which only reads its reference outputs and the rows
        # inputs arrive from
        sb = self.engine.clone(start["sandbox"] if start else template,
                               name.replace("+", "_") if not isolate else f"iso{isolate['level']}_{names[-1]}",
                               read_only=(REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, side_effects.PREHOOK_SCHEMA))
        judged_all: dict[str, dict] = {}
        try:
            if "determinism" in names:
                reorder_inputs(self.engine, plan, sb)
            profiles = self._profiles_dir(sb, other_threads="determinism" in names)
            errors: dict[str, str] = dict(start["errors"]) if start else {}
            results = []
            # successful runs of each model so far (log tables: one row each)
            runs: dict[str, int] = dict(start["runs"]) if start else {}
            # models dbt skipped in a run, and where
            skipped: dict[str, str] = dict(start["skipped"]) if start else {}
            # models whose statement ran past the limit (see StatementWatch)
            stopped: set[str] = set(start["stopped"]) if start else set()
            only = set(isolate["models"]) if isolate else None
            broken = set(isolate["broken"]) if isolate else set()
            judge_ids = set(isolate["judge"]) if isolate else None
            done = start["done"] if start else 0
            snapshots = [m for m in plan.judged if m.snapshot and (only is None or m.unique_id in only)]
            reopened: dict[str, int] = {}  # snapshot -> versions that reruns of an unchanged batch added
            for scenario in names:
                steps = scenario_steps(scenario, plan.timeline)
                todo = steps[done:]
                last_run = max(i for i, st in enumerate(todo) if isinstance(st, Run))
                # lean (see rebuild.py): stateful models (and what they read, in the first build) at
                # every run, the models below them at the end where their output differs; in
                # determinism the models whose SQL may depend on row order, and what they read
                lean = isolate is None
                current = first = set()
                # a table no run can change is built once, in the first build (see frozen_ids)
                between = [m for m in plan.stateful if m.unique_id not in plan.frozen] if lean else plan.stateful
                if lean and scenario == "determinism":
                    current = first = determinism_ids(plan, plan.order_sensitive)
                elif lean:
                    current, first = {m.unique_id for m in plan.stateful}, first_ids(plan)
                for i, step in enumerate(todo):
                    if isinstance(step, Run):
                        repeat = i > 0 and isinstance(todo[i - 1], Run) and todo[i - 1].clock == step.clock
                        before = snapshot_versions(self.engine, sb, snapshots) if repeat else {}
                        with self._isolation(plan, broken, full=(scenario != "determinism")):
                            exclude = broken if (isolate and scenario == "determinism") else None
                            if stopped:  # a statement stopped at the limit: not run again in this sandbox
                                exclude = (exclude or set()) | stopped
                            if exclude:
                                place_reference(self.engine, plan, sb, broken)
                            models = None
                            if lean:
                                models = ([m for m in plan.build if m.unique_id in first]
                                          if step.full_refresh else between)
                            res = None if models == [] else self._dbt(
                                plan, sb, profiles, step, final=(i == last_run), only=only, exclude=exclude,
                                models=models)
                        if res is not None:
                            results.append(res)
                            _tally(res, plan, step.label, errors, runs, skipped, stopped)
                        for uid, count in snapshot_versions(self.engine, sb, snapshots).items() if repeat else ():
                            if uid in before and count > before[uid]:
                                reopened[uid] = reopened.get(uid, 0) + count - before[uid]
                        self.progress.advance(f"{scenario}: {step.label}")
                    else:
                        with self.engine.connect(sb) as con:
                            apply_step(con, plan, step)
                            following = todo[i + 1] if i + 1 < len(todo) else None
                            if isinstance(following, Run):  # one connection for the rows and the clock
                                self._set_clock(con, sb, following.clock)
                done = len(steps)
                if lean:
                    final_step = todo[last_run]
                    assert isinstance(final_step, Run)
                    judged_all[scenario] = self._judge_lean(
                        plan, sb, profiles, scenario, final_step, current, first, errors, ref_errors, runs, skipped,
                        stopped, results)
                with self.engine.connect(sb) as con:
                    if not lean:
                        judged_all[scenario] = judge(con, scenario, plan, errors, ref_errors,
                                                     self.options.float_tolerance, judge_ids, skipped)
                    for uid, added in reopened.items():
                        r = judged_all[scenario].get(uid)
                        if r is not None and r.verdict in ("safe", "untested", "drift"):
                            judged_all[scenario][uid] = replace(
                                r, verdict="duplicates", extra_rows=max(r.extra_rows, added),
                                message=f"a rerun of an unchanged batch added {added} version(s) to the snapshot")
                    if not isolate and plan.side is not None:
                        found = side_effects.judge(
                            con, plan.side, runs, lambda a, b: diff_relations(con, a, b, float_tolerance=self.options.float_tolerance))
                        side_effects.attribute(judged_all[scenario], found)
                        judged_all.setdefault(SIDE_KEY, {})[scenario] = found
            return judged_all, results
        finally:
            if not self.options.keep_sandboxes:
                self.engine.drop(sb)

    def _judge_lean(self, plan: Plan, sb: Sandbox, profiles: str, scenario: str, step: Run, current: set[str],
                    first: set[str], errors: dict[str, str], ref_errors: dict[str, str], runs: dict[str, int],
                    skipped: dict[str, str], stopped: set[str], results: list) -> dict[str, ScenarioResult]:
        """The end of a lean scenario: judge the models its last run built (`current`), build what
        reads the ones that differ (and the models with hooks), judge those and the rest of what it
        built (`first`: its first build), and judge the others from the reference."""
        assert self.engine and self.project
        with self.engine.connect(sb) as con:
            out = judge(con, scenario, plan, errors, ref_errors, self.options.float_tolerance, current, skipped)
        differing = {u for u, r in out.items() if differs(r.verdict)}
        failed = {**ref_errors, **skipped, **errors}
        opaque = current if scenario != "determinism" else current & plan.order_sensitive
        rebuild, blocked = final_rebuild(plan, differing, failed, current, opaque, step.label)
        if rebuild:
            res = self._dbt(plan, sb, profiles, step, models=[self.project.models[u] for u in rebuild],
                            exclude=set(stopped) or None)
            results.append(res)
            _tally(res, plan, f"{step.label} (the models below)", errors, runs, skipped, stopped)
        built = set(rebuild) | (first - current)
        rest = {m.unique_id for m in plan.judged} - current
        with self.engine.connect(sb) as con:
            out.update(judge(con, scenario, plan, errors, ref_errors, self.options.float_tolerance,
                             {u for u in rest if u in built or u in ref_errors or u in errors}, skipped))
        for uid in sorted(rest - set(out)):
            if uid in blocked:
                out[uid] = ScenarioResult(scenario, "untested", message=blocked[uid])
            else:
                rows = plan.reference_rows.get(uid, 0)
                out[uid] = ScenarioResult(scenario, "safe", reference_rows=rows, rows=rows,
                                          message=CARRIED_ORDER if scenario == "determinism" else CARRIED)
        return out

    def _first_build(self, plan: Plan, template: Sandbox) -> tuple[dict, object]:
        """The first build (the data before the first replayed batch, built in full at its start)
        is the same in replay, rerun and partial: it runs once, in a sandbox of its own that those
        scenarios clone (a file copy on DuckDB, CREATE DATABASE ... TEMPLATE on PostgreSQL)."""
        assert self.engine and plan.timeline
        steps = scenario_steps("replay", plan.timeline)
        reset, run = steps[0], steps[1]
        assert isinstance(reset, Reset) and isinstance(run, Run) and run.full_refresh
        self.progress.scenario("first build")
        sb = self.engine.clone(template, "first_build",
                               read_only=(REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, side_effects.PREHOOK_SCHEMA))
        self._shared.append(sb)
        with self.engine.connect(sb) as con:
            apply_step(con, plan, reset)
            self._set_clock(con, sb, run.clock)
        res = self._dbt(plan, sb, self._profiles_dir(sb), run, final=False,
                        models=[m for m in plan.build if m.unique_id in first_ids(plan)])
        errors: dict[str, str] = {}
        runs: dict[str, int] = {}
        skipped: dict[str, str] = {}
        stopped: set[str] = set()
        _tally(res, plan, run.label, errors, runs, skipped, stopped)
        self.engine.release(sb)  # worker processes copy it next
        self.progress.advance(f"first build: {run.label}")
        return {"sandbox": sb, "done": 2, "errors": errors, "runs": runs, "skipped": skipped,
                "stopped": sorted(stopped)}, res

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

    # ---------------------------------------------------------------- main
    def run(self) -> GamedayReport:
        started = time.perf_counter()
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        # before any work: reports that cannot be written would lose the whole run, and the work
        # root holds copies of production (private to this user)
        o = self.options = replace(self.options, work_root=private_work_root(self.options.work_root))
        confined = o.confinement is not None and o.confinement.confined
        if not confined:  # (a confined run's command checked it: only it writes there)
            check_writable_dir(o.output_dir, "the output directory")
        parse_dir = o.work_root / f"{PARSE_PREFIX}{self.run_id}"
        parse_lock = make_locked_dir(parse_dir)  # a run killed while parsing leaves it to the sweep
        pool = None
        failure: BaseException | None = None
        ignored = scrub_note(scrub_dbt_environment())
        try:
            self.project = project = Project(o.project_dir, o.profiles_dir, o.target, o.vars_yaml, parse_dir)
            self.engine = engine = engine_for(project.target_output, o.work_root, self.run_id, confined=confined)
            project.session.work_dir = engine.run_dir
            if confined and engine.confinement_gap:
                raise ConfigError(f"cannot confine the project's code: {engine.confinement_gap}; pass --unconfined "
                                  "to run without that protection (the reports will say so)")
            engine.learn_project(project.manifest)
            engine.sweep()
            plan = make_plan(project, o.select, o.exclude, o.state)
            if ignored:
                plan.notes.append(ignored)
            if confined and engine.unconfined_part:
                plan.notes.append(f"not confined by the game day: {engine.unconfined_part}")
            check_config(plan.build, project.target_output, project.target_name)
            scenarios = [s for s in o.scenarios if s != "reference"]
            chains = ["+".join(c) for c in _chains(scenarios)]
            plan.late = Lateness(o.late_fraction, o.late_by)
            if "late" in scenarios and not o.late_fraction:
                scenarios.remove("late")
                chains = ["+".join(c) for c in _chains(scenarios)]
                o = self.options = replace(o, scenarios=tuple(s for s in o.scenarios if s != "late"))
                plan.notes.append("late: not run; --late-fraction/--late-by make a share of the rows of inputs "
                                  "without a load time arrive late (inputs with one arrive by it in every scenario)")
                if not chains:  # nothing would run but the reference: never "safe to run twice"
                    raise ConfigError("--scenarios late runs nothing without --late-fraction or --late-by (inputs "
                                      "with a load time arrive by it in every other scenario): add one, or choose "
                                      "other scenarios")
            if o.threads > 1 and len(chains) > 1 and not engine.parallel_ok:
                plan.notes.append(f"--threads {o.threads}: scenarios ran one after another, in the one Spark of "
                                  "this process (method: session; its catalog admits one process)")
            elif o.threads > 1 and len(chains) > 1:
                # workers start now: their start-up overlaps the snapshot and the reference build
                pool = start_pool(self, min(o.threads, len(chains)))
            plan.drop_absent_hook_sources(engine)
            snapshot = engine.create_snapshot([*plan.timed_sources, *plan.static_sources])
            self._read_by_name = copy_read_by_name(engine, project, plan, snapshot, self._profiles_dir(snapshot))
            plan.notes.extend(getattr(engine, "notes", []))  # what the snapshot could not copy as it is
            if plan.seeds:
                self._seed(plan, snapshot)
            with engine.connect(snapshot) as con:
                con.create_schema(clock.CLOCK_SCHEMA)
                for statement in clock.setup_sql(con.dialect):
                    con.execute(statement)
                if o.since or o.until:
                    cut_slice(con, plan, o.since, o.until)
                plan.timeline = plan_timeline(con, plan, o.batch_size, o.steps)
            plan.judge_exercise()
            shared = _sharing_first_build(chains, engine, plan.timeline)
            self.progress.start(1 + sum(count_runs([c.split("+")[-1]], plan.timeline) for c in chains)
                                - max(len(shared) - 1, 0), "game day")
            template, ref_errors, invocations = self._build_reference(plan, snapshot)
            engine.drop(snapshot)  # the reference sandbox holds the snapshot's tables too
            by_model: dict[str, dict[str, ScenarioResult]] = {m.unique_id: {} for m in plan.judged}
            for m in plan.judged:
                uid = m.unique_id
                rows = plan.reference_rows.get(uid, 0)
                by_model[uid]["reference"] = (
                    failed(plan, uid, "reference", ref_errors[uid]) if uid in ref_errors else
                    ScenarioResult("reference", "safe", reference_rows=rows, rows=rows))
            start = None
            if shared:
                start, first = self._first_build(plan, template)
                invocations.append(first)
            payloads = [self._payload(plan, c, template, ref_errors, start=start if c in shared else None)
                        for c in sorted(chains, key=lambda n: -count_runs(n.split("+"), plan.timeline))]
            side_found: dict[str, list] = {}
            for judged, results in self._execute(pool, plan, payloads, template, ref_errors).values():
                invocations += results
                side_found.update(judged.pop(SIDE_KEY, {}))
                for scenario, rs in judged.items():
                    for uid, r in rs.items():
                        by_model[uid][scenario] = r
            plan.side_found = side_found
            if not o.keep_sandboxes:
                for sb in self._shared:
                    engine.drop(sb)
            isolated = self._isolate(pool, plan, by_model, template, ref_errors, invocations)
            if o.keep_sandboxes:
                kept = engine.keep()
                plan.notes.append(f"--keep-sandboxes: {len(kept)} sandbox(es) kept for a day (a later game day's "
                                  f"sweep removes them after that): {', '.join(kept)}")
            return build_report(o, project, plan, by_model, isolated, invocations, started, started_at)
        except BaseException as err:
            failure = err
            if pool is not None:
                kill_pool(pool)  # before cleanup, which drops the workers' sandboxes too
                pool = None
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

    def _payload(self, plan: Plan, chain: str, template: Sandbox, ref_errors: dict[str, str],
                 isolate: dict | None = None, start: dict | None = None) -> dict:
        key = chain if not isolate else f"{chain} (isolation {isolate['level'] + 1})"
        return {"key": key, "scenario": chain, "template": template, "start": start,
                "ref_errors": ref_errors, "timeline": plan.timeline, "arrivals": plan.arrivals,
                "first_halves": plan.first_halves, "read_by_name": self._read_by_name,
                "time_columns": plan.time_columns, "late": plan.late, "side": plan.side, "isolate": isolate,
                "static": [src.unique_id for src in plan.static_sources], "statement_limit": self.watch.limit_s,
                "unordered": plan.unordered, "late_rows": plan.late_rows, "reference_rows": plan.reference_rows,
                "order_sensitive": plan.order_sensitive, "frozen": plan.frozen}

    def _execute(self, pool, plan: Plan, payloads: list[dict], template: Sandbox,
                 ref_errors: dict[str, str]) -> dict[str, tuple]:
        if pool is not None and len(payloads) > 1:
            return run_parallel(pool, payloads, self.progress)
        return {p["key"]: self.run_scenario(p["scenario"], plan, template, ref_errors, isolate=p["isolate"],
                                            start=p.get("start"))
                for p in payloads}

    def _isolate(self, pool, plan: Plan, by_model: dict[str, dict[str, ScenarioResult]], template: Sandbox,
                 ref_errors: dict[str, str], invocations: list) -> dict[str, set[str]]:
        """A model that differs below a differing parent is replayed again with its broken
        ancestors kept right (rebuilt in full, or their reference output): if it still differs,
        the defect is its own. Returns model -> scenarios where it differs in isolation."""
        parents = {m.unique_id: plan.parents_in_judged(m) for m in plan.judged}
        ancestors = {m.unique_id: plan.project.ancestors([m.unique_id]) for m in plan.judged}
        payloads = []
        for scenario in [s for s in self.options.scenarios if s != "reference"]:
            bad = {u for u, rs in by_model.items() if differs(rs.get(scenario, ScenarioResult(scenario, "safe")).verdict)}
            # A table or view is rebuilt from its parents at the end of every scenario, at the same
            # clock as the reference: with right parents it is right, unless it is nondeterministic,
            # which the determinism scenario shows. Only incremental models keep state of their own.
            candidates = sorted(u for u in bad if any(p in bad for p in parents[u])
                                and (scenario == "determinism" or plan.project.models[u].keeps_state))
            # A candidate that is also upstream of another candidate must not be rebuilt in full
            # while it is itself checked: candidates are replayed by depth, each level with only the
            # broken models above it kept right.
            for level in levels(candidates, ancestors):
                broken = sorted({a for u in level for a in ancestors[u] if a in bad})
                models = sorted(set(level) | {a for u in level for a in ancestors[u]})
                judge = sorted(set(level) | {p for u in level for p in parents[u]})
                payloads.append(self._payload(plan, scenario, template, ref_errors,
                                              {"broken": broken, "models": models, "judge": judge,
                                               "candidates": level, "level": len(payloads)}))
        if not payloads:
            return {}
        self.progress.start(count_runs([p["scenario"] for p in payloads], plan.timeline), "isolation")
        candidates_of = {p["key"]: p["isolate"]["candidates"] for p in payloads}
        out: dict[str, set[str]] = {}
        for key, (judged, results) in self._execute(pool, plan, payloads, template, ref_errors).items():
            invocations += results
            for scenario, rs in judged.items():
                for uid in candidates_of[key]:
                    r = rs.get(uid)
                    # its own defect: it differs while every parent matches its reference
                    if r is not None and differs(r.verdict) and not any(
                            differs(rs[p].verdict) for p in parents[uid] if p in rs):
                        out.setdefault(uid, set()).add(scenario)
        return out

    def _seed(self, plan: Plan, snapshot: Sandbox) -> None:
        """Load the seeds into the snapshot; a timed seed's rows are kept aside to arrive batch by batch."""
        assert self.engine and self.project
        profiles = self._profiles_dir(snapshot)
        self.engine.prepare_manifest(self.project.manifest, snapshot)
        res = self.project.session.invoke(["seed", "--select", *[s.selector for s in plan.seeds]],
                                          profiles_dir=profiles, dialect=self.engine.dialect,
                                          rewrite_sql=self.engine.sql_rewriter(snapshot),
                                          context=self.engine.invocation_context(snapshot))
        if not res.success:
            raise ConfigError(f"dbt seed failed in the input copy: {res.error}")
        timed = [s for s in plan.inputs if s.seed]
        if timed:
            with self.engine.connect(snapshot) as con:
                for s in timed:
                    con.copy_table(s.schema, s.identifier, SNAPSHOT_SCHEMA, snapshot_table(s))

SIDE_KEY = "__side_effects__"  # in run_scenario's result: scenario -> side relations that differ


def run_gameday(options: GamedayOptions, progress=None) -> GamedayReport:
    return Gameday(options, progress).run()
