"""The determinism scenario's sandbox: every input written again in another physical order."""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ..warehouse.base import Connection, Engine, Sandbox, table


def reorder_inputs(engine: Engine, plan: Any, sandbox: Sandbox) -> None:
    """Determinism: every input is written again in another physical order (by a hash of each
    row), so a model whose result depends on the order of tied rows (row_number, ntile,
    first_value or lag over ties, a limit without a total order) differs with near certainty,
    instead of by chance."""
    with engine.connect(sandbox) as con:
        reorder(con, plan.input_relations())


def reorder(con: Connection, relations) -> None:
    """Each table of `relations` ((schema, name)) written again in another physical order (by a hash
    of each row); nothing on an engine that reads rows back in no order it keeps."""
    if not con.dialect.physical_row_order:
        return
    for schema, name in relations:
        if not con.relation_kind(schema, name):
            continue
        live, shuffled = table(schema, name), table(schema, f"rerun_safety_reorder_{name}"[:63])
        columns = [c for c, _ in con.columns(schema, name)]
        con.execute(exp.Create(this=shuffled, kind="TABLE", expression=exp.select("*").from_(
            live.as_("rs_row")).order_by(con.dialect.row_order(columns))))
        con.delete_rows(live)
        con.execute(exp.insert(exp.select("*").from_(shuffled), live))
        con.drop_relation(schema, shuffled.name)
