"""Inputs read by name: relations that a model's compiled SQL reads without `source()` or `ref()`.

Vendor packages often build the names of their raw tables in Jinja (`api.Relation.create` from
vars, `adapter.get_relation`, a hard-coded `raw.events`) and declare the sources in YAML for
documentation and freshness only, so the manifest shows no model reading them. Before the game
day plans its batches, the models that can read by name are compiled in the snapshot, where
every declared source exists with its columns and no rows (so that `adapter.get_relation` finds
what it finds in the warehouse); every relation their compiled SQL reads that is neither a node
of the project nor an input already copied becomes an input: a declared source with its config
(`event_time`, `loaded_at_field`, `meta.rerun_safety`), or an undeclared relation (static).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

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
             user_relations: dict[tuple[str, str], tuple[str, str]]) -> ByName:
    """The inputs the compiled SQL (model uid -> SQL) reads by name. `databases`: the names the
    target's own database goes by, lower case (others are attached or foreign, read where they
    are); `user_relations`: the relations of the user's database, (schema, name) lower case ->
    as stored."""
    nodes = {(n.schema.lower(), n.identifier.lower()) for n in project.models.values()}
    known = {(s.schema.lower(), s.identifier.lower()) for s in [*plan.inputs, *plan.static_sources]}
    declared = {(s.schema.lower(), s.identifier.lower()): s for s in project.sources.values()}
    result = ByName()
    readers: dict[tuple[str, str], set[str]] = {}
    for uid, sql in compiled.items():
        for catalog, schema, name in relations_read(sql, dialect):
            if catalog is not None and catalog.lower() not in databases:
                continue
            key = (schema.lower(), name.lower())
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


def copy_read_by_name(engine, project: Project, plan, snapshot, profiles_dir: str) -> ByName:
    """Compile the candidates in the snapshot (declared sources present, empty), find what they read
    by name, and copy it into the snapshot with its rows; the plan takes it as an input."""
    models = candidates(project, plan.build)
    if not models or not hasattr(engine, "add_to_snapshot"):
        return ByName()
    user = engine.user_relations()
    databases = engine.database_names
    probes = [s for s in declared_unread(project, plan, user) if not s.database or s.database.lower() in databases]
    engine.add_to_snapshot(snapshot, probes, empty=True)
    engine.prepare_manifest(project.manifest, snapshot)
    res = project.session.invoke(["compile", "--select", *[m.selector for m in models]], profiles_dir=profiles_dir,
                                 dialect=engine.dialect, rewrite_sql=engine.sql_rewriter(snapshot),
                                 context=engine.invocation_context(snapshot))
    compiled = {}
    for r in getattr(res.raw, "results", None) or ():
        code = getattr(getattr(r, "node", None), "compiled_code", None)
        if code:
            compiled[r.node.unique_id] = code
    found = discover(project, plan, compiled, engine.dialect, databases, user)
    with engine.connect(snapshot) as con:
        for s in probes:
            con.drop_relation(s.schema, s.identifier)
    engine.add_to_snapshot(snapshot, found.inputs)
    plan.add_read_by_name(found)
    if found.inputs:
        plan.notes.append(found.note(project))
    return found
