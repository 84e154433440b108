"""What the first game day measured that a candidate fix is sized by (fix/search.py): how many batches late a
model's input rows arrived, the window that re-reads them plus one batch, and a microbatch model's lookback
in its own batches. `first` is the first game day (gameday.core.Finished)."""
from __future__ import annotations

from ..cadence import SECONDS, duration


def late_batches(first, uid: str) -> int:
    """The most batches a row of the model's inputs arrived after its time's batch."""
    plan = first.plan
    return max((plan.facts.late_batches.get(s.unique_id, 0) for s in plan.inputs_of(plan.project.models[uid])), default=0)


def lookback(first, uid: str) -> str | None:
    """One batch more than the most batches a row of the model's inputs arrived late: what a window
    must re-read so that a half-committed batch and late rows are read again."""
    plan = first.plan
    if plan is None or plan.facts.timeline is None:
        return None
    batch, n = plan.facts.timeline.batch, late_batches(first, uid) + 1
    return f"{batch.months * n} months" if batch.months else duration(batch.delta.total_seconds() * n)


def lookback_seconds(first, uid: str) -> float | None:
    """`lookback` in seconds (None: no timeline, or batches of months)."""
    plan = first.plan
    if plan is None or plan.facts.timeline is None or plan.facts.timeline.batch.months:
        return None
    return plan.facts.timeline.batch.delta.total_seconds() * (late_batches(first, uid) + 1)


def microbatch_lookback(first, uid: str) -> tuple[int | None, int]:
    """For a microbatch model: the lookback, in its own batches, that covers one game-day batch more than
    the most batches a row of its inputs arrived late; and the lookback it has. (None, 1) otherwise."""
    import math

    config = first.project.manifest.nodes[uid].config
    get = config.get if hasattr(config, "get") else (lambda k, d=None: getattr(config, k, d))
    if str(get("incremental_strategy") or "").lower() != "microbatch":
        return None, 1
    now = get("lookback")
    now = now if isinstance(now, int) else 1
    size = SECONDS.get(str(get("batch_size") or "").lower())
    t = first.plan.facts.timeline if first.plan is not None else None
    if not size or t is None or t.batch.months or not late_batches(first, uid):
        return None, now
    return math.ceil((late_batches(first, uid) + 1) * t.batch.delta.total_seconds() / size), now
