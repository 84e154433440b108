"""The game day: snapshot the sources, replay the project in sandboxes, diff, judge."""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlglot import exp

from .diff import DiffResult, diff_relations
from .errors import ConfigError
from .preflight import check_columns, check_config
from .project import Model, Project
from .results import GamedayReport, ModelVerdict, PartitionCount, ScenarioResult
from .sandbox import PREFIX, Engine, Sandbox, engine_for
from .sandbox.base import (PARSE_PREFIX, REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, Connection, make_locked_dir,
                           snapshot_table, table, ts_literal)
from .scenarios import ALL_SCENARIOS, Arrive, Reset, Run, Timeline, count_runs, make_timeline, scenario_steps
from .verdict import model_verdict, root_causes, scenario_verdict

PASSWORD_ENV = "RERUN_SAFETY_SANDBOX_PASSWORD"


@dataclass(frozen=True)
class GamedayOptions:
    project_dir: Path
    profiles_dir: str | None
    target: str | None
    select: tuple[str, ...]
    exclude: tuple[str, ...]
    vars_yaml: str | None
    steps: int
    scenarios: tuple[str, ...]
    output_dir: Path
    threads: int = 1
    keep_sandboxes: bool = False
    work_root: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "rerun_safety")

    @classmethod
    def build(cls, *, project_dir, profiles_dir=None, target=None, select=(), exclude=(), vars_yaml=None,
              steps=4, scenarios="all", output_dir=None, threads=1, keep_sandboxes=False,
              work_root=None) -> "GamedayOptions":
        project_dir = Path(project_dir).resolve()
        if isinstance(scenarios, str):
            names = ALL_SCENARIOS if scenarios.strip() in ("", "all") else tuple(
                s.strip() for s in scenarios.split(",") if s.strip())
        else:
            names = tuple(scenarios)
        unknown = [s for s in names if s not in ALL_SCENARIOS]
        if unknown:
            raise ConfigError(f"unknown scenario '{unknown[0]}' (known: {', '.join(ALL_SCENARIOS)})")
        if steps < 2:
            raise ConfigError("--steps must be at least 2")
        names = tuple(s for s in ALL_SCENARIOS if s in names or s == "reference")
        out = Path(output_dir).resolve() if output_dir else project_dir / "target" / "rerun_safety"
        kwargs: dict[str, Any] = {}
        if work_root:
            kwargs["work_root"] = Path(work_root)
        return cls(project_dir, profiles_dir, target, tuple(select), tuple(exclude), vars_yaml, steps, names,
                   out, threads, keep_sandboxes, **kwargs)


class _NoProgress:
    def start(self, total: int, description: str) -> None: ...
    def advance(self, description: str) -> None: ...
    def scenario(self, name: str) -> None: ...


@dataclass
class Plan:
    project: Project
    judged: list[Model]  # in topological order
    build: list[Model]  # every model dbt builds (judged + ephemeral/other upstream)
    seeds: list[Model]
    timed_sources: list
    static_sources: list
    timeline: Timeline
    microbatch: bool
    ref_names: dict[str, str]  # model unique_id -> table name in the reference schema
    stateful: list[Model] = field(default_factory=list)  # incremental models and tables they read
    reference_rows: dict[str, int] = field(default_factory=dict)

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


def _partition_column(m: Model) -> str | None:
    pk = m.partition_key
    if isinstance(pk, dict) and pk.get("field"):
        return str(pk["field"])
    if isinstance(pk, str):
        return pk
    if isinstance(pk, (list, tuple)) and pk:
        return str(pk[0])
    return m.event_time


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


class Gameday:
    def __init__(self, options: GamedayOptions, progress=None, run_id: str | None = None):
        self.options = options
        self.progress = progress or _NoProgress()
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.engine: Engine | None = None
        self.project: Project | None = None

    # ---------------------------------------------------------------- planning
    def _plan(self, project: Project) -> Plan:
        selected = project.select(self.options.select, self.options.exclude)
        if not selected:
            raise ConfigError("the selection matches no model" if (self.options.select or self.options.exclude)
                              else "the project has no models")
        if not any(project.models[u].incremental for u in selected):
            raise ConfigError("no incremental model is selected: the game day replays incremental models "
                              "(select at least one, e.g. --select config.materialized:incremental+)")
        build_ids = set(selected) | project.ancestors(selected)
        order = project.topo_order(build_ids)
        build = [project.models[u] for u in order if project.models[u].resource_type == "model"]
        seeds = [project.models[u] for u in order if project.models[u].resource_type == "seed"]
        judged = [m for m in build if m.judged]
        source_ids = sorted({s for m in build for s in m.sources})
        sources = [project.sources[s] for s in source_ids]
        timed = [s for s in sources if s.time_column]
        static = [s for s in sources if not s.time_column]
        for m in build:
            if m.incremental:
                ups = {s for u in ({m.unique_id} | project.ancestors([m.unique_id])) for s in project.models[u].sources}
                if ups and not any(project.sources[s].time_column for s in ups):
                    names = ", ".join(sorted(project.sources[s].name for s in ups))
                    raise ConfigError(f"model {m.name} is incremental but its sources ({names}) have no time "
                                      "column: set `event_time` in the source's config (or loaded_at_field, "
                                      "or meta.rerun_safety.time_column)")
        incremental = [m.unique_id for m in build if m.incremental]
        feeding = project.ancestors(incremental)
        stateful = [m for m in build if m.incremental or (m.unique_id in feeding and m.materialized == "table")]
        return Plan(project, judged, build, seeds, timed, static, None, any(m.strategy == "microbatch" for m in build),  # type: ignore[arg-type]
                    {m.unique_id: f"m{i}" for i, m in enumerate(judged)}, stateful)

    def _timeline(self, plan: Plan, con: Connection) -> Timeline:
        lows, highs = [], []
        for src in plan.timed_sources:
            col = exp.cast(exp.column(src.time_column, quoted=True), exp.DataType.build("timestamp"))
            q = exp.select(exp.func("min", col), exp.func("max", col)).from_(table(SNAPSHOT_SCHEMA, snapshot_table(src)))
            try:
                lo, hi = con.fetchone(q)
            except Exception as err:  # a cast error: the time column is not a timestamp
                raise ConfigError(f"source {src.name}: time column '{src.time_column}' cannot be read as a "
                                  f"timestamp: {str(err).strip().splitlines()[0]}") from None
            where = f"source {src.name}: time column '{src.time_column}'"
            lo, hi = _to_datetime(lo, where), _to_datetime(hi, where)
            if lo is not None:
                lows.append(lo)
                highs.append(hi)
        if not lows:
            raise ConfigError("every timed source is empty: there is nothing to replay "
                              f"({', '.join(s.name for s in plan.timed_sources)})")
        tmin, tmax = min(lows), max(highs)
        if tmax <= tmin:
            raise ConfigError("the sources' time range is a single instant: nothing to cut into steps")
        return make_timeline(tmin, tmax, self.options.steps)

    # ---------------------------------------------------------------- dbt in a sandbox
    def _profiles_dir(self, sandbox: Sandbox) -> str:
        assert self.engine and self.project
        out = self.engine.profile_output(sandbox)
        if out.get("password"):
            os.environ[PASSWORD_ENV] = str(out["password"])
            out["password"] = "{{ env_var('%s') }}" % PASSWORD_ENV
        folder = self.engine.run_dir / "profiles" / sandbox.name
        folder.mkdir(parents=True, exist_ok=True)
        doc = {self.project.profile_name: {"target": self.project.target_name,
                                           "outputs": {self.project.target_name: out}}}
        path = folder / "profiles.yml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return str(folder)

    def _run_args(self, plan: Plan, step: Run, final: bool) -> tuple[list[str], str | None]:
        # Between the first and the last run of a scenario only state matters: incremental models
        # and the tables they read. Views need no rerun, and other tables are rebuilt at the end.
        models = plan.build if (final or step.full_refresh) else plan.stateful
        args = ["run", "--select", *[m.selector for m in models]]
        if step.full_refresh:
            args.append("--full-refresh")
        start, end = step.window
        fmt = "%Y-%m-%dT%H:%M:%S"
        if plan.microbatch:
            args += ["--event-time-start", start.strftime(fmt), "--event-time-end", end.strftime(fmt)]
        merged = dict(self.project.cli_vars) if self.project else {}
        if not step.full_refresh:
            merged["rerun_safety_window_start"] = start.strftime("%Y-%m-%d %H:%M:%S")
            merged["rerun_safety_window_end"] = end.strftime("%Y-%m-%d %H:%M:%S")
        return args, (yaml.safe_dump(merged) if merged else None)

    def _dbt(self, plan: Plan, sandbox: Sandbox, profiles_dir: str, step: Run, final: bool = True):
        assert self.engine and self.project
        self.engine.prepare_manifest(self.project.manifest, sandbox)
        args, vars_yaml = self._run_args(plan, step, final)
        return self.project.session.invoke(args, profiles_dir=profiles_dir, vars_yaml=vars_yaml or "")

    def _apply(self, con: Connection, plan: Plan, step: Reset | Arrive) -> None:
        for src in plan.timed_sources:
            col = exp.cast(exp.column(src.time_column, quoted=True), exp.DataType.build("timestamp"))
            if isinstance(step, Reset):
                con.execute(exp.delete(table(src.schema, src.identifier), where=col >= ts_literal(step.cutoff)))
                continue
            cond = col >= ts_literal(step.lo)
            if step.hi is not None:
                cond = exp.and_(cond, col < ts_literal(step.hi))
            if step.part:
                half = _half_predicate(con.dialect)
                cond = exp.and_(cond, half if step.part == "first" else exp.not_(half))
            con.execute(exp.insert(exp.select("*").from_(table(SNAPSHOT_SCHEMA, snapshot_table(src)).as_("rs_row")).where(cond),
                                   table(src.schema, src.identifier)))

    # ---------------------------------------------------------------- scenarios
    def _build_reference(self, plan: Plan, snapshot: Sandbox) -> tuple[Sandbox, dict[str, str], list]:
        """Full refresh on all data; keep its outputs in the reference schema of a template that
        every scenario clones, then drop the built relations so no scenario can inherit them."""
        assert self.engine
        sb = self.engine.clone(snapshot, "reference")
        profiles = self._profiles_dir(sb)
        self.progress.scenario("reference")
        res = self._dbt(plan, sb, profiles, scenario_steps("reference", plan.timeline)[0])
        self.progress.advance("reference: full refresh")
        errors = _node_errors(res, plan)
        with self.engine.connect(sb) as con:
            con.create_schema(REFERENCE_SCHEMA)
            for m in plan.judged:
                if m.unique_id not in errors and con.relation_kind(m.schema, m.identifier):
                    check_columns(m, [c for c, _ in con.columns(m.schema, m.identifier)])
                    con.copy_table(m.schema, m.identifier, REFERENCE_SCHEMA, plan.ref_names[m.unique_id])
                    count = con.fetchone(exp.select(exp.func("count", exp.Star()))
                                         .from_(table(REFERENCE_SCHEMA, plan.ref_names[m.unique_id])))
                    plan.reference_rows[m.unique_id] = int(count[0])
                elif m.unique_id not in errors:
                    errors[m.unique_id] = "the reference build did not create it"
            for m in reversed(plan.build):
                con.drop_relation(m.schema, m.identifier)
        return sb, errors, [res]

    def _run_scenario(self, name: str, plan: Plan, template: Sandbox, ref_errors: dict[str, str]):
        assert self.engine
        self.progress.scenario(name)
        sb = self.engine.clone(template, name)
        try:
            profiles = self._profiles_dir(sb)
            errors: dict[str, str] = {}
            results = []
            steps = scenario_steps(name, plan.timeline)
            last_run = max(i for i, st in enumerate(steps) if isinstance(st, Run))
            for i, step in enumerate(steps):
                if isinstance(step, Run):
                    res = self._dbt(plan, sb, profiles, step, final=(i == last_run))
                    results.append(res)
                    for uid, msg in _node_errors(res, plan).items():
                        errors.setdefault(uid, f"{step.label}: {msg}")
                    self.progress.advance(f"{name}: {step.label}")
                else:
                    with self.engine.connect(sb) as con:
                        self._apply(con, plan, step)
            with self.engine.connect(sb) as con:
                judged = self._judge(con, name, plan, errors, ref_errors)
            return judged, results
        finally:
            if not self.options.keep_sandboxes:
                self.engine.drop(sb)

    def _judge(self, con: Connection, name: str, plan: Plan, errors: dict[str, str],
               ref_errors: dict[str, str]) -> dict[str, ScenarioResult]:
        out: dict[str, ScenarioResult] = {}
        for m in plan.judged:
            uid = m.unique_id
            if uid in ref_errors:
                out[uid] = ScenarioResult(name, "error" if name == "reference" else "skipped",
                                          message=f"reference build failed: {ref_errors[uid]}")
                continue
            if uid in errors:
                out[uid] = ScenarioResult(name, "error", message=errors[uid])
                continue
            if not con.relation_kind(m.schema, m.identifier):
                out[uid] = ScenarioResult(name, "skipped", message="not built in this scenario (an upstream model failed)")
                continue
            d = diff_relations(con, (REFERENCE_SCHEMA, plan.ref_names[uid]), (m.schema, m.identifier),
                               key=m.key, ignore_columns=m.ignore_columns, partition_column=_partition_column(m),
                               column_detail=(name == "determinism"))
            out[uid] = _scenario_result(name, d)
        return out

    # ---------------------------------------------------------------- main
    def run(self) -> GamedayReport:
        started = time.perf_counter()
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        o = self.options
        o.work_root.mkdir(parents=True, exist_ok=True)
        parse_dir = o.work_root / f"{PARSE_PREFIX}{self.run_id}"
        parse_lock = make_locked_dir(parse_dir)  # a run killed while parsing leaves it to the sweep
        pool = None
        try:
            self.project = project = Project(o.project_dir, o.profiles_dir, o.target, o.vars_yaml, parse_dir)
            self.engine = engine = engine_for(project.target_output, o.work_root, self.run_id)
            project.session.work_dir = engine.run_dir
            engine.sweep()
            plan = self._plan(project)
            check_config(plan.build, project.target_output, project.target_name)
            scenarios = [s for s in o.scenarios if s != "reference"]
            if o.threads > 1 and len(scenarios) > 1:
                # workers start now: their start-up overlaps the snapshot and the reference build
                pool = self._start_pool(min(o.threads, len(scenarios)))
            snapshot = engine.create_snapshot([*plan.timed_sources, *plan.static_sources])
            with engine.connect(snapshot) as con:
                plan.timeline = self._timeline(plan, con)
            if plan.seeds:
                self._seed(plan, snapshot)
            self.progress.start(count_runs(["reference", *scenarios], plan.timeline), "game day")
            template, ref_errors, invocations = self._build_reference(plan, snapshot)
            engine.drop(snapshot)  # the reference sandbox holds the snapshot's tables too
            by_model: dict[str, dict[str, ScenarioResult]] = {m.unique_id: {} for m in plan.judged}
            for m in plan.judged:
                uid = m.unique_id
                rows = plan.reference_rows.get(uid, 0)
                by_model[uid]["reference"] = ScenarioResult(
                    "reference", "error" if uid in ref_errors else "safe", reference_rows=rows, rows=rows,
                    message=ref_errors.get(uid, ""))
            if pool is not None:
                outcomes = self._run_parallel(pool, scenarios, plan, template, ref_errors)
            else:
                outcomes = [(name, *self._run_scenario(name, plan, template, ref_errors)) for name in scenarios]
            for name, judged, results in outcomes:
                invocations += results
                for uid, r in judged.items():
                    by_model[uid][name] = r
            return self._report(plan, by_model, invocations, started, started_at)
        except BaseException:
            if pool is not None:
                _kill_pool(pool)  # before cleanup, which drops the workers' sandboxes too
                pool = None
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
            if self.engine is not None:
                if not o.keep_sandboxes:
                    self.engine.cleanup()
                self.engine.close()
            shutil.rmtree(parse_dir, ignore_errors=True)
            parse_lock.close()

    def _start_pool(self, workers: int):
        """Worker processes for the scenarios (dbt is not thread-safe). Each gets the parsed
        manifest instead of parsing the project again, and is spawned at once."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from .dbt_invoke import dump_manifest

        assert self.project
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(self.options, self.run_id, os.getpid(),
                                             dump_manifest(self.project.manifest)))
        for _ in range(workers):
            pool.submit(_worker_ready)  # a spawn pool starts a process per pending task
        return pool

    def _run_parallel(self, pool, scenarios: list[str], plan: Plan, template: Sandbox,
                      ref_errors: dict[str, str]) -> list:
        from concurrent.futures import as_completed

        payloads = [{"template": template, "ref_errors": ref_errors, "timeline": plan.timeline, "scenario": name}
                    for name in sorted(scenarios, key=lambda n: -count_runs([n], plan.timeline))]
        done: dict[str, tuple] = {}
        futures = [pool.submit(_scenario_worker, p) for p in payloads]  # longest first
        for fut in as_completed(futures):
            name, judged, results = fut.result()
            done[name] = (name, judged, results)
            for _ in results:
                self.progress.advance(f"{name} done")
        return [done[name] for name in scenarios]

    def _seed(self, plan: Plan, snapshot: Sandbox) -> None:
        assert self.engine and self.project
        profiles = self._profiles_dir(snapshot)
        self.engine.prepare_manifest(self.project.manifest, snapshot)
        res = self.project.session.invoke(["seed", "--select", *[s.selector for s in plan.seeds]],
                                          profiles_dir=profiles)
        if not res.success:
            raise ConfigError(f"dbt seed failed in the snapshot: {res.error}")

    def _report(self, plan: Plan, by_model, invocations, started: float, started_at: str) -> GamedayReport:
        verdicts = {uid: {s: r.verdict for s, r in rs.items()} for uid, rs in by_model.items()}
        parents = {m.unique_id: plan.parents_in_judged(m) for m in plan.judged}
        roots, contaminated = root_causes(verdicts, parents)
        names = {m.unique_id: m.name for m in plan.judged}
        models = []
        for m in plan.judged:
            uid = m.unique_id
            scen = tuple(by_model[uid][s] for s in self.options.scenarios if s in by_model[uid])
            v = model_verdict({s.name: s.verdict for s in scen})
            reason = next((s.message for s in scen if s.verdict == v and s.message), "")
            models.append(ModelVerdict(
                name=m.name, unique_id=uid, verdict=v, root_cause=uid in roots,
                contaminated_by=tuple(sorted(names[r] for r in contaminated.get(uid, ()))),
                materialized=m.materialized, strategy=m.strategy, key=m.key,
                parents=tuple(names[p] for p in parents[uid]), scenarios=scen, reason=reason))
        from .results import VERDICT_ORDER

        models.sort(key=lambda mv: (VERDICT_ORDER.index(mv.verdict), not mv.root_cause, mv.name))
        assert self.project
        return GamedayReport(
            project=self.project.name, adapter=self.project.adapter, target=self.project.target_name,
            scenarios=self.options.scenarios, steps=self.options.steps,
            cutoffs=tuple(c.isoformat(sep=" ") for c in plan.timeline.cutoffs), models=tuple(models),
            wall_time=time.perf_counter() - started, dbt_invocations=len(invocations),
            model_time=sum(r.model_time for r in invocations), started_at=started_at,
            extra={"invocations": [{"wall_s": round(r.wall_time, 4), "model_s": round(r.model_time, 4),
                                    "nodes": len(r.nodes)} for r in invocations]})


_WORKER: dict[str, Any] = {}


def _kill_pool(pool) -> None:
    """Stop the workers now: leaving normally would wait for every running scenario."""
    for proc in list((pool._processes or {}).values()):
        proc.kill()
        proc.join(5)
    pool.shutdown(wait=False, cancel_futures=True)


def _worker_ready() -> None:
    return None


def _worker_init(options: GamedayOptions, run_id: str, parent_pid: int | None = None,
                 manifest: bytes | None = None) -> None:
    """Runs once per worker process: load the parent's manifest (or parse), attach to its run."""
    from .dbt_invoke import load_manifest

    if parent_pid is not None:
        _die_with_parent(parent_pid)
    gd = Gameday(options, None, run_id=run_id)
    work = options.work_root / f"{PREFIX}{run_id}" / f"worker_{os.getpid()}"
    gd.project = Project(options.project_dir, options.profiles_dir, options.target, options.vars_yaml, work,
                         manifest=load_manifest(manifest) if manifest is not None else None)
    gd.engine = engine_for(gd.project.target_output, options.work_root, run_id, attach=True)
    _WORKER["gameday"] = gd
    _WORKER["plan"] = gd._plan(gd.project)


def _die_with_parent(parent_pid: int) -> None:
    """A worker outliving a SIGKILLed parent would keep creating sandboxes after the next run's
    sweep: ask Linux to kill it with its parent (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still kills workers
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def _scenario_worker(payload: dict) -> tuple:
    """One scenario in a worker process: clone the template, replay, judge."""
    gd: Gameday = _WORKER["gameday"]
    plan: Plan = _WORKER["plan"]
    plan.timeline = payload["timeline"]
    name = payload["scenario"]
    judged, results = gd._run_scenario(name, plan, payload["template"], payload["ref_errors"])
    return name, judged, [dataclasses.replace(r, raw=None) for r in results]


def _half_predicate(dialect: str) -> exp.Expression:
    """An arbitrary half of the rows, independent of time order (parallel writers commit in any order)."""
    if dialect == "duckdb":
        return exp.condition("hash(rs_row) % 2 = 0")
    return exp.condition("abs(hashtext(rs_row::text)) % 2 = 0", dialect="postgres")


def _node_errors(res, plan: Plan) -> dict[str, str]:
    judged = {m.unique_id for m in plan.build}
    if res.crashed:
        return {uid: res.error for uid in judged}
    return {n.unique_id: n.message or n.status for n in res.nodes
            if n.unique_id in judged and n.status in ("error", "runtime error")}


def _scenario_result(name: str, d: DiffResult) -> ScenarioResult:
    verdict = scenario_verdict(name, d)
    return ScenarioResult(
        name=name, verdict=verdict, reference_rows=d.reference_rows, rows=d.rows,
        extra_rows=d.extra_rows, missing_rows=d.missing_rows, duplicate_keys=d.duplicate_keys,
        missing_keys=d.missing_keys, extra_keys=d.extra_keys, changed_rows=d.changed_rows,
        volatile_columns=d.differing_columns if name == "determinism" else (),
        differing_columns=d.differing_columns, message=d.schema_message,
        sample=d.sample, partitions=tuple(PartitionCount(p, r, c) for p, r, c in d.partitions),
        partition_column=d.partition_column)


def run_gameday(options: GamedayOptions, progress=None) -> GamedayReport:
    return Gameday(options, progress).run()
