"""Inputs read by name: relations that a model's compiled SQL reads without `source()` or `ref()`.

Vendor packages often build the names of their raw tables in Jinja (`api.Relation.create` from
vars, `adapter.get_relation`, a hard-coded `raw.events`) and declare the sources in YAML for
documentation and freshness only, so the manifest shows no model reading them; event packages
build the name from a var whose value renders a source, in SQL their macros write only once they
have queried the package's own models. Before the game day plans its batches, every built SQL model
is compiled in the snapshot, where every declared source exists with its columns and no rows (so
that `adapter.get_relation` finds what it finds in the warehouse); a model whose compile queries a
model that does not exist there is compiled again in a copy where its upstream models are built.
Every relation the compiled SQL reads that is neither a node of the project nor an input already
copied becomes an input: a declared source with its config (`event_time`, `loaded_at_field`,
`meta.rerun_safety`, also from dbt_project.yml's `sources:`), or an undeclared relation (static).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from ..errors import first_line
from ..project import Model, Project, SourceTable

# Jinja that names a relation without source() or ref(), in a model or in a macro it calls
_BY_NAME_CALL = re.compile(r"\bRelation\s*\.\s*create\b|\bget_relation\s*\(|\bload_(?:cached_)?relation\s*\(")
# a schema-qualified name after FROM or JOIN, written in the SQL itself rather than by ref()/source()
_QUALIFIED_NAME = re.compile(r"(?i)\b(?:from|join)\s+(?:\"[^\"]+\"|[a-z_][\w$]*)\s*\.\s*(?:\"[^\"]+\"|[a-z_][\w$]*)")


@dataclass
class ByName:
    """What the compiled SQL of the models read by name: input id -> the models that read it."""

    inputs: list[SourceTable] = field(default_factory=list)
    readers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def note(self, project: Project) -> str:
        parts = []
        for src in self.inputs:
            names = ", ".join(sorted(project.models[u].name for u in self.readers[src.unique_id]))
            declared = "a declared source" if src.unique_id in project.sources and not \
                src.unique_id.startswith(UNDECLARED) else "not declared as a source: static"
            parts.append(f"{src.name} ({declared}; read by {names})")
        return "inputs read by name, not through source(): " + "; ".join(parts)


UNDECLARED = "relation."


def _macro_closure(manifest: Any, macros) -> set[str]:
    seen: set[str] = set()
    stack = list(macros)
    while stack:
        uid = stack.pop()
        if uid in seen:
            continue
        seen.add(uid)
        macro = manifest.macros.get(uid)
        if macro is not None:
            stack.extend(getattr(macro.depends_on, "macros", ()) or ())
    return seen


# Jinja whose output names no relation but through the manifest: ref(), source(), this, config(), the
# incremental branch, comments
_PLAIN_JINJA = re.compile(
    r"\{\{-?\s*(?:ref|source)\s*\([^{}]*\)\s*-?\}\}|\{\{-?\s*this\s*-?\}\}"
    r"|\{\{-?\s*config\s*\((?:[^{}]|\{[^{}]*\})*\)\s*-?\}\}"
    r"|\{%-?\s*(?:if\s+is_incremental\s*\(\s*\)|else|endif)\s*-?%\}|\{#.*?#\}", re.S)


def plain(raw_code: str) -> bool:
    """Whether a model's compiled SQL can read nothing but its refs, its sources, itself and the
    relations its own SQL names without a schema: its only Jinja is ref(), source(), this, config(),
    the is_incremental() branch and comments, and its SQL names no schema-qualified relation. Such a
    model need not be compiled to know what it reads (a proof, not a guess: any other Jinja, a var or a
    macro call, is compiled)."""
    rest = _PLAIN_JINJA.sub(" ", raw_code or "")
    return "{{" not in rest and "{%" not in rest and not _QUALIFIED_NAME.search(rest)


def candidates(project: Project, build: list[Model]) -> list[Model]:
    """The built SQL models that may read a relation by name: their Jinja (or a macro they call,
    at any depth) names one, or their SQL names a schema-qualified relation itself."""
    manifest = project.manifest
    by_macro: dict[str, bool] = {}
    own_packages = {"dbt", f"dbt_{project.adapter}", "rerun_safety"}
    out = []
    for m in build:
        if m.language != "sql" or m.resource_type != "model":
            continue
        node = manifest.nodes.get(m.unique_id)
        macros = _macro_closure(manifest, getattr(node.depends_on, "macros", ()) or ()) if node is not None else set()
        own = m.raw_code
        found = bool(_BY_NAME_CALL.search(own) or _QUALIFIED_NAME.search(re.sub(r"\{\{.*?\}\}", "", own, flags=re.S)))
        for uid in sorted(macros):
            if found:
                break
            if uid not in by_macro:
                macro = manifest.macros.get(uid)
                # dbt's, the adapter's and ours look up the model's own relations ({{ this }})
                by_macro[uid] = bool(macro is not None and macro.package_name not in own_packages
                                     and _BY_NAME_CALL.search(macro.macro_sql or ""))
            found = by_macro[uid]
        if found:
            out.append(m)
    return out


def relations_read(sql: str, dialect: str) -> set[tuple[str | None, str, str]]:
    """(catalog, schema, name) of every schema-qualified relation the SQL names, as written (CTEs
    and unqualified names aside)."""
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except sqlglot.errors.SqlglotError:
        return set()
    out = set()
    for tree in trees:
        for t in tree.find_all(exp.Table):
            if not t.name or not t.db:  # a CTE, or a name found through the search path
                continue
            out.add((t.catalog or None, t.db, t.name))
    return out


def discover(project: Project, plan, compiled: dict[str, str], dialect: str, databases: set[str],
             user_relations: dict[tuple[str, str], tuple[str, str]], user_schema=lambda s: s) -> ByName:
    """The inputs the compiled SQL (model uid -> SQL) reads by name. `databases`: the names the
    target's own database goes by, lower case (others are attached or foreign, read where they
    are); `user_relations`: the relations of the user's database, (schema, name) lower case ->
    as stored; `user_schema`: the user's name of a schema the SQL names in the sandbox it compiled in."""
    nodes = {(n.schema.lower(), n.identifier.lower()) for n in project.models.values()}
    known = {(s.schema.lower(), s.identifier.lower()) for s in [*plan.inputs, *plan.static_sources]}
    declared = {(s.schema.lower(), s.identifier.lower()): s for s in project.sources.values()}
    result = ByName()
    readers: dict[tuple[str, str], set[str]] = {}
    for uid, sql in compiled.items():
        for catalog, schema, name in relations_read(sql, dialect):
            if catalog is not None and catalog.lower() not in databases:
                continue
            key = (user_schema(schema).lower(), name.lower())
            if key in nodes or key in known:
                continue
            if key in declared or key in user_relations:
                readers.setdefault(key, set()).add(uid)
    for key in sorted(readers):
        src = declared.get(key)
        if src is None:
            schema, name = user_relations[key]
            src = SourceTable(f"{UNDECLARED}{schema}.{name}", f"{schema}.{name}", None, schema, name, None, None)
        result.inputs.append(src)
        result.readers[src.unique_id] = tuple(sorted(readers[key]))
    return result


def declared_unread(project: Project, plan, user_relations) -> list[SourceTable]:
    """Declared sources that no built model reads through source() and that exist in the user's
    database: created empty in the snapshot while the candidates compile."""
    known = {s.unique_id for s in [*plan.inputs, *plan.static_sources]}
    return [s for uid, s in sorted(project.sources.items())
            if uid not in known and not s.external and (s.schema.lower(), s.identifier.lower()) in user_relations]


def copy_read_by_name(engine, project: Project, plan, snapshot, profiles_for) -> tuple[Any, list[str]]:
    """Compile every built SQL model in the snapshot (declared sources present, empty) but the `plain` ones,
    find what it reads by name, and copy that into the snapshot with its rows; the plan takes it as an input. A model whose
    Jinja queries other models of the project while it compiles (`run_query` on a package's manifest
    table, say) is compiled again where its upstream models are built; one that still does not compile
    is named in a run note (`compile_failures`). `profiles_for(sandbox)`: the profiles folder of a
    sandbox. The plan that reads them, and the run notes."""
    models = [m for m in plan.build if m.language == "sql" and m.resource_type == "model" and not plain(m.raw_code)]
    if not models:
        return plan, []
    user = engine.user_relations()
    databases = engine.database_names
    probes = [s for s in declared_unread(project, plan, user) if not s.database or s.database.lower() in databases]
    engine.add_to_snapshot(snapshot, probes, empty=True)
    engine.prepare_manifest(project.manifest, snapshot)
    compiled, failed = _compile(engine, project, snapshot, profiles_for(snapshot), models)
    if failed:
        more, failed = _compile_after_upstream(engine, project, snapshot, profiles_for, failed)
        compiled.update(more)
    found = discover(project, plan, compiled, engine.dialect, databases, user, engine.user_schema)
    with engine.connect(snapshot) as con:
        for s in probes:
            con.drop_relation(s.schema, s.identifier)
    engine.add_to_snapshot(snapshot, found.inputs)
    failures = {project.models[u].name: message for u, message in sorted(failed.items())}
    plan = plan.reading_by_name(found).learned(compile_failures=failures)
    notes = [found.note(project)] if found.inputs else []
    if failed:
        notes.append(
            "models that did not compile in the game day's copy of the inputs, even with their upstream models "
            "built there, so the relations they read by name (not through source() or ref()) are not known: "
            + "; ".join(f"{name} (dbt: {message})" for name, message in failures.items())
            + "; an input only they read is not replayed, and their verdicts cover the inputs found through "
            "source() and ref()")
    return plan, notes


def _compile(engine, project: Project, sandbox, profiles_dir: str, models: list[Model]) -> tuple[dict, dict]:
    """(model uid -> compiled SQL, model uid -> dbt's message for each that did not compile)."""
    # the models alone: a test on them (reconcile_counts' group_by reads the model's columns) would fail
    # to compile before they are built, and fail the compile of the models with it
    res = project.session.invoke(["compile", "--indirect-selection", "empty", "--select", *[m.selector for m in models]],
                                 profiles_dir=profiles_dir,
                                 dialect=engine.dialect, rewrite_sql=engine.sql_rewriter(sandbox),
                                 context=engine.invocation_context(sandbox))
    compiled: dict[str, str] = {}
    failed: dict[str, str] = {}
    for r in getattr(res.raw, "results", None) or ():
        node = getattr(r, "node", None)
        code = getattr(node, "compiled_code", None)
        if code:
            compiled[node.unique_id] = code
        elif node is not None:
            message = getattr(r, "message", None) or "skipped: an upstream model failed"
            failed[node.unique_id] = first_line(message)[:300]
    for m in models:
        if m.unique_id not in compiled and m.unique_id not in failed:
            failed[m.unique_id] = first_line(res.error or "not compiled")[:300]
    return compiled, failed


def _compile_after_upstream(engine, project: Project, snapshot, profiles_for, failed: dict[str, str]) -> tuple[dict, dict]:
    """Compile the models that failed again in a copy of the snapshot where every model, seed and snapshot
    upstream of them is built first (from the full copy of the inputs); the copy is dropped after."""
    upstream = [project.models[u] for u in project.topo_order(project.ancestors(failed))
                if u in project.models and project.models[u].materialized != "ephemeral"]
    if not upstream:
        return {}, failed
    engine.release(snapshot)
    sandbox = engine.clone(snapshot, "compile")
    try:
        profiles = profiles_for(sandbox)
        engine.prepare_manifest(project.manifest, sandbox)
        project.session.invoke(["build", "--select", *[m.selector for m in upstream], "--exclude-resource-type",
                                "test", "--exclude-resource-type", "unit_test"], profiles_dir=profiles,
                               dialect=engine.dialect, rewrite_sql=engine.sql_rewriter(sandbox),
                               context=engine.invocation_context(sandbox))
        compiled, still = _compile(engine, project, sandbox, profiles, [project.models[u] for u in failed])
    finally:
        engine.drop(sandbox)
    return compiled, still
