"""Where a game day's time goes: the wall time, and the work behind it split by phase, summed over every
process that did it (with --threads 2 two worker processes work at once, so the work can exceed the wall).

- parse: dbt parsing the project (once; from the user's partial-parse state where it fits);
- dbt start-up: each dbt invocation's own cost outside its models (its wall time minus its models' time:
  adapter set-up, connections, the relation cache, catalog reads, on-run hooks);
- model execution: the models' own time, as dbt times them (compile and run);
- copies: the snapshot of the inputs, the clones every scenario starts from, and dropping them;
- judging: comparing outputs with the reference (the diff), side relations included;
- reports: assembling the report.
Timed here with `spent(phase)` in the process that does the work; a scenario's share travels back with
its verdicts (replay.JobResult.cost) from a worker process, and the invocations carry their own times.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

from ..results import Cost

_spent: dict[str, float] = {}


@contextmanager
def spent(phase: str):
    started = time.perf_counter()
    try:
        yield
    finally:
        _spent[phase] = _spent.get(phase, 0.0) + time.perf_counter() - started


def take() -> dict[str, float]:
    """What this process spent since the last take, per phase; the tally starts again."""
    out = dict(_spent)
    _spent.clear()
    return out


def add(spent_: dict[str, float], into: dict[str, float] | None = None) -> dict[str, float]:
    """`spent_` added into `into` (this process's tally when None)."""
    target = _spent if into is None else into
    for phase, seconds in spent_.items():
        target[phase] = target.get(phase, 0.0) + seconds
    return target


def cost_of(wall: float, spent_: dict[str, float], invocations) -> Cost:
    """The report's split of the wall time: `spent_` per phase, the invocations' own times."""
    models = sum(r.model_time for r in invocations)
    startup = sum(max(r.wall_time - r.model_time, 0.0) for r in invocations)
    return Cost(wall, spent_.get("parse", 0.0), startup, models, spent_.get("copies", 0.0),
                spent_.get("judging", 0.0), spent_.get("reports", 0.0), len(invocations),
                sum(len(r.nodes) for r in invocations))
