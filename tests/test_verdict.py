"""Pure logic: what a difference means, and who is the root cause."""
import datetime as dt

import pytest

from rerun_safety.diff import DiffResult
from rerun_safety.gameday.verdict import model_verdict, root_causes, scenario_verdict


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


def test_model_verdict_is_the_worst():
    assert model_verdict({"replay": "duplicates", "partial": "loss", "rerun": "safe"}) == "loss"
    assert model_verdict({"replay": "safe", "determinism": "nondeterministic", "partial": "loss"}) == "nondeterministic"
    assert model_verdict({"replay": "safe", "rerun": "skipped"}) == "safe"
    assert model_verdict({}) == "skipped"


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
