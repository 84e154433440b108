"""What the runs of a game day share, and what one dbt run leaves to judge a scenario by."""
from __future__ import annotations

import yaml
from sqlglot import exp

from ..dbt_invoke import STOPPED_MARKER
from ..warehouse.base import Engine
from ..warehouse.base import Connection
from .plan import Plan
from .scenarios import Run, common_steps, scenario, scenario_steps


def sharing_first_build(chains: list[str], engine: Engine, timeline) -> list[str]:
    """The chains that clone one shared first build: those whose first scenario starts with the
    same steps as replay (the reset of the inputs and the first build: replay, rerun, partial,
    backfill; not late, whose rows arrive otherwise), two or more, on an engine that clones a
    sandbox cheaply (Dialect.cheap_clones: DuckDB, PostgreSQL); none otherwise."""
    head = scenario_steps("replay", timeline)[:2]
    shared = [c for c in chains if scenario_steps(c.split("+")[0], timeline)[:2] == head]
    return shared if len(shared) > 1 and engine.dialect.cheap_clones else []


def branches(chains: list[str], engine: Engine, timeline) -> dict[str, list[tuple[str, int]]]:
    """The scenarios that go on from a copy of another chain's sandbox (partial from replay's, before
    the half-committed batch), on an engine that copies a sandbox cheaply, where that saves a run
    beyond the shared first build: {the chain they branch from: [(scenario, steps in common)]}."""
    if not engine.dialect.cheap_clones:
        return {}
    firsts = {c.split("+")[0]: c for c in chains}
    out: dict[str, list[tuple[str, int]]] = {}
    for c in chains:
        base = scenario(c).branches_from if "+" not in c else None
        if base in firsts:
            common = common_steps(base, c, timeline)
            if common > 2:  # (the reset of the inputs and the first build are shared anyway)
                out.setdefault(firsts[base], []).append((c, common))
    return out


def tally_run(res, plan: Plan, label: str, errors: dict[str, str], runs: dict[str, int],
           skipped: dict[str, str], stopped: set[str]) -> None:
    """What one dbt run of a scenario leaves to judge it by: successful runs of each model (log
    tables: one row each), the first error of each (and whether the statement limit stopped it),
    and where dbt skipped it (what it holds is an earlier run's output)."""
    for n in res.nodes:
        if n.status == "success":
            runs[n.unique_id] = runs.get(n.unique_id, 0) + 1
        elif n.status == "skipped":
            skipped.setdefault(n.unique_id, f"not built at {label}: an upstream model failed")
    for uid, msg in node_errors(res, plan).items():
        errors.setdefault(uid, f"{label}: {msg}")
        if STOPPED_MARKER in msg:
            stopped.add(uid)


def row_counts(con: Connection, tables: dict[str, exp.Table], per_query: int = 100) -> dict[str, int]:
    """Rows of each table, a hundred tables a query."""
    out: dict[str, int] = {}
    items = list(tables.items())
    for i in range(0, len(items), per_query):
        chunk = items[i:i + per_query]
        selects = [exp.select(exp.Literal.number(j), exp.func("count", exp.Star())).from_(t)
                   for j, (_uid, t) in enumerate(chunk)]
        query = selects[0]
        for sel in selects[1:]:
            query = exp.union(query, sel, distinct=False)
        for j, n in con.fetchall(query):
            out[chunk[int(j)][0]] = int(n)
    return out


def node_errors(res, plan: Plan) -> dict[str, str]:
    judged = {m.unique_id for m in plan.build}
    if res.crashed:
        return {uid: res.error for uid in judged}
    return {n.unique_id: n.message or n.status for n in res.nodes
            if n.unique_id in judged and n.status in ("error", "runtime error", "partial success")}


def run_args(plan: Plan, step: Run, final: bool, cli_vars: dict, only: set[str] | None = None,
             exclude: set[str] | None = None, models: list | None = None) -> tuple[list[str], str | None]:
    """The dbt command of one run of a scenario, and its vars as YAML (None: none).

    Between the first and the last run of a scenario only state matters: incremental models and
    the tables they read. Views need no rerun, and other tables are rebuilt at the end (`models`:
    the caller's choice, see rebuild.py)."""
    if models is None:
        models = plan.build if (final or step.full_refresh) else plan.stateful
    models = [m for m in models if (only is None or m.unique_id in only) and m.unique_id not in (exclude or ())]
    # snapshots run where the user's `dbt build` runs them: in order with the models
    command = (["build", "--resource-type", "model", "--resource-type", "snapshot"]
               if any(m.snapshot for m in models) else ["run"])
    args = [*command, "--select", *[m.selector for m in models]]
    if step.full_refresh:
        args.append("--full-refresh")
    # Microbatch models compute their own batches (batch_size, lookback) from the simulated clock.
    merged = dict(cli_vars)
    if not step.full_refresh:
        start, end = step.window
        merged["rerun_safety_window_start"] = start.strftime("%Y-%m-%d %H:%M:%S")
        merged["rerun_safety_window_end"] = end.strftime("%Y-%m-%d %H:%M:%S")
    return args, (yaml.safe_dump(merged) if merged else None)
