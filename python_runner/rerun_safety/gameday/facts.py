"""`Facts`: what a game day learns from the data before its scenarios run, frozen from then on. The
snapshot teaches the schedule and the inputs' counts (timeline.plan_timeline), the reference build its
outputs (core.Gameday's reference). A `Plan` holds it whole (`plan.facts`), and a worker process reads
the plan it is sent as it is."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .scenarios import Timeline


class FrozenMap(dict):
    """A dict nobody writes once it is made (a plan's facts are read by every scenario and worker)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a game day's facts are frozen: make a new plan (Plan.learned)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self):
        return (FrozenMap, (dict(self),))


def frozen_map(value: Mapping | None) -> FrozenMap:
    return value if isinstance(value, FrozenMap) else FrozenMap(value or {})


@dataclass(frozen=True)
class Facts:
    timeline: Timeline | None = None
    # input id -> rows before the first replayed batch, then rows of each replayed batch
    arrivals: Mapping[str, tuple[int, ...]] = field(default_factory=FrozenMap)
    # input id -> rows of each replayed batch (index 0 unused) in the half the partial scenario commits first
    first_halves: Mapping[str, tuple[int, ...]] = field(default_factory=FrozenMap)
    late_rows: Mapping[str, int] = field(default_factory=FrozenMap)  # input id -> rows arriving after a later batch
    late_batches: Mapping[str, int] = field(default_factory=FrozenMap)  # input id -> the most batches a row arrives late
    # input id -> (rows of its fullest batch before the replayed ones, that batch's start): a bulk load
    bulk: Mapping[str, tuple[int, Any]] = field(default_factory=FrozenMap)
    exercised: Mapping[str, bool] = field(default_factory=FrozenMap)  # model -> its inputs received new rows
    empty_first: Mapping[str, str] = field(default_factory=FrozenMap)  # model -> why its first build saw no rows
    time_columns: Mapping[str, str] = field(default_factory=FrozenMap)  # model -> its output's time column
    # model -> its output columns gathered by an aggregate without ORDER BY (see order_only)
    unordered: Mapping[str, Mapping[str, str | None]] = field(default_factory=FrozenMap)
    # built models whose output may depend on the order of their inputs' rows (rebuild.order_sensitive)
    order_sensitive: frozenset[str] = frozenset()
    # tables no run of a scenario can change, built once in its first build (rebuild.frozen_ids)
    frozen: frozenset[str] = frozenset()
    # model -> its output columns that only stamp the run's clock, left out of the comparison
    audit_columns: Mapping[str, tuple[str, ...]] = field(default_factory=FrozenMap)
    # model -> its output columns it computes itself, each with the columns it reads (lineage.computed_columns)
    computed_columns: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=FrozenMap)
    # model -> its output columns a window function computes (lineage.window_columns): renumbered, not lost
    window_columns: Mapping[str, tuple[str, ...]] = field(default_factory=FrozenMap)
    # model -> the columns its SQL picks or pairs rows by (lineage.row_columns; absent: not known)
    row_columns: Mapping[str, frozenset[str]] = field(default_factory=FrozenMap)
    reference_rows: Mapping[str, int] = field(default_factory=FrozenMap)
    # model -> its reference output's fingerprint (diff.fingerprint) and columns (GamedayOptions.fingerprints)
    fingerprints: Mapping[str, Any] = field(default_factory=FrozenMap)
    reference_columns: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=FrozenMap)  # (name, type)
    # incremental model -> the keys (lineage.key_candidates) its reference output holds unique, without NULLs
    unique_keys: Mapping[str, list[tuple[str, ...]]] = field(default_factory=FrozenMap)
    side: Any = None  # side_effects.SidePlan, once the reference has run
    # model name -> dbt's message, for each model that did not compile in the snapshot (by_name)
    compile_failures: Mapping[str, str] = field(default_factory=FrozenMap)
    read_by_name: Any = None  # by_name.ByName: the inputs the compiled SQL reads by name

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, dict) and not isinstance(value, FrozenMap):
                object.__setattr__(self, name, FrozenMap(value))
