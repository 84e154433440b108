"""The lint's note on two runs at once: which incremental models keep a batch twice when two runs of it overlap."""
from __future__ import annotations

from ..project import display_name
from .nodes import config_get, hooks, is_incremental


def overlap_note(manifest, selected, adapter: str) -> str | None:
    """On an engine where two runs of one model can overlap (PostgreSQL), the incremental models whose writes
    do not wait for one another: two runs of a batch at once keep it twice with dbt's delete+insert, merge,
    append or microbatch (tests/strategy/test_overlap.py). A note, not a finding: whether runs overlap is the
    orchestrator's, not the SQL's."""
    from ..warehouse.dialects import dialect_for

    dialect = dialect_for(adapter)
    if dialect.overlapping_runs is not None:
        return None
    open_ = []
    for uid in sorted(selected):
        node = manifest.nodes.get(uid)
        if not is_incremental(node):
            continue
        strategy = str(config_get(node, "incremental_strategy") or "append").lower()
        if strategy == "partition_overwrite" and config_get(node, "serialize_runs") is not False:
            continue  # it takes the run lock itself
        if any("serialize_runs" in h for h in hooks(node, "pre_hook")):
            continue
        open_.append(f"{display_name(node)} ({strategy})")
    if not open_:
        return None
    shown = ", ".join(open_[:10]) + (f" and {len(open_) - 10} more" if len(open_) > 10 else "")
    return (f"two runs at once ({dialect.display_name}): {len(open_)} incremental model(s) whose runs do not wait for "
            f"one another keep a batch twice when two runs of it overlap (a retry beside a run that did not die, "
            f"a backfill during the schedule): {shown}; `pre_hook='{{{{ rerun_safety.serialize_runs() }}}}'` (or "
            "partition_overwrite) makes a second run wait; the game day's concurrent scenario replays it")
