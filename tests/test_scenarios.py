"""Pure logic: the simulated schedule (batches at the user's cadence) and the scenarios' steps."""
import datetime as dt

import pytest

from rerun_safety.errors import ConfigError
from rerun_safety.gameday.scenarios import (Arrive, Batch, Reset, Run, common_steps, count_runs, make_timeline,
                                           scenario_steps)

D = dt.datetime


@pytest.mark.parametrize("text, label, delta, months", [
    ("day", "day", dt.timedelta(days=1), 0),
    ("hour", "hour", dt.timedelta(hours=1), 0),
    ("week", "week", dt.timedelta(weeks=1), 0),
    ("month", "month", None, 1),
    ("year", "year", None, 12),
    ("6h", "6h", dt.timedelta(hours=6), 0),
    ("2d", "2d", dt.timedelta(days=2), 0),
    (" 15M ", "15m", dt.timedelta(minutes=15), 0),
    ("3mo", "3mo", None, 3),
])
def test_batch_parse(text, label, delta, months):
    b = Batch.parse(text)
    assert (b.label, b.delta, b.months) == (label, delta, months)


@pytest.mark.parametrize("text", ["", "daily", "0d", "-1h", "1.5h", "d", "6 hours"])
def test_batch_parse_refuses(text):
    with pytest.raises(ConfigError, match="is not a batch"):
        Batch.parse(text)


def test_batch_alignment():
    assert Batch.parse("day").floor(D(2026, 3, 5, 17, 4)) == D(2026, 3, 5)
    assert Batch.parse("6h").floor(D(2026, 3, 5, 17, 4)) == D(2026, 3, 5, 12)
    assert Batch.parse("week").floor(D(2026, 3, 5, 17)) == D(2026, 3, 2)  # a Monday
    assert Batch.parse("month").floor(D(2026, 3, 31, 23)) == D(2026, 3, 1)
    assert Batch.parse("3mo").floor(D(2026, 8, 2)) == D(2026, 7, 1)
    assert Batch.parse("month").shift(D(2026, 11, 1), 3) == D(2027, 2, 1)
    assert Batch.parse("year").shift(D(2026, 1, 1), -2) == D(2024, 1, 1)
    assert Batch.parse("month").count(D(2025, 11, 1), D(2026, 3, 1)) == 4


def test_timeline_replays_the_last_batches():
    # six days of data, daily batches, 4 steps: the first build holds two days
    t = make_timeline(D(2026, 3, 1, 0, 2), D(2026, 3, 6, 23, 59), 4, "day")
    assert t.bounds == (D(2026, 3, 3), D(2026, 3, 4), D(2026, 3, 5), D(2026, 3, 6), D(2026, 3, 7))
    assert (t.steps, t.start, t.end) == (4, D(2026, 3, 1), D(2026, 3, 7))
    # windows overlap the previous batch by one batch
    assert t.window(1) == (D(2026, 3, 2), D(2026, 3, 4))
    assert t.window(4) == (D(2026, 3, 5), D(2026, 3, 7))


def test_timeline_holds_no_more_batches_than_the_data():
    t = make_timeline(D(2026, 3, 1, 5), D(2026, 3, 3, 1), 10, "day")
    assert t.steps == 2 and t.requested_steps == 10
    assert t.bounds == (D(2026, 3, 2), D(2026, 3, 3), D(2026, 3, 4))
    with pytest.raises(ConfigError, match="single day batch"):
        make_timeline(D(2026, 3, 1, 5), D(2026, 3, 1, 9), 4, "day")
    # monthly batches over a year and a half
    m = make_timeline(D(2025, 1, 15), D(2026, 6, 2), 3, "month")
    assert m.bounds == (D(2026, 4, 1), D(2026, 5, 1), D(2026, 6, 1), D(2026, 7, 1))


def test_an_input_that_ends_early_gets_its_own_last_batches():
    inputs = {"orders": (D(2026, 4, 11), D(2026, 5, 10, 12)), "clicks": (D(2026, 3, 20), D(2026, 3, 30, 7)),
              "late": (D(2026, 5, 1), D(2026, 5, 8, 3))}
    t = make_timeline(D(2026, 3, 20), D(2026, 5, 10, 12), 4, "day", inputs)
    assert t.bounds[0] == D(2026, 5, 7)
    assert t.bounds_for("clicks") == (D(2026, 3, 27), D(2026, 3, 28), D(2026, 3, 29), D(2026, 3, 30), D(2026, 3, 31))
    # an input with rows inside the replayed batches keeps the common schedule
    assert t.bounds_for("late") == t.bounds_for("orders") == t.bounds


def test_scenario_steps():
    t = make_timeline(D(2026, 3, 1), D(2026, 3, 6, 12), 4, "day")
    replay = scenario_steps("replay", t)
    assert [type(s).__name__ for s in replay] == ["Reset", "Run"] + ["Arrive", "Run"] * 4
    assert replay[0] == Reset()
    first = replay[1]
    assert (first.full_refresh, first.clock, first.window) == (True, D(2026, 3, 3), (D(2026, 3, 1), D(2026, 3, 3)))
    # each run sees the clock at the end of its batch
    assert [s.clock for s in replay if isinstance(s, Run)] == list(t.bounds)
    assert [s.index for s in replay if isinstance(s, Arrive)] == [1, 2, 3, 4]
    partial = scenario_steps("partial", t)
    assert [(s.index, s.part) for s in partial if isinstance(s, Arrive)] == [
        (1, None), (2, None), (3, "first"), (3, "rest"), (4, None)]
    rerun = scenario_steps("rerun", t)
    assert [s.label for s in rerun if isinstance(s, Run)][2:4] == ["batch 1, again", "batch 2"]
    backfill = scenario_steps("backfill", t)
    assert backfill[:-1] == replay  # backfill continues replay, so they can share a sandbox
    assert backfill[-1] == Run(False, t.window(1), "backfill of batch 1", t.end)
    ref = scenario_steps("reference", t)
    assert ref == [Run(True, (t.start, t.end), "full refresh", t.end)]
    assert count_runs(["reference", "replay", "rerun", "partial", "backfill", "determinism"], t) == 1 + 5 + 9 + 6 + 6 + 1


@pytest.mark.parametrize("steps, common, half", [(1, 2, 1), (2, 4, 2), (3, 4, 2), (4, 6, 3), (5, 6, 3), (6, 8, 4)])
def test_partial_is_replay_up_to_its_half_committed_batch(steps, common, half):
    """partial goes on from a copy of replay's sandbox (runs.branches): the steps they share end with the
    run of the batch before the half-committed one; after them, partial's own runs."""
    t = make_timeline(D(2026, 3, 1), D(2026, 3, 20), steps, "day")
    assert t.half_committed == half
    replay, partial = scenario_steps("replay", t), scenario_steps("partial", t)
    assert common_steps("replay", "partial", t) == common
    assert partial[:common] == replay[:common] and isinstance(partial[common - 1], Run)
    assert partial[common] == Arrive(half, "first") != replay[common]
    # what partial runs after the copy: the batch in halves (2) and the batches after it
    assert count_runs(["partial"], t, after=common) == 2 + steps - half
    assert common_steps("replay", "rerun", t) == 4  # the first build and batch 1, then "batch 1, again"
    assert common_steps("replay", "late", t) == 0  # late rows: the inputs are reset otherwise


def test_a_branch_needs_cheap_copies_and_a_run_beyond_the_shared_first_build():
    from types import SimpleNamespace

    from rerun_safety.gameday.runs import branches

    t4 = make_timeline(D(2026, 3, 1), D(2026, 3, 20), 4, "day")
    cheap, dear = (SimpleNamespace(dialect=SimpleNamespace(cheap_clones=c)) for c in (True, False))
    chains = ["replay+backfill", "rerun", "partial", "determinism"]
    assert branches(chains, cheap, t4) == {"replay+backfill": [("partial", 6)]}
    assert branches(chains, dear, t4) == {}  # (Spark: each scenario builds its own)
    assert branches(["rerun", "partial"], cheap, t4) == {}  # no replay to go on from
    # one step: partial shares only the first build with replay (shared anyway)
    assert branches(chains, cheap, make_timeline(D(2026, 3, 1), D(2026, 3, 20), 1, "day")) == {}


def test_late_steps_arrive_by_load_time():
    t = make_timeline(D(2026, 3, 1), D(2026, 3, 6, 12), 4, "day")
    late = scenario_steps("late", t)
    replay = scenario_steps("replay", t)
    assert late[0] == Reset(late=True) and replay[0] == Reset()
    assert [s for s in late if isinstance(s, Arrive)] == [Arrive(i, late=True) for i in (1, 2, 3, 4)]
    assert [s for s in late if isinstance(s, Run)] == [s for s in replay if isinstance(s, Run)]
