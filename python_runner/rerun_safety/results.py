"""Frozen result types of a game day. Renderers take these and never recompute them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

class Verdict(StrEnum):
    """What a scenario (and a model, the worst of its scenarios) is judged; worst first. A `str`, so the
    reports write its word and a verdict read back from one compares equal."""

    ERROR = "error"
    NONDETERMINISTIC = "nondeterministic"
    LOSS = "loss"
    DUPLICATES = "duplicates"
    DRIFT = "drift"
    # the model's own output matches, but what its hooks write elsewhere does not
    SIDE_EFFECT = "side_effect"
    # the model's inputs received no new rows in any replayed batch, so nothing was exercised
    UNTESTED = "untested"
    SAFE = "safe"
    SKIPPED = "skipped"

    @classmethod
    def of(cls, word: "str | Verdict") -> "Verdict | None":
        """The verdict a report's word names (None: not one, e.g. from a newer report)."""
        try:
            return cls(word)
        except ValueError:
            return None

    @property
    def rank(self) -> int:
        """Position in the order, worst is 0."""
        return _ORDER.index(self)

    @property
    def unsafe(self) -> bool:
        """A defect a team acts on: the output (or what the hooks write) differs, or it did not build."""
        return self in UNSAFE

    @property
    def row_defect(self) -> bool:
        """Rows lost, copied or changed against the reference (what a fix of the write path can cure)."""
        return self in (Verdict.LOSS, Verdict.DUPLICATES, Verdict.DRIFT)

    @property
    def matched(self) -> bool:
        """The output matched the reference (judged safe, or nothing arrived to test it)."""
        return self in (Verdict.SAFE, Verdict.UNTESTED)

    @property
    def passed(self) -> bool:
        return self is Verdict.SAFE


_ORDER = tuple(Verdict)
VERDICT_ORDER = tuple(v.value for v in Verdict)
UNSAFE = frozenset({Verdict.ERROR, Verdict.NONDETERMINISTIC, Verdict.LOSS, Verdict.DUPLICATES, Verdict.DRIFT,
                    Verdict.SIDE_EFFECT})


def _verdict_rank(verdict: str) -> int:
    """Position in the order (worst is 0); an unknown word ranks after all known ones."""
    found = Verdict.of(verdict)
    return found.rank if found is not None else len(_ORDER)


def sort_worst_first(models) -> list:
    """Models worst verdict first; within a verdict, root causes first, then by name."""
    return sorted(models, key=lambda m: (_verdict_rank(m.verdict), not m.root_cause, m.name))


def worst(verdicts) -> Verdict:
    vs = [Verdict(v) for v in verdicts if v]
    if not vs:
        return Verdict.SKIPPED
    return min(vs, key=_ORDER.index)


@dataclass(frozen=True)
class PartitionCount:
    """Rows of one partition (e.g. one day) in the reference and in the scenario."""

    partition: str
    reference_rows: int
    rows: int


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    verdict: Verdict
    reference_rows: int = 0
    rows: int = 0
    extra_rows: int = 0
    missing_rows: int = 0
    duplicate_keys: int = 0
    missing_keys: int = 0
    extra_keys: int = 0
    changed_rows: int = 0
    volatile_columns: tuple[str, ...] = ()
    differing_columns: tuple[str, ...] = ()
    message: str = ""
    sample: tuple[dict[str, Any], ...] = ()
    partitions: tuple[PartitionCount, ...] = ()
    partition_column: str | None = None
    # coverage: rows of the model's timed inputs in the scenario's decisive step (every replayed
    # batch; the half-committed batch; the backfilled batch; the late rows); None where no step
    # decides (reference, determinism) or the model has no timed input
    input_rows: int | None = None
    # the differing columns whose difference vanishes once the values they list are sorted (a list
    # gathered without ORDER BY, here or above: gameday/order_only.py)
    order_only_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sample"] = [dict(r) for r in self.sample]
        return d

    @property
    def differing_partitions(self) -> tuple[PartitionCount, ...]:
        """Partitions whose row count differs from the reference's (e.g. a doubled day)."""
        return tuple(p for p in self.partitions if p.rows != p.reference_rows)

    @property
    def difference(self) -> int:
        """How much this scenario differs, for ranking: extra + missing + duplicate keys + changed."""
        return self.extra_rows + self.missing_rows + self.duplicate_keys + self.changed_rows


@dataclass(frozen=True)
class ModelVerdict:
    name: str
    unique_id: str
    verdict: Verdict
    root_cause: bool
    contaminated_by: tuple[str, ...]
    materialized: str
    strategy: str | None
    key: tuple[str, ...]
    parents: tuple[str, ...]
    scenarios: tuple[ScenarioResult, ...]
    reason: str = ""
    notes: tuple[str, ...] = ()  # what the reader should know: clock reads, an empty first build, ...
    # columns that differ between two builds of the same data (beside the verdict when it is a data defect)
    nondeterministic_columns: tuple[str, ...] = ()
    # columns that only stamp the run's clock, left out of the comparison (compare_audit_columns: compared)
    audit_columns: tuple[str, ...] = ()
    # why a model that differs is neither a root cause nor shown contaminated ('' otherwise)
    inconclusive: str = ""
    # unsafe only where two runs of a batch overlapped (the concurrent scenario): safe run one at a time
    overlap_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unique_id": self.unique_id,
            "verdict": self.verdict,
            "root_cause": self.root_cause,
            "contaminated_by": list(self.contaminated_by),
            "materialized": self.materialized,
            "strategy": self.strategy,
            "key": list(self.key),
            "parents": list(self.parents),
            "reason": self.reason,
            "notes": list(self.notes),
            "nondeterministic_columns": list(self.nondeterministic_columns),
            "audit_columns": list(self.audit_columns),
            "inconclusive": self.inconclusive,
            "overlap_only": self.overlap_only,
            "scenarios": [s.to_dict() for s in self.scenarios],
        }

    @property
    def worst_scenario(self) -> ScenarioResult | None:
        """The scenario that decided the verdict: one of the model's verdict, the largest difference."""
        if not self.scenarios:
            return None
        # one with the model's own verdict first (a loss beside a nondeterministic column is shown by the
        # scenario that lost rows); on a tie, the one that found it by itself (not by another's reasoning)
        return min(self.scenarios,
                   key=lambda s: (s.verdict != self.verdict, _verdict_rank(s.verdict), -s.difference, bool(s.message)))


@dataclass(frozen=True)
class Tried:
    """A candidate fix that was tried and not verified, and why."""

    candidate: str
    description: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Fix:
    """What the fix search found for one root cause: a verified change (`patch`, a unified diff of
    `path` against the user's file), or none, with what was tried."""

    model: str
    verdict: Verdict
    verified: bool
    candidate: str = ""  # the verified candidate's name ("" when none was verified)
    description: str = ""
    path: str = ""  # the file the patch changes, relative to the project folder
    patch: str = ""
    models: tuple[str, ...] = ()  # the models the verifying game day judged safe: the root cause and below
    tried: tuple[Tried, ...] = ()
    why_none: str = ""  # when no candidate applies to this defect
    seconds: float = 0.0
    note: str = ""  # what the user should know about applying it (a package's file, say)
    before_sha256: str = ""  # the file as the game day read it (--apply refuses another)
    text: str = field(default="", repr=False)  # the file's new text
    # it declares what a table is for (a run log) rather than change what runs: for review, never applied
    # by --apply
    declaration: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["text"]
        d["tried"] = [t.to_dict() for t in self.tried]
        d["models"] = list(self.models)
        d["seconds"] = round(self.seconds, 3)
        return d


@dataclass(frozen=True)
class Cost:
    """Where a game day's time went (gameday/cost.py): the wall time, and the work split by phase, in
    seconds summed over the processes that did it."""

    wall: float
    parse: float
    dbt_startup: float
    models: float
    copies: float
    judging: float
    reports: float
    invocations: int
    model_executions: int

    @property
    def work(self) -> float:
        return self.parse + self.dbt_startup + self.models + self.copies + self.judging + self.reports

    def to_dict(self) -> dict:
        return {"wall_s": round(self.wall, 3), "work_s": round(self.work, 3), "parse_s": round(self.parse, 3),
                "dbt_startup_s": round(self.dbt_startup, 3), "model_execution_s": round(self.models, 3),
                "copies_s": round(self.copies, 3), "judging_s": round(self.judging, 3),
                "reports_s": round(self.reports, 3), "dbt_invocations": self.invocations,
                "model_executions": self.model_executions}

    def line(self) -> str:
        parts = [f"{name} {seconds:.1f} s" for name, seconds in (
            ("parse", self.parse), ("dbt start-up", self.dbt_startup), ("model execution", self.models),
            ("copies", self.copies), ("judging", self.judging), ("reports", self.reports))]
        return (f"Time: {self.wall:.1f} s; work {self.work:.1f} s: {', '.join(parts)}; {self.invocations} dbt "
                f"invocations, {self.model_executions} model executions")


@dataclass(frozen=True)
class GamedayReport:
    project: str
    adapter: str
    target: str
    scenarios: tuple[str, ...]
    steps: int
    cutoffs: tuple[str, ...]
    models: tuple[ModelVerdict, ...]
    wall_time: float
    dbt_invocations: int
    model_time: float
    started_at: str
    extra: dict[str, Any] = field(default_factory=dict)
    batch_size: str = "day"
    notes: tuple[str, ...] = ()  # about the whole run: the schedule simulated, inputs realigned, ...
    baseline: dict[str, str] | None = None  # model name -> verdict in the report compared with
    fixes: tuple[Fix, ...] | None = None  # --fix: per root cause, a verified fix or none (None: not asked)
    cost: Cost | None = None  # where the time went

    @property
    def worse_than_baseline(self) -> tuple[ModelVerdict, ...]:
        """Unsafe models whose verdict is worse than in the baseline (or that it did not have)."""
        if self.baseline is None:
            return self.unsafe
        return tuple(m for m in self.unsafe if m.name not in self.baseline
                     or _verdict_rank(m.verdict) < _verdict_rank(self.baseline[m.name]))

    @property
    def same_as_baseline(self) -> tuple[ModelVerdict, ...]:
        """Models whose verdict is the baseline's (what a pull request's comment folds away)."""
        if self.baseline is None:
            return ()
        return tuple(m for m in self.models if self.baseline.get(m.name) == m.verdict)

    @property
    def fixed_since_baseline(self) -> tuple[ModelVerdict, ...]:
        """Models the baseline called unsafe that are judged safe now."""
        if self.baseline is None:
            return ()
        return tuple(m for m in self.models if m.verdict.passed and self.baseline.get(m.name) in UNSAFE)

    @property
    def unsafe(self) -> tuple[ModelVerdict, ...]:
        return tuple(m for m in self.models if m.verdict.unsafe)

    @property
    def root_causes(self) -> tuple[ModelVerdict, ...]:
        return tuple(m for m in self.models if m.root_cause)

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {v: 0 for v in VERDICT_ORDER}
        for m in self.models:
            counts[m.verdict] = counts.get(m.verdict, 0) + 1
        return {
            "models": len(self.models),
            "verdicts": counts,
            "unsafe": len(self.unsafe),
            "root_causes": [m.name for m in self.root_causes],
            "contaminated": [m.name for m in self.models if m.contaminated_by and not m.root_cause],
            "inconclusive": [m.name for m in self.models if m.inconclusive],
            "scenarios": list(self.scenarios),
            "steps": self.steps,
            "batch_size": self.batch_size,
            "cutoffs": list(self.cutoffs),
            "notes": list(self.notes),
            "wall_time_s": round(self.wall_time, 3),
            "dbt_invocations": self.dbt_invocations,
            "model_time_s": round(self.model_time, 3),
            **({"cost": self.cost.to_dict()} if self.cost is not None else {}),
            **({"baseline": {"worse": [m.name for m in self.worse_than_baseline],
                             "unsafe_as_before": [m.name for m in self.unsafe if m not in self.worse_than_baseline],
                             "fixed": [m.name for m in self.fixed_since_baseline]}}
               if self.baseline is not None else {}),
            "exit_code": 1 if self.worse_than_baseline else 0,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "adapter": self.adapter,
            "target": self.target,
            "started_at": self.started_at,
            "models": [m.to_dict() for m in self.models],
            "summary": self.summary(),
            # whether the project's code ran confined by the kernel (and where it could write)
            **({"fixes": [f.to_dict() for f in self.fixes]} if self.fixes is not None else {}),
            **({"confinement": self.extra["confinement"]} if "confinement" in self.extra else {}),
            **({"extra": {k: v for k, v in self.extra.items() if k != "confinement"}} if self.extra else {}),
        }


def _register() -> None:
    from .confine.wire import register

    register(GamedayReport, ModelVerdict, ScenarioResult, PartitionCount, Fix, Tried, Cost)


_register()
