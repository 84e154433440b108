"""Compiled SQL of the selected models, for both branches of each incremental model, as
`dbt compile` would produce it against a warehouse that holds the project's relations.

* dbt parses the project once (its partial-parse state kept in target/rerun_safety_lint, so a
  second lint of the same project parses only what changed); `dbt ls` (reusing the manifest)
  resolves --select/--exclude; a selection that matches nothing is a usage error.
* Every compile runs against a *scratch* catalog (scratch.py), never the user's target: for
  DuckDB an empty file in a temp dir whose stem is the manifest's catalog name, for PostgreSQL a
  scratch database on the same server (the manifest's nodes pointed at it in memory, since
  dbt-postgres refuses cross-database references).
* The sources, seeds and snapshots upstream of the incremental models and of the models that
  introspect the catalog are created there empty, with the columns the user's target has (read
  only), else those their YAML or CSV declares (catalog.py).
* Pass 1, `compile --full-refresh`: the full-refresh SQL of the selected models, with sentinel
  window vars so the compiled literal of a window var is recognisable.
* The needed models are then created empty from their compiled SQL, upstream first; the models
  that introspect compile once what they read exists (in batches, both branches).
* Pass 2, `compile` of the incremental models, with their relations present as tables, renders
  `is_incremental()` as true: the SQL that a scheduled run would send. On a machine with a core to
  spare it runs in a second process while pass 1 runs (its `{{ this }}` then has a placeholder
  column; the models that introspect always compile here).
* When PostgreSQL refuses the scratch database (no CREATEDB), pass 1 runs against the user's
  database (compile only reads its catalog) and the incremental branch is reported as unchecked.

Models that query data at compile time (`run_query`, `dbt_utils.get_column_values`) see tables
with the right columns and no rows.
"""
from __future__ import annotations

import os

import copy

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..dbt_invoke import DbtSession, parse_error, listed_ids, ls_args, selection_terms, selects_by_state
from ..errors import ConfigError, NothingToCheck
from . import catalog
from .dbt_compile import (STOP, Selection, render_clocks, compile_all, fqn_selector, check_stop,
                          incremental_pass)
from .context import WINDOW_END_SENTINEL, WINDOW_START_SENTINEL, WINDOW_VARS
from .pass2 import Pass2Worker, worth_a_second_process
from .target import resolve_target
from ..warehouse.base import default_work_root, private_work_root
from ..warehouse.engines import scratch_for
from ..warehouse.scratch import (PLACEHOLDER_COLUMN, SCRATCH_PREFIX, RelationSpec, RunDir, Scratch, TargetProfile,
                                 sweep_run_dirs)

__all__ = ["PLACEHOLDER_COLUMN", "SCRATCH_PREFIX", "compile_project", "CompiledModel", "CompileOutcome",
           "resolve_target", "TargetProfile", "STOP"]


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
    # (schema, name) -> [(column, type)] of what the scratch catalog held after compiling, lowercased
    columns: dict = field(default_factory=dict)
    # unique_id -> (schema, name) of its relation; and why a model's relation could not be created
    relations: dict = field(default_factory=dict)
    not_created: dict = field(default_factory=dict)
    # unique_id -> "source raw.x": upstream relations whose columns are known nowhere
    unknown_relations: dict = field(default_factory=dict)
    # unique_id -> (what its SQL holds now, what it holds compiled at another time): the clock rendered
    # by Jinja at compile time (modules.datetime, run_started_at)
    clock_rendered: dict = field(default_factory=dict)
    target: Any = None  # the profile's target (TargetProfile): where lint --with-data reads
    compile_database: str | None = None  # the scratch database the manifest names for the target's (Scratch)


# ---------------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------------

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


def compile_project(project_dir: str | Path, profiles_dir: str | Path | None, target: str | None,
                    select: tuple[str, ...], exclude: tuple[str, ...], vars_yaml: str | None,
                    parallel: bool | None = None, state: str | None = None,
                    work_root: str | Path | None = None, confined: bool = False) -> CompileOutcome:
    """Parse, select and compile both branches; never writes to the user's target. `parallel`:
    compile the incremental branch in a second process (None: when it is likely to help)."""
    project = Path(project_dir).resolve()
    if not (project / "dbt_project.yml").exists():
        raise ConfigError(f"no dbt_project.yml in {project}")
    timings: dict[str, float] = {}
    window_vars, literals, user_vars = merged_vars(vars_yaml, with_window=True)
    plain_vars, _, _ = merged_vars(vars_yaml, with_window=False)
    tp = resolve_target(project, Path(profiles_dir).resolve() if profiles_dir else None, target, user_vars)
    user_target = copy.deepcopy(tp)  # the user's target as the profile names it (the scratch redirects tp's)

    root = private_work_root(Path(work_root) if work_root else default_work_root())
    sweep_run_dirs(root)  # what a killed lint left behind
    run = RunDir(root)
    work = run.path
    scratch: Scratch | None = None
    worker: Pass2Worker | None = None
    try:
        session = DbtSession(project, profiles_dir, target, lint_session_dir(project, work), vars_yaml=vars_yaml)
        t = time.perf_counter()
        # parse as DbtSession.parse does, without writing manifest.json (nobody reads it here)
        parsed = session.invoke(["parse", "--no-write-json"], use_manifest=False)
        check_stop()
        if not parsed.success or parsed.raw is None:
            raise parse_error(parsed.error or "dbt parse failed")
        manifest = session.manifest = parsed.raw
        timings["dbt_parse"] = time.perf_counter() - t

        t = time.perf_counter()
        selected = _select(session, select, exclude, state)
        timings["dbt_ls"] = time.perf_counter() - t

        nodes = [manifest.nodes[u] for u in selected if u in manifest.nodes]
        if state:  # dbt's compile has no comparison manifest: name the selected models instead
            select, exclude = tuple(fqn_selector(n) for n in nodes), ()
        sql_nodes = [n for n in nodes if getattr(n, "language", "sql") != "python"]
        incremental = [n for n in sql_nodes if n.config.materialized == "incremental"]
        intro = catalog.introspecting(manifest, sql_nodes)

        t = time.perf_counter()
        adapter = manifest.metadata.adapter_type or tp.adapter_type
        # what must exist in the scratch catalog: the incremental and introspecting models, and all upstream
        wanted = {n.unique_id for n in incremental} | intro
        upstream = catalog.ancestors(manifest, wanted)
        # an unselected model upstream that introspects also waits for what it reads
        intro |= catalog.introspecting(manifest, [manifest.nodes[u] for u in upstream if u.startswith("model.")
                                                  and u in manifest.nodes])
        # the catalogs the project names (a DuckDB scratch makes a file for each)
        catalogs = [manifest_catalog(manifest)] + [n.database for n in incremental] + [
            (manifest.sources[u].database if u in manifest.sources else getattr(manifest.nodes.get(u), "database", None))
            for u in sorted(upstream)]
        scratch = scratch_for(adapter, tp, work, run.run_id, catalogs, manifest, confined=confined)
        timings["scratch"] = time.perf_counter() - t

        started = time.perf_counter()
        incr: dict[str, tuple[str | None, str]] = {}
        not_created: dict[str, str] = {}
        unknown: dict[str, str] = {}
        pass2 = None
        t = time.perf_counter()
        if scratch.incremental_possible:
            # sources, seeds, snapshots with their real columns; incremental relations as placeholders
            # (so is_incremental() is true in pass 2) until their real columns are known
            base, unknown = catalog.base_relations(manifest, tp, upstream | wanted, scratch.dialect)
            placeholders = [RelationSpec(n.database, n.schema, n.alias or n.name) for n in incremental]
            scratch.create(base + placeholders)
        timings["scratch_tables"] = time.perf_counter() - t  # part of "compile" too
        if not scratch.incremental_possible:
            intro = set()  # no scratch catalog to fill: everything compiles in pass 1, against the target
        intro_nodes = [n for n in sql_nodes if n.unique_id in intro]
        if scratch.incremental_possible and incremental:
            pass2 = dict(selection=Selection.restricted(select, exclude, "config.materialized:incremental")
                         .without([n for n in incremental if n.unique_id in intro] + _python(nodes)),
                         uids=[n.unique_id for n in incremental if n.unique_id not in intro],
                         plain_vars=plain_vars, window_vars=window_vars, flags=scratch.extra_flags,
                         user_db=scratch.user_db, scratch_db=scratch.dbname)
            if not pass2["uids"]:
                pass2 = None
            elif parallel if parallel is not None else worth_a_second_process(len(pass2["uids"])):
                worker = Pass2Worker.start(session, scratch, work, pass2)

        t = time.perf_counter()
        # pass 1 leaves out the models that introspect: they compile below, once upstream exists
        models_sel = Selection.restricted(select, exclude, "resource_type:model").without(intro_nodes + _python(nodes))
        first = [n for n in sql_nodes if n.unique_id not in intro]
        full = compile_all(session, models_sel, first, full_refresh=True, profiles_dir=scratch.profiles_dir(),
                            vars_yaml=window_vars, flags=scratch.extra_flags)
        for n in _python(nodes):
            full.update(compile_all(session, Selection.of([n]), [n], full_refresh=True,
                                     profiles_dir=scratch.profiles_dir(), vars_yaml=window_vars,
                                     flags=scratch.extra_flags))
        timings["compile_full"] = time.perf_counter() - t
        t = time.perf_counter()
        clock_rendered = render_clocks(session, [n for n in first if n.unique_id in set(selected)], full,
                                         profiles_dir=scratch.profiles_dir(), vars_yaml=window_vars,
                                         flags=scratch.extra_flags, dialect=scratch.dialect)
        timings["compile_clock"] = time.perf_counter() - t

        if scratch.incremental_possible:
            t = time.perf_counter()
            upstream_models = [manifest.nodes[u] for u in upstream
                               if u.startswith("model.") and u in manifest.nodes and u not in full]
            missing = [n for n in upstream_models if n.unique_id not in intro and
                       n.config.materialized != "ephemeral" and getattr(n, "language", "sql") != "python"]
            if missing:  # upstream of the selection, not selected: compiled for their columns only
                full.update(compile_all(session, Selection.of(missing), missing, full_refresh=True,
                                         profiles_dir=scratch.profiles_dir(), vars_yaml=window_vars,
                                         flags=scratch.extra_flags))
            not_created, late_incr = _materialize(session, manifest, scratch, full, intro, wanted | upstream,
                                                  window_vars, plain_vars, unknown)
            incr.update(late_incr)
            timings["scratch_models"] = time.perf_counter() - t

        if pass2 is not None:
            t = time.perf_counter()
            result = worker.result() if worker is not None else None
            if result is None:  # no worker, or it failed: compile here (the relations are real by now)
                result = incremental_pass(session, manifest, scratch.profiles_dir(), pass2)
            elif worker is not None:
                worker.succeeded = True
            incr.update(result)
            # with a worker: its whole run (start, parse, compile), overlapping pass 1
            timings["compile_incremental"] = time.perf_counter() - (worker.started if worker else t)
            if worker is not None and worker.succeeded:
                timings["pass2_process_parse"] = worker.parse_time
        timings["compile"] = time.perf_counter() - started

        columns = scratch.columns() if scratch.incremental_possible else {}
        models = {}
        for n in nodes:
            f_sql, f_err = full.get(n.unique_id, (None, ""))
            if n.config.materialized == "incremental" and scratch.incremental_possible \
                    and getattr(n, "language", "sql") != "python":
                i_sql, i_err = incr.get(n.unique_id, (None, ""))
                models[n.unique_id] = CompiledModel(n.unique_id, f_sql, f_err, i_sql, i_err, True)
            else:
                models[n.unique_id] = CompiledModel(n.unique_id, f_sql, f_err)
        relations = {n.unique_id: (n.schema.lower(), (n.alias or n.name).lower()) for n in manifest.nodes.values()
                     if getattr(n, "schema", None) and str(n.resource_type) in ("model", "seed", "snapshot",
                                                                                "NodeType.Model", "NodeType.Seed",
                                                                                "NodeType.Snapshot")}
        for uid, src in manifest.sources.items():
            relations[uid] = (src.schema.lower(), (src.identifier or src.name).lower())
        return CompileOutcome(manifest, selected, models, scratch.mode, literals, timings, columns, relations,
                              not_created, unknown, clock_rendered, target=user_target,
                              compile_database=scratch.compile_database)
    finally:
        try:
            if worker is not None:
                worker.stop()
            if scratch is not None:
                scratch.close()
        finally:
            run.remove()


def _python(nodes: list) -> list:
    return [n for n in nodes if getattr(n, "language", "sql") == "python"]


def _select(session: DbtSession, select: tuple[str, ...], exclude: tuple[str, ...],
            state: str | None = None) -> list[str]:
    """The selected models' unique_ids (dbt ls on the parsed manifest); a selection that matches
    nothing is a usage error, as in the game day (a typo in a CI selector must not pass).
    `state`: the folder of a previous manifest.json, for `state:modified+` and the like."""
    listed = session.invoke(ls_args(select, exclude, state))
    check_stop()
    if not listed.success:
        raise ConfigError(f"dbt ls failed for the selection: {listed.error}")
    selected = listed_ids(listed)
    if not selected:
        terms = selection_terms(select, exclude)
        if selects_by_state(select, state):
            raise NothingToCheck(f"the selection matches no model ({terms})")
        raise ConfigError(f"the selection matches no model ({terms or 'the project has no models'})")
    return selected


def _spec(node, sql: str) -> RelationSpec:
    kind = "table" if node.config.materialized == "incremental" else "view"
    return RelationSpec(node.database, node.schema, node.alias or node.name, select=sql, kind=kind)


def _materialize(session: DbtSession, manifest, scratch: Scratch, full: dict, intro: set[str], needed: set[str],
                 window_vars: str | None, plain_vars: str | None, unknown: dict) -> tuple[dict, dict]:
    """Create the needed models in the scratch catalog, empty, from their compiled SQL, upstream
    first. A model that introspects compiles only once what it reads exists: such models wait in
    a batch, compiled (both branches) when a model below needs them or at the end. Returns
    ({unique_id: why its relation could not be created}, {unique_id: incremental branch}) and
    updates `full` with the introspecting models' SQL."""
    order = [u for u in catalog.topo_order(manifest, {u for u in needed if u.startswith("model.")})
             if u in manifest.nodes]
    not_created: dict[str, str] = {}
    incr: dict[str, tuple[str | None, str]] = {}
    to_create: list = []
    pending: list = []
    pending_ids: set[str] = set()

    def create_batch() -> None:
        if to_create:
            failed = scratch.create(_spec(n, full[n.unique_id][0]) for n in to_create)
            for n in to_create:
                key = (n.schema.lower(), (n.alias or n.name).lower())
                if key in failed:
                    not_created[n.unique_id] = failed[key]
            to_create.clear()

    def flush() -> None:
        create_batch()
        if not pending:
            return
        batch = list(pending)
        pending.clear()
        pending_ids.clear()
        kw = dict(profiles_dir=scratch.profiles_dir(), flags=scratch.extra_flags)
        full.update(compile_all(session, Selection.of(batch), batch, full_refresh=True, vars_yaml=window_vars, **kw))
        to_create.extend(n for n in batch if full.get(n.unique_id, (None, ""))[0] is not None)
        create_batch()
        inc = [n for n in batch if n.config.materialized == "incremental"]
        if inc:
            incr.update(incremental_pass(session, manifest, scratch.profiles_dir(), dict(
                selection=Selection.of(inc), uids=[n.unique_id for n in inc], plain_vars=plain_vars,
                window_vars=window_vars, flags=scratch.extra_flags)))

    for uid in order:
        node = manifest.nodes[uid]
        if node.config.materialized == "ephemeral" or getattr(node, "language", "sql") == "python":
            continue
        parents = getattr(node.depends_on, "nodes", None) or ()
        missing = next((p for p in parents if p in unknown or p in not_created), None)
        if missing is not None and uid not in intro:  # it cannot run here: say why without trying
            not_created[uid] = f"upstream {unknown.get(missing) or missing} is not in the scratch catalog"
            continue
        if any(p in pending_ids for p in parents):
            flush()
        if uid in intro:
            pending.append(node)
            pending_ids.add(uid)
        elif full.get(uid, (None, ""))[0] is not None:
            to_create.append(node)
        check_stop()
    flush()
    return not_created, incr


def lint_session_dir(project: Path, fallback: Path | None) -> Path | None:
    """dbt's target and log paths for the lint: under the project's target/ (like `dbt compile`),
    so that the next lint reuses dbt's partial parse; a temp dir when the project is read-only, or when
    its target/ or target/rerun_safety_lint is a link (which the project could point anywhere: the confined
    lint may write there)."""
    from ..errors import ConfigError
    from ..safe_files import open_dir

    path = project / "target" / "rerun_safety_lint"
    try:
        fd = open_dir(project, ("target", "rerun_safety_lint"), create=True, what="the lint's folder")
    except ConfigError:
        return fallback / "session" if fallback is not None else None
    try:
        probe = ".write_probe"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd))
        os.unlink(probe, dir_fd=fd)
        return path
    except OSError:
        return fallback / "session" if fallback is not None else None
    finally:
        os.close(fd)


def manifest_catalog(manifest) -> str:
    """The catalog most models live in (for DuckDB: the database file's stem or its alias)."""
    counts: dict[str, int] = {}
    for n in manifest.nodes.values():
        if getattr(n, "resource_type", None) is not None and str(n.resource_type) in ("model", "NodeType.Model") \
                and n.database:
            counts[n.database] = counts.get(n.database, 0) + 1
    return max(counts, key=counts.get) if counts else "scratch"
