"""Pure logic: what a difference means, and who is the root cause."""
import datetime as dt
from dataclasses import replace
from types import SimpleNamespace

import pytest

from rerun_safety.diff import DiffResult
from rerun_safety.gameday.lineage import computed_columns
from rerun_safety.gameday.verdict import (Isolation, chance_scenarios, explained_by_nondeterminism, reaches, root_causes,
                                          scenario_verdict, verdict_of)
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


def test_a_random_sample_is_nondeterministic_whatever_rows_the_replays_keep():
    """`where random() < 0.5`: two clean builds keep other rows (and another count), so rows lost,
    added or changed in a replay are that same chance, not a loss; a key kept twice is not."""
    cols = ("amount", "order_id")
    sample = r("determinism", "nondeterministic", reference_rows=138, rows=156, extra_rows=80, missing_rows=62,
               changed_rows=62, differing_columns=cols, volatile_columns=cols)
    fewer = r("partial", "loss", reference_rows=138, rows=120, extra_rows=50, missing_rows=68, changed_rows=50,
              differing_columns=cols)
    more = r("replay", "drift", reference_rows=138, rows=142, extra_rows=80, missing_rows=76, changed_rows=76,
             differing_columns=cols)
    assert verdict_of([r("reference", "safe"), more, fewer, sample]) == ("nondeterministic", ())
    copied = r("rerun", "duplicates", reference_rows=138, rows=150, extra_rows=12, duplicate_keys=12)
    assert verdict_of([sample, more, copied]) == ("duplicates", ())
    # the same counts without the sample's row-level difference (values only) stay a loss
    values = r("determinism", "nondeterministic", changed_rows=4, extra_rows=4, missing_rows=4,
               differing_columns=("amount",), volatile_columns=("amount",))
    assert verdict_of([values, fewer]) == ("loss", ("amount",))


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
    roots, contaminated, inconclusive = root_causes(verdicts, parents)
    assert roots == {"bad"}
    assert contaminated == {"agg": {"bad"}, "agg2": {"bad"}}


def test_root_cause_is_per_scenario():
    # `child` differs only where its parent matches: it is a root cause of its own
    parents = {"parent": (), "child": ("parent",)}
    verdicts = {"parent": {"replay": "duplicates", "partial": "safe"},
                "child": {"replay": "safe", "partial": "loss"}}
    roots, contaminated, inconclusive = root_causes(verdicts, parents)
    assert roots == {"parent", "child"}
    assert contaminated == {}


class _Models:
    def __init__(self, names):
        self.models = {n: type("M", (), {"name": n})() for n in names}


class _Plan:
    def __init__(self, names, computed):
        self.project = _Models(names)
        self.facts = SimpleNamespace(computed_columns=computed, row_columns={})  # what the reference's SQL taught


def test_contaminated_only_where_the_isolation_showed_it():
    """`scd` differs below `stg` (which differs). In isolation `stg` still differs: the replay could not
    put it back. Where the columns `scd` differs in are its own computation from columns that do not
    differ in `stg`, it is a root cause; where it differs in a column carried from `stg`, or in rows,
    nothing is shown: inconclusive, never contaminated."""
    parents = {"stg": (), "scd": ("stg",), "final": ("scd",)}
    verdicts = {"stg": {"replay": "drift", "partial": "drift"}, "scd": {"replay": "drift", "partial": "loss"},
                "final": {"replay": "drift", "partial": "loss"}}
    plan = _Plan(["stg", "scd", "final"], {"scd": {"is_latest": frozenset({"customer_id", "occurred_at"}),
                                                    "amount2": frozenset({"amount"})}})
    stg_still = ScenarioResult("replay", "drift", rows=10, reference_rows=8, extra_keys=2)
    iso = Isolation()
    own = ScenarioResult("replay", "drift", rows=5, reference_rows=5, changed_rows=2, differing_columns=("is_latest",))
    iso.add(plan, "scd", "replay", {"scd": own, "stg": stg_still}, ("stg",))
    lost = ScenarioResult("partial", "loss", rows=4, reference_rows=5, missing_keys=1)
    iso.add(plan, "scd", "partial", {"scd": lost, "stg": replace(stg_still, name="partial")}, ("stg",))
    assert iso.own == {"scd": {"replay"}}
    assert list(iso.unshown["scd"]) == ["partial"] and "stg still differed" in iso.unshown["scd"]["partial"]
    roots, contaminated, inconclusive = root_causes(verdicts, parents, iso)
    assert roots == {"stg", "scd"}
    # a table over them is rebuilt from its parents; `scd`, its own defect shown in replay, inherits there too
    assert contaminated == {"final": {"scd", "stg"}, "scd": {"stg"}}

    # a column computed from a column that differs in the parent is not shown to be its own
    iso2 = Isolation()
    carried = replace(own, differing_columns=("amount2",))
    iso2.add(plan, "scd", "replay", {"scd": carried, "stg": replace(stg_still, differing_columns=("amount",))},
             ("stg",))
    assert iso2.own == {} and "scd" in iso2.unshown
    roots, contaminated, inconclusive = root_causes({"stg": {"replay": "drift"}, "scd": {"replay": "drift"}},
                                                    {"stg": (), "scd": ("stg",)}, iso2)
    assert roots == {"stg"} and contaminated == {}
    assert inconclusive["scd"].startswith("the isolated replay could not put its parents back")

    # shown: right in isolation on its parents' reference output
    iso3 = Isolation()
    iso3.add(plan, "scd", "replay", {"scd": replace(own, verdict="safe"), "stg": replace(stg_still, verdict="safe")},
             ("stg",))
    assert iso3.own == {} and iso3.unshown == {}
    roots, contaminated, inconclusive = root_causes({"stg": {"replay": "drift"}, "scd": {"replay": "drift"}},
                                                    {"stg": (), "scd": ("stg",)}, iso3)
    assert roots == {"stg"} and contaminated == {"scd": {"stg"}} and inconclusive == {}


def test_a_relation_a_hook_of_another_model_writes_is_inconclusive_not_a_root_cause():
    # `scd`'s post-hook deletes from `stg`: `stg` depends on `scd` as well (an edge), and no replay tells
    parents = {"stg": ("scd",), "scd": ("stg",)}
    verdicts = {"stg": {"replay": "drift"}, "scd": {"replay": "drift"}}
    iso = Isolation(own={"scd": {"replay"}})
    iso.unshown_in("stg", "replay", "its relation is also written by a hook of scd, which differs too")
    roots, contaminated, inconclusive = root_causes(verdicts, parents, iso)
    assert roots == {"scd"} and contaminated == {}
    assert inconclusive == {"stg": "its relation is also written by a hook of scd, which differs too"}


def test_computed_columns_follow_ctes_and_leave_carried_columns_out():
    sql = ("with a as (select id, cast(ts as date) as d, amount * 2 as dbl from t), "
           "b as (select a.*, count(*) over () as n from a) select id, d as day, dbl, n, "
           "row_number() over (partition by id order by ts) = 1 as is_first from b")
    assert computed_columns(sql, "duckdb") == {"dbl": frozenset({"amount"}), "n": frozenset(),
                                               "is_first": frozenset({"id", "ts"})}
    assert computed_columns("select * from t", "duckdb") == {}
    assert computed_columns("not sql at all (", "duckdb") == {}


@pytest.mark.parametrize("columns, expected", [
    ([("id", "INTEGER"), ("at", "TIMESTAMP")], "date or time columns: at; to replay by it: `time_columns: {raw.t: at}`"),
    # one timestamp beside a date: the timestamp; two timestamps: named, never guessed
    ([("day", "DATE"), ("at", "timestamp without time zone")],
     "date or time columns: day, at; to replay by it: `time_columns: {raw.t: at}`"),
    ([("a", "TIMESTAMP"), ("b", "TIMESTAMP WITH TIME ZONE")], "date or time columns: a, b"),
    ([("day", "date")], "date or time columns: day; to replay by it: `time_columns: {raw.t: day}`"),
    ([("id", "integer")], ""),
])
def test_time_column_hint_fills_in_the_line_only_for_one_candidate(columns, expected):
    from rerun_safety.gameday.plan import time_column_hint

    assert time_column_hint("raw.t", columns) == expected


def _model(uid, materialized="table", parents=(), **kw):
    from rerun_safety.project import Model

    return Model(unique_id=uid, name=uid, fqn=(uid,), resource_type="model", materialized=materialized,
                 strategy="merge" if materialized == "incremental" else None, key=("id",), partition_key=None,
                 event_time=None, database=None, schema="main", identifier=uid, parents=parents, sources=(),
                 ignore_columns=(), window_driven=False, raw_code="select 1", **kw)


def test_a_table_differing_over_parents_that_all_match_is_its_own_nondeterminism():
    """Ties a row_number breaks by the order of an intermediate model's rows: after incremental runs that
    order is another, the model differs while its parent matches. Rebuilt at the reference's clock from
    the same rows, the difference can only be its own: nondeterministic there, not drift."""
    from rerun_safety.gameday.assemble import OWN_NONDETERMINISM, own_nondeterminism

    inc = _model("inc", "incremental")
    seq = _model("seq", parents=("inc",))
    below = _model("below", parents=("seq",))
    mystery = _model("mystery", parents=("inc",))
    via_table = _model("via", parents=("hidden",))
    models = {m.unique_id: m for m in (inc, seq, below, mystery, via_table)}
    models["hidden"] = _model("hidden", parents=("inc",))  # built, not judged
    judged = [inc, seq, below, mystery, via_table]
    drift = r("replay", "drift", changed_rows=3, extra_rows=3, missing_rows=3, differing_columns=("n",))
    safe = r("replay", "safe")
    by_model = {"inc": {"replay": safe, "partial": r("partial", "loss", rows=8, missing_rows=2, missing_keys=2)},
                "seq": {"replay": drift, "partial": replace(drift, name="partial")},
                "below": {"replay": drift}, "mystery": {"replay": drift}, "via": {"replay": drift}}
    graph = {"inc": (), "seq": ("inc",), "below": ("seq",), "mystery": ("inc",), "via": ("inc",)}
    out = own_nondeterminism(models, judged, by_model, graph, unknown={"mystery"})
    assert out["seq"]["replay"].verdict == "nondeterministic"
    assert out["seq"]["replay"].volatile_columns == ("n",) and out["seq"]["replay"].message == OWN_NONDETERMINISM
    # where its parent lost rows, the difference may be the parent's: left as it was
    assert out["seq"]["partial"].verdict == "drift"
    # below a parent that differs; reading something unknown (by name, a hook); a parent not judged
    assert [out[u]["replay"].verdict for u in ("below", "mystery", "via")] == ["drift"] * 3
    # an incremental model keeps state of its own: never excused this way
    out = own_nondeterminism(models, judged, {**by_model, "inc": {"replay": drift}}, graph, unknown=set())
    assert out["inc"]["replay"].verdict == "drift"


@pytest.mark.parametrize("package, name, hooks, meta, expected", [
    ("elementary", "dbt_run_results", "", {}, "Elementary's run records"),
    ("dbt_artifacts", "model_executions", "", {}, "dbt_artifacts' run records"),
    ("snowplow_web", "snowplow_web_incremental_manifest", "", {}, "an event package's incremental manifest"),
    ("shop", "run_log", "insert into {{ target.schema }}.run_log values (1)", {}, "written by the project's"),
    # a hook that grants or analyzes a model writes no rows into it
    ("shop", "orders", "grant select on {{ target.schema }}.orders to reporter", {}, ""),
    ("shop", "orders_log", "insert into {{ target.schema }}.orders_log_v2 values (1)", {}, ""),
    ("shop", "orders", "", {"rerun_safety": {"run_log": True}}, "declared a run log"),
    ("elementary", "dbt_run_results", "", {"rerun_safety": {"run_log": False}}, ""),
])
def test_run_logs_are_known_by_package_hook_or_declaration(package, name, hooks, meta, expected):
    from rerun_safety.project import run_log_reason

    node = SimpleNamespace(meta=meta, config=SimpleNamespace(get=lambda k, d=None: None))
    assert run_log_reason(node, package, name, name, hooks).startswith(expected)
    assert bool(run_log_reason(node, package, name, name, hooks)) is bool(expected)


def test_own_defect_beside_a_parent_whose_values_alone_differ():
    """A daily history carrying each field forward (its own defect: the status column) below a pivot whose
    only difference is the order of a string_agg of labels. The isolated replay cannot put the pivot back
    (it is nondeterministic), but the model picks and pairs no row by `labels`: its status is its own."""
    from rerun_safety.gameday.lineage import computed_columns, row_columns

    sql = ("with days as (select issue_id, day, last_value(status ignore nulls) over (partition by issue_id "
           "order by day) as status from changes) select d.issue_id, d.day, d.status, p.labels from days d "
           "join pivot p on p.issue_id = d.issue_id")
    facts = SimpleNamespace(computed_columns={"hist": computed_columns(sql, "duckdb")},
                            row_columns={"hist": row_columns(sql, "duckdb")})
    plan = SimpleNamespace(facts=facts, project=SimpleNamespace(models={"pivot": SimpleNamespace(name="pivot")}))
    pivot = r("replay", "drift", changed_rows=4, extra_rows=4, missing_rows=4, differing_columns=("labels",))
    hist = r("replay", "drift", changed_rows=6, extra_rows=6, missing_rows=6, differing_columns=("status", "labels"))
    iso = Isolation()
    iso.add(plan, "hist", "replay", {"hist": hist, "pivot": pivot}, ("pivot",))
    assert iso.own == {"hist": {"replay"}} and iso.unshown == {}
    # only the carried labels differ: that may be the pivot's alone
    iso = Isolation()
    iso.add(plan, "hist", "replay", {"hist": replace(hist, differing_columns=("labels",)), "pivot": pivot}, ("pivot",))
    assert iso.own == {} and "hist" in iso.unshown
    # joined on the labels: the pivot's values decide which rows pair, so nothing can be told
    joined = sql.replace("p.issue_id = d.issue_id", "p.labels = d.status")
    facts.row_columns["hist"] = row_columns(joined, "duckdb")
    iso = Isolation()
    iso.add(plan, "hist", "replay", {"hist": hist, "pivot": pivot}, ("pivot",))
    assert iso.own == {} and "hist" in iso.unshown
    # a parent that lost rows may explain anything below it
    facts.row_columns["hist"] = row_columns(sql, "duckdb")
    iso = Isolation()
    iso.add(plan, "hist", "replay", {"hist": hist, "pivot": replace(pivot, rows=8, missing_rows=6, missing_keys=2)},
            ("pivot",))
    assert iso.own == {}


def test_a_parent_differing_in_values_the_model_pairs_no_row_by_reaches_only_what_it_carries():
    # issue_enhanced differs in `sprint` only; project_enhanced groups by project_id and computes
    # `components` from component_name: nothing of its difference can come from there
    parent = ScenarioResult("determinism", "nondeterministic", rows=9, reference_rows=9, extra_rows=1,
                            missing_rows=1, changed_rows=1, differing_columns=("sprint",))
    own = ScenarioResult("determinism", "nondeterministic", rows=2, reference_rows=2, extra_rows=1, missing_rows=1,
                         changed_rows=1, differing_columns=("components",))
    computed = {"components": frozenset({"component_name"}), "issues": frozenset({"issue_id"})}
    assert not reaches(own, parent, computed, frozenset({"project_id", "issue_id"}))
    # ... but a column it passes on (may be the sprint under another name), a column computed from the
    # sprint, a sprint it filters or joins on, a parent that lost rows, or SQL not understood: it may
    assert reaches(replace(own, differing_columns=("sprint_list",)), parent, computed, frozenset({"project_id"}))
    assert reaches(replace(own, differing_columns=("n",)), parent, {"n": frozenset({"sprint"})}, frozenset())
    assert reaches(own, parent, computed, frozenset({"sprint"}))
    assert reaches(own, replace(parent, rows=8, missing_rows=2, verdict="loss"), computed, frozenset())
    assert reaches(own, parent, computed, None)
    assert not reaches(own, replace(parent, verdict="safe"), computed, None)


def test_a_nondeterministic_root_contaminates_only_what_nondeterminism_explains():
    # pivot: a string_agg's order (chance everywhere); daily: its own loss in partial beside the order it
    # carries (chance in replay); history: a key lost in partial only, below daily; view: pivot's order only
    parents = {"pivot": (), "daily": ("pivot",), "history": ("daily",), "view": ("pivot",)}
    verdicts = {"pivot": {"replay": "drift", "partial": "drift", "determinism": "nondeterministic"},
                "daily": {"replay": "drift", "partial": "loss", "determinism": "nondeterministic"},
                "history": {"replay": "safe", "partial": "loss", "determinism": "safe"},
                "view": {"replay": "drift", "partial": "drift", "determinism": "nondeterministic"}}
    chance = {"pivot": {"replay", "partial", "determinism"}, "daily": {"replay", "determinism"},
              "view": {"replay", "partial", "determinism"}}
    iso = Isolation(own={"daily": {"partial"}})
    roots, contaminated, _ = root_causes(verdicts, parents, iso, chance)
    assert roots == {"pivot", "daily"}
    assert contaminated == {"daily": {"pivot"}, "history": {"daily"}, "view": {"pivot"}}
    # without knowing what chance explains, the pivot is blamed for the lost key too (as before)
    assert root_causes(verdicts, parents, iso)[1]["history"] == {"daily", "pivot"}
    # a parent whose difference cannot reach the model there passes nothing on
    roots, contaminated, _ = root_causes(verdicts, parents, iso, chance, {"view": {s: frozenset({"pivot"})
                                                                                for s in verdicts["view"]}})
    assert "view" not in contaminated and "view" in roots
    # through a model that matches there, nothing reaches
    verdicts2 = {**verdicts, "daily": {**verdicts["daily"], "partial": "safe"}}
    assert "history" not in root_causes(verdicts2, parents, Isolation(), chance)[1]


def test_a_parent_rebuilt_with_its_own_chance_again_leaves_the_models_own_loss_shown():
    """The isolation rebuilds a nondeterministic parent in full, which draws its chance again (a list in
    another order): it still differs there, but only as two clean builds of it do. The model's keys lost
    beside it are its own; the same list carried, and nothing more, shows nothing."""
    plan = _Plan(["pivot", "daily"], {})
    plan.facts.row_columns = {"daily": frozenset({"sprint", "issue_id"})}  # it joins on the list too
    order = dict(rows=5, reference_rows=5, extra_rows=1, missing_rows=1, changed_rows=1, differing_columns=("sprint",))
    shown = {"pivot": ({"sprint"}, False, {"sprint"}), "daily": ({"sprint"}, False, {"sprint"})}
    pivot = ScenarioResult("partial", "drift", order_only_columns=("sprint",), **order)
    lost = ScenarioResult("partial", "loss", rows=237, reference_rows=381, missing_rows=146, extra_rows=2,
                          changed_rows=2, missing_keys=144, differing_columns=("sprint",), order_only_columns=())
    iso = Isolation()
    iso.add(plan, "daily", "partial", {"daily": lost, "pivot": pivot}, ("pivot",), shown)
    assert iso.own == {"daily": {"partial"}}
    carried = ScenarioResult("replay", "drift", order_only_columns=("sprint",), **order)
    iso.add(plan, "daily", "replay", {"daily": carried, "pivot": replace(pivot, name="replay")}, ("pivot",), shown)
    assert iso.own == {"daily": {"partial"}} and "replay" in iso.unshown["daily"]
    # a parent that differs beyond its chance (other values) still leaves the loss unshown
    other = replace(pivot, order_only_columns=())
    iso2 = Isolation()
    iso2.add(plan, "daily", "partial", {"daily": lost, "pivot": other}, ("pivot",), shown)
    assert iso2.own == {} and "partial" in iso2.unshown["daily"]
    # without what the builds showed (no nondeterminism known), as before: unshown
    iso3 = Isolation()
    iso3.add(plan, "daily", "partial", {"daily": lost, "pivot": pivot}, ("pivot",))
    assert iso3.own == {} and "partial" in iso3.unshown["daily"]


def test_a_list_read_in_another_order_excuses_only_another_order():
    # determinism: `sprint` differs only in its list's order; partial: `4` against `1, 3, 4`
    det = ScenarioResult("determinism", "nondeterministic", rows=5, reference_rows=5, extra_rows=1, missing_rows=1,
                         changed_rows=1, differing_columns=("sprint",), volatile_columns=("sprint",),
                         order_only_columns=("sprint",))
    order = ScenarioResult("replay", "drift", rows=5, reference_rows=5, extra_rows=1, missing_rows=1, changed_rows=1,
                           differing_columns=("sprint",), order_only_columns=("sprint",))
    values = replace(order, name="partial", order_only_columns=())
    assert verdict_of([det, order]) == ("nondeterministic", ("sprint",))
    assert verdict_of([det, order, values]) == ("drift", ("sprint",))
    assert chance_scenarios({"determinism": det, "replay": order, "partial": values}) == {"determinism", "replay"}
    assert not explained_by_nondeterminism(values, {"sprint"}, False, {"sprint"})
    # a column whose two clean builds differed in its values (a tie broken otherwise) is excused by name
    tie = replace(det, order_only_columns=())
    assert verdict_of([tie, values]) == ("nondeterministic", ("sprint",))


def test_a_long_list_folds_into_one_short_line():
    from rerun_safety.errors import folded

    assert folded(["a", "b"]) == "a, b"
    assert folded([f"seed s{i}" for i in range(104)], 3) == "seed s0, seed s1, seed s2 and 101 more"
