"""Attributes copied once: an incremental model that joins the current state of something that changes
(a customer's segment, a product's price) into rows it writes once and does not read again."""
from __future__ import annotations

from sqlglot import exp

from ..context import ModelContext
from .base import Hit, is_this, mentions_window, watermarks


def _kind(table: exp.Table, ctx: ModelContext) -> str | None:
    name = table.name.lower()
    if table.db:
        return ctx.relation_kinds.get((table.db.lower(), name))
    found = {k for (_, n), k in ctx.relation_kinds.items() if n == name}
    return found.pop() if len(found) == 1 else None


def _copied(select: exp.Select, alias: str, on: exp.Expression | None) -> list[str]:
    """The output columns taken from `alias` that are not its join keys."""
    keys = {c.name.lower() for c in (on.find_all(exp.Column) if on is not None else ()) if c.table.lower() == alias}
    out = []
    for proj in select.expressions:
        for col in proj.find_all(exp.Column):
            if col.table.lower() == alias and col.name.lower() not in keys:
                out.append(proj.alias_or_name)
                break
    return out


def stale_attribute(ctx: ModelContext) -> list[Hit]:
    """The incremental branch cuts its rows to a batch (a watermark or the window vars) and joins, on
    equality alone, a relation holding the current state of something (an untimed source, or a table or
    view built only from such), copying its columns: rows written before a change keep the old values,
    which a rebuild would not (a point-in-time join, a snapshot, an input declared static: not judged)."""
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok or not ctx.relation_kinds:
        return []
    hits = []
    for stmt in ctx.incremental.statements:
        if not (watermarks(stmt, ctx) or mentions_window(stmt, ctx)):
            continue  # every run reads everything: what it writes is as current as its inputs
        for select in stmt.find_all(exp.Select):
            for join in select.args.get("joins") or ():
                table = join.this
                on = join.args.get("on")
                if not isinstance(table, exp.Table) or is_this(table, ctx) or _kind(table, ctx) != "state":
                    continue
                if on is not None and any(not isinstance(c, (exp.EQ, exp.And, exp.Paren, exp.Column, exp.Dot,
                                                             exp.Identifier, exp.Literal))
                                          for c in on.walk() if isinstance(c, exp.Condition)):
                    continue  # a range join (valid_from <= t < valid_to): the state as of each row
                alias = (table.alias or table.name).lower()
                copied = _copied(select, alias, on)
                if copied:
                    hits.append(Hit("stale-attribute",
                                    f"{', '.join(copied)} copied from {table.name} (the current state of what "
                                    "it describes) into rows written once per batch: a later change there never "
                                    "reaches rows already written, which a full rebuild would show",
                                    "incremental", (rf"\b{table.name}\b",), key=f"{table.name}:{','.join(copied)}"))
    return hits
