"""Scenarios as plain lists of steps: data arrives a batch at a time, the clock moves, dbt runs.

Pure logic, no I/O. The simulated schedule follows the user's cadence: `--batch-size` (a calendar
unit or a duration) and `--steps N`, the number of batches replayed at the end of the data.
Everything before the first replayed batch is present for the first (full) build.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..cadence import Batch  # noqa: F401 - the schedule's unit, used here and imported from here
from ..errors import ConfigError



@dataclass(frozen=True)
class Scenario:
    """What a scenario is, for the code that runs, judges and reports it (which asks these, never
    the name). Its steps come from `scenario_steps`."""

    name: str
    # the clean full build every other scenario is judged against
    baseline: bool = False
    # one full rebuild of inputs written again in another order, at another thread count: what
    # differs is nondeterministic (its columns volatile), not a rerun defect
    reorders: bool = False
    # rows arrive by their arrival time, a share of them late (needs --late-fraction or --late-by
    # where an input has no load time)
    late_arrivals: bool = False
    # the input rows whose arrival decides the scenario: "batches" (every replayed batch), "half"
    # (the half-committed batch), "first" (batch 1, backfilled), "late_rows" (the rows arriving late), ""
    decisive: str = ""
    # the scenario this one continues (backfill is replay plus one more run): they share a sandbox,
    # and the one continued is judged on the way
    continues: str | None = None
    # the scenario whose steps this one begins with (partial is replay up to the half-committed
    # batch): it goes on from a copy of that one's sandbox, taken after their last run in common
    branches_from: str | None = None

    @property
    def half_committed(self) -> bool:
        """A batch committed in halves: a loss there has that cause of its own."""
        return self.decisive == "half"


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("reference", baseline=True),
    Scenario("replay", decisive="batches"),
    Scenario("rerun", decisive="batches"),
    Scenario("partial", decisive="half", branches_from="replay"),
    Scenario("backfill", decisive="first", continues="replay"),
    Scenario("late", late_arrivals=True, decisive="late_rows"),
    Scenario("determinism", reorders=True),
)}
ALL_SCENARIOS = tuple(SCENARIOS)
REFERENCE = next(s.name for s in SCENARIOS.values() if s.baseline)


def scenario(name: str) -> Scenario:
    return SCENARIOS[name]


def chains(names) -> list[list[str]]:
    """Scenarios that continue one another share a sandbox (backfill is replay plus one more run,
    so replay is judged on the way): those first, in one chain, then each other scenario alone."""
    linked = {s.name for s in SCENARIOS.values() if s.continues} | {s.continues for s in SCENARIOS.values() if s.continues}
    tail = [s for s in ALL_SCENARIOS if s in linked and s in names]
    return ([tail] if tail else []) + [[s] for s in names if s not in linked]

@dataclass(frozen=True)
class Reset:
    """Delete every input row at or after the input's first replayed boundary; `late`: by the
    rows' arrival (load) time instead of their event time."""

    late: bool = False


@dataclass(frozen=True)
class Arrive:
    """The rows of replayed batch `index` (1-based) arrive; `part` picks an arbitrary half
    (first) or the rest of them."""

    index: int
    part: str | None = None  # None | "first" | "rest"
    late: bool = False  # rows arrive by their load time (or a simulated delay), not their event time


@dataclass(frozen=True)
class Run:
    full_refresh: bool
    window: tuple[dt.datetime, dt.datetime]  # half-open [start, end) for window-driven models
    label: str
    clock: dt.datetime  # the time the models see: the end of the batch being run


Step = Reset | Arrive | Run


@dataclass(frozen=True)
class Timeline:
    """`bounds` = b_0 < b_1 < ... < b_N: batch i is [b_{i-1}, b_i). Inputs whose data ends before
    b_0 would receive no rows at all; they are replayed over their own last N batches
    (`own_bounds`), so every model is exercised."""

    batch: Batch
    bounds: tuple[dt.datetime, ...]
    data_start: dt.datetime
    own_bounds: tuple[tuple[str, tuple[dt.datetime, ...]], ...] = ()
    requested_steps: int = 0
    partial_at: int = 0  # the half-committed batch (0: the middle one)

    @property
    def steps(self) -> int:
        return len(self.bounds) - 1

    @property
    def half_committed(self) -> int:
        """The batch the partial scenario commits in halves."""
        return self.partial_at or self.steps // 2 + 1

    @property
    def start(self) -> dt.datetime:
        return min(self.batch.floor(self.data_start), self.bounds[0])

    @property
    def end(self) -> dt.datetime:
        return self.bounds[-1]

    def bounds_for(self, input_id: str) -> tuple[dt.datetime, ...]:
        return dict(self.own_bounds).get(input_id, self.bounds)

    def window(self, i: int) -> tuple[dt.datetime, dt.datetime]:
        """Window of batch i (1-based): it starts one batch before batch i, so consecutive
        windows overlap by a batch, as a retried or overlapping scheduled run does."""
        return (max(self.batch.shift(self.bounds[i - 1], -1), self.start), self.bounds[i])


def make_timeline(tmin: dt.datetime, tmax: dt.datetime, steps: int, batch: Batch | str = "day",
                  inputs: dict[str, tuple[dt.datetime, dt.datetime]] | None = None) -> Timeline:
    """The last `steps` batches up to the one holding `tmax` (fewer when the data holds fewer).
    `inputs` maps an input id to its own (min, max): an input whose rows all lie before the first
    replayed batch gets its own last batches."""
    b = batch if isinstance(batch, Batch) else Batch.parse(batch)
    end = b.shift(b.floor(tmax), 1)
    available = b.count(b.floor(tmin), end)
    n = min(steps, available - 1)
    if n < 1:
        raise ConfigError(f"the data spans a single {b.label} batch ({tmin} .. {tmax}): nothing to replay; "
                          "choose a smaller --batch-size")
    bounds = tuple(b.shift(end, i - n) for i in range(n + 1))
    own = []
    for input_id, (lo, hi) in sorted((inputs or {}).items()):
        if hi < bounds[0]:
            own_end = b.shift(b.floor(hi), 1)
            own.append((input_id, tuple(b.shift(own_end, i - n) for i in range(n + 1))))
    return Timeline(b, bounds, tmin, tuple(own), steps)


def scenario_steps(name: str, t: Timeline) -> list[Step]:
    kind = scenario(name)
    if kind.baseline or kind.reorders:
        return [Run(True, (t.start, t.end), "full refresh", t.end)]
    b = t.bounds
    n = t.steps
    late = kind.late_arrivals
    steps: list[Step] = [Reset(late), Run(True, (t.start, b[0]), "first build", b[0])]
    partial_at = t.half_committed
    for i in range(1, n + 1):
        label = f"batch {i}"
        if name == "partial" and i == partial_at:
            steps += [Arrive(i, "first"), Run(False, t.window(i), f"{label}, half-committed", b[i]),
                      Arrive(i, "rest"), Run(False, t.window(i), f"{label}, rerun", b[i])]
            continue
        steps.append(Arrive(i, late=late))
        steps.append(Run(False, t.window(i), label, b[i]))
        if name == "rerun":
            steps.append(Run(False, t.window(i), f"{label}, again", b[i]))
    if name == "backfill":
        steps.append(Run(False, t.window(1), "backfill of batch 1", t.end))
    return steps


def count_runs(names, t: Timeline, after: int = 0) -> int:
    """The runs of these scenarios (`after`: of the steps after that many)."""
    return sum(1 for n in names for s in scenario_steps(n, t)[after:] if isinstance(s, Run))


def common_steps(base: str, other: str, t: Timeline) -> int:
    """How many of `other`'s first steps are `base`'s, up to and including their last run in common:
    a copy of `base`'s sandbox taken there is where `other` goes on from (0: they share no run)."""
    shared = 0
    for i, (a, b) in enumerate(zip(scenario_steps(base, t), scenario_steps(other, t))):
        if a != b:
            break
        if isinstance(a, Run):
            shared = i + 1
    return shared
