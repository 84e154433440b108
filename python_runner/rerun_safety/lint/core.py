"""`rerun-safety lint`: compile the selected models (both branches of incremental ones), parse the
SQL with sqlglot in the target's dialect, and run the rules. Returns a `LintResult`; never prints."""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import Any

from sqlglot import exp

from ..dbt_invoke import scrub_dbt_environment
from ..project import display_name
from .compile import PLACEHOLDER_COLUMN, CompiledModel, compile_project
from .nodes import config_get as _config_get, hooks as _hooks, is_incremental as _is_incremental
from .overlap import overlap_note as _overlap_note
from .context import ModelContext, ParsedSql, parse_sql, sqlglot_dialect
from .findings import Finding, LintResult
from .rules import lint_model, locate, make_finding
from .rules.keys import output_keys

_UNIQUE_TESTS = {"unique": "column_name", "unique_key": "columns",
                 "unique_combination_of_columns": "combination_of_columns"}


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    out = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().strip('"`[]').lower()
            if part:
                out.append(part)
    return tuple(out)


def _plain(cols: tuple[str, ...]) -> bool:
    return bool(cols) and all(c.replace("_", "").isalnum() for c in cols)


def unique_sets(manifest) -> dict[str, list[frozenset]]:
    """unique_id -> column sets known to be unique: unique_key config, unique / unique_key /
    unique_combination_of_columns tests, and unique or primary-key constraints."""
    sets: dict[str, list[frozenset]] = {}

    def add(uid: str, cols: tuple[str, ...]) -> None:
        if _plain(cols):
            sets.setdefault(uid, [])
            if frozenset(cols) not in sets[uid]:
                sets[uid].append(frozenset(cols))

    for uid, node in manifest.nodes.items():
        rtype = str(node.resource_type)
        if rtype == "model":
            add(uid, _names(getattr(node.config, "unique_key", None)))
            for col in (node.columns or {}).values():
                for c in getattr(col, "constraints", None) or []:
                    if str(getattr(c, "type", "")) in ("unique", "primary_key", "ConstraintType.unique",
                                                        "ConstraintType.primary_key"):
                        add(uid, _names(col.name))
            for c in getattr(node, "constraints", None) or []:
                if str(getattr(c, "type", "")) in ("unique", "primary_key") and getattr(c, "columns", None):
                    add(uid, _names(c.columns))
        elif rtype == "test":
            meta = getattr(node, "test_metadata", None)
            if meta is None or meta.name not in _UNIQUE_TESTS:
                continue
            cols = _names(meta.kwargs.get(_UNIQUE_TESTS[meta.name]) or getattr(node, "column_name", None))
            target = getattr(node, "attached_node", None)
            targets = [target] if target else [d for d in node.depends_on.nodes
                                               if d.startswith(("model.", "source.", "seed.", "snapshot."))]
            for t in targets[:1]:
                add(t, cols)
    for uid, src in getattr(manifest, "sources", {}).items():  # a connector's primary key in source YAML
        for meta in (getattr(src, "meta", None) or {}, getattr(src.config, "meta", None) or {}):
            section = meta.get("rerun_safety") if isinstance(meta.get("rerun_safety"), dict) else {}
            for value in (meta.get("primary_key"), section.get("primary_key"), section.get("unique_key")):
                if value and not isinstance(value, bool):
                    add(uid, _names(value))
        for col in (src.columns or {}).values():
            cmeta = getattr(col, "meta", None) or {}
            types = {str(getattr(c, "type", "")).split(".")[-1] for c in getattr(col, "constraints", None) or []}
            if cmeta.get("primary_key") is True or types & {"primary_key", "unique"}:
                add(uid, _names(col.name))
    return sets


def _meta(node) -> dict:
    merged: dict = {}
    for meta in (getattr(node, "meta", None) or {}, getattr(node.config, "meta", None) or {}):
        section = meta.get("rerun_safety") if isinstance(meta, dict) else None
        if isinstance(section, dict):
            merged.update(section)
    return merged


def _source_load_times(manifest) -> dict[str, tuple[str, str, str]]:
    """source unique_id -> (name, event-time column, load-time column) for the sources that declare
    when rows were loaded beside when they happened, read as the game day reads them: `loaded_at_field`
    beside `config: {event_time: ...}`, or `meta: {rerun_safety: {loaded_at: col}}`."""
    out = {}
    for uid, src in manifest.sources.items():
        meta = _meta(src)
        declared = getattr(src.config, "event_time", None)
        event = declared or src.loaded_at_field or meta.get("time_column") or meta.get("event_time")
        load = meta.get("loaded_at") or (src.loaded_at_field if declared else None)
        if event and load and str(event).lower() != str(load).lower():
            out[uid] = (f"{src.source_name}.{src.name}", str(event), str(load))
    return out


def relation_kinds(manifest, time_columns: dict[str, str], kinds: dict[str, str]) -> dict[tuple[str, str], str]:
    """(schema, identifier) -> what a relation holds, for the stale-attribute rule: "event" (rows that
    arrive over time: a timed source or seed, an incremental model, a model reading one), "state" (the
    current state of things that change: an untimed source, or a table or view built only from such),
    "static" (seeds and sources declared static in rerun_safety.yml, and what is built only from them),
    "history" (snapshots). `time_columns`/`kinds`: rerun_safety.yml's, by source_name.table_name or seed name."""
    own: dict[str, str] = {}
    for uid, src in manifest.sources.items():
        name = f"{src.source_name}.{src.name}"
        declared = kinds.get(name)
        timed = (getattr(src.config, "event_time", None) or src.loaded_at_field or name in time_columns
                 or _meta(src).get("time_column"))
        own[uid] = ("static" if declared == "static" else "state" if declared == "current_state" else
                    "event" if declared in ("event_log", "loaded_log") or timed else "state")
    for uid, node in manifest.nodes.items():
        kind = str(node.resource_type.value)
        if kind == "seed":
            declared = kinds.get(node.name)
            own[uid] = ("event" if node.name in time_columns or declared in ("event_log", "loaded_log") else
                        "state" if declared == "current_state" else "static")
        elif kind == "snapshot":
            own[uid] = "history"
        elif kind == "model" and getattr(node.config, "materialized", None) == "incremental":
            own[uid] = "event"

    def of(uid: str, seen: frozenset = frozenset()) -> str:
        if uid in own or uid in seen:
            return own.get(uid, "static")
        node = manifest.nodes.get(uid)
        parents = [p for p in (getattr(node.depends_on, "nodes", None) or ()) if p in manifest.nodes
                   or p in manifest.sources] if node is not None else []
        found = {of(p, seen | {uid}) for p in parents}
        own[uid] = ("event" if "event" in found or "history" in found else "state" if "state" in found
                    else "static")
        return own[uid]

    out = {}
    for uid, src in manifest.sources.items():
        out[(str(src.schema).lower(), str(src.identifier).lower())] = own[uid]
    for uid, node in manifest.nodes.items():
        if str(node.resource_type.value) in ("model", "seed", "snapshot"):
            out[(str(node.schema).lower(), str(node.alias or node.name).lower())] = of(uid)
    return out


def _relation_names(manifest) -> dict[str, str]:
    """How hooks' `source()` and `ref()` render, as schema.identifier (the lint reads which table a hook writes)."""
    names = {f"source:{s.source_name}.{s.name}": f"{s.schema}.{s.identifier}" for s in manifest.sources.values()}
    for node in manifest.nodes.values():
        if str(node.resource_type) in ("model", "seed", "snapshot"):
            names[f"ref:{node.name}"] = f"{node.schema}.{node.alias or node.name}"
    return names


def _upstream(uid: str, manifest, cache: dict) -> frozenset:
    """Every node and source upstream of a node."""
    if uid in cache:
        return cache[uid]
    cache[uid] = frozenset()  # a cycle (never in a valid project) stops here
    node = manifest.nodes.get(uid)
    parents = tuple(getattr(node.depends_on, "nodes", None) or ()) if node is not None else ()
    found = set(parents)
    for parent in parents:
        found |= _upstream(parent, manifest, cache)
    cache[uid] = frozenset(found)
    return cache[uid]


def _parse(sql: str | None, dialect: str | None, cache: dict) -> ParsedSql | None:
    if sql is None:
        return None
    if sql not in cache:
        cache[sql] = parse_sql(sql, dialect)
    return cache[sql]


def _schedule(project_dir: Path, given: str | None, vars_yaml: str | None) -> tuple[str, float, str]:
    """(label, seconds, where from) of how often the models run."""
    from ..cadence import Batch
    from ..project import runner_schedule
    from ..vars import parse_vars

    if given:
        return Batch.parse(given).label, Batch.parse(given).seconds, "--batch-size"
    text, origin = runner_schedule(project_dir, parse_vars(vars_yaml))
    if text is None:
        return "day", 86400.0, "the default schedule"
    batch = Batch.parse(text, option=f"{origin}: schedule")
    return batch.label, batch.seconds, f"schedule in {Path(origin).name if origin.endswith('.yml') else origin}"


def _model_schedule(node, project: tuple[str, float, str]) -> tuple[str, float, str]:
    """A model's own `meta: {rerun_safety: {schedule: ...}}` (a job that runs it at another cadence),
    else the project's."""
    from ..cadence import Batch

    text = _meta(node).get("schedule")
    if not text:
        return project
    batch = Batch.parse(str(text), option=f"model {display_name(node)}: meta.rerun_safety.schedule")
    return batch.label, batch.seconds, "its meta.rerun_safety.schedule"


class OverBudget(Exception):
    """A model's analysis ran past --model-budget."""


@contextlib.contextmanager
def budget(seconds: float | None):
    """Raise OverBudget in the block after `seconds` of wall time (SIGALRM: the main thread only;
    elsewhere, or without a budget, the block is not bounded)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def over(signum, frame):
        raise OverBudget()

    previous = signal.signal(signal.SIGALRM, over)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_lint(project_dir: str | Path = ".", profiles_dir: str | Path | None = None, target: str | None = None,
             select: tuple[str, ...] = (), exclude: tuple[str, ...] = (), vars_yaml: str | None = None,
             parallel: bool | None = None, state: str | None = None, work_root: str | Path | None = None,
             confined: bool = False, schedule: str | None = None, with_data: bool = False,
             model_budget: float | None = 30.0) -> LintResult:
    """Lint the selected models. `parallel` forces (True) or forbids (False) compiling the
    incremental branches in a second process; by default it is used when it is likely to help.
    `schedule`: how often the models run (--batch-size), else `schedule:` in rerun_safety.yml, else a day.
    `with_data`: read the lateness of the timed sources upstream of incremental models from the target
    (lint.lateness; read-only); without it no connection to the target is opened.
    `model_budget`: seconds for one model's parse and rules; a model past it is reported as skipped
    (LintResult.skipped), and the stop signals are heard between models."""
    from .dbt_compile import check_stop

    started = time.perf_counter()
    cadence = _schedule(Path(project_dir), schedule, vars_yaml)
    scrub_dbt_environment()  # CI's DBT_DEFER/DBT_STATE/...: the lint compiles the project as it is
    outcome = compile_project(project_dir, profiles_dir, target, tuple(select), tuple(exclude), vars_yaml,
                              parallel=parallel, state=state, work_root=work_root, confined=confined)
    manifest = outcome.manifest
    adapter = manifest.metadata.adapter_type
    dialect = sqlglot_dialect(adapter)
    uniq = unique_sets(manifest)
    root = manifest.metadata.project_name
    root_macros = frozenset(m.name for m in manifest.macros.values() if m.package_name == root)
    visible = _macros_by_package(manifest, adapter)

    catalog = {key: dict(cols) for key, cols in outcome.columns.items()}
    load_times = _source_load_times(manifest)
    relation_names = _relation_names(manifest)
    from ..project import load_runner_config
    from ..vars import parse_vars

    times, declared, _, _ = load_runner_config(Path(project_dir), parse_vars(vars_yaml))
    holds = relation_kinds(manifest, times, declared)
    upstream: dict = {}
    feeds = _feeding_incremental(manifest)
    observed, notes = {}, []
    if with_data and outcome.target is not None:
        from .lateness import observe

        t = time.perf_counter()
        wanted = {u for uid in outcome.selected if _is_incremental(manifest.nodes.get(uid))
                  for u in _upstream(uid, manifest, upstream) if u in load_times}
        observed, notes = observe(manifest, load_times, wanted, outcome.target, outcome.compile_database)
        outcome.timings["with_data"] = time.perf_counter() - t
    relation_keys: dict = {}
    for uid, sets in uniq.items():
        rel = outcome.relations.get(uid)
        if rel:
            relation_keys.setdefault(rel, [])
            relation_keys[rel] += [s for s in sets if s not in relation_keys[rel]]

    parse_time = rules_time = 0.0
    findings: list[Finding] = []
    suppressed: list[Finding] = []
    names = [display_name(manifest.nodes[u]) for u in outcome.selected
             if u in manifest.nodes and u in outcome.models]
    # upstream first (a node's upstream set is a strict subset of any node's below it): the unique
    # column sets a model's output holds (a GROUP BY, say) are known when the models below it are linted
    t = time.perf_counter()
    parsed, skipped = {}, {}
    for uid in outcome.selected:
        check_stop()
        try:
            with budget(model_budget):
                parsed[uid] = _parse_model(manifest.nodes.get(uid), outcome.models.get(uid), dialect)
        except OverBudget:
            parsed[uid] = (True, None, None)  # (read as unknown by the models below)
            skipped[uid] = f"parsing its SQL took more than {model_budget:g}s (--model-budget)"
        except RecursionError:
            parsed[uid] = (True, None, None)
            skipped[uid] = "its SQL nests deeper than the parser can follow"
    parse_time += time.perf_counter() - t
    below = _children(manifest)
    used: dict[str, frozenset | None] = {}  # model -> the identifiers its SQL uses (None: not known), once each
    for uid in sorted(outcome.selected, key=lambda u: len(_upstream(u, manifest, upstream))):
        check_stop()
        node = manifest.nodes.get(uid)
        compiled: CompiledModel | None = outcome.models.get(uid)
        if node is None or compiled is None or uid in skipped:
            continue
        try:
            with budget(model_budget):
                python, full, incr = parsed[uid]

                rel = outcome.relations.get(uid)
                own = catalog.get(rel) if rel else None
                if own is not None and (set(own) == {PLACEHOLDER_COLUMN} or uid in outcome.not_created):
                    own = None  # only the placeholder: its real columns are unknown

                t = time.perf_counter()
                sets = list(uniq.get(uid, []))
                for parent in node.depends_on.nodes:
                    sets += [s for s in uniq.get(parent, []) if s not in sets]
                ctx = ModelContext(
                    name=display_name(node), adapter_type=adapter, materialized=node.config.materialized,
                    incremental_strategy=_config_get(node, "incremental_strategy"),
                    unique_key=_names(_config_get(node, "unique_key")),
                    partition_key=_config_get(node, "partition_key"), partitions=_config_get(node, "partitions"),
                    config={**{k: _config_get(node, k) for k in ("partition_by", "partitioned_by", "event_time",
                                                                 "batch_size", "lookback")},
                            "pre_hook": _hooks(node, "pre_hook"), "post_hook": _hooks(node, "post_hook")},
                    rerun_safety_meta=_meta(node), unique_sets=tuple(sets),
                    this=(node.database or "", node.schema or "", node.alias or node.name),
                    full=full, incremental=incr, unique_id=uid, path=node.original_file_path,
                    raw_code=node.raw_code or "", window_literals=outcome.window_literals, root_macros=root_macros,
                    strategy_macros=None if visible is None else frozenset().union(
                        *(visible.get(p, ()) for p in (root, node.package_name, *visible["internal"]))),
                    catalog=catalog, columns=own, feeds_incremental=uid in feeds, relation_keys=relation_keys,
                    language="python" if python else "sql",
                    load_times=tuple(load_times[u] for u in sorted(_upstream(uid, manifest, upstream)) if u in load_times),
                    lateness=tuple(observed[u] for u in sorted(_upstream(uid, manifest, upstream)) if u in observed),
                    relation_names=relation_names, clock_rendered=outcome.clock_rendered.get(uid),
                    read_below=_read_below(below.get(uid, ()), parsed, used) if uid in feeds and
                    node.config.materialized in ("table", "view", "ephemeral") else None,
                    schedule=_model_schedule(node, cadence), relation_kinds=holds)
                unknown = sorted(outcome.unknown_relations.get(p, p) for p in node.depends_on.nodes
                                 if p in outcome.unknown_relations)
                extra = _python_findings(ctx, compiled) if python else _pipeline_findings(ctx, compiled, full, incr, unknown)
                kept, quiet = lint_model(ctx, extra, run=not python)
                findings += kept
                suppressed += quiet
                if rel and full is not None and full.ok and not _is_incremental(node):  # (an append repeats its keys)
                    derived = [k for k in output_keys(full.statements[-1], ctx) if k not in relation_keys.get(rel, [])]
                    if derived:
                        relation_keys[rel] = [*relation_keys.get(rel, []), *derived]
                rules_time += time.perf_counter() - t
        except OverBudget:
            skipped[uid] = f"its rules took more than {model_budget:g}s (--model-budget)"
        except RecursionError:
            skipped[uid] = "its SQL nests deeper than the rules can follow"

    timings = dict(outcome.timings)
    timings["sqlglot_parse"] = parse_time
    timings["rules"] = rules_time
    timings["total"] = time.perf_counter() - started
    order = {n: i for i, n in enumerate(names)}
    findings.sort(key=lambda f: (order.get(f.model, 0), f.severity != "error", f.rule, f.line or 0))
    gone = tuple((display_name(manifest.nodes[u]) if u in manifest.nodes else u, why) for u, why in skipped.items())
    notes = [*notes, *(f"model {name} skipped: {why}" for name, why in gone)]
    overlap = _overlap_note(manifest, outcome.selected, adapter)
    notes += [overlap] if overlap else []
    return LintResult(tuple(findings), tuple(names), tuple(suppressed), outcome.mode, timings, notes=tuple(notes),
                      skipped=gone)


def _parse_model(node, compiled: CompiledModel | None, dialect) -> tuple[bool, ParsedSql | None, ParsedSql | None]:
    """(a Python model, its full-refresh SQL parsed, its incremental SQL parsed)."""
    if node is None or compiled is None:
        return False, None, None
    cache: dict = {}
    python = str(getattr(node, "language", "sql") or "sql").lower().endswith("python")
    full = None if python else _parse(compiled.full_sql, dialect, cache)
    incr = _parse(compiled.incremental_sql, dialect, cache) if compiled.incremental_checked and not python else None
    return python, full, incr


def _children(manifest) -> dict[str, list[str]]:
    """node -> the nodes that depend on it (tests left out)."""
    out: dict[str, list[str]] = {}
    for uid, node in manifest.nodes.items():
        if str(node.resource_type.value) == "test":
            continue
        for parent in getattr(node.depends_on, "nodes", None) or ():
            out.setdefault(parent, []).append(uid)
    return out


def _read_below(children, parsed: dict, used: dict) -> frozenset | None:
    """Every identifier the SQL of the models below uses, lowercased; None when one of them is not
    known here (not linted, a Python model, a snapshot, unparsed) or reads `*`. `used` caches each
    model's identifiers (a model below several parents is read once)."""
    names: set[str] = set()
    for uid in children:
        if uid not in used:
            used[uid] = _identifiers(*parsed.get(uid, (True, None, None)))
        if used[uid] is None:
            return None
        names |= used[uid]
    return frozenset(names)


def _identifiers(python: bool, full: ParsedSql | None, incr: ParsedSql | None) -> frozenset | None:
    if python or full is None or not full.ok:
        return None
    names: set[str] = set()
    for branch in (full, incr):
        for stmt in branch.statements if branch is not None and branch.ok else ():
            if any(True for _ in stmt.find_all(exp.Star)):
                return None
            names |= {i.name.lower() for i in stmt.find_all(exp.Identifier)}
    return frozenset(names)


def _feeding_incremental(manifest) -> set[str]:
    """unique_ids of the nodes with an incremental model (or one of the project's own
    materializations, which the game day replays like one) downstream."""
    from ..project import BUILTIN_MATERIALIZATIONS

    stack = [uid for uid, n in manifest.nodes.items() if n.resource_type.value == "model" and (
        (m := getattr(n.config, "materialized", None)) == "incremental" or m not in BUILTIN_MATERIALIZATIONS)]
    out: set[str] = set()
    while stack:
        node = manifest.nodes.get(stack.pop())
        for parent in (getattr(node.depends_on, "nodes", None) or ()) if node is not None else ():
            if parent not in out:
                out.add(parent)
                stack.append(parent)
    return out


def _python_findings(ctx: ModelContext, compiled: CompiledModel) -> list[Finding]:
    """A Python model gets one note; its code is read (ast) for what it does with its own table."""
    import ast

    what = []
    try:
        tree = ast.parse(ctx.raw_code or "")
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                 and isinstance(n.value, ast.Name) and n.value.id == "dbt"}
        if "is_incremental" in attrs:
            what.append("filters on dbt.is_incremental")
        if "this" in attrs:
            what.append("reads dbt.this")
    except SyntaxError as err:
        what.append(f"its code does not parse (line {err.lineno})")
    read = f" (it {', '.join(what)}; the game day replays it)" if what else ""
    return [make_finding(ctx, "python-model", f"Python model {ctx.name}: the SQL rules do not apply{read}",
                         branch="full")]


def _pipeline_findings(ctx: ModelContext, compiled: CompiledModel, full: ParsedSql | None,
                       incr: ParsedSql | None, unknown: list[str] = ()) -> list[Finding]:
    """Compile errors, parse errors and unchecked branches, as findings on the model."""
    out = []
    why = (f" (the scratch catalog could not hold {', '.join(unknown)}: not in the target, and no columns in its "
           "YAML or CSV)") if unknown else ""
    if compiled.full_error:
        out.append(make_finding(ctx, "compile-error",
                                f"model {ctx.name} could not be compiled: {compiled.full_error}{why}", branch="full"))
    if compiled.incremental_checked and compiled.incremental_error and compiled.incremental_error != compiled.full_error:
        out.append(make_finding(ctx, "compile-error",
                                f"model {ctx.name} could not be compiled with is_incremental() true: "
                                f"{compiled.incremental_error}", branch="incremental",
                                line=locate(ctx.raw_code, (r"is_incremental",))))
    seen = set()
    for branch, parsed in (("full", full), ("incremental", incr)):
        if parsed is not None and parsed.error and parsed.error not in seen:
            seen.add(parsed.error)
            label = "full-refresh" if branch == "full" else "incremental"
            out.append(make_finding(ctx, "sql-parse-error",
                                    f"sqlglot ({ctx.dialect or 'generic'}) could not parse the {label} SQL of "
                                    f"model {ctx.name}: {parsed.error}", branch=branch))
    if ctx.is_incremental and not compiled.incremental_checked:
        out.append(make_finding(ctx, "incremental-branch-unchecked",
                                f"the incremental branch of model {ctx.name} was not compiled; only the "
                                "full-refresh SQL was checked", branch="incremental"))
    return out


def _macros_by_package(manifest: Any, adapter: str) -> dict | None:
    """Macro names per package, and under "internal" the packages dbt itself ships for the adapter
    (their macros need no prefix); None when the adapter's packages cannot be told."""
    try:
        from dbt.adapters.factory import get_adapter_package_names

        internal = tuple(get_adapter_package_names(adapter))
    except Exception:  # noqa: BLE001 - the plugin is not loaded: do not guess
        return None
    out: dict = {"internal": internal}
    for m in manifest.macros.values():
        out.setdefault(m.package_name, set()).add(m.name)
    return out
