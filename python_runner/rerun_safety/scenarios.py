"""Scenarios as plain lists of steps: data arrives, dbt runs. Pure logic, no I/O."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

ALL_SCENARIOS = ("reference", "replay", "rerun", "partial", "backfill", "determinism")


@dataclass(frozen=True)
class Reset:
    """Delete every source row at or after `cutoff` (the sandbox starts from the first cutoff)."""

    cutoff: dt.datetime


@dataclass(frozen=True)
class Arrive:
    """Rows with lo <= time < hi arrive; `part` picks an arbitrary half (first) or the rest."""

    lo: dt.datetime
    hi: dt.datetime | None
    part: str | None = None  # None | "first" | "rest"


@dataclass(frozen=True)
class Run:
    full_refresh: bool
    window: tuple[dt.datetime, dt.datetime]  # half-open [start, end) for window-driven models
    label: str


Step = Reset | Arrive | Run


@dataclass(frozen=True)
class Timeline:
    tmin: dt.datetime
    tmax: dt.datetime
    cutoffs: tuple[dt.datetime, ...]  # c_1 .. c_{N-1}; the last step takes everything

    @property
    def end(self) -> dt.datetime:
        return self.tmax + dt.timedelta(seconds=1)

    @property
    def start(self) -> dt.datetime:
        return dt.datetime.combine(self.tmin.date(), dt.time())

    def bounds(self) -> list[dt.datetime | None]:
        return [*self.cutoffs, None]

    def window(self, i: int) -> tuple[dt.datetime, dt.datetime]:
        """Window of incremental step i (1-based, i >= 2): starts half a step before the
        previous window ended, so consecutive windows overlap."""
        b = self.bounds()
        lo, hi = b[i - 2], b[i - 1] or self.end
        overlap = (hi - lo) / 2 if i >= 3 else (lo - self.start) / 2
        return ((lo - overlap).replace(microsecond=0), hi)


def make_timeline(tmin: dt.datetime, tmax: dt.datetime, steps: int) -> Timeline:
    span = tmax - tmin
    cutoffs = []
    for i in range(1, steps):
        c = tmin + span * i / steps
        cutoffs.append(c.replace(microsecond=0))
    return Timeline(tmin, tmax, tuple(cutoffs))


def scenario_steps(name: str, t: Timeline) -> list[Step]:
    full = Run(True, (t.start, t.end), "full refresh")
    if name in ("reference", "determinism"):
        return [full]
    b = t.bounds()
    n = len(b)
    steps: list[Step] = [Reset(b[0]), Run(True, (t.start, b[0]), "full refresh at cutoff 1")]
    partial_at = n // 2 + 1 if n >= 2 else None
    for i in range(2, n + 1):
        lo, hi = b[i - 2], b[i - 1]
        run = Run(False, t.window(i), f"step {i}")
        if name == "partial" and i == partial_at:
            steps += [Arrive(lo, hi, "first"), Run(False, t.window(i), f"step {i}, half-committed"),
                      Arrive(lo, hi, "rest"), Run(False, t.window(i), f"step {i}, rerun")]
            continue
        steps.append(Arrive(lo, hi))
        steps.append(run)
        if name == "rerun":
            steps.append(Run(False, t.window(i), f"step {i}, again"))
    if name == "backfill":
        steps.append(Run(False, t.window(2), "backfill of step 2"))
    return steps


def count_runs(names, t: Timeline) -> int:
    return sum(1 for n in names for s in scenario_steps(n, t) if isinstance(s, Run))
