"""What the reference build teaches (core.Gameday._build_reference): from its compiled SQL, each
model's time column, audit columns, computed columns, whether its output depends on row order, what
never changes; from its outputs, their rows, copies in the reference schema, and (for the fix search)
their columns, fingerprints and unique keys. Each returns the plan that knows it."""
from __future__ import annotations

from ..diff.fingerprint import fingerprint, unique_keys
from ..warehouse.base import REFERENCE_SCHEMA, Connection, table
from . import order_only
from .lineage import audit_columns, computed_columns, key_candidates, output_time_column, row_columns, window_columns
from .plan import Plan, partition_column
from .preflight import check_columns
from .rebuild import frozen_ids, order_sensitive
from .runs import row_counts


def compiled_code(res) -> dict[str, str]:
    """Model id -> the SQL dbt compiled for it in this invocation."""
    compiled = {}
    for r in getattr(res.raw, "results", None) or ():
        node = getattr(r, "node", None)
        if node is not None and getattr(node, "compiled_code", None):
            compiled[node.unique_id] = node.compiled_code
    return compiled


def learn_from_sql(plan: Plan, res, compare_audit: bool, dialect) -> Plan:
    """What the reference's compiled SQL shows (in this order: each reads what the one before taught)."""
    compiled = compiled_code(res)
    plan = plan.learned(time_columns=time_columns(plan, compiled, dialect))
    plan = plan.learned(
        audit_columns=_audit_columns(plan, compiled, compare_audit, dialect),
        computed_columns={m.unique_id: computed_columns(compiled[m.unique_id], dialect)
                          for m in plan.judged if m.unique_id in compiled and m.language == "sql"},
        window_columns={m.unique_id: found for m in plan.judged if m.unique_id in compiled and m.language == "sql"
                        and (found := window_columns(compiled[m.unique_id], dialect))},
        row_columns={m.unique_id: found for m in plan.judged if m.unique_id in compiled and m.language == "sql"
                     and (found := row_columns(compiled[m.unique_id], dialect)) is not None})
    plan = plan.learned(order_sensitive=frozenset(order_sensitive(plan, compiled, dialect)))
    return plan.learned(frozen=frozenset(frozen_ids(plan)),
                        unordered=order_only.unordered_in_results(res.raw, plan, dialect))


def time_columns(plan: Plan, compiled: dict[str, str], dialect) -> dict[str, str]:
    """The time column of each model: its event_time or partition_key config, else traced through its
    compiled SQL from its inputs' time columns (for the per-day counts)."""
    out: dict[str, str] = {}
    known: dict[str, str] = {s.identifier.lower(): s.time_column for s in plan.inputs if s.time_column}
    for m in plan.build:
        column = partition_column(m)
        if column is None and m.unique_id in compiled and m.language == "sql":
            column = output_time_column(compiled[m.unique_id], dialect, known)
        if column:
            out[m.unique_id] = column
            known[m.identifier.lower()] = column
    return out


def _audit_columns(plan: Plan, compiled: dict[str, str], compare_audit: bool, dialect) -> dict[str, tuple[str, ...]]:
    """The columns of each judged model that only stamp the run's clock (lineage.audit_columns), but
    where the project or the model asks to compare them (compare_audit_columns)."""
    out = {}
    for m in plan.judged:
        compare = m.compare_audit_columns if m.compare_audit_columns is not None else compare_audit
        if m.unique_id in compiled and m.language == "sql" and not compare:
            found = tuple(c for c in audit_columns(compiled[m.unique_id], dialect, plan.facts.timeline.end)
                          if c.lower() not in {i.lower() for i in m.ignore_columns})
            if found:
                out[m.unique_id] = found
    return out


def keep_outputs(con: Connection, plan: Plan, errors: dict[str, str], options) -> Plan:
    """Copy each judged model's output to the reference schema (a model the build did not create is an
    error); its rows, and with `options.fingerprints` what a candidate fix must reproduce."""
    con.create_schema(REFERENCE_SCHEMA)
    with con.catalog_cached():
        typed = {m.unique_id: con.columns(m.schema, m.identifier) for m in plan.judged
                 if m.unique_id not in errors and con.relation_kind(m.schema, m.identifier)}
    built = {u: [c for c, _ in cols] for u, cols in typed.items()}
    for m in plan.judged:
        if m.unique_id in built:
            check_columns(m, built[m.unique_id])
            con.copy_table(m.schema, m.identifier, REFERENCE_SCHEMA, plan.ref_names[m.unique_id])
        elif m.unique_id not in errors:
            errors[m.unique_id] = "the reference build did not create it"
    plan = plan.learned(reference_rows=row_counts(con, {u: table(REFERENCE_SCHEMA, plan.ref_names[u]) for u in built}))
    return _fingerprints(con, plan, typed, options.float_tolerance) if options.fingerprints else plan


def _fingerprints(con: Connection, plan: Plan, typed: dict[str, list[tuple[str, str]]], tolerance: float) -> Plan:
    """Each reference output's columns and fingerprint over those compared (not its audit or ignored
    columns), and for an incremental model the keys its output holds unique: what fix/ checks."""
    columns_of, prints, keys = {}, {}, {}
    for m in plan.judged:
        if m.unique_id not in typed:
            continue
        skip = {c.lower() for c in (*m.ignore_columns, *plan.facts.audit_columns.get(m.unique_id, ()))}
        columns = [(c, t) for c, t in typed[m.unique_id] if c.lower() not in skip]
        columns_of[m.unique_id] = tuple(typed[m.unique_id])
        ref = table(REFERENCE_SCHEMA, plan.ref_names[m.unique_id])
        prints[m.unique_id] = fingerprint(con, ref, columns, m.float_tolerance if m.float_tolerance is not None
                                          else tolerance)
        if m.incremental:  # the keys a keyed strategy could use (fix/): its time column, its inputs', typed
            times = [plan.facts.time_columns.get(m.unique_id, ""), *(s.time_column or "" for s in plan.inputs_of(m)),
                     *(c for c, t in typed[m.unique_id] if t.lower().startswith(("date", "timestamp")))]
            keys[m.unique_id] = unique_keys(con, ref, key_candidates(m.key, [c for c, _ in typed[m.unique_id]], times))
    return plan.learned(reference_columns=columns_of, fingerprints=prints, unique_keys=keys)
