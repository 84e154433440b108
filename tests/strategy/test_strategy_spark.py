"""`partition_overwrite` on Spark (dbt-spark, parquet, the process's in-process Spark): the
multiset cases of test_strategy.py that Spark can express, plus what is Spark's own (the table is
partitioned by the key, dbt-spark's partition_by is read, and what Spark cannot do is refused
with one line).

Spark partitions by column values, so the day cases use a date column (partition_key='d' or
{'field': 'd', 'granularity': 'day'}, which is the same) instead of a timestamp with a granularity.
As in test_strategy.py, every case has its own model and raw input, and the cases share the dbt
invocations: one full-refresh build, then incremental runs.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from _po_project import SparkPoProject, make_project, model_sql
from support.spark import require_spark
from test_strategy import (
    COLS_BATCH, COLS_FIRST, NULLS_BATCH, NULLS_FIRST, P_COLS, AB_COLS, PRED_FIRST, REJECT_FIRST,
    STATIC, STATIC_BATCH, STATIC_FIRST, EMPTY_COL_FIRST, BAD_FIRST, Case,
)

D_COLS = "id int, d date, v int"
TS_COLS = "id int, ts timestamp, v int"
P_COLS_SPARK = P_COLS.replace("integer", "int").replace("varchar(20)", "string")
AB_COLS_SPARK = AB_COLS.replace("integer", "int").replace("varchar(10)", "string")


def day(d):
    return dt.date(2024, 1, d)


def date_rows(days, version, per_day=3):
    """Rows for the given days; `version` changes the values so replaced rows are told apart."""
    return [(d * 100 + i, day(d), version * 1000 + d * 10 + i) for d in days for i in range(per_day)]


SAME_FIRST, SAME_BATCH = date_rows([1, 2, 3], 1), date_rows([2, 3], 2)
OVERLAP_FULL = date_rows([1, 2], 1) + date_rows([3, 4, 5, 6], 2) + [(499, day(4), 7)]
STATIC_DAY_FIRST, STATIC_DAY_BATCH = date_rows([1, 2, 3, 4], 1), date_rows([2], 2, per_day=2)

RUNS = ("full", "inc1", "inc2", "inc3")

CASES = {
    "po_same": Case("partition_key={'field': 'd', 'granularity': 'day'}", D_COLS,
                    {"full": SAME_FIRST, "inc1": SAME_BATCH, "inc2": SAME_BATCH, "inc3": SAME_BATCH}),
    "po_overlap": Case("partition_key='d'", D_COLS, {"full": date_rows([1, 2, 3, 4], 1),
                                                     "inc1": date_rows([3, 4, 5], 2) + [(499, day(4), 7)],
                                                     "inc2": date_rows([5, 6], 2)}),
    "po_overlap_full": Case("partition_key='d'", D_COLS, {"full": OVERLAP_FULL}),
    "po_nulls": Case("partition_key='p'", P_COLS_SPARK, {"full": NULLS_FIRST, "inc1": NULLS_BATCH,
                                                         "inc2": NULLS_BATCH, "inc3": NULLS_BATCH}),
    "po_empty_col": Case("partition_key='p'", P_COLS_SPARK, {"full": EMPTY_COL_FIRST, "inc1": []}),
    "po_static": Case(STATIC, P_COLS_SPARK, {"full": STATIC_FIRST, "inc1": STATIC_BATCH, "inc2": STATIC_BATCH,
                                             "inc3": []}),
    "po_static_reject": Case(STATIC, P_COLS_SPARK, {"full": REJECT_FIRST,
                                                    "inc1": [(6, "o'brien", 6), (7, "zz", 7)]}),
    "po_static_day": Case("partition_key='d', partitions=['2024-01-02', '2024-01-03']", D_COLS,
                          {"full": STATIC_DAY_FIRST, "inc1": STATIC_DAY_BATCH, "inc2": date_rows([2, 5], 3)}),
    "po_cols": Case("partition_key=['a', 'B']", AB_COLS_SPARK, {"full": COLS_FIRST, "inc1": COLS_BATCH,
                                                                "inc2": COLS_BATCH}),
    "po_pred": Case("partition_key='p', incremental_predicates=['DBT_INTERNAL_DEST.v < 100']", P_COLS_SPARK,
                    {"full": PRED_FIRST, "inc1": [(4, "a", 4)]}),
    # dbt-spark's own partition_by is the partition key when partition_key is not set
    "po_partition_by": Case("partition_by=['p']", P_COLS_SPARK, {"full": NULLS_FIRST, "inc1": NULLS_BATCH}),
    # the other file format the strategy accepts
    "po_orc": Case("partition_key='p', file_format='orc'", P_COLS_SPARK, {"full": NULLS_FIRST, "inc1": NULLS_BATCH,
                                                                         "inc2": NULLS_BATCH}),
    # a table that exists unpartitioned (built before the model used this strategy)
    "po_unpartitioned": Case("partition_key='p'", P_COLS_SPARK, {"full": BAD_FIRST, "inc1": [(3, "a", 3)]},
                             before={"inc1": "drop table po_unpartitioned; create table po_unpartitioned "
                                             "using parquet as select 1 as id, 'a' as p, 1 as v "
                                             "union all select 2, 'b', 2"}),
}

# dbt-spark's own strategies through the shim: left to dbt-spark unchanged.
NATIVE = {
    "native_append": "incremental_strategy='append'",
    "native_insert_overwrite": "incremental_strategy='insert_overwrite', partition_by='p'",
}
for _name in NATIVE:
    CASES[_name] = Case("", P_COLS_SPARK, {"full": [(1, "a", 1), (2, "b", 2)], "inc1": [(3, "a", 3)]})

# Refused at the first run, before a table is created: (config, columns, message fragments).
BAD_CONFIGS = {
    "bad_missing": ("unique_key='id'", P_COLS_SPARK, ["partition_key is not set"]),
    "bad_column": ("partition_key='nope'", P_COLS_SPARK,
                   ["partition_key names 'nope', which is not a column of the model (columns: id, p, v)",
                    "Set partition_key to one of them"]),
    "bad_columns": ("partition_key=['p', 'missing_col']", P_COLS_SPARK,
                    ["partition_key names 'missing_col'", "Set partition_key to one of them"]),
    "bad_partitions": ("partition_key='p', partitions='b'", P_COLS_SPARK,
                       ["partitions must be a list of partition values", "got b."]),
    "bad_partitions_empty": ("partition_key='p', partitions=[]", P_COLS_SPARK, ["partitions is an empty list"]),
    "bad_dict": ("partition_key={'column': 'p'}", P_COLS_SPARK,
                 ["partition_key is a dict without a 'field' column name"]),
    # Spark's own refusals
    "bad_hour": ("partition_key={'field': 'ts', 'granularity': 'hour'}", TS_COLS,
                 ["partition_key granularity 'hour' has no Spark equivalent",
                  "Spark partitions by column values: add a date column to the model "
                  "(cast(ts as date) as ts_date) and set partition_key='ts_date'."]),
    "bad_day_on_timestamp": ("partition_key={'field': 'ts', 'granularity': 'day'}", TS_COLS,
                             ["partition_key {'field': 'ts', 'granularity': 'day'} needs a date column on Spark; "
                              "ts is timestamp."]),
    "bad_delta": ("partition_key='p', file_format='delta'", P_COLS_SPARK,
                  ["file_format 'delta' cannot overwrite partitions with this strategy on Spark. "
                   "Set file_format to one of parquet, orc (default parquet)."]),
    "bad_both_keys": ("partition_key='p', partition_by='id'", P_COLS_SPARK,
                      ["partition_key (p) and partition_by (id) name different columns. Set only one of them."]),
}
for _name, (_config, _cols, _) in BAD_CONFIGS.items():
    CASES[_name] = Case(_config, _cols, {"full": BAD_FIRST if _cols != TS_COLS else
                                         [(1, dt.datetime(2024, 1, 1, 5), 1)]})


def columns(case: Case) -> str:
    return ", ".join(c.strip().split(" ")[0] for c in case.cols.split(","))


class Runs:
    def __init__(self):
        self.status: dict[tuple[str, str], tuple[str, str]] = {}
        self.rows: dict[tuple[str, str], Counter | None] = {}

    def after(self, model: str, run: str) -> Counter:
        status, message = self.status[(model, run)]
        assert status == "success", f"run {run} of {model}: {status}: {message}"
        return self.rows[(model, run)]

    def failed(self, model: str, run: str) -> tuple[str, Counter | None]:
        status, message = self.status[(model, run)]
        assert status == "error", f"run {run} of {model} unexpectedly succeeded"
        return message, self.rows[(model, run)]


@pytest.fixture(scope="module")
def po(tmp_path_factory):
    require_spark()
    models = {name: model_sql(case.config) for name, case in CASES.items() if name not in NATIVE}
    for name, config in NATIVE.items():
        models[name] = ("{{ config(materialized='incremental', " + config + ") }}\n"
                        "select * from {{ target.schema }}.raw_{{ this.identifier }}\n")
    project = make_project(tmp_path_factory.mktemp("po_spark"), "spark", models, project_class=SparkPoProject)
    yield project
    project.drop_warehouse()


@pytest.fixture(scope="module")
def runs(po) -> Runs:
    out = Runs()
    for run in RUNS:
        selected = [name for name, case in CASES.items() if run in case.batches]
        for name in selected:
            if run in CASES[name].before:
                po.sql(CASES[name].before[run].split("; "))
        po.fill_raws({name: (CASES[name].cols, CASES[name].batches[run]) for name in selected})
        ok, messages, exc = po.dbt("run", "--select", *selected, *(["--full-refresh"] if run == "full" else []))
        assert exc is None, f"dbt crashed in run {run} instead of failing a model: {exc} {messages}"
        assert set(po.last_by_node) == set(selected), (run, sorted(po.last_by_node))
        out.status.update({(name, run): po.last_by_node[name] for name in selected})
        existing = {r[1] for r in po.sql(f"show tables in {po.spark_schema}", fetch=True) if not r[2]}
        for name in selected:
            out.rows[(name, run)] = (Counter(po.sql(f"select {columns(CASES[name])} from {name}", fetch=True))
                                     if name in existing else None)
    return out


def partitions(po, table: str) -> list[str]:
    return sorted(r[0] for r in po.sql(f"show partitions {table}", fetch=True))


def test_same_batch_three_times_equals_once(po, runs):
    expected = Counter(date_rows([1], 1) + SAME_BATCH)
    assert runs.after("po_same", "full") == Counter(SAME_FIRST)
    for run in ("inc1", "inc2", "inc3"):
        assert runs.after("po_same", run) == expected
    assert sum(expected.values()) == 9
    # {'field': 'd', 'granularity': 'day'} on a date column is the column itself
    assert partitions(po, "po_same") == ["d=2024-01-01", "d=2024-01-02", "d=2024-01-03"]


def test_overlapping_batches_converge_to_full_build(runs):
    runs.after("po_overlap", "inc1")
    incremental = runs.after("po_overlap", "inc2")
    assert incremental == runs.after("po_overlap_full", "full") == Counter(OVERLAP_FULL)
    assert sum(incremental.values()) == 19


def test_null_partitions_do_not_duplicate(po, runs):
    for run in ("inc1", "inc2", "inc3"):
        assert runs.after("po_nulls", run) == Counter(NULLS_BATCH + [(4, "b", 4)])
    assert po.sql("select count(*) from po_nulls where p is null", fetch=True) == [(3,)]
    assert partitions(po, "po_nulls") == ["p=__HIVE_DEFAULT_PARTITION__", "p=a", "p=b"]


def test_empty_batch_changes_nothing(runs):
    assert runs.after("po_empty_col", "inc1") == Counter(EMPTY_COL_FIRST)
    assert runs.after("po_static", "inc3") == runs.after("po_static", "inc2")


def test_static_partitions_replace_listed_partitions(po, runs):
    assert runs.after("po_static", "full") == Counter(STATIC_FIRST)
    # the listed partitions are replaced, also 'b' which the batch leaves empty (dropped)
    expected = Counter(STATIC_BATCH + [(3, "c", 3), (5, "c", 5)])
    for run in ("inc1", "inc2"):
        assert runs.after("po_static", run) == expected
    assert partitions(po, "po_static") == ["p=__HIVE_DEFAULT_PARTITION__", "p=c", "p=o%27brien"]


def test_static_partitions_reject_rows_outside_and_change_nothing(runs):
    message, rows = runs.failed("po_static_reject", "inc1")
    assert "model 'po_static_reject'" in message
    assert "a batch row has partition_key (p) = (zz), outside the static partitions; nothing was changed" in message
    assert "Add it to partitions" in message
    assert rows == Counter(REJECT_FIRST)


def test_static_day_partitions(runs):
    got = runs.after("po_static_day", "inc1")
    assert got == Counter(date_rows([1, 4], 1) + STATIC_DAY_BATCH)  # day 3 listed, absent from batch: emptied
    message, rows = runs.failed("po_static_day", "inc2")
    assert "a batch row has partition_key (d) = (2024-01-05), outside the static partitions" in message
    assert rows == got


def test_list_of_columns_with_nulls(runs):
    expected = Counter(COLS_BATCH + [(2, 1, "y", 2), (3, None, "x", 3), (5, 2, None, 5)])
    for run in ("inc1", "inc2"):
        assert runs.after("po_cols", run) == expected


def test_incremental_predicates_limit_the_replacement(runs):
    # the predicate protects the row with v >= 100: written back into the replaced partition
    assert runs.after("po_pred", "inc1") == Counter([(2, "a", 500), (3, "b", 3), (4, "a", 4)])


def test_partition_by_is_the_key(po, runs):
    assert runs.after("po_partition_by", "inc1") == Counter(NULLS_BATCH + [(4, "b", 4)])
    assert partitions(po, "po_partition_by") == ["p=__HIVE_DEFAULT_PARTITION__", "p=a", "p=b"]


def test_unpartitioned_table_is_refused_and_unchanged(runs):
    message, rows = runs.failed("po_unpartitioned", "inc1")
    assert ".po_unpartitioned is not partitioned, not by the partition_key (p). Run it once with " \
           "--full-refresh to rebuild it partitioned by (p)." in message
    assert rows == Counter([(1, "a", 1), (2, "b", 2)])


@pytest.mark.parametrize("model", sorted(BAD_CONFIGS))
def test_bad_config_fails_before_creating_the_table(runs, model):
    message, rows = runs.failed(model, "full")
    assert "Compilation Error" in message
    assert f"partition_overwrite strategy, model '{model}'" in message
    for fragment in BAD_CONFIGS[model][2]:
        assert fragment in message
    assert message.count("partition_overwrite strategy, model") == 1
    assert rows is None


def test_dbt_spark_strategies_pass_through_the_shim(po, runs):
    assert runs.after("native_append", "inc1") == Counter([(1, "a", 1), (2, "b", 2), (3, "a", 3)])
    assert runs.after("native_insert_overwrite", "inc1") == Counter([(2, "b", 2), (3, "a", 3)])
    assert partitions(po, "native_insert_overwrite") == ["p=a", "p=b"]


def test_orc_tables_too(po, runs):
    for run in ("inc1", "inc2"):
        assert runs.after("po_orc", run) == Counter(NULLS_BATCH + [(4, "b", 4)])
    assert partitions(po, "po_orc") == ["p=__HIVE_DEFAULT_PARTITION__", "p=a", "p=b"]
    provider = [r for r in po.sql("describe table extended po_orc", fetch=True) if r[0] == "Provider"]
    assert provider == [("Provider", "orc", "")]
