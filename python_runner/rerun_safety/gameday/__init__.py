"""The game day: replay every incremental model in sandboxes and judge it against a clean reference.

The public face: `run_gameday(GamedayOptions.build(...))` returns a `GamedayReport` (rerun_safety.results).
Inside (a map with each module's test and doc: docs/gameday.md, "The code: a map"): `options` (what the
user asked), `plan` and `facts` (the frozen plan and what the data taught), `scenarios` (one class per
scenario: steps, what decides it, how it runs and judges), `timeline` and `by_name` (the schedule and the
inputs, from the snapshot), `reference` (what the reference build teaches), `core` (the stages),
`replay` (one chain of scenarios in a sandbox) and `workers`, `rebuild`/`reorder`/`sandbox_data` (what a
scenario builds and writes), `judge`/`verdict`/`order_only`/`side_effects` (from diffs to verdicts),
`assemble` (the report), `lineage`, `preflight`, `runs`, `cost`.
"""
from .core import Gameday, run_gameday
from .options import GamedayOptions, default_threads

__all__ = ["Gameday", "GamedayOptions", "default_threads", "run_gameday"]
