"""`partition_overwrite` on real DuckDB and PostgreSQL: exact row multisets after reruns,
overlapping batches, NULL partitions, static partitions, empty batches, granularities, composite
keys, a failure after the delete, and bad configs.

Every case has its own model (and raw table) in one project per engine, so the cases share dbt
invocations: one full-refresh build of every model, then incremental runs, each selecting the
models whose case has a batch at that run (a run with --target notx for the one case that needs
it). After each run the exact row multiset of every model it selected, and each model's status
and message, are recorded; each test asserts its own case on those records.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

import pytest

from _po_project import make_project, model_sql

TS_COLS = "id integer, ts timestamp, v integer"
P_COLS = "id integer, p varchar(20), v integer"
AB_COLS = "id integer, a integer, b varchar(10), v integer"

DAY = "partition_key={'field': 'ts', 'granularity': 'day'}"
STATIC = "partition_key='p', partitions=[\"o'brien\", 'b', none]"


def ts(day, hour=0, month=1):
    return dt.datetime(2024, month, day, hour)


def day_rows(days, version, per_day=3):
    """Rows for the given days; `version` changes the values so replaced rows are told apart."""
    return [(d * 100 + i, ts(d, i), version * 1000 + d * 10 + i) for d in days for i in range(per_day)]


# The runs, in order: "full" builds every model with --full-refresh; "notx" runs on the target
# with transactions off; the others are incremental runs on the default target.
RUNS = ("full", "inc1", "notx", "inc2", "inc3")


@dataclass
class Case:
    """A model, its raw table's columns, and the raw rows it is given before each run it takes part in."""

    config: str
    cols: str
    batches: dict = field(default_factory=dict)  # run -> rows of raw_<model> for that run
    before: dict = field(default_factory=dict)  # run -> SQL run on the warehouse before that run


# ---------------------------------------------------------------------------------------- data
SAME_FIRST, SAME_BATCH = day_rows([1, 2, 3], version=1), day_rows([2, 3], version=2)

# Late data: days 3-4 are restated by the second batch, with one more row on day 4.
OVERLAP_FULL = day_rows([1, 2], 1) + day_rows([3, 4, 5, 6], 2) + [(499, ts(4, 23), 7)]

NULLS_FIRST = [(1, None, 1), (2, None, 2), (3, "a", 3), (4, "b", 4)]
NULLS_BATCH = [(5, None, 5), (6, None, 6), (7, None, 7), (8, "a", 8)]

EMPTY_COL_FIRST = [(1, None, 1), (2, "a", 2), (3, "b", 3)]

STATIC_FIRST = [(1, "o'brien", 1), (2, "b", 2), (3, "c", 3), (4, None, 4), (5, "c", 5)]
STATIC_BATCH = [(6, "o'brien", 6), (7, None, 7), (8, None, 8)]
REJECT_FIRST = [(1, "o'brien", 1), (2, "b", 2), (3, "c", 3)]

STATIC_DAY_FIRST, STATIC_DAY_BATCH = day_rows([1, 2, 3, 4], 1), day_rows([2], 2, per_day=2)

JAN = [(i, ts(i + 1, 1, month=1), i) for i in range(5)]
FEB = [(10 + i, ts(i + 1, 2, month=2), i) for i in range(5)]
MAR = [(20 + i, ts(i + 1, 3, month=3), i) for i in range(2)]
HOURS = [(i, dt.datetime(2024, 1, 1, i // 4, (i % 4) * 15), i) for i in range(16)]  # hours 0-3
DAYS = day_rows([1, 2, 3], 1, per_day=4)
MONTH_BATCH = [(99, ts(28, 23, month=2), 99)]  # one row replaces all of February
HOUR_BATCH = [(100, dt.datetime(2024, 1, 1, 2, 59, 59), 100), (101, dt.datetime(2024, 1, 1, 5, 0), 101)]
DAY_BATCH = [(999, ts(2, 23), 5)]

COLS_FIRST = [(1, 1, "x", 1), (2, 1, "y", 2), (3, None, "x", 3), (4, None, None, 4), (5, 2, None, 5)]
COLS_BATCH = [(6, 1, "x", 6), (7, None, None, 7), (8, 3, "z", 8)]

PRED_FIRST = [(1, "a", 1), (2, "a", 500), (3, "b", 3)]
NOTNULL_FIRST = [(1, "a", 1), (2, "a", 2), (3, "b", 3)]
NOTX_FIRST = [(1, "a", 1), (2, "b", 2)]
BAD_FIRST = [(1, "a", 1), (2, "b", 2)]

CASES = {
    # the same batch three times equals once
    "po_same": Case(DAY, TS_COLS, {"full": SAME_FIRST, "inc1": SAME_BATCH, "inc2": SAME_BATCH,
                                   "inc3": SAME_BATCH}),
    # overlapping batches converge to a full build of the same data (po_overlap_full)
    "po_overlap": Case(DAY, TS_COLS, {"full": day_rows([1, 2, 3, 4], 1),
                                      "inc1": day_rows([3, 4, 5], 2) + [(499, ts(4, 23), 7)],
                                      "inc2": day_rows([5, 6], 2)}),
    "po_overlap_full": Case(DAY, TS_COLS, {"full": OVERLAP_FULL}),
    "po_nulls": Case("partition_key='p'", P_COLS, {"full": NULLS_FIRST, "inc1": NULLS_BATCH,
                                                   "inc2": NULLS_BATCH, "inc3": NULLS_BATCH}),
    "po_empty_col": Case("partition_key='p'", P_COLS, {"full": EMPTY_COL_FIRST, "inc1": []}),
    "po_empty_day": Case(DAY, TS_COLS, {"full": day_rows([1, 2], 1), "inc1": []}),
    "po_static": Case(STATIC, P_COLS, {"full": STATIC_FIRST, "inc1": STATIC_BATCH, "inc2": STATIC_BATCH}),
    "po_static_reject": Case(STATIC, P_COLS, {"full": REJECT_FIRST, "inc1": [(6, "o'brien", 6), (7, "zz", 7)]}),
    "po_static_day": Case(DAY + ", partitions=['2024-01-02', '2024-01-03']", TS_COLS,
                          {"full": STATIC_DAY_FIRST, "inc1": STATIC_DAY_BATCH, "inc2": day_rows([2, 5], 3)}),
    "po_month": Case("partition_key={'field': 'ts', 'granularity': 'month'}", TS_COLS,
                     {"full": JAN + FEB + MAR, "inc1": MONTH_BATCH}),
    "po_hour": Case("partition_key={'field': 'ts', 'granularity': 'hour'}", TS_COLS,
                    {"full": HOURS, "inc1": HOUR_BATCH}),
    "po_day": Case(DAY, TS_COLS, {"full": DAYS, "inc1": DAY_BATCH}),
    "po_cols": Case("partition_key=['a', 'B']", AB_COLS, {"full": COLS_FIRST, "inc1": COLS_BATCH,
                                                          "inc2": COLS_BATCH, "inc3": COLS_BATCH}),
    "po_pred": Case("partition_key='p', incremental_predicates=['DBT_INTERNAL_DEST.v < 100']", P_COLS,
                    {"full": PRED_FIRST, "inc1": [(4, "a", 4)]}),
    # partition 'a' is deleted by the statement, then the insert violates NOT NULL; then a valid batch
    "po_notnull": Case("partition_key='p'", P_COLS,
                       {"full": NOTNULL_FIRST, "inc1": [(4, "a", None), (5, "a", 5)], "inc2": [(5, "a", 5)]},
                       before={"inc1": "alter table po_notnull alter column v set not null"}),
    # refused on the target with transactions off, then the same batch on the default target
    "po_notx": Case("partition_key='p'", P_COLS, {"full": NOTX_FIRST, "notx": [(3, "a", 3)],
                                                  "inc2": [(3, "a", 3)]}),
}

BAD_CONFIGS = {
    "bad_missing": ("unique_key='id'", ["partition_key is not set", "partition_key='<column>'"]),
    "bad_column": ("partition_key='nope'",
                   ["partition_key names 'nope', which is not a column of the model (columns: id, p, v)",
                    "Set partition_key to one of them"]),
    "bad_columns": ("partition_key=['p', 'missing_col']",
                    ["partition_key names 'missing_col'", "Set partition_key to one of them"]),
    "bad_granularity": ("partition_key={'field': 'p', 'granularity': 'week'}",
                        ["partition_key granularity 'week' is unknown",
                         "Set 'granularity' to one of hour, day, month, year"]),
    "bad_partitions": ("partition_key='p', partitions='b'",
                       ["partitions must be a list of partition values", "got b."]),
    "bad_partitions_empty": ("partition_key='p', partitions=[]", ["partitions is an empty list", "remove partitions"]),
    "bad_dict": ("partition_key={'column': 'p'}", ["partition_key is a dict without a 'field' column name"]),
    "bad_field_type": ("partition_key={'field': 'p', 'granularity': 'day'}",
                       ["partition_key field 'p' is", "not a date or timestamp", "Use partition_key='p'"]),
}
# The first build of a bad-config model does not call the strategy; its incremental run fails.
for _name, (_config, _) in BAD_CONFIGS.items():
    CASES[_name] = Case(_config, P_COLS, {"full": BAD_FIRST, "inc1": [(3, "a", 3)]})


class Runs:
    """What each run did to each model it selected: status, message and rows afterwards."""

    def __init__(self):
        self.status: dict[tuple[str, str], tuple[str, str]] = {}
        self.rows: dict[tuple[str, str], Counter] = {}

    def after(self, model: str, run: str) -> Counter:
        """The model's rows after a run that must have succeeded for it."""
        status, message = self.status[(model, run)]
        assert status == "success", f"run {run} of {model}: {status}: {message}"
        return self.rows[(model, run)]

    def failed(self, model: str, run: str) -> tuple[str, Counter]:
        """The message of a run that must have failed for the model (not crashed), and its rows after."""
        status, message = self.status[(model, run)]
        assert status == "error", f"run {run} of {model} unexpectedly succeeded"
        return message, self.rows[(model, run)]


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def po(request, tmp_path_factory):
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    models = {name: model_sql(case.config) for name, case in CASES.items()}
    project = make_project(tmp_path_factory.mktemp(f"po_{request.param}"), request.param, models, pg_server=pg)
    yield project
    project.drop_warehouse()


@pytest.fixture(scope="module")
def runs(po) -> Runs:
    out = Runs()
    for run in RUNS:
        selected = [name for name, case in CASES.items() if run in case.batches]
        for name in selected:
            if run in CASES[name].before:
                po.sql(CASES[name].before[run])
        po.fill_raws({name: (CASES[name].cols, CASES[name].batches[run]) for name in selected})
        extra = {"full": ["--full-refresh"], "notx": ["--target", "notx"]}.get(run, [])
        ok, messages, exc = po.dbt("run", "--select", *selected, *extra)
        assert exc is None, f"dbt crashed in run {run} instead of failing a model: {exc} {messages}"
        assert set(po.last_by_node) == set(selected), (run, sorted(po.last_by_node))
        assert ok == all(status == "success" for status, _ in po.last_by_node.values()), (run, messages)
        out.status.update({(name, run): po.last_by_node[name] for name in selected})
        out.rows.update({(name, run): rows for name, rows in po.rows_of(selected).items()})
    return out


def test_same_batch_three_times_equals_once(runs):
    expected = Counter(day_rows([1], 1) + SAME_BATCH)
    assert runs.after("po_same", "full") == Counter(SAME_FIRST)
    assert runs.after("po_same", "inc1") == expected
    for run in ("inc2", "inc3"):
        assert runs.after("po_same", run) == expected
    assert sum(expected.values()) == 9


def test_overlapping_batches_converge_to_full_build(runs):
    runs.after("po_overlap", "inc1")
    incremental = runs.after("po_overlap", "inc2")
    full_build = runs.after("po_overlap_full", "full")
    assert incremental == full_build == Counter(OVERLAP_FULL)
    assert sum(incremental.values()) == 19


def test_null_partitions_do_not_duplicate(po, runs):
    for run in ("inc1", "inc2", "inc3"):
        assert runs.after("po_nulls", run) == Counter(NULLS_BATCH + [(4, "b", 4)])
    nulls = po.sql("select count(*) from po_nulls where p is null", fetch=True)[0][0]
    assert nulls == 3


def test_empty_batch_changes_nothing(runs):
    assert runs.after("po_empty_col", "inc1") == Counter(EMPTY_COL_FIRST)
    assert runs.after("po_empty_day", "inc1") == Counter(day_rows([1, 2], 1))


def test_static_partitions_replace_listed_partitions(runs):
    assert runs.after("po_static", "full") == Counter(STATIC_FIRST)
    # the listed partitions are replaced, also 'b' which the batch leaves empty (replaceWhere)
    expected = Counter(STATIC_BATCH + [(3, "c", 3), (5, "c", 5)])
    for run in ("inc1", "inc2"):
        assert runs.after("po_static", run) == expected


def test_static_partitions_reject_rows_outside_and_change_nothing(runs):
    assert runs.after("po_static_reject", "full") == Counter(REJECT_FIRST)
    message, rows = runs.failed("po_static_reject", "inc1")
    assert "model 'po_static_reject'" in message
    assert "a batch row has partition_key (p) = (zz), outside the static partitions" in message
    assert "Add it to partitions" in message
    assert rows == Counter(REJECT_FIRST)


def test_static_day_partitions(runs):
    assert runs.after("po_static_day", "full") == Counter(STATIC_DAY_FIRST)
    got = runs.after("po_static_day", "inc1")
    assert got == Counter(day_rows([1, 4], 1) + STATIC_DAY_BATCH)  # day 3 listed, absent from batch: emptied
    message, rows = runs.failed("po_static_day", "inc2")
    assert "outside the static partitions" in message
    assert rows == got


def test_granularities_month_hour_day(runs):
    """One batch per model, all three run in one dbt invocation."""
    assert runs.after("po_month", "full") == Counter(JAN + FEB + MAR)
    assert runs.after("po_hour", "full") == Counter(HOURS)
    assert runs.after("po_day", "full") == Counter(DAYS)
    assert runs.after("po_month", "inc1") == Counter(JAN + MAR + MONTH_BATCH)
    kept_hours = [r for r in HOURS if r[1].hour != 2]
    hour = runs.after("po_hour", "inc1")
    assert hour == Counter(kept_hours + HOUR_BATCH)
    assert sum(hour.values()) == 14
    assert runs.after("po_day", "inc1") == Counter(day_rows([1, 3], 1, per_day=4) + DAY_BATCH)


def test_list_of_columns_with_nulls(runs):
    assert runs.after("po_cols", "full") == Counter(COLS_FIRST)
    expected = Counter(COLS_BATCH + [(2, 1, "y", 2), (3, None, "x", 3), (5, 2, None, 5)])
    for run in ("inc1", "inc2", "inc3"):
        assert runs.after("po_cols", run) == expected


def test_incremental_predicates_limit_the_delete(runs):
    assert runs.after("po_pred", "full") == Counter(PRED_FIRST)
    # the predicate protects the row with v >= 100 from the delete
    assert runs.after("po_pred", "inc1") == Counter([(2, "a", 500), (3, "b", 3), (4, "a", 4)])


def test_failure_after_delete_leaves_target_unchanged(runs):
    assert runs.after("po_notnull", "full") == Counter(NOTNULL_FIRST)
    message, rows = runs.failed("po_notnull", "inc1")
    assert "not null" in message.lower() or "not-null" in message.lower()
    assert rows == Counter(NOTNULL_FIRST)
    # and the same statement succeeds once the batch is valid
    assert runs.after("po_notnull", "inc2") == Counter([(3, "b", 3), (5, "a", 5)])


@pytest.mark.parametrize("model", sorted(BAD_CONFIGS))
def test_bad_config_fails_clearly_and_changes_nothing(runs, model):
    assert runs.after(model, "full") == Counter(BAD_FIRST)
    message, rows = runs.failed(model, "inc1")
    assert "Compilation Error" in message
    assert f"partition_overwrite strategy, model '{model}'" in message
    for fragment in BAD_CONFIGS[model][1]:
        assert fragment in message
    assert message.count("partition_overwrite strategy, model") == 1
    assert rows == Counter(BAD_FIRST)


def test_refuses_when_transactions_are_off(po, runs):
    assert runs.after("po_notx", "full") == Counter(NOTX_FIRST)
    message, rows = runs.failed("po_notx", "notx")
    setting = "disable_transactions: true" if po.engine == "duckdb" else "autocommit: true"
    assert f"model 'po_notx': the profile sets {setting}" in message
    assert "pick another incremental_strategy" in message
    assert rows == Counter(NOTX_FIRST)
    assert runs.after("po_notx", "inc2") == Counter([(2, "b", 2), (3, "a", 3)])
