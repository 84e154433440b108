"""What the scratch catalog must hold for the selected models to compile as `dbt compile` would:
the sources, seeds and snapshots they read (with the columns the user's target has, else those
their YAML or CSV declares), and which models introspect the catalog at compile time."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from ..warehouse.dialects import dialect_for
from ..warehouse.registry import adapter
from ..warehouse.scratch import RelationSpec, TargetProfile

# Jinja that reads the catalog while compiling. `is_incremental()` also does (adapter.get_relation),
# but the incremental relations exist for that anyway.
INTROSPECTION = re.compile(
    r"get_columns_in_relation|get_columns_in_query|run_query|call\s+statement|get_column_values|"
    r"get_filtered_columns_in_relation|\bstar\s*\(|get_relations_by_|union_relations|information_schema|"
    r"get_relations_by_pattern|list_relations", re.IGNORECASE)


def introspecting(manifest, nodes: Iterable) -> set[str]:
    """unique_ids of the nodes whose Jinja (or a macro they call, transitively) reads the catalog."""
    memo: dict[str, bool] = {}

    def macro_reads(uid: str, depth: int = 0) -> bool:
        if uid in memo:
            return memo[uid]
        memo[uid] = False  # cycles
        macro = manifest.macros.get(uid)
        if macro is None or depth > 30:
            return False
        found = bool(INTROSPECTION.search(macro.macro_sql or ""))
        if not found:
            found = any(macro_reads(m, depth + 1) for m in (macro.depends_on.macros or ()))
        memo[uid] = found
        return found

    out = set()
    for node in nodes:
        if INTROSPECTION.search(node.raw_code or "") or any(
                macro_reads(m) for m in (getattr(node.depends_on, "macros", None) or ())):
            out.add(node.unique_id)
    return out


def ancestors(manifest, uids: Iterable[str]) -> set[str]:
    """Every node and source upstream of `uids` (models, seeds, snapshots, sources)."""
    seen: set[str] = set()
    stack = list(uids)
    while stack:
        uid = stack.pop()
        node = manifest.nodes.get(uid)
        if node is None:
            continue
        for parent in getattr(node.depends_on, "nodes", None) or ():
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


def topo_order(manifest, uids: set[str]) -> list[str]:
    order: list[str] = []
    done: set[str] = set()

    def visit(u: str, depth: int = 0) -> None:
        if u in done or depth > 5000:
            return
        done.add(u)
        node = manifest.nodes.get(u)
        for p in (getattr(node.depends_on, "nodes", None) or ()) if node is not None else ():
            if p in uids:
                visit(p, depth + 1)
        order.append(u)

    for u in sorted(uids):
        visit(u)
    return order


def _relation(node) -> tuple[str | None, str, str]:
    ident = getattr(node, "alias", None) or getattr(node, "identifier", None) or node.name
    return (node.database or None, node.schema, ident)


def read_target_columns(tp: TargetProfile, relations: list[tuple[str | None, str, str]]) -> dict:
    """(schema, name) -> [(column, type)] for those relations that exist in the user's target;
    read only, and {} when the target cannot be read (a DuckDB file another process writes to)."""
    if not relations:
        return {}
    wanted = {(s.lower(), n.lower()) for _, s, n in relations}
    try:
        found = adapter(tp.adapter_type)
        rows = found.target_columns(tp.output) if found is not None else []
    except Exception:  # the target is optional here: YAML columns and the CSV remain
        return {}
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for schema, name, column, kind in rows:
        key = (str(schema).lower(), str(name).lower())
        if key in wanted:
            out.setdefault(key, []).append((str(column), str(kind)))
    return out


def _yaml_columns(node) -> tuple[tuple[str, str], ...]:
    cols = []
    for col in (getattr(node, "columns", None) or {}).values():
        kind = getattr(col, "data_type", None) or "text"
        cols.append((col.name, str(kind)))
    return tuple(cols)


def _csv_columns(node, project_root: str, dialect: str) -> tuple[tuple[str, str], ...]:
    """A seed's columns from its CSV (DuckDB's sniffer), with the seed's column_types applied."""
    import duckdb

    path = Path(getattr(node, "root_path", None) or project_root) / node.original_file_path
    if not path.exists():
        return ()
    overrides = {str(k).lower(): str(v) for k, v in ((node.config.get("column_types") if hasattr(node.config, "get")
                                                      else None) or {}).items()}
    con = duckdb.connect()
    try:
        rows = con.execute("describe select * from read_csv(?, header = true) limit 0", [str(path)]).fetchall()
    except Exception:
        return ()
    finally:
        con.close()
    out = []
    for row in rows:
        name, kind = row[0], str(row[1])
        if name.lower() in overrides:
            kind = overrides[name.lower()]
        else:
            kind = dialect_for(dialect).from_duckdb_type(kind)
        out.append((name, kind))
    return tuple(out)


def base_relations(manifest, tp: TargetProfile, uids: set[str], dialect: str
                   ) -> tuple[list[RelationSpec], dict[str, str]]:
    """Sources, seeds and snapshots among `uids`, as empty relations with their real columns; and
    {unique_id: name} of those whose columns are known nowhere."""
    nodes: list[Any] = []
    for uid in sorted(uids):
        if uid.startswith("source."):
            node = manifest.sources.get(uid)
        elif uid.startswith(("seed.", "snapshot.")):
            node = manifest.nodes.get(uid)
        else:
            continue
        if node is not None:
            nodes.append(node)
    found = read_target_columns(tp, [_relation(n) for n in nodes])
    root = str(getattr(manifest.metadata, "project_root", "") or "")
    specs = []
    unknown: dict[str, str] = {}
    for node in nodes:
        database, schema, name = _relation(node)
        columns = tuple(found.get((schema.lower(), name.lower()), ()))
        if not columns and node.unique_id.startswith("seed."):
            columns = _csv_columns(node, root, dialect)
        if not columns:
            columns = _yaml_columns(node)
        if columns:
            specs.append(RelationSpec(database, schema, name, columns))
        else:
            kind = node.unique_id.split(".")[0]
            label = f"{node.source_name}.{node.name}" if kind == "source" else node.name
            unknown[node.unique_id] = f"{kind} {label}"
    return specs, unknown
