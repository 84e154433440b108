"""The user's dbt project as the game day sees it: models, sources, keys, time columns, lineage.

Parsed once; everything else reuses the manifest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .dbt_invoke import DbtSession
from .errors import ConfigError
from .profiles import load_target_output, resolve_profiles_dir
from .vars import parse_vars
from .warehouse.base import SourceTable  # noqa: F401 - the project's inputs (defined beneath the engines)

# dbt-duckdb `external`: a file written by the model, read back through a view
JUDGED_MATERIALIZATIONS = ("table", "incremental", "view", "materialized_view", "external")
# What dbt and its adapters build themselves; any other materialization is the project's own
BUILTIN_MATERIALIZATIONS = frozenset({"table", "view", "incremental", "ephemeral", "materialized_view", "external",
                                      "snapshot", "seed", "test", "unit", "dynamic_table", "function"})


@dataclass(frozen=True)
class Model:
    unique_id: str
    name: str
    fqn: tuple[str, ...]
    resource_type: str  # model | seed | snapshot
    materialized: str
    strategy: str | None
    key: tuple[str, ...]
    partition_key: Any
    event_time: str | None
    database: str | None
    schema: str
    identifier: str
    parents: tuple[str, ...]  # models and seeds this one reads
    sources: tuple[str, ...]
    ignore_columns: tuple[str, ...]
    window_driven: bool
    language: str = "sql"
    raw_code: str = field(default="", repr=False, compare=False)
    float_tolerance: float | None = None
    log_tables: tuple[str, ...] = ()  # relations its hooks write one row per run into, by design
    # a snapshot: the column that closes a version, and the value it holds while open (None: NULL)
    valid_to: str | None = None
    valid_to_current: str | None = None
    # meta.rerun_safety.compare_audit_columns: compare the columns that only stamp the run's clock (None:
    # the project's setting)
    compare_audit_columns: bool | None = None
    # why its rows record dbt's own runs (a package's run results, an on-run-end hook's log), "" if not:
    # what an invocation writes there depends on which models it ran, so it is built, never judged
    run_log: str = ""

    @property
    def incremental(self) -> bool:
        return self.materialized == "incremental"

    @property
    def snapshot(self) -> bool:
        return self.resource_type == "snapshot"

    @property
    def custom(self) -> bool:
        """A materialization of the project's own (`{% materialization name %}`): what it writes, and
        whether it reads its own earlier output, is known only by running it, so it is replayed at
        every run and judged like an incremental model."""
        return self.resource_type == "model" and self.materialized not in BUILTIN_MATERIALIZATIONS

    @property
    def keeps_state(self) -> bool:
        """Its output may depend on its own earlier runs: an incremental model, a snapshot, or a
        materialization of the project's own."""
        return self.incremental or self.snapshot or self.custom

    @property
    def empty(self) -> bool:
        """A model file with no SQL: dbt builds nothing for it (as its `node.empty`)."""
        return self.resource_type == "model" and self.language == "sql" and not self.raw_code.strip()

    @property
    def judged(self) -> bool:
        return not self.empty and not self.run_log and (self.snapshot or self.custom or (
            self.resource_type == "model" and self.materialized in JUDGED_MATERIALIZATIONS))

    @property
    def selector(self) -> str:
        return "fqn:" + ".".join(self.fqn)


def display_name(node: Any) -> str:
    """A node's name as dbt shows it: a versioned model's with its version (`orders.v2`), so that
    `v1` and `v2` of one model are two names wherever a person reads one."""
    version = getattr(node, "version", None)
    return node.name if version is None else f"{node.name}.v{version}"


def hook_sql(value: Any) -> list[str]:
    """The SQL of each hook in a `pre_hook`/`post_hook` config value, in dbt's order: the value as a
    manifest keeps it (a list of Hook objects) or as a user writes it (a string, a `{sql: ...,
    transaction: ...}` mapping, or a list of those); empty ones left out."""
    items = [value] if isinstance(value, (str, dict)) else list(value or [])
    out = []
    for item in items:
        sql = item.get("sql") if isinstance(item, dict) else getattr(item, "sql", item)
        if isinstance(sql, str) and sql.strip():
            out.append(sql)
    return out


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip()) if "," in value else (value,)
    return tuple(str(v) for v in value)


def _meta(node: Any) -> dict:
    meta = dict(getattr(node, "meta", None) or {})
    cfg_meta = (node.config.get("meta") if hasattr(node.config, "get") else None) or {}
    meta.update(cfg_meta)
    rs = meta.get("rerun_safety") or {}
    return rs if isinstance(rs, dict) else {}


# Packages whose tables record dbt's runs (invocations, run results, the artifacts they upload from an
# on-run-end hook): what a run writes there follows which models that invocation ran.
RUN_LOG_PACKAGES = {"elementary": "Elementary's run records", "dbt_artifacts": "dbt_artifacts' run records"}
# an event package's incremental manifest: one row per model, written by its on-run-end hook
_MANIFEST = re.compile(r"incremental_manifest$", re.IGNORECASE)
_WRITES = r"(?:insert\s+(?:or\s+\w+\s+)?into|merge\s+into|update|delete\s+from|copy)\s+"


def run_log_reason(node: Any, package: str, name: str, identifier: str, run_hooks: str) -> str:
    """Why a model is a run log (see Model.run_log), or "": declared (meta.rerun_safety.run_log), a known
    package's, an event package's incremental manifest, or a relation the project's on-run-start/end
    hooks write into."""
    declared = _flag(name, "run_log", _meta(node).get("run_log"))
    if declared is not None:
        return "declared a run log (meta.rerun_safety.run_log)" if declared else ""
    if package in RUN_LOG_PACKAGES:
        return RUN_LOG_PACKAGES[package]
    if package.lower().startswith("snowplow") and _MANIFEST.search(name):
        return "an event package's incremental manifest, written by its on-run-end hook"
    for word in {name, identifier}:
        if re.search(_WRITES + r"[^;]{0,120}?(?<![\w$])" + re.escape(word) + r"(?![\w$])", run_hooks, re.IGNORECASE):
            return "written by the project's on-run-start/end hooks"
    return ""


def _flag(model: str, key: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"model {model}: meta.rerun_safety.{key} must be true or false; got {value!r}")


def _tolerance(model: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        out = -1.0
    if not out >= 0:
        raise ConfigError(f"model {model}: meta.rerun_safety.float_tolerance must be a number >= 0 "
                          f"(a relative tolerance such as 1e-9); got {value!r}")
    return out


def _keys_from_tests(manifest: Any) -> dict[str, tuple[str, ...]]:
    """Keys declared by tests: `unique` on a column, our `unique_key`, dbt_utils' combination test."""
    keys: dict[str, tuple[str, ...]] = {}
    for node in manifest.nodes.values():
        meta = getattr(node, "test_metadata", None)
        if node.resource_type.value != "test" or meta is None:
            continue
        attached = getattr(node, "attached_node", None)
        if not attached:
            continue
        kwargs = meta.kwargs or {}
        cols: tuple[str, ...] = ()
        if meta.name == "unique" and kwargs.get("column_name"):
            cols = (str(kwargs["column_name"]),)
        elif meta.name == "unique_key" and kwargs.get("columns"):
            cols = _as_tuple(kwargs["columns"])
        elif meta.name == "unique_combination_of_columns" and kwargs.get("combination_of_columns"):
            cols = _as_tuple(kwargs["combination_of_columns"])
        if cols and (attached not in keys or len(cols) < len(keys[attached])):
            keys[attached] = cols
    return keys


RUNNER_CONFIG_FILE = "rerun_safety.yml"


INPUT_KINDS = ("event_log", "loaded_log", "static", "current_state")


RUNNER_KEYS = ("time_columns", "inputs", "compare_audit_columns", "schedule")


def _runner_config(project_dir: Path, cli_vars: dict) -> tuple[dict, str]:
    """The runner's settings as written (checked to be a mapping of known keys), and where from:
    `rerun_safety.yml` in the project, else `vars: {rerun_safety: {...}}` (--vars, then
    dbt_project.yml); ({}, "") when there are none."""
    found: list[tuple[Any, str]] = []
    path = project_dir / RUNNER_CONFIG_FILE
    if path.exists():
        try:
            found.append((yaml.safe_load(path.read_text()) or {}, str(path)))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{path}{where} is not valid YAML") from None
    if isinstance(cli_vars.get("rerun_safety"), dict):
        found.append((cli_vars["rerun_safety"], "--vars rerun_safety"))
    try:
        project_vars = (yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}).get("vars") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        project_vars = {}
    if isinstance(project_vars, dict) and isinstance(project_vars.get("rerun_safety"), dict):
        found.append((project_vars["rerun_safety"], "vars.rerun_safety in dbt_project.yml"))
    if not found:
        return {}, ""
    config, origin = found[0]
    if not isinstance(config, dict):
        raise ConfigError(f"{origin} must be a mapping, e.g. 'time_columns: {{raw.events: loaded_at}}'")
    unknown = sorted(set(config) - set(RUNNER_KEYS))
    if unknown:
        raise ConfigError(f"{origin}: unknown key '{unknown[0]}' (known: {', '.join(RUNNER_KEYS)})")
    if "schedule" in config and not isinstance(config["schedule"], str):
        raise ConfigError(f"{origin}: schedule must say how often the models run: hour, day, week, month, year, "
                          "or a duration such as 15m, 6h, 2d")
    return config, origin


def runner_schedule(project_dir: Path, cli_vars: dict) -> tuple[str | None, str]:
    """`schedule` of the runner's settings (how often the models run, e.g. `day`, `6h`) and where it
    came from; (None, "") when not set."""
    config, origin = _runner_config(project_dir, cli_vars)
    return (config["schedule"], origin) if "schedule" in config else (None, "")


def load_runner_config(project_dir: Path, cli_vars: dict) -> tuple[dict[str, str], dict[str, str], str, bool]:
    """The runner's own settings for a project: `time_columns` (input name -> column), `inputs`
    (input name -> its kind, one of INPUT_KINDS) and `compare_audit_columns` (compare the columns that
    only stamp the run's clock, left out by default); `schedule` is the lint's (runner_schedule).
    Returns (time columns, input kinds, where they came from, compare audit columns)."""
    config, origin = _runner_config(project_dir, cli_vars)
    if not origin:
        return {}, {}, "", False
    compare_audit = config.get("compare_audit_columns", False)
    if not isinstance(compare_audit, bool):
        raise ConfigError(f"{origin}: compare_audit_columns must be true or false; got {compare_audit!r}")
    kinds = config.get("inputs") or {}
    if not isinstance(kinds, dict) or not all(isinstance(k, str) and v in INPUT_KINDS for k, v in kinds.items()):
        raise ConfigError(f"{origin}: inputs must map a source ('source_name.table_name') or a seed name to one of "
                          f"{', '.join(INPUT_KINDS)}, e.g. 'inputs: {{raw.countries: static}}'")
    columns = config.get("time_columns") or {}
    if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                for k, v in columns.items()):
        raise ConfigError(f"{origin}: time_columns must map a source ('source_name.table_name') or a seed "
                          "name to a column name, e.g. 'time_columns: {raw.events: loaded_at}'")
    return dict(columns), dict(kinds), origin, compare_audit


class Project:
    """A parsed dbt project plus the user's rendered target."""

    def __init__(self, project_dir: str | Path, profiles_dir: str | None, target: str | None,
                 vars_yaml: str | None, work_dir: Path, manifest: Any = None):
        self.project_dir = Path(project_dir).resolve()
        if not self.project_dir.is_dir():
            raise ConfigError(f"project dir {project_dir} does not exist")
        self.profiles_dir = resolve_profiles_dir(profiles_dir).resolve()
        self.cli_vars = parse_vars(vars_yaml)
        self.profile_name, self.target_name, self.target_output = load_target_output(
            self.project_dir, self.profiles_dir, target, self.cli_vars)
        self.adapter = self.target_output["type"]
        # the target as the user named it (None: the profile's own, as dbt picks it): naming it when
        # the user did not would make dbt discard the partial-parse state of their last run
        self.session = DbtSession(self.project_dir, self.profiles_dir, target, work_dir,
                                  vars_yaml=yaml.safe_dump(self.cli_vars) if self.cli_vars else None)
        self.session.user_database = self.target_output.get("dbname") or self.target_output.get("database")
        if manifest is not None:
            self.manifest = self.session.manifest = manifest
        else:
            self.manifest = self.session.parse()
        self.models: dict[str, Model] = {}
        self.sources: dict[str, SourceTable] = {}
        # model -> inputs its compiled SQL reads by name, not through source() (see by_name)
        self.read_by_name: dict[str, set[str]] = {}
        self.time_columns, self.input_kinds, self.time_columns_origin, self.compare_audit_columns = load_runner_config(
            self.project_dir, self.cli_vars)
        self._load()
        self._apply_time_columns()
        self.source_aliases = self._merge_same_table_sources()

    @property
    def name(self) -> str:
        return self.manifest.metadata.project_name or self.project_dir.name

    def _load(self) -> None:
        m = self.manifest
        for uid, src in m.sources.items():
            cfg = src.config
            meta_rs = _meta(src)
            time_col, origin = None, None
            if getattr(cfg, "event_time", None):
                time_col, origin = cfg.event_time, "event_time"
            elif src.loaded_at_field:
                time_col, origin = src.loaded_at_field, "loaded_at_field"
            elif meta_rs.get("time_column") or meta_rs.get("event_time"):
                time_col, origin = meta_rs.get("time_column") or meta_rs.get("event_time"), "meta"
            load_col = meta_rs.get("loaded_at") or (src.loaded_at_field if origin == "event_time" else None)
            self.sources[uid] = SourceTable(uid, f"{src.source_name}.{src.name}", src.database, src.schema,
                                            src.identifier, time_col, origin, external=self._external(src),
                                            load_column=str(load_col) if load_col and time_col else None)
        self.seed_inputs: dict[str, SourceTable] = {}
        keys_by_test = _keys_from_tests(m)
        run_hooks = "\n".join(n.raw_code for u, n in m.nodes.items()
                               if u.startswith("operation.") and not u.startswith("operation.rerun_safety."))
        for uid, node in m.nodes.items():
            rtype = node.resource_type.value
            if rtype not in ("model", "seed", "snapshot") or not node.config.enabled:
                continue
            cfg = node.config
            deps = tuple(getattr(node.depends_on, "nodes", ()) or ())
            strategy = cfg.get("incremental_strategy") if cfg.materialized == "incremental" else None
            if cfg.materialized == "incremental" and not strategy:
                strategy = "default"
            key = _as_tuple(cfg.get("unique_key")) or keys_by_test.get(uid, ())
            raw = getattr(node, "raw_code", "") or ""
            ignore = _as_tuple(_meta(node).get("ignore_columns"))
            valid_to = valid_to_current = None
            if rtype == "snapshot":
                # what dbt stamps a version with depends on when the snapshot ran, which a replay
                # changes by design: versions are compared on the snapshot's own columns
                names = cfg.snapshot_table_column_names
                ignore += tuple(names.values())
                valid_to, valid_to_current = names["dbt_valid_to"], cfg.get("dbt_valid_to_current")
            self.models[uid] = Model(
                unique_id=uid, name=display_name(node), fqn=tuple(node.fqn), resource_type=rtype,
                materialized=cfg.materialized, strategy=strategy, key=key,
                partition_key=cfg.get("partition_key"), event_time=cfg.get("event_time"),
                database=node.database, schema=node.schema,
                identifier=getattr(node, "alias", None) or node.name,
                parents=tuple(d for d in deps if d.split(".")[0] in ("model", "seed", "snapshot")),
                sources=tuple(d for d in deps if d.startswith("source.")),
                ignore_columns=ignore, valid_to=valid_to, valid_to_current=valid_to_current,
                float_tolerance=_tolerance(node.name, _meta(node).get("float_tolerance")),
                log_tables=_as_tuple(_meta(node).get("log_tables")),
                compare_audit_columns=_flag(node.name, "compare_audit_columns", _meta(node).get("compare_audit_columns")),
                window_driven=(strategy == "microbatch" or "window_filter" in raw),
                language=str(getattr(node, "language", "sql") or "sql"),
                raw_code=raw,
                run_log=run_log_reason(node, str(getattr(node, "package_name", "") or ""), node.name,
                                       getattr(node, "alias", None) or node.name, run_hooks) if rtype == "model" else "",
            )
            seed_time = cfg.get("event_time") or _meta(node).get("time_column") or _meta(node).get("event_time")
            if rtype == "seed" and seed_time:
                origin = "event_time" if cfg.get("event_time") else "meta"
                self.seed_inputs[uid] = SourceTable(uid, node.name, node.database, node.schema,
                                                    self.models[uid].identifier, str(seed_time), origin, seed=True)

    def _external(self, src: Any) -> str | None:
        """A dbt-duckdb source read from a file (`external_location`): its rendered location. The
        snapshot copies it into a table, so the location is taken out of this manifest: in a
        sandbox, `source()` then names that table."""
        from .warehouse.dialects import dialect_for

        if not dialect_for(self.adapter).external_sources:
            return None
        extra = getattr(src.config, "_extra", None) or {}
        if "external_location" not in (src.meta or {}) and "external_location" not in extra:
            return None
        from types import SimpleNamespace

        from dbt.adapters.duckdb.relation import DuckDBRelation

        try:
            rendered = DuckDBRelation.create_from_source(SimpleNamespace(quoting={}), src).render()
        except Exception as err:  # noqa: BLE001 - a bad template in the user's config
            raise ConfigError(f"source {src.source_name}.{src.name}: external_location cannot be rendered: "
                              f"{err}") from None
        src.meta.pop("external_location", None)
        extra.pop("external_location", None)
        return rendered

    def _apply_time_columns(self) -> None:
        """The runner config's time columns: override a source's, or make a seed a timed input."""
        by_name = {s.name: uid for uid, s in self.sources.items()}
        seeds = {m.name: uid for uid, m in self.models.items() if m.resource_type == "seed"}
        for name, column in self.time_columns.items():
            if name in by_name:
                uid = by_name[name]
                self.sources[uid] = replace(self.sources[uid], time_column=column,
                                            time_origin=self.time_columns_origin)
            elif name in seeds:
                m = self.models[seeds[name]]
                self.seed_inputs[m.unique_id] = SourceTable(m.unique_id, m.name, m.database, m.schema, m.identifier,
                                                            column, self.time_columns_origin, seed=True)
            else:
                known = ", ".join(sorted([*by_name, *seeds])[:8]) or "none"
                raise ConfigError(f"{self.time_columns_origin}: time_columns names '{name}', which is neither a "
                                  f"source ('source_name.table_name') nor a seed of the project (e.g. {known})")
        for name, kind in self.input_kinds.items():
            if name in by_name:
                uid = by_name[name]
                self.sources[uid] = replace(self.sources[uid], kind=kind)
            elif name in seeds:
                uid = seeds[name]
                if kind in ("static", "current_state"):
                    self.seed_inputs.pop(uid, None)
                elif uid in self.seed_inputs:
                    self.seed_inputs[uid] = replace(self.seed_inputs[uid], kind=kind)
            else:
                known = ", ".join(sorted([*by_name, *seeds])[:8]) or "none"
                raise ConfigError(f"{self.time_columns_origin}: inputs names '{name}', which is neither a "
                                  f"source ('source_name.table_name') nor a seed of the project (e.g. {known})")
            src = self.sources.get(by_name.get(name, "")) or self.seed_inputs.get(seeds.get(name, ""))
            if kind in ("event_log", "loaded_log") and (src is None or not src.time_column):
                raise ConfigError(f"{self.time_columns_origin}: inputs says {name} is a {kind.replace('_', ' ')}, "
                                  f"but it has no time column: name one (time_columns: {{{name}: <column>}})")

    def _merge_same_table_sources(self) -> dict[str, str]:
        """Sources declared twice for one table (a package's declaration and the project's, as with
        vendor packages): one input, copied and replayed once, read by the models of both. Returns
        {dropped unique_id: the one kept}; the kept one is the declaration with a time column."""
        groups: dict[tuple, list[str]] = {}
        for uid, src in sorted(self.sources.items()):
            where = ("file", src.external) if src.external else \
                ((src.database or "").lower(), (src.schema or "").lower(), (src.identifier or "").lower())
            groups.setdefault(where, []).append(uid)
        aliases: dict[str, str] = {}
        for uids in groups.values():
            if len(uids) < 2:
                continue
            timed = {u: (self.sources[u].time_column, self.sources[u].load_column) for u in uids
                     if self.sources[u].time_column}
            if len(set(timed.values())) > 1:
                (a, ta), (b, tb) = list(timed.items())[:2]
                src = self.sources[a]
                raise ConfigError(
                    f"sources {self.sources[a].name} and {self.sources[b].name} are one table "
                    f"({src.schema}.{src.identifier}) with two time columns ({ta[0]} and {tb[0]}): name the "
                    f"same column for both (time_columns in rerun_safety.yml)")
            keep = next(iter(timed), uids[0])
            aliases.update({u: keep for u in uids if u != keep})
        if aliases:
            for uid, m in self.models.items():
                if any(s in aliases for s in m.sources):
                    self.models[uid] = replace(m, sources=tuple(dict.fromkeys(aliases.get(s, s) for s in m.sources)))
            for uid in aliases:
                del self.sources[uid]
        return aliases

    def add_read_by_name(self, found) -> None:
        """Inputs the compiled SQL reads by name (gameday/by_name.ByName: its inputs, and the models that
        read each), known from then on as sources those models read (again in a worker: idempotent)."""
        for src in found.inputs:
            self.sources.setdefault(src.unique_id, src)
            for uid in found.readers[src.unique_id]:
                self.read_by_name.setdefault(uid, set()).add(src.unique_id)

    def sources_of(self, uid: str) -> tuple[str, ...]:
        """The sources a model reads: through source(), and by name (see by_name)."""
        m = self.models.get(uid)
        return (*(m.sources if m else ()), *sorted(self.read_by_name.get(uid, ())))

    def timed_inputs_of(self, uids) -> set[str]:
        """Timed sources and timed seeds read by these models or their ancestors."""
        out: set[str] = set()
        for uid in set(uids) | self.ancestors(uids):
            if uid in self.seed_inputs:
                out.add(uid)
            for s in self.sources_of(uid):
                if self.sources[s].time_column:
                    out.add(s)
        return out

    def input(self, uid: str) -> SourceTable:
        return self.seed_inputs.get(uid) or self.sources[uid]

    def select(self, select: tuple[str, ...], exclude: tuple[str, ...], state: str | None = None) -> list[str]:
        """Model and snapshot unique_ids matching dbt's selection syntax (`dbt ls` on the parsed manifest)."""
        from .dbt_invoke import listed_ids, ls_args

        res = self.session.invoke(ls_args(select, exclude, state, ("model", "snapshot")))
        if not res.success:
            raise ConfigError(f"bad selection: {res.error or 'dbt ls failed'}")
        return [i for i in listed_ids(res) if i in self.models]

    def ancestors(self, uids) -> set[str]:
        seen: set[str] = set()
        stack = list(uids)
        while stack:
            uid = stack.pop()
            for parent in self.models[uid].parents if uid in self.models else ():
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        return seen

    def topo_order(self, uids) -> list[str]:
        uids = set(uids)
        order: list[str] = []
        done: set[str] = set()

        def visit(u: str) -> None:
            if u in done:
                return
            done.add(u)
            for p in self.models[u].parents:
                if p in uids:
                    visit(p)
            order.append(u)

        for u in sorted(uids):
            visit(u)
        return order
