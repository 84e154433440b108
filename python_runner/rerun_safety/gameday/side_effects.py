"""Writes outside a model's own relation: tables its hooks (pre_hook, post_hook) and the project's
on-run-start/end hooks create or change, compared with the reference run like models.

Which relations: every relation a run creates that is neither a model nor ours, and every existing
relation (a source, a seed) whose name a hook's SQL mentions. They are kept from the reference run,
the template is put back as it was before it, and each scenario's end state is compared with them.
A relation declared a log by design (`meta.rerun_safety.log_tables` on the model whose hook writes
it) is instead checked for one new row per run of that model.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp

from ..clock import CLOCK_SCHEMA
from ..project import hook_sql
from ..warehouse.base import REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, Connection, table
from ..results import Verdict

PREHOOK_SCHEMA = "rerun_safety_prehook"
LEDGER_TABLE = "rerun_safety_ledger"  # the package's own run ledger: one row per run by design
_OURS = {REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, CLOCK_SCHEMA, PREHOOK_SCHEMA, "information_schema", "pg_catalog",
         "pg_toast"}


@dataclass
class SideRelation:
    schema: str
    name: str
    ref_name: str  # its reference copy in REFERENCE_SCHEMA
    created: bool  # the reference run created it (else it existed before: a source or seed)
    writers: tuple[str, ...]  # models whose hooks mention it
    project_hook: bool  # an on-run-start/end hook mentions it
    log_of: str | None = None  # the model that declares it a log table (one row per run)
    baseline_rows: int = 0  # rows before any run (log tables)
    hook_sql: str = ""
    # its reference state's (column, type) and fingerprint, with GamedayOptions.fingerprints (fix/)
    columns: tuple[tuple[str, str], ...] = ()
    fingerprint: Any = None

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass
class SidePlan:
    relations: list[SideRelation] = field(default_factory=list)
    saved: list[tuple[str, str, str]] = field(default_factory=list)  # (schema, name, copy) put back after the reference
    hooks: dict[str, str] = field(default_factory=dict)  # model uid -> its hooks' SQL
    project_hooks: str = ""  # the project's on-run-start/end hooks' SQL


def hook_texts(manifest: Any, uids) -> tuple[dict[str, str], str]:
    """(model uid -> its pre/post hooks' SQL, the project's on-run-start/end hooks' SQL)."""
    models = {}
    for uid in uids:
        node = manifest.nodes.get(uid)
        if node is None:
            continue
        text = "\n".join([*hook_sql(getattr(node.config, "pre_hook", None)),
                          *hook_sql(getattr(node.config, "post_hook", None))])
        if text.strip():
            models[uid] = text
    project = "\n".join(n.raw_code for u, n in manifest.nodes.items()
                        if u.startswith("operation.") and not u.startswith("operation.rerun_safety."))
    return models, project


def mentions(text: str, name: str) -> bool:
    return bool(re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", text, re.IGNORECASE))


def _relations(con: Connection) -> set[tuple[str, str]]:
    return {(str(s), str(n)) for s, n in con.base_tables() if str(s).lower() not in _OURS
            and not str(s).lower().startswith("pg_temp")}


def _count(con: Connection, schema: str, name: str) -> int:
    return int(con.fetchone(exp.select(exp.func("count", exp.Star())).from_(table(schema, name)))[0])


def before_reference(con: Connection, plan, manifest: Any) -> tuple[SidePlan, set[tuple[str, str]]]:
    """In the reference sandbox, before its run: save the relations hooks mention."""
    models, project = hook_texts(manifest, [m.unique_id for m in plan.build])
    side = SidePlan(hooks=models, project_hooks=project)
    existing = _relations(con)
    built = {(m.schema.lower(), m.identifier.lower()) for m in plan.build}
    for schema, name in sorted(existing):
        if (schema.lower(), name.lower()) in built:
            continue
        if any(mentions(t, name) for t in models.values()) or mentions(project, name):
            copy = f"p{len(side.saved)}"
            con.copy_table(schema, name, PREHOOK_SCHEMA, copy)
            side.saved.append((schema, name, copy))
    return side, existing


def after_reference(con: Connection, plan, side: SidePlan, existing: set[tuple[str, str]]) -> None:
    """After the reference run: keep the side relations' reference state, then put the template
    back as it was before the run (drop what hooks created, restore what they changed)."""
    models, project = side.hooks, side.project_hooks
    built = {(m.schema.lower(), m.identifier.lower()) for m in plan.build}
    logs = {}
    for m in plan.build:
        for rel in m.log_tables:
            logs[rel.lower()] = m.unique_id
    saved = {(s, n): c for s, n, c in side.saved}
    now = _relations(con)
    for schema, name in sorted(now):
        key = (schema.lower(), name.lower())
        if key in built or name.lower() == LEDGER_TABLE:
            continue
        created = (schema, name) not in existing
        if not created and (schema, name) not in saved:
            continue
        writers = tuple(u for u, t in models.items() if mentions(t, name))
        ref_name = f"s{len(side.relations)}"
        con.copy_table(schema, name, REFERENCE_SCHEMA, ref_name)
        log_of = logs.get(f"{schema}.{name}".lower()) or logs.get(name.lower())
        baseline = 0 if created else _count(con, PREHOOK_SCHEMA, saved[(schema, name)])
        hook_sql = next((models[u] for u in writers), "") or (project if mentions(project, name) else "")
        side.relations.append(SideRelation(schema, name, ref_name, created, writers, mentions(project, name),
                                           log_of, baseline, hook_sql.strip()))
    for schema, name in sorted(now - existing):
        if (schema.lower(), name.lower()) not in built:
            con.drop_relation(schema, name)
    for schema, name, copy in side.saved:
        con.delete_rows(table(schema, name))
        con.execute(exp.insert(exp.select("*").from_(table(PREHOOK_SCHEMA, copy)), table(schema, name)))


def fingerprint_relations(con: Connection, side: SidePlan, tolerance: float) -> None:
    """Each side relation's reference columns and fingerprint: what a fixed hook's clean build must
    reproduce (fix/)."""
    from ..diff.fingerprint import fingerprint

    for rel in side.relations:
        rel.columns = tuple(con.columns(REFERENCE_SCHEMA, rel.ref_name))
        rel.fingerprint = fingerprint(con, table(REFERENCE_SCHEMA, rel.ref_name), rel.columns, tolerance)


def judge(con: Connection, side: SidePlan, runs: dict[str, int], diff) -> list[dict]:
    """The side relations that differ from the reference at the end of a scenario. `runs`: how
    many times each model ran successfully in the scenario; `diff(reference, current)` compares."""
    out = []
    for rel in side.relations:
        exists = con.relation_kind(rel.schema, rel.name) is not None
        if rel.log_of is not None:
            expected = rel.baseline_rows + runs.get(rel.log_of, 0)
            rows = _count(con, rel.schema, rel.name) if exists else 0
            if rows != expected:
                out.append({"relation": rel.label, "writers": rel.writers or (rel.log_of,), "log": True,
                            "rows": rows, "expected_rows": expected, "extra_rows": max(rows - expected, 0),
                            "missing_rows": max(expected - rows, 0), "hook_sql": rel.hook_sql})
            continue
        if not exists:
            out.append({"relation": rel.label, "writers": rel.writers, "log": False, "rows": 0,
                        "extra_rows": 0, "missing_rows": -1, "hook_sql": rel.hook_sql,
                        "project_hook": rel.project_hook})
            continue
        d = diff((REFERENCE_SCHEMA, rel.ref_name), (rel.schema, rel.name))
        if not d.identical:
            out.append({"relation": rel.label, "writers": rel.writers, "log": False, "rows": d.rows,
                        "reference_rows": d.reference_rows, "extra_rows": d.extra_rows,
                        "missing_rows": d.missing_rows, "hook_sql": rel.hook_sql,
                        "project_hook": rel.project_hook,
                        "runs": max((runs.get(w, 0) for w in rel.writers), default=0)})
    return out


def describe(found: dict) -> str:
    if found.get("log"):
        return (f"its hook writes {found['relation']}, declared a log table: {found['rows']} rows where one per "
                f"run makes {found['expected_rows']}")
    if found["missing_rows"] == -1:
        return f"its hook writes {found['relation']}, which this scenario did not create"
    return (f"its hook writes {found['relation']}, which differs from the reference run "
            f"({found.get('reference_rows', 0):,} -> {found['rows']:,} rows: {found['extra_rows']:,} extra, "
            f"{found['missing_rows']:,} missing); hook: {found['hook_sql'][:300]}")


def attribute(judged: dict, found: list[dict]) -> None:
    """A differing side relation makes the model whose hook writes it `side_effect` (unless its
    own output is already worse), with the relation and the hook named."""
    for f in found:
        for uid in f["writers"]:
            r = judged.get(uid)
            if r is None:
                continue
            text = describe(f)
            if r.verdict in (Verdict.SAFE, Verdict.UNTESTED):
                judged[uid] = replace(r, verdict=Verdict.SIDE_EFFECT, message=text, extra_rows=f["extra_rows"],
                                      missing_rows=max(f["missing_rows"], 0))
            else:
                judged[uid] = replace(r, message="; ".join(x for x in (r.message, text) if x))


def per_run(found: dict) -> int:
    """The rows a side relation gains at every run of the model whose hook writes it, where the fault-free
    schedule left it holding its clean build's rows once per run (a run log: one audit row per run), else
    0. `found`: what `judge` found in the replay scenario."""
    ref, runs = found.get("reference_rows", 0), found.get("runs", 0)
    if found.get("log") or ref < 1 or runs < 2 or found.get("rows") != ref * runs:
        return 0
    return ref
