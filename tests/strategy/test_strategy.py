"""`partition_overwrite` on real DuckDB and PostgreSQL: exact row multisets after reruns,
overlapping batches, NULL partitions, static partitions, empty batches, granularities, composite
keys, a failure after the delete, and bad configs."""
from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from _po_project import make_project, model_sql

TS_COLS = "id integer, ts timestamp, v integer"
P_COLS = "id integer, p varchar(20), v integer"
AB_COLS = "id integer, a integer, b varchar(10), v integer"

MODELS = {
    "po_day": model_sql("partition_key={'field': 'ts', 'granularity': 'day'}"),
    "po_month": model_sql("partition_key={'field': 'ts', 'granularity': 'month'}"),
    "po_hour": model_sql("partition_key={'field': 'ts', 'granularity': 'hour'}"),
    "po_col": model_sql("partition_key='p'"),
    "po_cols": model_sql("partition_key=['a', 'B']"),
    "po_static": model_sql("partition_key='p', partitions=[\"o'brien\", 'b', none]"),
    "po_static_day": model_sql("partition_key={'field': 'ts', 'granularity': 'day'}, "
                               "partitions=['2024-01-02', '2024-01-03']"),
    "po_pred": model_sql("partition_key='p', incremental_predicates=['DBT_INTERNAL_DEST.v < 100']"),
    "po_notnull": model_sql("partition_key='p'"),
    "po_notx": model_sql("partition_key='p'"),
    "bad_missing": model_sql("unique_key='id'"),
    "bad_column": model_sql("partition_key='nope'"),
    "bad_columns": model_sql("partition_key=['p', 'missing_col']"),
    "bad_granularity": model_sql("partition_key={'field': 'p', 'granularity': 'week'}"),
    "bad_partitions": model_sql("partition_key='p', partitions='b'"),
    "bad_partitions_empty": model_sql("partition_key='p', partitions=[]"),
    "bad_dict": model_sql("partition_key={'column': 'p'}"),
    "bad_field_type": model_sql("partition_key={'field': 'p', 'granularity': 'day'}"),
}


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def po(request, tmp_path_factory):
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    project = make_project(tmp_path_factory.mktemp(f"po_{request.param}"), request.param, MODELS, pg_server=pg)
    yield project
    project.drop_warehouse()


def ts(day, hour=0, month=1):
    return dt.datetime(2024, month, day, hour)


def day_rows(days, version, per_day=3):
    """Rows for the given days; `version` changes the values so replaced rows are told apart."""
    return [(d * 100 + i, ts(d, i), version * 1000 + d * 10 + i) for d in days for i in range(per_day)]


def build(po, model, cols, rows, *extra):
    po.fill_raw(model, cols, rows)
    po.run(model, *extra)
    return po.rows(model)


def test_same_batch_three_times_equals_once(po):
    first = day_rows([1, 2, 3], version=1)
    batch = day_rows([2, 3], version=2)
    build(po, "po_day", TS_COLS, first, "--full-refresh")
    once = build(po, "po_day", TS_COLS, batch)
    expected = Counter(day_rows([1], 1) + batch)
    assert once == expected
    for _ in range(2):
        assert build(po, "po_day", TS_COLS, batch) == expected
    assert sum(expected.values()) == 9


def test_overlapping_batches_converge_to_full_build(po):
    # Late data: days 3-4 are restated by the second batch, with one more row on day 4.
    full = day_rows([1, 2], 1) + day_rows([3, 4, 5, 6], 2) + [(499, ts(4, 23), 7)]
    build(po, "po_day", TS_COLS, day_rows([1, 2, 3, 4], 1), "--full-refresh")
    build(po, "po_day", TS_COLS, day_rows([3, 4, 5], 2) + [(499, ts(4, 23), 7)])
    incremental = build(po, "po_day", TS_COLS, day_rows([5, 6], 2))
    full_build = build(po, "po_day", TS_COLS, full, "--full-refresh")
    assert incremental == full_build == Counter(full)
    assert sum(incremental.values()) == 19


def test_null_partitions_do_not_duplicate(po):
    first = [(1, None, 1), (2, None, 2), (3, "a", 3), (4, "b", 4)]
    batch = [(5, None, 5), (6, None, 6), (7, None, 7), (8, "a", 8)]
    build(po, "po_col", P_COLS, first, "--full-refresh")
    for _ in range(3):
        got = build(po, "po_col", P_COLS, batch)
        assert got == Counter(batch + [(4, "b", 4)])
    nulls = po.sql("select count(*) from po_col where p is null", fetch=True)[0][0]
    assert nulls == 3


def test_empty_batch_changes_nothing(po):
    first = [(1, None, 1), (2, "a", 2), (3, "b", 3)]
    po.fill_raw("po_col", P_COLS, first)
    po.fill_raw("po_day", TS_COLS, day_rows([1, 2], 1))
    po.run("po_col po_day", "--full-refresh")
    po.fill_raw("po_col", P_COLS, [])
    po.fill_raw("po_day", TS_COLS, [])
    po.run("po_col po_day")
    assert po.rows("po_col") == Counter(first)
    assert po.rows("po_day") == Counter(day_rows([1, 2], 1))


def test_static_partitions_replace_listed_partitions(po):
    first = [(1, "o'brien", 1), (2, "b", 2), (3, "c", 3), (4, None, 4), (5, "c", 5)]
    build(po, "po_static", P_COLS, first, "--full-refresh")
    batch = [(6, "o'brien", 6), (7, None, 7), (8, None, 8)]
    # the listed partitions are replaced, also 'b' which the batch leaves empty (replaceWhere)
    expected = Counter(batch + [(3, "c", 3), (5, "c", 5)])
    for _ in range(2):
        assert build(po, "po_static", P_COLS, batch) == expected


def test_static_partitions_reject_rows_outside_and_change_nothing(po):
    first = [(1, "o'brien", 1), (2, "b", 2), (3, "c", 3)]
    build(po, "po_static", P_COLS, first, "--full-refresh")
    po.fill_raw("po_static", P_COLS, [(6, "o'brien", 6), (7, "zz", 7)])
    message = po.run_fails("po_static")
    assert "model 'po_static'" in message
    assert "a batch row has partition_key (p) = (zz), outside the static partitions" in message
    assert "Add it to partitions" in message
    assert po.rows("po_static") == Counter(first)


def test_static_day_partitions(po):
    first = day_rows([1, 2, 3, 4], 1)
    build(po, "po_static_day", TS_COLS, first, "--full-refresh")
    batch = day_rows([2], 2, per_day=2)
    got = build(po, "po_static_day", TS_COLS, batch)
    assert got == Counter(day_rows([1, 4], 1) + batch)  # day 3 listed, absent from batch: emptied
    po.fill_raw("po_static_day", TS_COLS, day_rows([2, 5], 3))
    assert "outside the static partitions" in po.run_fails("po_static_day")
    assert po.rows("po_static_day") == got


def test_granularities_month_hour_day(po):
    """One batch per model, all three run in one dbt invocation."""
    jan = [(i, ts(i + 1, 1, month=1), i) for i in range(5)]
    feb = [(10 + i, ts(i + 1, 2, month=2), i) for i in range(5)]
    mar = [(20 + i, ts(i + 1, 3, month=3), i) for i in range(2)]
    hours = [(i, dt.datetime(2024, 1, 1, i // 4, (i % 4) * 15), i) for i in range(16)]  # hours 0-3
    days = day_rows([1, 2, 3], 1, per_day=4)
    po.fill_raw("po_month", TS_COLS, jan + feb + mar)
    po.fill_raw("po_hour", TS_COLS, hours)
    po.fill_raw("po_day", TS_COLS, days)
    po.run("po_month po_hour po_day", "--full-refresh")

    month_batch = [(99, ts(28, 23, month=2), 99)]  # one row replaces all of February
    hour_batch = [(100, dt.datetime(2024, 1, 1, 2, 59, 59), 100), (101, dt.datetime(2024, 1, 1, 5, 0), 101)]
    day_batch = [(999, ts(2, 23), 5)]
    po.fill_raw("po_month", TS_COLS, month_batch)
    po.fill_raw("po_hour", TS_COLS, hour_batch)
    po.fill_raw("po_day", TS_COLS, day_batch)
    po.run("po_month po_hour po_day")

    assert po.rows("po_month") == Counter(jan + mar + month_batch)
    kept_hours = [r for r in hours if r[1].hour != 2]
    assert po.rows("po_hour") == Counter(kept_hours + hour_batch)
    assert sum(po.rows("po_hour").values()) == 14
    assert po.rows("po_day") == Counter(day_rows([1, 3], 1, per_day=4) + day_batch)


def test_list_of_columns_with_nulls(po):
    first = [(1, 1, "x", 1), (2, 1, "y", 2), (3, None, "x", 3), (4, None, None, 4), (5, 2, None, 5)]
    build(po, "po_cols", AB_COLS, first, "--full-refresh")
    batch = [(6, 1, "x", 6), (7, None, None, 7), (8, 3, "z", 8)]
    expected = Counter(batch + [(2, 1, "y", 2), (3, None, "x", 3), (5, 2, None, 5)])
    for _ in range(3):
        assert build(po, "po_cols", AB_COLS, batch) == expected


def test_incremental_predicates_limit_the_delete(po):
    first = [(1, "a", 1), (2, "a", 500), (3, "b", 3)]
    build(po, "po_pred", P_COLS, first, "--full-refresh")
    batch = [(4, "a", 4)]
    # the predicate protects the row with v >= 100 from the delete
    assert build(po, "po_pred", P_COLS, batch) == Counter([(2, "a", 500), (3, "b", 3), (4, "a", 4)])


def test_failure_after_delete_leaves_target_unchanged(po):
    first = [(1, "a", 1), (2, "a", 2), (3, "b", 3)]
    build(po, "po_notnull", P_COLS, first, "--full-refresh")
    po.sql("alter table po_notnull alter column v set not null")
    # partition 'a' is deleted by the statement, then the insert violates NOT NULL
    po.fill_raw("po_notnull", P_COLS, [(4, "a", None), (5, "a", 5)])
    message = po.run_fails("po_notnull")
    assert "not null" in message.lower() or "not-null" in message.lower()
    assert po.rows("po_notnull") == Counter(first)
    # and the same statement succeeds once the batch is valid
    assert build(po, "po_notnull", P_COLS, [(5, "a", 5)]) == Counter([(3, "b", 3), (5, "a", 5)])


BAD_CONFIGS = {
    "bad_missing": ["partition_key is not set", "partition_key='<column>'"],
    "bad_column": ["partition_key names 'nope', which is not a column of the model (columns: id, p, v)",
                   "Set partition_key to one of them"],
    "bad_columns": ["partition_key names 'missing_col'", "Set partition_key to one of them"],
    "bad_granularity": ["partition_key granularity 'week' is unknown",
                        "Set 'granularity' to one of hour, day, month, year"],
    "bad_partitions": ["partitions must be a list of partition values", "got b."],
    "bad_partitions_empty": ["partitions is an empty list", "remove partitions"],
    "bad_dict": ["partition_key is a dict without a 'field' column name"],
    "bad_field_type": ["partition_key field 'p' is", "not a date or timestamp", "Use partition_key='p'"],
}


@pytest.fixture(scope="module")
def bad_config_run(po):
    """Build every bad-config model (the first build does not call the strategy), then run them
    all incrementally in one dbt invocation; return each model's status and message."""
    first = [(1, "a", 1), (2, "b", 2)]
    for model in BAD_CONFIGS:
        po.fill_raw(model, P_COLS, first)
    po.run(" ".join(BAD_CONFIGS), "--full-refresh")
    for model in BAD_CONFIGS:
        po.fill_raw(model, P_COLS, [(3, "a", 3)])
    ok, _, exc = po.dbt("run", "--select", *BAD_CONFIGS)
    assert not ok and exc is None
    return first, dict(po.last_by_node)


@pytest.mark.parametrize("model", sorted(BAD_CONFIGS))
def test_bad_config_fails_clearly_and_changes_nothing(po, bad_config_run, model):
    first, by_node = bad_config_run
    status, message = by_node[model]
    assert status == "error"
    assert "Compilation Error" in message
    assert f"partition_overwrite strategy, model '{model}'" in message
    for fragment in BAD_CONFIGS[model]:
        assert fragment in message
    assert message.count("partition_overwrite strategy, model") == 1
    assert po.rows(model) == Counter(first)


def test_refuses_when_transactions_are_off(po):
    first = [(1, "a", 1), (2, "b", 2)]
    build(po, "po_notx", P_COLS, first, "--full-refresh")
    po.fill_raw("po_notx", P_COLS, [(3, "a", 3)])
    message = po.run_fails("po_notx", "--target", "notx")
    setting = "disable_transactions: true" if po.engine == "duckdb" else "autocommit: true"
    assert f"model 'po_notx': the profile sets {setting}" in message
    assert "pick another incremental_strategy" in message
    assert po.rows("po_notx") == Counter(first)
    assert build(po, "po_notx", P_COLS, [(3, "a", 3)]) == Counter([(2, "b", 2), (3, "a", 3)])
