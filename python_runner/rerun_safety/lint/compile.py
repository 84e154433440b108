"""Compiled SQL of the selected models, for both branches of each incremental model.

How the incremental branch is compiled (dbt's `is_incremental()` is true only when the target
relation exists as a table, and not on --full-refresh):

* dbt parses the project once (its partial-parse state kept in target/rerun_safety_lint, so a
  second lint of the same project parses only what changed); `dbt ls` (reusing the manifest) resolves --select/--exclude.
* Every compile runs against a *scratch* catalog, never the user's target: for DuckDB an empty
  file in a temp dir whose stem is the manifest's catalog name (the catalog is baked into the
  manifest), for PostgreSQL a scratch database created on the same server and dropped afterwards
  (the user's database is not touched; dbt-postgres echoes the manifest's database name when it
  lists relations, and `--no-populate-cache` skips its cross-database check).
* Pass 1, `compile --full-refresh`: the full-refresh SQL of every selected model, with sentinel
  window vars so the compiled literal of a window var is recognisable.
* The incremental models' relations are then created as empty tables in the scratch catalog, and
  pass 2, `compile` of those models, renders `is_incremental()` as true: the SQL that a scheduled
  run would send, compiled by dbt in the target's own dialect.
* When PostgreSQL refuses the scratch database (no CREATEDB), pass 1 runs against the user's
  database (compile only reads its catalog) and the incremental branch is reported as unchecked.

Models that query data at compile time (`run_query`, `dbt_utils.get_column_values`) see the empty
scratch catalog.
"""
from __future__ import annotations

import json
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

from ..dbt_invoke import DbtSession, _parse_error
from ..errors import ConfigError, DbtInvocationError
from .context import WINDOW_END_SENTINEL, WINDOW_START_SENTINEL, WINDOW_VARS

PLACEHOLDER_COLUMN = "_rerun_safety_lint"
# Below this many incremental models a second process costs more (dbt import, parse) than it saves.
PARALLEL_MIN_MODELS = 40
SCRATCH_PREFIX = "rerun_safety_lint_"


@dataclass(frozen=True)
class CompiledModel:
    unique_id: str
    full_sql: str | None = None
    full_error: str = ""
    incremental_sql: str | None = None
    incremental_error: str = ""
    incremental_checked: bool = False


@dataclass
class CompileOutcome:
    manifest: Any
    selected: list[str]
    models: dict[str, CompiledModel]
    mode: str
    window_literals: tuple[str, str]
    timings: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Profile of the target, as dbt renders it
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TargetProfile:
    profile_name: str
    target_name: str
    output: dict

    @property
    def adapter_type(self) -> str:
        return str(self.output.get("type", ""))


def resolve_target(project_dir: Path, profiles_dir: Path | None, target: str | None,
                   cli_vars: dict) -> TargetProfile:
    """The rendered output of the profile target dbt will use (env_var() and var() resolved)."""
    from dbt.cli.resolvers import default_profiles_dir
    from dbt.config.renderer import ProfileRenderer
    from dbt_common.context import set_invocation_context
    from dbt_common.exceptions import DbtBaseException

    set_invocation_context(os.environ)  # env_var() in profiles reads it
    try:
        return _resolve_target(project_dir, profiles_dir, target, cli_vars, ProfileRenderer, default_profiles_dir)
    except DbtBaseException as err:
        raise ConfigError(f"could not render the profile: {' '.join(str(err).split())}") from None


def _resolve_target(project_dir, profiles_dir, target, cli_vars, ProfileRenderer, default_profiles_dir):
    project_file = project_dir / "dbt_project.yml"
    if not project_file.exists():
        raise ConfigError(f"no dbt_project.yml in {project_dir}")
    renderer = ProfileRenderer(cli_vars)
    project = yaml.safe_load(project_file.read_text()) or {}
    profile_name = renderer.render_value(str(project.get("profile") or ""))
    directory = Path(profiles_dir) if profiles_dir else Path(os.environ.get("DBT_PROFILES_DIR") or default_profiles_dir())
    profiles_file = directory / "profiles.yml"
    if not profiles_file.exists():
        raise ConfigError(f"no profiles.yml in {directory} (pass --profiles-dir)")
    profiles = yaml.safe_load(profiles_file.read_text()) or {}
    profile = profiles.get(profile_name)
    if not isinstance(profile, dict):
        raise ConfigError(f"profile '{profile_name}' not found in {profiles_file}")
    target_name = target or os.environ.get("DBT_TARGET") or renderer.render_value(str(profile.get("target", "default")))
    outputs = profile.get("outputs") or {}
    if target_name not in outputs:
        raise ConfigError(f"target '{target_name}' not found in profile '{profile_name}'")
    output = renderer.render_data(dict(outputs[target_name]))
    return TargetProfile(profile_name, target_name, output)


def _write_profile(directory: Path, tp: TargetProfile, output: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "profiles.yml"
    path.write_text(yaml.safe_dump({tp.profile_name: {"target": tp.target_name,
                                                      "outputs": {tp.target_name: output}}}))
    os.chmod(path, 0o600)  # it may hold the warehouse password
    return directory


# ---------------------------------------------------------------------------------------------
# Scratch catalogs
# ---------------------------------------------------------------------------------------------

def _create_table_sql(database: str | None, schema: str, name: str, dialect: str) -> list[str]:
    def ident(text: str) -> exp.Identifier:
        return exp.to_identifier(text, quoted=True)

    table = exp.Table(this=ident(name), db=ident(schema), catalog=ident(database) if database else None)
    schema_table = exp.Table(this=ident(schema), db=ident(database) if database else None)
    create_schema = exp.Create(this=schema_table, kind="SCHEMA", exists=True)
    create_table = exp.Create(
        this=exp.Schema(this=table, expressions=[exp.ColumnDef(this=ident(PLACEHOLDER_COLUMN),
                                                               kind=exp.DataType.build("int"))]),
        kind="TABLE", exists=True)
    return [create_schema.sql(dialect=dialect), create_table.sql(dialect=dialect)]


class Scratch:
    """Where compiles run. `profiles_dir` for pass 1 and 2; `prepare(relations)` makes the
    incremental models' relations exist; `close()` removes everything."""

    mode = ""
    extra_flags: tuple[str, ...] = ()
    incremental_possible = True

    def profiles_dir(self) -> str:
        raise NotImplementedError

    def worker_profiles_dir(self, work: Path) -> str:
        """Profiles for a second process compiling at the same time."""
        return self.profiles_dir()

    def prepare(self, relations: list[tuple[str, str, str]]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DuckDBScratch(Scratch):
    mode = "scratch duckdb file"

    def __init__(self, tp: TargetProfile, work: Path, catalogs: list[str]):
        self.dir = work / "scratch_duckdb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.catalogs = [c for c in dict.fromkeys(catalogs) if c] or ["scratch"]
        main, *others = self.catalogs
        output = {"type": "duckdb", "path": str(self.dir / f"{main}.duckdb"),
                  "schema": tp.output.get("schema", "main"), "threads": 1, "keep_open": False}
        if others:
            output["attach"] = [{"path": str(self.dir / f"{c}.duckdb"), "alias": c} for c in others]
        self._profiles = _write_profile(work / "scratch_profile", tp, output)

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def worker_profiles_dir(self, work: Path) -> str:
        # a DuckDB file is locked by the process that opens it: the worker gets its own copy
        copy = work / "scratch_duckdb_pass2"
        shutil.copytree(self.dir, copy, dirs_exist_ok=True)
        profile = yaml.safe_load((self._profiles / "profiles.yml").read_text())
        for prof in profile.values():
            for out in prof["outputs"].values():
                out["path"] = str(copy / Path(out["path"]).name)
                for att in out.get("attach", []):
                    att["path"] = str(copy / Path(att["path"]).name)
        target = work / "scratch_profile_pass2"
        target.mkdir(parents=True, exist_ok=True)
        (target / "profiles.yml").write_text(yaml.safe_dump(profile))
        return str(target)

    def prepare(self, relations):
        import duckdb

        main, *others = self.catalogs
        con = duckdb.connect(str(self.dir / f"{main}.duckdb"))
        try:
            for c in others:
                path = exp.Literal.string(str(self.dir / f"{c}.duckdb")).sql("duckdb")
                con.execute(f"attach {path} as {exp.to_identifier(c, quoted=True).sql('duckdb')}")
            con.execute("begin")  # one commit for all tables instead of one per statement
            for database, schema, name in relations:
                for stmt in _create_table_sql(database, schema, name, "duckdb"):
                    con.execute(stmt)
            con.execute("commit")
            con.execute("checkpoint")
        finally:
            con.close()


class PostgresScratch(Scratch):
    mode = "scratch postgres database"
    extra_flags = ("--no-populate-cache",)

    def __init__(self, tp: TargetProfile, work: Path):
        import psycopg2

        self.tp = tp
        self.dbname = f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:12]}"
        self.created = False
        conn = psycopg2.connect(**self._dsn(tp.output.get("dbname") or tp.output.get("database")))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f"create database {self._quoted()}")
            self.created = True
        except psycopg2.Error as err:
            self.refusal = str(err).strip().splitlines()[0]
        finally:
            conn.close()
        self.incremental_possible = self.created
        output = dict(tp.output)
        if self.created:
            output["dbname"] = self.dbname
            output.pop("database", None)
            self._profiles = _write_profile(work / "scratch_profile", tp, output)
        else:
            self.mode = f"not checked (no scratch database: {self.refusal})"
            self._profiles = _write_profile(work / "target_profile", tp, output)

    def _quoted(self) -> str:
        return exp.to_identifier(self.dbname, quoted=True).sql("postgres")

    def _dsn(self, dbname: str) -> dict:
        out = self.tp.output
        dsn = {"host": out.get("host"), "port": out.get("port", 5432), "user": out.get("user"),
               "password": out.get("password") or out.get("pass") or None, "dbname": dbname}
        for key in ("sslmode", "sslcert", "sslkey", "sslrootcert", "connect_timeout"):
            if out.get(key) is not None:
                dsn[key] = out[key]
        return {k: v for k, v in dsn.items() if v is not None}

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def prepare(self, relations):
        import psycopg2

        conn = psycopg2.connect(**self._dsn(self.dbname))
        try:
            with conn, conn.cursor() as cur:
                for _database, schema, name in relations:
                    for stmt in _create_table_sql(None, schema, name, "postgres"):
                        cur.execute(stmt)
        finally:
            conn.close()

    def close(self):
        if not self.created:
            return
        import psycopg2

        conn = psycopg2.connect(**self._dsn(self.tp.output.get("dbname") or self.tp.output.get("database")))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f"drop database if exists {self._quoted()} with (force)")
        finally:
            conn.close()


# ---------------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------------

def _fqn_selector(node) -> str:
    return "fqn:" + ".".join(node.fqn)


@dataclass(frozen=True)
class Selection:
    """dbt --select / --exclude terms. Few terms keep dbt's selection fast: 500 fqn terms cost it
    more than compiling 500 models."""

    select: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @classmethod
    def restricted(cls, select: tuple[str, ...], exclude: tuple[str, ...], restrict: str) -> "Selection":
        terms = [t for term in select for t in term.split()]
        return cls(tuple(f"{t},{restrict}" for t in terms) or (restrict,),
                   tuple(t for term in exclude for t in term.split()))

    @classmethod
    def of(cls, nodes: list) -> "Selection":
        return cls(tuple(_fqn_selector(n) for n in nodes))

    def without(self, nodes: list) -> "Selection":
        return Selection(self.select, self.exclude + tuple(_fqn_selector(n) for n in nodes))


def _compile(session: DbtSession, selection: Selection, *, full_refresh: bool, profiles_dir: str,
             vars_yaml: str | None, flags: tuple[str, ...]) -> dict[str, tuple[str | None, str]]:
    """unique_id -> (compiled SQL or None, error) for the selected models."""
    args = ["compile", "--indirect-selection", "empty", "--no-write-json", *flags]
    if full_refresh:
        args.append("--full-refresh")
    args += ["--select", *selection.select]
    if selection.exclude:
        args += ["--exclude", *selection.exclude]
    res = session.invoke(args, profiles_dir=profiles_dir, vars_yaml=vars_yaml)
    out: dict[str, tuple[str | None, str]] = {}
    results = getattr(res.raw, "results", None) or []
    for r in results:
        node = getattr(r, "node", None)
        if node is None:
            continue
        status = str(getattr(getattr(r, "status", ""), "value", getattr(r, "status", "")))
        if status == "success" and getattr(node, "compiled_code", None) is not None:
            out[node.unique_id] = (node.compiled_code, "")
        elif status == "skipped":
            continue  # skipped below a failing parent: compiled again on its own
        else:
            message = " ".join(str(getattr(r, "message", "") or status).split())
            out[node.unique_id] = (None, message[:500])
    if res.crashed and not out:
        raise DbtInvocationError(f"dbt compile crashed: {res.error}")
    if not res.success and not out:
        raise DbtInvocationError(f"dbt compile failed: {res.error}")
    return out


def _failing_node(message: str, nodes: list):
    """The node a crashed compile names ("... in model x (models/x.sql)"), if any."""
    for n in nodes:
        if f"({n.original_file_path})" in message or f" model {n.name} " in f" {message} ":
            return n
    return None


def _error_text(err: Exception) -> str:
    text = str(err)
    for prefix in ("dbt compile crashed: ", "dbt compile failed: "):
        text = text.replace(prefix, "", 1)
    return text


def _compile_all(session, selection: Selection, nodes: list, **kw) -> dict[str, tuple[str | None, str]]:
    """Compile the selection. A model that fails to compile stops dbt's whole compile, so it is
    recorded and the rest compiled again without it; models skipped below a failing parent, or
    left when the failing model cannot be told, are compiled one at a time."""
    if not nodes:
        return {}
    out: dict[str, tuple[str | None, str]] = {}
    failed: list = []
    while True:
        try:
            out.update(_compile(session, selection.without(failed), **kw))
            break
        except DbtInvocationError as err:
            culprit = _failing_node(str(err), [n for n in nodes if n.unique_id not in out])
            if culprit is None:
                if len(nodes) == 1:
                    out[nodes[0].unique_id] = (None, _error_text(err))
                break
            out[culprit.unique_id] = (None, _error_text(err))
            failed.append(culprit)
    for n in nodes:
        if n.unique_id not in out and n.config.materialized != "ephemeral" and len(nodes) > 1:
            out.update(_compile_all(session, Selection.of([n]), [n], **kw))
    return out


def merged_vars(vars_yaml: str | None, with_window: bool) -> tuple[str | None, tuple[str, str], dict]:
    """The user's vars, plus sentinel window vars when asked and the user set none. Returns the
    YAML to pass, the date prefixes a compiled window var shows, and the parsed user vars."""
    user: dict = {}
    if vars_yaml:
        try:
            user = yaml.safe_load(vars_yaml) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"--vars is not valid YAML: {err}") from None
        if not isinstance(user, dict):
            raise ConfigError("--vars must be a YAML mapping, e.g. '{key: value}'")
    start = str(user.get(WINDOW_VARS[0], WINDOW_START_SENTINEL))
    end = str(user.get(WINDOW_VARS[1], WINDOW_END_SENTINEL))
    literals = (start[:10], end[:10])
    if not with_window:
        return (vars_yaml or None), literals, user
    merged = {WINDOW_VARS[0]: WINDOW_START_SENTINEL, WINDOW_VARS[1]: WINDOW_END_SENTINEL, **user}
    return yaml.safe_dump(merged, default_flow_style=True).strip(), literals, user


def _incremental_pass(session: DbtSession, manifest, profiles_dir: str, p: dict) -> dict:
    """Pass 2: compile the incremental models with is_incremental() true."""
    nodes = [manifest.nodes[u] for u in p["uids"]]
    out = _compile_all(session, p["selection"], nodes, full_refresh=False, profiles_dir=profiles_dir,
                       vars_yaml=p["plain_vars"], flags=p["flags"])
    # a model that needs the window vars to compile at all gets them (as in a windowed run)
    needs_window = [n for n in nodes if any(v in out.get(n.unique_id, (None, ""))[1] for v in WINDOW_VARS)]
    out.update(_compile_all(session, Selection.of(needs_window), needs_window, full_refresh=False,
                            profiles_dir=profiles_dir, vars_yaml=p["window_vars"], flags=p["flags"]))
    return out


def _pass2_main(job_file: str) -> int:
    """Entry point of the pass-2 process (`python -m rerun_safety.lint.compile JOB`): its own dbt
    (one invocation at a time per process), parsing from the partial-parse state the main process
    just wrote. Writes {"compiled": {uid: [sql, error]}, "parse_time": s} next to the job."""
    job = json.loads(Path(job_file).read_text())
    session = DbtSession(job["project"], job["profiles_dir"], job["target"], Path(job["session_dir"]),
                         vars_yaml=job["vars_yaml"])
    parsed = session.invoke(["parse", "--no-write-json"], use_manifest=False)
    if not parsed.success or parsed.raw is None:
        return 3
    session.manifest = parsed.raw
    p2 = dict(job["pass2"])
    p2["selection"] = Selection(tuple(p2["selection"][0]), tuple(p2["selection"][1]))
    p2["flags"] = tuple(p2["flags"])
    out = _incremental_pass(session, parsed.raw, job["scratch_profiles"], p2)
    Path(job["result"]).write_text(json.dumps({"compiled": out, "parse_time": parsed.wall_time}))
    return 0


class _Pass2Worker:
    """Pass 2 in a second process while pass 1 runs here: dbt compiles one node at a time under
    the GIL, so on a multi-core machine the two passes overlap. A plain subprocess (not
    multiprocessing) so that nothing of the caller's main module is imported again."""

    parse_time = 0.0
    succeeded = False

    def __init__(self, process, result: Path, started: float):
        self.process, self.result_file, self.started = process, result, started

    @classmethod
    def start(cls, session: DbtSession, scratch: Scratch, work: Path, pass2: dict) -> "_Pass2Worker":
        import subprocess
        import sys

        session_dir = work / "pass2_session"
        state = session.work_dir / "dbt_target" / "partial_parse.msgpack"
        (session_dir / "dbt_target").mkdir(parents=True, exist_ok=True)
        if state.exists():
            shutil.copy2(state, session_dir / "dbt_target" / "partial_parse.msgpack")
        sel: Selection = pass2["selection"]
        job = dict(project=session.project_dir, profiles_dir=session.profiles_dir, target=session.target,
                   vars_yaml=session.vars_yaml, session_dir=str(session_dir),
                   scratch_profiles=scratch.worker_profiles_dir(work), result=str(work / "pass2_result.json"),
                   pass2={**pass2, "selection": [list(sel.select), list(sel.exclude)], "flags": list(pass2["flags"])})
        job_file = work / "pass2_job.json"
        job_file.write_text(json.dumps(job))
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "rerun_safety.lint.compile", str(job_file)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        return cls(process, Path(job["result"]), started)

    def result(self) -> dict | None:
        """The compiled SQL, or None when the process failed (the caller then compiles itself)."""
        if self.process.wait() != 0 or not self.result_file.exists():
            return None
        data = json.loads(self.result_file.read_text())
        self.parse_time = float(data.get("parse_time") or 0.0)
        return {uid: (sql, err) for uid, (sql, err) in data["compiled"].items()}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _worth_a_second_process(n_incremental: int) -> bool:
    """Only with enough incremental models to pay for the process start and its parse, and a core
    to spare: on a saturated machine two compiling processes only slow each other down."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return n_incremental >= PARALLEL_MIN_MODELS and cores > 1 and load < cores - 0.5


def compile_project(project_dir: str | Path, profiles_dir: str | Path | None, target: str | None,
                    select: tuple[str, ...], exclude: tuple[str, ...], vars_yaml: str | None,
                    parallel: bool | None = None) -> CompileOutcome:
    """Parse, select and compile both branches; never writes to the user's target. `parallel`:
    compile the incremental branch in a second process (None: when it is likely to help)."""
    project = Path(project_dir).resolve()
    if not (project / "dbt_project.yml").exists():
        raise ConfigError(f"no dbt_project.yml in {project}")
    timings: dict[str, float] = {}
    window_vars, literals, user_vars = merged_vars(vars_yaml, with_window=True)
    plain_vars, _, _ = merged_vars(vars_yaml, with_window=False)
    tp = resolve_target(project, Path(profiles_dir).resolve() if profiles_dir else None, target, user_vars)

    work = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    scratch: Scratch | None = None
    worker: _Pass2Worker | None = None
    try:
        session = DbtSession(project, profiles_dir, target, _session_dir(project, work), vars_yaml=vars_yaml)
        t = time.perf_counter()
        # parse as DbtSession.parse does, without writing manifest.json (nobody reads it here)
        parsed = session.invoke(["parse", "--no-write-json"], use_manifest=False)
        if not parsed.success or parsed.raw is None:
            raise _parse_error(parsed.error or "dbt parse failed")
        manifest = session.manifest = parsed.raw
        timings["dbt_parse"] = time.perf_counter() - t

        t = time.perf_counter()
        ls_args = ["ls", "--resource-type", "model", "--output", "json", "--output-keys", "unique_id"]
        for s in select:
            ls_args += ["--select", s]
        for s in exclude:
            ls_args += ["--exclude", s]
        listed = session.invoke(ls_args)
        if not listed.success:
            raise ConfigError(f"dbt ls failed for the selection: {listed.error}")
        selected = [json.loads(line)["unique_id"] for line in (listed.raw or [])]
        timings["dbt_ls"] = time.perf_counter() - t

        nodes = [manifest.nodes[u] for u in selected if u in manifest.nodes]
        incremental = [n for n in nodes if n.config.materialized == "incremental"]

        t = time.perf_counter()
        adapter = manifest.metadata.adapter_type or tp.adapter_type
        if adapter == "duckdb":
            catalogs = [manifest_catalog(manifest)] + [n.database for n in incremental]
            scratch = DuckDBScratch(tp, work, catalogs)
        elif adapter == "postgres":
            scratch = PostgresScratch(tp, work)
        else:
            raise ConfigError(f"lint supports duckdb and postgres targets; this target is '{adapter}'")
        timings["scratch"] = time.perf_counter() - t

        started = time.perf_counter()
        incr: dict[str, tuple[str | None, str]] = {}
        worker = None
        if scratch.incremental_possible and incremental:
            t = time.perf_counter()
            # with --full-refresh is_incremental() stays false, so pass 1 may see these tables too
            scratch.prepare([(n.database, n.schema, n.alias or n.name) for n in incremental])
            timings["scratch_tables"] = time.perf_counter() - t  # part of "compile" too
            pass2 = dict(selection=Selection.restricted(select, exclude, "config.materialized:incremental"),
                         uids=[n.unique_id for n in incremental], plain_vars=plain_vars, window_vars=window_vars,
                         flags=scratch.extra_flags)
            if parallel if parallel is not None else _worth_a_second_process(len(incremental)):
                worker = _Pass2Worker.start(session, scratch, work, pass2)

        t = time.perf_counter()
        models_sel = Selection.restricted(select, exclude, "resource_type:model")
        full = _compile_all(session, models_sel, nodes, full_refresh=True, profiles_dir=scratch.profiles_dir(),
                            vars_yaml=window_vars, flags=scratch.extra_flags)
        timings["compile_full"] = time.perf_counter() - t

        if scratch.incremental_possible and incremental:
            t = time.perf_counter()
            result = worker.result() if worker is not None else None
            if result is None:  # no worker, or it failed: compile here
                result = _incremental_pass(session, manifest, scratch.profiles_dir(), pass2)
            elif worker is not None:
                worker.succeeded = True
            incr = result
            # with a worker: its whole run (start, parse, compile), overlapping pass 1
            timings["compile_incremental"] = time.perf_counter() - (worker.started if worker else t)
            if worker is not None and result is not None and worker.succeeded:
                timings["pass2_process_parse"] = worker.parse_time
        timings["compile"] = time.perf_counter() - started

        models = {}
        for n in nodes:
            f_sql, f_err = full.get(n.unique_id, (None, ""))
            if n.config.materialized == "incremental" and scratch.incremental_possible:
                i_sql, i_err = incr.get(n.unique_id, (None, ""))
                models[n.unique_id] = CompiledModel(n.unique_id, f_sql, f_err, i_sql, i_err, True)
            else:
                models[n.unique_id] = CompiledModel(n.unique_id, f_sql, f_err)
        return CompileOutcome(manifest, selected, models, scratch.mode, literals, timings)
    finally:
        try:
            if worker is not None:
                worker.stop()
            if scratch is not None:
                scratch.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _session_dir(project: Path, fallback: Path) -> Path:
    """dbt's target and log paths for the lint: under the project's target/ (like `dbt compile`),
    so that the next lint reuses dbt's partial parse; a temp dir when the project is read-only."""
    path = project / "target" / "rerun_safety_lint"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write_probe"
        probe.write_text("")
        probe.unlink()
        return path
    except OSError:
        return fallback / "session"


def manifest_catalog(manifest) -> str:
    """The catalog most models live in (for DuckDB: the database file's stem or its alias)."""
    counts: dict[str, int] = {}
    for n in manifest.nodes.values():
        if getattr(n, "resource_type", None) is not None and str(n.resource_type) in ("model", "NodeType.Model") \
                and n.database:
            counts[n.database] = counts.get(n.database, 0) + 1
    return max(counts, key=counts.get) if counts else "scratch"


if __name__ == "__main__":
    import sys

    sys.exit(_pass2_main(sys.argv[1]))
