"""The game day: replay every incremental model in sandboxes and judge it against a clean reference.

The public face: `run_gameday(GamedayOptions.build(...))` returns a `GamedayReport` (rerun_safety.results).
Inside: `options` (what the user asked), `scenarios` (the simulated schedule, pure), `plan` (what is built,
what arrives when), `rebuild` (what a scenario builds beyond its stateful models), `core` (the runs),
`workers` (scenarios in worker processes), `verdict` and `assemble` (from diffs to verdicts and the report),
`side_effects`, `order_only`, `lineage`, `by_name`, `preflight` (what the game day checks besides).
"""
from .core import Gameday, run_gameday
from .options import GamedayOptions, default_threads

__all__ = ["Gameday", "GamedayOptions", "default_threads", "run_gameday"]
