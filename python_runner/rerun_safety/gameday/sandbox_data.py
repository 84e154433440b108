"""What a scenario writes into its sandbox besides dbt's runs: the inputs reset to the first build
and each batch's rows arriving, the reference output put in place of broken models, and the versions a
snapshot holds (the inputs written again in another order: reorder.py)."""

from __future__ import annotations

from sqlglot import exp

from ..warehouse.base import Engine, Sandbox
from ..warehouse.base import REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, Connection, snapshot_table, table, ts_literal
from .plan import Plan
from .scenarios import Arrive, Reset
from .timeline import (arrival_expr, arrives_out_of_order, batch_condition, late_superset, row_hash_predicate,
                       time_expr)


def apply_step(con: Connection, plan: Plan, step: Reset | Arrive) -> None:
    """A reset keeps each input's rows from before the first replayed batch; an arrival inserts a
    batch's rows (or half of them, for a half-committed batch) from the input copy."""
    assert plan.facts.timeline is not None
    for src in plan.inputs:
        col = time_expr(src)
        bounds = plan.facts.timeline.bounds_for(src.unique_id)
        copy = table(SNAPSHOT_SCHEMA, snapshot_table(src)).as_("rs_row")
        live = table(src.schema, src.identifier)
        if isinstance(step, Reset) and arrives_out_of_order(src, step.late):
            # rows arrive by their load time: keep (put back) what arrived before the first batch
            maybe_later = late_superset(src, plan, bounds[0])
            con.delete_rows(live, maybe_later)
            before = exp.and_(maybe_later, arrival_expr(src, plan, con.dialect, step.late) < ts_literal(bounds[0]))
            con.execute(exp.insert(exp.select("*").from_(copy).where(before), live))
            continue
        if isinstance(step, Reset):
            con.delete_rows(live, col >= ts_literal(bounds[0]))
            continue
        when = arrival_expr(src, plan, con.dialect, step.late) if arrives_out_of_order(src, step.late) else col
        cond = batch_condition(when, bounds, step.index)
        if step.part:
            half = row_hash_predicate(con.dialect, 2, 1)
            cond = exp.and_(cond, half if step.part == "first" else exp.not_(half))
        con.execute(exp.insert(exp.select("*").from_(copy).where(cond), live))


def snapshot_versions(engine: Engine, sandbox: Sandbox, snapshots: list) -> dict[str, int]:
    """Rows (versions) of each snapshot built in the sandbox."""
    if not snapshots:
        return {}
    with engine.connect(sandbox) as con:
        return {m.unique_id: int(con.fetchone(exp.select(exp.func("count", exp.Star())).from_(
            table(m.schema, m.identifier)))[0]) for m in snapshots if con.relation_kind(m.schema, m.identifier)}


def place_reference(engine: Engine, plan: Plan, sandbox: Sandbox, broken: set[str]) -> None:
    """Determinism in isolation: the broken models' relations hold their reference output, written in
    another physical order (as the determinism build writes every table): a model that breaks ties in
    their order shows its own nondeterminism there, instead of reading them as the reference did."""
    from .reorder import reorder

    with engine.connect(sandbox) as con:
        placed = []
        for m in plan.judged:
            if m.unique_id in broken:
                con.drop_relation(m.schema, m.identifier)
                con.copy_table(REFERENCE_SCHEMA, plan.ref_names[m.unique_id], m.schema, m.identifier)
                placed.append((m.schema, m.identifier))
        reorder(con, placed)
