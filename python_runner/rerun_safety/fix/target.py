"""What the candidate fixes of one root cause are made from, and what a candidate is (fix/)."""
from __future__ import annotations

from dataclasses import dataclass

from ..results import Verdict


@dataclass(frozen=True)
class Target:
    """What the candidates of one root cause are made from."""

    name: str
    verdict: Verdict
    raw: str  # the model file's text
    materialized: str
    strategy: str | None
    key: tuple[str, ...]  # unique_key, or a key its tests declare
    columns: tuple[str, ...]  # its reference output's columns, in order
    # keys its clean build's output holds unique without NULLs, most likely first (lineage.key_candidates)
    keys: tuple[tuple[str, ...], ...] = ()
    column_types: tuple[tuple[str, str], ...] = ()  # its reference output's (column, data type)
    granularity: str | None = None  # its partition_key's granularity (partition_overwrite)
    lookback: str | None = None  # the interval that covers what the replay showed late, e.g. "2 days"
    late: bool = False  # rows of its inputs arrived after a later batch than their time's
    side: tuple["SideTable", ...] = ()  # relations its hooks write that a rerun left different (side_effect)
    dialect: str = ""  # sqlglot's name of the target's dialect
    # a microbatch model: the lookback (in its own batches) that re-processes what the replay showed
    # arriving late, plus one batch, and the lookback it has (dbt's default 1)
    microbatch_lookback: int | None = None
    lookback_now: int = 1
    overlap_only: bool = False  # unsafe only where two runs of a batch overlapped (ModelVerdict.overlap_only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))


@dataclass(frozen=True)
class SideTable:
    """A relation the model's hooks write, as its clean build left it."""

    name: str  # its identifier in the warehouse
    columns: tuple[tuple[str, str], ...]  # (column, data type), in order
    label: str = ""  # schema.name
    # the rows it gains at every run in the fault-free schedule, where that keeps its clean build's rows
    # once per run (a run log: side_effects.per_run); 0 otherwise
    per_run: int = 0


@dataclass(frozen=True)
class Candidate:
    name: str
    description: str
    text: str  # the new text of the file it changes
    settings: tuple[tuple[str, object], ...] = ()  # when it only sets these config() keys (else empty)
    path: str = ""  # the file it changes, relative to the project ("": the model's own file)
    follows: bool = False  # made on top of another candidate that mended one defect and showed the next
    declaration: bool = False  # it declares what a table is for instead of changing what runs (Fix.declaration)
    also: tuple[str, ...] = ()  # other models the change reaches (a var they read too): judged with it
