"""Pure logic: what a difference means, and who is the root cause."""
import datetime as dt

import pytest

from rerun_safety.diff import DiffResult
from rerun_safety.gameday.verdict import root_causes, scenario_verdict, verdict_of
from rerun_safety.results import ScenarioResult


def d(**kw):
    base = dict(reference_rows=10, rows=10, identical=False)
    base.update(kw)
    return DiffResult(**base)


@pytest.mark.parametrize("diff, scenario, expected", [
    (d(identical=True), "replay", "safe"),
    (d(extra_rows=3), "determinism", "nondeterministic"),
    (d(keyed=True, missing_keys=2, duplicate_keys=5, rows=13), "partial", "loss"),
    (d(keyed=True, duplicate_keys=5, rows=15, extra_rows=5), "replay", "duplicates"),
    (d(keyed=True, changed_rows=1, extra_rows=1, missing_rows=1), "replay", "drift"),
    (d(rows=8, missing_rows=2), "replay", "loss"),
    (d(rows=12, extra_rows=2, extra_copies=2), "rerun", "duplicates"),
    (d(rows=10, extra_rows=2, missing_rows=2, changed_rows=2), "rerun", "drift"),
    (d(schema_message="columns differ: +x"), "replay", "drift"),
    # copies of some rows make the table larger, yet others were lost: loss outranks duplicates
    (d(reference_rows=59368, rows=63805, extra_rows=5103, missing_rows=666, extra_copies=5103), "partial", "loss"),
    # two copies beside two changed rows (their new versions are no copies): duplicates, nothing lost
    (d(reference_rows=10, rows=12, extra_rows=4, missing_rows=2, extra_copies=2), "rerun", "duplicates"),
])
def test_scenario_verdict(diff, scenario, expected):
    assert scenario_verdict(scenario, diff) == expected


def r(name, verdict, **kw):
    return ScenarioResult(name, verdict, **{"reference_rows": 10, "rows": 10, **kw})


def test_model_verdict_is_the_worst():
    assert verdict_of([r("replay", "duplicates"), r("partial", "loss"), r("rerun", "safe")]) == ("loss", ())
    assert verdict_of([r("replay", "safe"), r("rerun", "skipped")]) == ("safe", ())
    assert verdict_of([]) == ("skipped", ())


# the determinism scenario: the list column differs between two builds of the same data
LISTS = r("determinism", "nondeterministic", changed_rows=4, extra_rows=4, missing_rows=4,
          differing_columns=("names",), volatile_columns=("names",))


def test_nondeterminism_never_hides_another_defect():
    # a stale total beside the list: the drift is the verdict, the list named beside it
    stale = r("replay", "drift", changed_rows=3, extra_rows=3, missing_rows=3, differing_columns=("names", "total"))
    assert verdict_of([LISTS, stale]) == ("drift", ("names",))
    # a loss in the half-committed batch (keys missing): the loss, whatever the list does
    lost = r("partial", "loss", rows=8, missing_rows=2, missing_keys=2, differing_columns=("names",))
    assert verdict_of([LISTS, lost, r("replay", "safe")]) == ("loss", ("names",))
    # a replay that differs only in the list's values, rows as in the reference: the nondeterminism itself
    order = r("replay", "drift", changed_rows=2, extra_rows=2, missing_rows=2, differing_columns=("names",))
    assert verdict_of([LISTS, order]) == ("nondeterministic", ("names",))
    # nondeterminism found in another scenario (an aggregate's order, see order_only) counts as well
    assert verdict_of([LISTS, r("rerun", "nondeterministic", volatile_columns=("names",))]) == \
        ("nondeterministic", ("names",))


def test_nondeterminism_of_whole_rows_stays_the_verdict():
    """A `limit` without a total order picks other rows: no column explains it, so nothing can be told
    apart from it."""
    rows = r("determinism", "nondeterministic", extra_rows=3, missing_rows=3)
    assert verdict_of([rows, r("replay", "drift", extra_rows=3, missing_rows=3, changed_rows=3,
                                 differing_columns=("id",))]) == ("nondeterministic", ())


def test_root_cause_and_contamination():
    parents = {"stg": (), "bad": ("stg",), "agg": ("bad",), "agg2": ("agg",), "ok": ("stg",), "mix": ("ok", "bad")}
    verdicts = {
        "stg": {"replay": "safe"},
        "bad": {"replay": "duplicates"},
        "agg": {"replay": "drift"},
        "agg2": {"replay": "drift"},
        "ok": {"replay": "safe"},
        "mix": {"replay": "safe"},
    }
    roots, contaminated = root_causes(verdicts, parents)
    assert roots == {"bad"}
    assert contaminated == {"agg": {"bad"}, "agg2": {"bad"}}


def test_root_cause_is_per_scenario():
    # `child` differs only where its parent matches: it is a root cause of its own
    parents = {"parent": (), "child": ("parent",)}
    verdicts = {"parent": {"replay": "duplicates", "partial": "safe"},
                "child": {"replay": "safe", "partial": "loss"}}
    roots, contaminated = root_causes(verdicts, parents)
    assert roots == {"parent", "child"}
    assert contaminated == {}
