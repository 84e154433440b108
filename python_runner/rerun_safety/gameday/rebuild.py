"""What a scenario builds beyond its stateful models. Pure logic, no I/O.

A table or view is a function of what it reads and of the clock. At the end of a scenario every
input holds all its rows and the clock is the reference build's, so a model that is not stateful
and reads nothing whose output differs from the reference would be built into the reference's
output again. A scenario therefore builds, besides the models that keep state (and everything they
read, once, in its first build):
- at its end, the models below a stateful model whose output differs from the reference (and what
  they read that was not built yet), to see how far the damage goes;
- the models with hooks, at the first build and at the end, as a user's runs would: what a hook
  writes outside its model is compared with the reference run's writes;
- the models whose SQL may give other rows from one build to the next (order_sensitive), at the end;
and judges the others from the reference (their inputs matched it). A model below one that failed
or was skipped in the scenario is not built, as dbt would not build it.
"""
from __future__ import annotations

from typing import Any

import sqlglot
import sqlglot.errors
from sqlglot import exp

CARRIED_ORDER = ("not built again: its SQL has nothing whose result depends on the order of rows (a window, a "
                 "limit, a value picked from a group, a gathered list, the clock, chance) and what it reads "
                 "matched the reference, so its output is the reference's")
CARRIED = ("not built again: everything it reads matched the reference at the end of the scenario, "
           "so its output is the reference's")


def hooked_ids(plan: Any) -> set[str]:
    """Models whose pre/post hooks run SQL: they run wherever a user's run would run them."""
    from .side_effects import hook_texts

    return set(hook_texts(plan.project.manifest, [m.unique_id for m in plan.build])[0])


def first_ids(plan: Any) -> set[str]:
    """A scenario's first build: stateful models, models with hooks, and every model they read."""
    roots = {m.unique_id for m in plan.build if m.keeps_state} | hooked_ids(plan)
    built = {m.unique_id for m in plan.build}
    return roots | (plan.project.ancestors(roots) & built)


def frozen_ids(plan: Any) -> set[str]:
    """Tables that no run of a scenario can change: built in its first build, then not run again
    until its end (airbnb: 3 of 12 models at every batch). A table whose ancestors are all tables,
    views or ephemeral models of the same kind, reading only static inputs (no time column: present
    in full at every build), whose compiled SQL nothing makes depend on the clock, chance or the
    order of rows (order_sensitive), with no hooks and no relation read by name."""
    from .by_name import candidates

    models = plan.project.models
    timed = {s.unique_id for s in plan.inputs}
    hooked = hooked_ids(plan)
    named = {m.unique_id for m in candidates(plan.project, plan.build)}
    plain: set[str] = set()  # models whose output is the same at every build of a scenario
    for m in plan.build:  # topological order
        uid = m.unique_id
        if (m.materialized not in ("table", "view", "ephemeral") or m.language != "sql" or m.keeps_state
                or uid in hooked or uid in plan.facts.order_sensitive or uid in named
                or plan.project.timed_inputs_of([uid]) & timed):
            continue
        if all(p in plain or p not in models for p in m.parents):
            plain.add(uid)
    return {u for u in plain if models[u].materialized == "table"}


def determinism_ids(plan: Any, sensitive: set[str]) -> set[str]:
    """What the determinism scenario builds first: the models whose output may depend on the order
    of their inputs' rows, and every model they read."""
    built = {m.unique_id for m in plan.build}
    roots = sensitive & built
    return roots | (plan.project.ancestors(roots) & built)


def final_rebuild(plan: Any, differing: set[str], failed: dict[str, str], current: set[str],
                  opaque: set[str], label: str = "the end") -> tuple[list[str], dict[str, str]]:
    """After a scenario's last run of the models it keeps `current` (its stateful models; in
    determinism, what it built): the models to build again (in order), and the models not to
    build, each with the reason (an upstream model that failed or was skipped). `differing`:
    judged models of `current` whose output differs from the reference; `opaque`: models of
    `current` that may differ although nothing they read does (when not compared, they count as
    differing); `failed`: model -> what happened to it in the scenario (error or skip)."""
    stateful = current
    # built at the end whatever they read: models with hooks (see the module's docstring) and
    # models whose output may change from one build to the next (order_sensitive)
    hooked = hooked_ids(plan) | (plan.facts.order_sensitive & {m.unique_id for m in plan.build})
    changed: set[str] = set(differing) | hooked
    judged = {m.unique_id for m in plan.judged}
    blocked: dict[str, str] = {}
    roots: set[str] = set()
    for m in plan.build:  # topological order
        uid = m.unique_id
        parents = [p for p in m.parents if p in plan.project.models]
        below = next((p for p in parents if p in failed or p in blocked), None)
        if uid in failed:
            continue
        if below is not None:
            what = "was not built" if failed[below].startswith("not built") else "failed"
            blocked[uid] = blocked.get(below) or (f"not built at {label}: an upstream model {what} "
                                                  f"({plan.project.models[below].name})")
            continue
        if uid in stateful:
            # a model that is not compared (not judged) may differ: what reads it is built
            if uid not in judged and (uid in opaque or any(p in changed for p in parents)):
                changed.add(uid)
            continue
        if any(p in changed for p in parents):
            changed.add(uid)
            roots.add(uid)
        elif uid in hooked:
            roots.add(uid)
    built = {m.unique_id for m in plan.build}
    todo = roots | ((plan.project.ancestors(roots) & built) - stateful)
    todo -= set(blocked)
    return [m.unique_id for m in plan.build if m.unique_id in todo], blocked



# What can make a query's result depend on the order its input rows are read in (ties in a window's
# or an aggregate's order, a limit, a value picked from a group), or on the moment or the machine
# it runs on. A query without any of them, and without a function sqlglot does not know, gives the
# same rows whatever order its inputs hold (float sums aside, which the diff's tolerance covers).
_ORDER_SENSITIVE = tuple(c for c in (getattr(exp, n, None) for n in (
    "Window", "Limit", "Fetch", "Offset", "Qualify", "TableSample", "AnyValue", "ArgMax", "ArgMin", "ArrayAgg",
    "JSONArrayAgg", "GroupConcat", "First", "Last", "FirstValue", "LastValue", "Lag", "Lead", "NthValue", "Ntile",
    "RowNumber", "Mode", "ApproxDistinct", "ApproxQuantile", "ApproxQuantiles", "ApproxTopK", "Rand", "Randn",
    "Randstr", "Uuid", "CurrentDate", "CurrentDatetime", "CurrentTime", "CurrentTimestamp", "CurrentTimestampLTZ",
    "Anonymous")) if isinstance(c, type))


def order_sensitive_sql(sql: str, dialect: str) -> str | None:
    """What in `sql` may depend on the order of rows (or the clock, or chance); None: nothing.
    SQL that does not parse counts as sensitive."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError, RecursionError):
        return "SQL the parser does not read"
    if not statements:
        return "no SQL"
    for stmt in statements:
        found = stmt.find(*_ORDER_SENSITIVE)
        if found is not None:
            return found.sql(dialect=dialect)[:80]
        for distinct in stmt.find_all(exp.Distinct):
            if distinct.args.get("on") is not None:
                return "DISTINCT ON"
    return None


def order_sensitive(plan: Any, compiled: dict[str, str], dialect: str) -> set[str]:
    """The built models whose output may change when their inputs are read in another order:
    by their compiled SQL (the reference build's), and every model that is not plain SQL, keeps
    state of its own kind (a snapshot, the project's own materialization) or has hooks."""
    hooked = hooked_ids(plan)
    out = set()
    for m in plan.build:
        uid = m.unique_id
        if m.materialized == "ephemeral" and m.language == "sql":
            continue  # compiled into each model that reads it, and judged there
        if (m.language != "sql" or m.snapshot or m.custom or uid in hooked or uid not in compiled
                or order_sensitive_sql(compiled[uid], dialect)):
            out.add(uid)
    return out
