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



class Scenario:
    """What a scenario is and does, for the code that runs, judges and reports it (which asks these, never
    the name): its steps, and the input rows whose arrival decides it. One subclass per kind, one
    instance each in SCENARIOS."""

    name = ""
    # the clean full build every other scenario is judged against
    baseline = False
    # one full rebuild of inputs written again in another order, at another thread count: what
    # differs is nondeterministic (its columns volatile), not a rerun defect
    reorders = False
    # rows arrive by their arrival time, a share of them late (needs --late-fraction or --late-by
    # where an input has no load time)
    late_arrivals = False
    # a batch committed in halves: a loss there has that cause of its own
    half_committed = False
    # the scenario this one continues (backfill is replay plus one more run): they share a sandbox,
    # and the one continued is judged on the way
    continues: str | None = None
    # the scenario whose steps this one begins with (partial is replay up to the half-committed
    # batch): it goes on from a copy of that one's sandbox, taken after their last run in common
    branches_from: str | None = None
    # one batch run twice at once, the first run's transaction held open until the second has started
    # and blocked or written (an orchestrator's retry beside a run that did not die, a manual backfill
    # during the nightly run): where the engine cannot hold one run open beside another, not applicable
    overlapping = False
    # run when --scenarios names none (`default`); `all` runs every scenario
    by_default = True

    def applies(self, dialect) -> str:
        """Why this scenario cannot run on this engine ('' when it can)."""
        return ""

    def steps(self, t: "Timeline") -> list["Step"]:
        """The scheduled runs: the first build, then each replayed batch's rows and its run."""
        b = t.bounds
        steps: list[Step] = [Reset(self.late_arrivals), Run(True, (t.start, b[0]), "first build", b[0])]
        for i in range(1, t.steps + 1):
            steps += self._batch(t, i)
        return steps

    def _batch(self, t: "Timeline", i: int) -> list["Step"]:
        return [Arrive(i, late=self.late_arrivals), Run(False, t.window(i), f"batch {i}", t.bounds[i])]

    def decisive_rows(self, plan, inputs) -> int | None:
        """Rows of these inputs in the step that decides the scenario (None: no step does)."""
        return None

    def unexercised(self, plan, inputs, names: str) -> str:
        """Why the deciding step touched none of these inputs' rows ('' when it did, or no step decides)."""
        return ""

    # ---------------------------------------------------------------- how it runs
    # the thread count of the reference (False), or another one (a result that depends on how rows are
    # split between threads differs)
    other_threads = False
    # in isolation, the broken ancestors' reference outputs are put in place (True), or they are rebuilt
    # in full at every run (False)
    isolation_by_reference = False

    def prepare_sandbox(self, engine, plan, sandbox) -> None:
        """What its sandbox needs before the first run (nothing but the clone, by default)."""

    def write_rewrite(self, dialect):
        """What every statement dbt sends in its sandbox goes through beside the engine's own rewrite
        (None: nothing)."""
        return None

    def rebuilds_on_final_parents(self) -> bool:
        """Whether a table or view it judges was built again at its end from what its parents held then,
        at the reference's clock (so a difference over parents that all matched is the model's own
        nondeterminism). Not the reference itself, nor a rebuild of the whole project."""
        return not self.baseline

    def lean_models(self, plan) -> tuple[set[str], set[str]]:
        """(the models each run builds, the models its first build builds) in a lean scenario: the
        stateful models and what they read in the first build (rebuild.py)."""
        from .rebuild import first_ids

        return {m.unique_id for m in plan.stateful}, first_ids(plan)

    def opaque(self, plan, current: set[str]) -> set[str]:
        """Of the models a run built, those whose right output does not show that the models below
        them would come out right (their below are rebuilt and judged too)."""
        return current

    def carried(self) -> str:
        """Why a model not built in the scenario is judged from the reference."""
        from .rebuild import CARRIED

        return CARRIED

    def isolates(self, model) -> bool:
        """Whether a model that differs below a differing parent is replayed in isolation: one that
        keeps state of its own (a table or view is rebuilt from its parents at the clock of the
        reference: with right parents it is right)."""
        return model.keeps_state

    # ---------------------------------------------------------------- how it judges
    column_detail = False  # the diff names the columns that differ (nondeterministic columns)

    def verdict_of(self, diff) -> "Verdict | None":
        """The verdict a difference gets here whatever its rows say (None: judged by its rows and keys)."""
        return None

    def volatile(self, diff) -> tuple[str, ...]:
        """The columns a difference shows to change between clean builds of the same data."""
        return ()

    def on_reference_error(self, message: str, as_failure):
        """A model whose reference build failed is not judged here (`as_failure()`: the result that
        describes the failure)."""
        from ..results import ScenarioResult, Verdict

        return ScenarioResult(self.name, Verdict.SKIPPED, message=f"reference build failed: {message}")

    def coverage(self, plan, m, r):
        """A safe result of a model that keeps state, where no new rows reached it (in any replayed batch,
        or in this scenario's deciding step), is `untested`: nothing was exercised."""
        from dataclasses import replace

        from ..results import Verdict

        if not r.verdict.passed or not (m.incremental or m.custom):
            return r
        # (a snapshot of a table that never changes is exercised by every run: each is a rerun
        # of the same input, which must open no version)
        if not plan.facts.exercised.get(m.unique_id, True):
            return replace(r, verdict=Verdict.UNTESTED, message=plan.untested_reason(m))
        why = plan.unexercised(m, self.name)
        return replace(r, verdict=Verdict.UNTESTED, message=f"{self.name}: {why}") if why else r

    # ---------------------------------------------------------------- how it reads in the reports
    # a loss there no larger than the rows that arrive late is put down to them (not where the
    # scenario has a cause of its own)
    loss_by_late_rows = True

    def __repr__(self) -> str:
        return f"<scenario {self.name}>"


def _full_refresh(t: "Timeline") -> list["Step"]:
    return [Run(True, (t.start, t.end), "full refresh", t.end)]


class _Baseline(Scenario):
    name, baseline = "reference", True

    def steps(self, t):
        return _full_refresh(t)

    def on_reference_error(self, message, as_failure):
        return as_failure()  # the reference's own failure


class _Replay(Scenario):
    """Every replayed batch arrives and runs once: every batch decides."""

    name = "replay"

    def decisive_rows(self, plan, inputs):
        return sum(plan.rows_in_batch(inputs, i) for i in range(1, plan.facts.timeline.steps + 1))


class _Rerun(_Replay):
    name = "rerun"

    def _batch(self, t, i):
        return [*super()._batch(t, i), Run(False, t.window(i), f"batch {i}, again", t.bounds[i])]


class _Partial(Scenario):
    """Replay, but one batch is committed in halves: its first half, a run, the rest, a rerun."""

    name, half_committed, branches_from = "partial", True, "replay"
    loss_by_late_rows = False  # a half-committed batch is its own cause

    def _batch(self, t, i):
        if i != t.half_committed:
            return super()._batch(t, i)
        return [Arrive(i, "first"), Run(False, t.window(i), f"batch {i}, half-committed", t.bounds[i]),
                Arrive(i, "rest"), Run(False, t.window(i), f"batch {i}, rerun", t.bounds[i])]

    def decisive_rows(self, plan, inputs):
        return plan.rows_in_batch(inputs, plan.facts.timeline.half_committed)

    def unexercised(self, plan, inputs, names):
        i = plan.facts.timeline.half_committed
        first, rest = plan.halves_in_batch(inputs, i)
        if first and rest:
            return ""
        return (f"the half-committed batch (batch {i}) held {first + rest} row(s) of its inputs ({names}), "
                f"{first} in the half committed first and {rest} in the rest: no half of it could be left behind")


class _Backfill(Scenario):
    """Replay, then batch 1 run again at the end (its window re-read): batch 1 decides."""

    name, continues = "backfill", "replay"

    def steps(self, t):
        return [*super().steps(t), Run(False, t.window(1), "backfill of batch 1", t.end)]

    def decisive_rows(self, plan, inputs):
        return plan.rows_in_batch(inputs, 1)

    def unexercised(self, plan, inputs, names):
        return "" if plan.rows_in_batch(inputs, 1) else f"the backfilled batch (batch 1) held no rows of its inputs ({names})"


class _Concurrent(Scenario):
    """Replay, but one batch (the one partial commits in halves) is run twice at once: the first run
    holds each model's transaction open after its writes until the second run of the model has started
    and blocked or written. What two runs of a batch leave is what one leaves, or the strategy doubles
    rows (or loses them) when runs overlap."""

    name, branches_from, overlapping = "concurrent", "replay", True
    by_default = False  # asked for by name (or `all`) for now: it costs a run more, in a process of its own

    def applies(self, dialect):
        return dialect.overlapping_runs or ""

    def _batch(self, t, i):
        if i != t.half_committed:
            return super()._batch(t, i)
        return [Arrive(i), Overlap(False, t.window(i), f"batch {i}, two runs at once", t.bounds[i])]

    def decisive_rows(self, plan, inputs):
        return plan.rows_in_batch(inputs, plan.facts.timeline.half_committed)

    def unexercised(self, plan, inputs, names):
        i = plan.facts.timeline.half_committed
        if plan.rows_in_batch(inputs, i):
            return ""
        return f"the batch run twice at once (batch {i}) held no rows of its inputs ({names})"


class _Late(Scenario):
    """Rows arrive by their arrival time, a share late: the late rows decide."""

    name, late_arrivals = "late", True

    def decisive_rows(self, plan, inputs):
        return sum(plan.facts.late_rows.get(s.unique_id, 0) for s in inputs)

    def unexercised(self, plan, inputs, names):
        if self.decisive_rows(plan, inputs):
            return ""
        return f"no row of its inputs ({names}) arrived after a later batch than its event time"


class _Determinism(Scenario):
    """One full rebuild of inputs written again in another order, at another thread count: what differs
    is nondeterministic (its columns volatile), not a rerun defect."""

    name, reorders, other_threads, isolation_by_reference, column_detail = "determinism", True, True, True, True

    def steps(self, t):
        return _full_refresh(t)

    def prepare_sandbox(self, engine, plan, sandbox):
        from .reorder import reorder_inputs

        reorder_inputs(engine, plan, sandbox)

    def write_rewrite(self, dialect):
        # every table it builds written in another physical order too (Dialect.shuffled_write), so a
        # model breaking ties in an intermediate model's order reads them otherwise than the reference
        return dialect.shuffled_write

    def rebuilds_on_final_parents(self):
        return False  # it is itself the rebuild; what differs in it is judged nondeterministic already

    def lean_models(self, plan):
        from .rebuild import determinism_ids

        ids = determinism_ids(plan, plan.facts.order_sensitive)
        return ids, ids

    def opaque(self, plan, current):
        return current & plan.facts.order_sensitive

    def carried(self):
        from .rebuild import CARRIED_ORDER

        return CARRIED_ORDER

    def isolates(self, model):
        return True  # a table may be nondeterministic itself

    def verdict_of(self, diff):
        from ..results import Verdict

        return None if diff.identical else Verdict.NONDETERMINISTIC

    def volatile(self, diff):
        return diff.differing_columns

    def coverage(self, plan, m, r):
        return r  # judged on a rebuild: no rows arrive


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _Baseline(), _Replay(), _Rerun(), _Partial(), _Backfill(), _Concurrent(), _Late(), _Determinism())}
ALL_SCENARIOS = tuple(SCENARIOS)
DEFAULT_SCENARIOS = tuple(n for n, s in SCENARIOS.items() if s.by_default)
REFERENCE = next(s.name for s in SCENARIOS.values() if s.baseline)


def scenario(name: str) -> Scenario:
    return SCENARIOS[name]


def replayed(names) -> list[str]:
    """The scenarios among these that are judged against the reference (all but the reference itself)."""
    return [n for n in names if not SCENARIOS[n].baseline]


def with_baseline(names) -> tuple[str, ...]:
    """These scenarios and the reference, in the order of ALL_SCENARIOS."""
    return tuple(s for s in ALL_SCENARIOS if s in names or SCENARIOS[s].baseline)


def overlap_only(results) -> bool:
    """Whether a model's scenario results are unsafe only where two runs of a batch overlapped (the
    concurrent scenario): run one at a time, every scenario passed."""
    from ..results import UNSAFE

    bad = [s for s in results if s.verdict in UNSAFE]
    return bool(bad) and all(s.name in SCENARIOS and SCENARIOS[s.name].overlapping for s in bad)


def not_applicable(names, dialect) -> dict[str, str]:
    """The scenarios among these this engine cannot run, and why."""
    return {n: why for n in names if (why := SCENARIOS[n].applies(dialect))}


def delaying(names) -> list[str]:
    """The scenarios among these in which rows arrive late (by their arrival time)."""
    return [n for n in names if SCENARIOS[n].late_arrivals]


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


@dataclass(frozen=True)
class Overlap(Run):
    """A run started twice at once (the concurrent scenario): the first run's writes of each model held
    uncommitted until the second run of that model has started and blocked or written."""


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
    return scenario(name).steps(t)


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
