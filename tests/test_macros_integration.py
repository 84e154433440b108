"""integration_tests/ built for real on DuckDB, on the session's PostgreSQL server and on the
process's in-process Spark (tests/support/spark.py).

Each engine builds the project once (module-scoped fixture) and a few extra dbt invocations run
against that build (windows, incremental watermark, a run that fails after its insert, bad
arguments); the tests below assert on the results. dbtRunner is not thread-safe: one invocation
at a time, in this process.
"""
from __future__ import annotations

import csv
import hashlib
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from support.spark import require_spark, spark_profile, spark_query, unique_schema
from support.common import REPO_ROOT, copy_fixture, duckdb_profile, warehouse_target, write_profiles

IT_DIR = REPO_ROOT / "integration_tests"
PROFILE = "rerun_safety_integration_tests"

# Exact failure counts of every data test in integration_tests/models/schema.yml.
EXPECTED_FAILURES = {
    # clean table and deduplicate outputs: pass
    "clean_unique_key": 0,
    "clean_reconcile_counts": 0,
    "clean_reconcile_sums": 0,
    "clean_equal_multiset": 0,
    "clean_volume_within_band": 0,
    "dedup_orders_current_matches_expected": 0,
    "dedup_orders_current_one_row_per_key": 0,
    "dedup_shuffled_1_matches_expected": 0,
    "dedup_shuffled_2_matches_expected": 0,
    "dedup_shuffled_3_matches_expected": 0,
    "unique_key_column_level_label": 0,             # column-level: the key is column_name
    # last day (23 events) appended twice
    "expect_fail_doubled_unique_key": 23,           # each of its 23 keys twice
    "expect_fail_doubled_reconcile_counts": 1,      # that day: 46 rows for 23 distinct keys
    "expect_fail_doubled_reconcile_sums": 1,        # that day's sum doubled
    "expect_fail_doubled_mapped_reconcile_sums": 1,  # the same against the daily aggregate's own names
    "expect_fail_doubled_mapped_reconcile_counts": 1,  # that day: 46 rows for 23 keys, against the renamed events
    "mapped_reconcile_sums": 0,                     # revenue per revenue_date = amount per paid_date
    "mapped_reconcile_counts": 0,
    "expect_fail_doubled_equal_multiset": 23,       # 23 rows with count 2 vs 1
    "expect_fail_doubled_volume_within_band": 1,    # duplicate_rows (distinct 23 is in band)
    # last day: 11 of 23 events kept, each twice (22 rows, inside the band)
    "expect_fail_half_missing_volume_within_band": 2,  # distinct below band + duplicate rows
    "expect_fail_half_missing_reconcile_counts": 1,
    "expect_fail_short_history_volume_within_band": 1,  # insufficient_history
    # volume_within_band leaves out the current period (the one containing as_of, default now)
    "doubled_current_day_not_judged_volume_within_band": 0,           # 2026-02-08 tested: clean
    "expect_fail_doubled_current_day_included_volume_within_band": 1,  # 2026-02-09: duplicate_rows
    "relative_yesterday_volume_within_band": 0,                     # yesterday: 21 keys, in band
    "expect_fail_relative_today_included_volume_within_band": 1,    # today: 3 keys, below band
    "expect_fail_stalled_yesterday_volume_within_band": 1,          # yesterday: 0 keys, below band
    "expect_fail_equal_multiset_xxy_vs_xyy": 2,     # x: 2 vs 1, y: 1 vs 2
    "expect_fail_unique_key_composite_nulls": 3,    # (1,NULL) twice, (2,NULL), (3,3) twice
    "expect_fail_unique_key_composite_allow_null": 2,  # (1,NULL) twice, (3,3) twice
}

# data_events: day d (0-based from 2026-01-01) has 20 + (7*d % 9) events.
DAY_COUNTS = [20 + (7 * d) % 9 for d in range(40)]


@dataclass
class Built:
    engine: str
    project: Path
    query: callable
    build: object
    extra: dict = field(default_factory=dict)


def _invoke(project: Path, args: list[str], manifest=None):
    from dbt.cli.main import dbtRunner

    runner = dbtRunner(manifest=manifest) if manifest is not None else dbtRunner()
    return runner.invoke([*args, "--project-dir", str(project), "--profiles-dir", str(project)])


def _copy_project(dest: Path) -> Path:
    project = dest / "integration_tests"
    shutil.copytree(IT_DIR, project, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "*.duckdb",
                                                                   "package-lock.yml", "profiles.yml"))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    return project


def _error_text(res) -> str:
    parts = [str(res.exception or "")]
    for r in getattr(res.result, "results", None) or []:
        parts.append(str(r.message or ""))
    return "\n".join(parts)


def _by_name(res) -> dict:
    return {r.node.name: r for r in res.result.results}


def _spark_target(project: Path):
    """A fresh schema in the process's Spark; query() reads it by unqualified names, as on the
    other engines (the queries' `cast(... as varchar)` is Spark's `string`)."""
    require_spark()
    schema = unique_schema("rs_it")
    write_profiles(project, PROFILE, spark_profile(schema))

    def query(sql):
        spark_query(f"use {schema}")
        try:
            return spark_query(sql.replace(" as varchar)", " as string)"))
        finally:
            spark_query("use default")  # the session is shared: leave no schema current
    return query


@pytest.fixture(scope="module", params=["duckdb", "postgres", "spark"])
def built(request, tmp_path_factory):
    engine = request.param
    tmp = tmp_path_factory.mktemp(f"it_{engine}")
    project = _copy_project(tmp)
    if engine == "spark":
        query, dbname = _spark_target(project), None
    else:
        query, dbname = warehouse_target(engine, project, PROFILE, tmp, request, "rs_it")

    try:
        deps = _invoke(project, ["deps"])
        assert deps.success, deps.exception
        parsed = _invoke(project, ["parse"])
        assert parsed.success, parsed.exception
        manifest = parsed.result
        build = _invoke(project, ["build"], manifest)
        out = Built(engine, project, query, build)
        if build.success:
            extra = out.extra
            # A second run of the incremental model: the window comes from the target's watermark.
            extra["incremental"] = _invoke(project, ["run", "-s", "window_events_incremental"], manifest)
            extra["windowed"] = _invoke(project, ["run", "-s", "window_events", "--vars",
                                                  "{rerun_safety_window_start: '2026-01-05', "
                                                  "rerun_safety_window_end: '2026-01-07T00:00:00Z'}"], manifest)
            extra["last_window_after_build"] = query("select * from ledger_last_window")
            extra["last_window"] = _invoke(project, ["run", "-s", "ledger_last_window"], manifest)
            extra["ledger_before_fail"] = query(
                "select count(*) from rerun_safety_ledger where model_name = 'ledger_fails_after_insert'")[0][0]
            extra["failing"] = _invoke(project, ["run", "-s", "ledger_fails_after_insert", "--vars",
                                                 "{rs_it_fail_after_insert: true, "
                                                 "rerun_safety_window_start: '2026-02-01', "
                                                 "rerun_safety_window_end: '2026-02-02'}"], manifest)
            extra["injection"] = _invoke(project, ["compile", "-s", "window_events", "--vars",
                                                   "{rerun_safety_window_start: \"2026-01-01'; drop table "
                                                   "data_events; --\", rerun_safety_window_end: '2026-01-02'}"], manifest)
            extra["reversed_window"] = _invoke(project, ["compile", "-s", "window_events", "--vars",
                                                         "{rerun_safety_window_start: '2026-01-02', "
                                                         "rerun_safety_window_end: '2026-01-02'}"], manifest)
            # An unknown column is only knowable from the warehouse: checked at compile time.
            bad = project / "models" / "_bad_unknown_column.yml"
            bad.write_text(yaml.safe_dump({"version": 2, "models": [{"name": "window_events", "data_tests": [
                {"rerun_safety.reconcile_counts": {"name": "bad_unknown_column", "arguments": {
                    "compare_to": "ref('data_events')", "key": "event_idd", "group_by": "event_date"}}}]}]}))
            extra["unknown_column"] = _invoke(project, ["test", "-s", "bad_unknown_column"])
            bad.unlink()
        yield out
    finally:
        if dbname:
            request.getfixturevalue("pg_server").drop_database(dbname)


def test_build_succeeds_and_every_test_has_its_exact_failure_count(built):
    assert built.build.success, _error_text(built.build)
    results = _by_name(built.build)
    tests = {name: r for name, r in results.items() if r.node.resource_type == "test"}
    assert set(tests) == set(EXPECTED_FAILURES)
    got = {name: (str(r.status), r.failures) for name, r in tests.items()}
    want = {name: ("pass" if n == 0 else "warn", n) for name, n in EXPECTED_FAILURES.items()}
    assert got == want
    errors = [n for n, r in results.items() if str(r.status) in ("error", "fail", "skipped")]
    assert errors == []


def _failing_rows(built, test_name):
    node = _by_name(built.build)[test_name].node
    return built.query(f"select * from ({node.compiled_code}) as t")


def test_volume_band_reasons(built):
    doubled = _failing_rows(built, "expect_fail_doubled_volume_within_band")
    assert [r[-1] for r in doubled] == ["duplicate_rows"]
    period, n_rows, n_distinct, used = doubled[0][:4]
    assert (n_rows, n_distinct, used) == (46, 23, 30)
    half = _failing_rows(built, "expect_fail_half_missing_volume_within_band")
    assert sorted(r[-1] for r in half) == ["distinct_keys_below_band", "duplicate_rows"]
    row = half[0]
    n_rows, n_distinct, lower, upper = row[1], row[2], float(row[6]), float(row[7])
    # count(*) alone would look normal; the distinct count is what leaves the band.
    assert (n_rows, n_distinct) == (22, 11)
    assert lower <= n_rows <= upper and n_distinct < lower
    short = _failing_rows(built, "expect_fail_short_history_volume_within_band")
    assert [(r[3], r[-1]) for r in short] == [(2, "insufficient_history")]


def test_volume_band_leaves_out_the_current_period(built):
    import datetime as dt

    # as_of 2026-02-09 14:00: 2026-02-09 is current; the test checks 2026-02-08 (DAY_COUNTS[38]
    # keys, 30 training days) and passes; included, the doubled current day fails on duplicates.
    node = _by_name(built.build)["doubled_current_day_not_judged_volume_within_band"].node
    code = node.compiled_code
    checked = code[:code.rindex("select * from validation_errors")] + "select * from checks"
    rows = built.query(f"select * from ({checked}) as t")
    assert [(str(r[0])[:10], r[1], r[2], r[3]) for r in rows] == [("2026-02-08", 25, 25, 30)]
    assert DAY_COUNTS[38] == 25
    assert _failing_rows(built, "doubled_current_day_not_judged_volume_within_band") == []
    included = _failing_rows(built, "expect_fail_doubled_current_day_included_volume_within_band")
    assert [(str(r[0])[:10], r[1], r[2], r[3], r[-1]) for r in included] == [
        ("2026-02-09", 46, 23, 30, "duplicate_rows")]
    # Relative to the clock: today (3 keys so far) is left out; included, it is below the band of
    # the 20 days before it. A stalled load (no rows yesterday) fails as 0 keys below the band.
    today = built.query("select cast(cast(current_timestamp as timestamp) as date)")[0][0]
    rows = _failing_rows(built, "expect_fail_relative_today_included_volume_within_band")
    assert [(str(r[0])[:10], r[1], r[2], r[3], r[-1]) for r in rows] == [
        (str(today), 3, 3, 20, "distinct_keys_below_band")]
    rows = _failing_rows(built, "expect_fail_stalled_yesterday_volume_within_band")
    assert [(str(r[0])[:10], r[1], r[2], r[3], r[-1]) for r in rows] == [
        (str(today - dt.timedelta(days=1)), 0, 0, 19, "distinct_keys_below_band")]


def test_reconcile_rows_name_the_partition(built):
    rows = _failing_rows(built, "expect_fail_half_missing_reconcile_counts")
    assert [(str(r[0])[:10], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("2026-02-09", 22, 11, 23, 23, -12, "distinct_keys_differ")]
    rows = _failing_rows(built, "expect_fail_doubled_reconcile_sums")
    assert len(rows) == 1 and str(rows[0][0])[:10] == "2026-02-09"
    assert rows[0][1] == 2 * rows[0][2] and rows[0][3] == rows[0][2]


def _expected_dedup_rows():
    rows = []
    with open(IT_DIR / "seeds" / "data_deduplicate_expected.csv") as f:
        for r in csv.DictReader(f):
            rows.append((int(r["id"]) if r["id"] else None, r["updated_at"] or None, r["status"] or None,
                         Decimal(r["amount"]).quantize(Decimal("0.01")) if r["amount"] else None))
    return rows


def _norm(row):
    id_, ts, status, amount = row
    return (id_, ts.strftime("%Y-%m-%d %H:%M:%S") if ts is not None else None, status,
            Decimal(str(amount)).quantize(Decimal("0.01")) if amount is not None else None)


def test_deduplicate_is_identical_across_insert_orders(built):
    # The three inputs really hold the rows in different physical orders...
    scans = [built.query(f"select id, status, amount from dedup_shuffled_input_{k}") for k in (1, 2, 3)]
    assert len({tuple(s) for s in scans}) == 3 and all(len(s) == 169 for s in scans)
    # ...and the deduplicated outputs are byte-identical, with the NULL key and NULL columns kept.
    order = "order by id nulls last, updated_at nulls last, status nulls last, amount nulls last"
    outputs = {}
    for rel in ("orders_current", "dedup_shuffled_1", "dedup_shuffled_2", "dedup_shuffled_3"):
        rows = [_norm(r) for r in built.query(f"select id, updated_at, status, amount from {rel} {order}")]
        outputs[rel] = hashlib.sha256(repr(rows).encode()).hexdigest()
        assert rows == _expected_dedup_rows()
    assert len(set(outputs.values())) == 1
    rows = _expected_dedup_rows()
    assert len(rows) == 38
    assert sum(1 for r in rows if r[0] is None) == 1          # NULL is a key value, kept once
    assert sum(1 for r in rows if r[1] is None) == 2          # ids 4 and 6: NULL order_by kept


def test_window_vars_select_a_half_open_window(built):
    assert built.extra["windowed"].success, _error_text(built.extra["windowed"])
    # [2026-01-05, 2026-01-07): days 4 and 5 exactly, none of 2026-01-07 00:05.
    assert built.query("select count(*) from window_events")[0][0] == DAY_COUNTS[4] + DAY_COUNTS[5] == 49


def test_incremental_window_is_aligned_to_the_grain(built):
    res = built.extra["incremental"]
    assert res.success, _error_text(res)
    assert built.query("select count(*), count(distinct event_id) from window_events_incremental")[0] == (959, 959)
    ledger = built.query("select rows_in_batch, rows_in_target, window_start from rerun_safety_ledger "
                         "where model_name = 'window_events_incremental' order by recorded_at")
    assert len(ledger) == 2
    assert ledger[0] == (959, 959, None)  # first build: the whole table
    # Second run: watermark 2026-02-09 13:39 minus 1 day, truncated to 2026-02-08 00:00 -> two whole days.
    expected_batch = DAY_COUNTS[38] + DAY_COUNTS[39]
    assert expected_batch == 48
    # rows_in_batch is the batch dbt built (its temp relation or, on Spark, temp view), on every engine.
    assert ledger[1] == (expected_batch, 959, None)


def test_ledger_row_only_for_committed_runs(built):
    # The build committed ledger_target and ledger_fails_after_insert once each (the build set no
    # window vars; the failing run below does).
    rows = built.query("select model_name, rows_in_batch, rows_in_target, status, invocation_id "
                       "from rerun_safety_ledger where model_name in ('ledger_target', 'ledger_fails_after_insert') "
                       "and window_start is null order by model_name")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("ledger_fails_after_insert", 959, 959, "success"), ("ledger_target", 959, 959, "success")]
    assert rows[0][4] == rows[1][4]  # both written by the same build invocation
    failing = built.extra["failing"]
    assert not failing.success
    assert str(_by_name(failing)["ledger_fails_after_insert"].status) == "error"
    assert built.extra["ledger_before_fail"] == 1
    counts = built.query("select count(*), count(window_start) from rerun_safety_ledger "
                         "where model_name = 'ledger_fails_after_insert'")[0]
    if built.engine == "spark":
        # No transactions on Spark: the row its record_batch wrote (after the model's data) stays
        # when a later post-hook fails (docs/ledger.md).
        assert counts == (2, 1)
    else:
        # A run that recorded its batch and then failed left nothing: no new ledger row.
        assert counts == (1, 0)
    # The exposed ledger view reads the same rows.
    # ledger_target 1, ledger_fails_after_insert 1 (Spark 2), window_events 2, window_events_incremental 2.
    assert built.query("select count(*) from rerun_safety_run_ledger")[0][0] == \
        built.query("select count(*) from rerun_safety_ledger")[0][0] == (7 if built.engine == "spark" else 6)


def test_last_committed_window_reads_the_ledger(built):
    # During the build, window_events had committed once, without window vars.
    assert built.extra["last_window_after_build"] == [(True, None, None, 959, True)]
    res = built.extra["last_window"]
    assert res.success, _error_text(res)
    # After the windowed run, the greatest window_end is that run's window.
    row = built.query("select found, cast(window_start as varchar), cast(window_end as varchar), rows_in_target, "
                      "missing_model_is_none from ledger_last_window")[0]
    assert (row[0], row[1][:19], row[2][:19], row[3], row[4]) == (
        True, "2026-01-05 00:00:00", "2026-01-07 00:00:00", 49, True)
    ledger = built.query("select cast(window_start as varchar), cast(window_end as varchar), rows_in_batch, "
                         "rows_in_target from rerun_safety_ledger where model_name = 'window_events' "
                         "order by recorded_at")
    assert [(a and a[:19], b and b[:19], c, d) for a, b, c, d in ledger] == [
        (None, None, 959, 959), ("2026-01-05 00:00:00", "2026-01-07 00:00:00", 49, 49)]


def test_window_vars_are_validated_before_any_sql(built):
    res = built.extra["injection"]
    assert not res.success
    text = _error_text(res)
    assert "rerun_safety_window_start" in text and "is not an ISO-8601 date/timestamp" in text
    assert built.query("select count(*) from data_events")[0][0] == 959
    res = built.extra["reversed_window"]
    assert not res.success
    assert "start must be before end" in _error_text(res)


def test_unknown_column_fails_at_compile_time(built):
    res = built.extra["unknown_column"]
    assert not res.success
    text = _error_text(res)
    assert "reconcile_counts: argument 'key' names column 'event_idd'" in text
    assert "Fix: use one of: event_id, event_at, event_date, amount" in text


BAD_ARGUMENTS = [
    ("volume_within_band", {"time_column": "d", "key": "id", "include_current_period": "yes"},
     "volume_within_band: argument 'include_current_period' must be true or false; got 'yes'"),
    ("volume_within_band", {"time_column": "d", "key": "id", "as_of": "yesterday'; drop table m; --"},
     "volume_within_band: argument 'as_of' must be an ISO-8601 date or timestamp"),
    ("reconcile_counts", {"compare_to": "ref('m')", "key": "id", "group_by": "d", "tolerance": "five"},
     "reconcile_counts: argument 'tolerance' must be a number; got 'five' (a string). Fix: write it unquoted"),
    ("reconcile_counts", {"compare_to": "ref('m')", "group_by": "d"},
     "reconcile_counts: argument 'key' is required; set it to a column name or a list of column names"),
]


def test_bad_arguments_fail_at_parse_time(tmp_path):
    """Type and presence errors need no warehouse: `dbt parse` already refuses them."""
    project = tmp_path / "bad_args"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "bad_args", "version": "1.0.0", "config-version": 2, "profile": "bad_args"}))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    (project / "models" / "m.sql").write_text("select 1 as id, current_date as d")
    write_profiles(project, "bad_args", duckdb_profile(tmp_path / "w.duckdb", keep_open=False))
    assert _invoke(project, ["deps"]).success
    for test_name, arguments, message in BAD_ARGUMENTS:
        (project / "models" / "m.yml").write_text(yaml.safe_dump({"version": 2, "models": [
            {"name": "m", "data_tests": [{f"rerun_safety.{test_name}": {"arguments": arguments}}]}]}))
        res = _invoke(project, ["parse"])
        assert not res.success, test_name
        assert message in _error_text(res)


# ---------------------------------------------------------------------------------------------
# Float tolerance on Spark: the fixture test_float_tolerance_macros.py builds on DuckDB and
# PostgreSQL (sums added up in two orders, values a hair apart, a bigint and a decimal moved by one
# unit), built on Spark with the same exact failure counts.


@pytest.fixture(scope="module")
def float_built_spark(tmp_path_factory):
    from test_float_tolerance_macros import _write_seeds

    require_spark()
    tmp = tmp_path_factory.mktemp("float_spark")
    project = copy_fixture("float_tolerance", tmp)
    _write_seeds(project)
    # Spark spells float8 `double`; its seeds load through the integration project's seed macro
    # (dbt-spark's session connection would load decimals as floats and NULLs as 'None'). The
    # decimal is numeric(36,10) here: the model's own decimal(38,10) + decimal(38,10) would round
    # to 9 digits on Spark and lose the 1e-10 it adds before any test sees it.
    for path in [project / "dbt_project.yml", *(project / "models").glob("*.sql")]:
        text = path.read_text().replace("float8", "double")
        path.write_text(text.replace("numeric(38,10)", "numeric(36,10)").replace("numeric(38, 10)", "numeric(36, 10)"))
    (project / "macros").mkdir(exist_ok=True)
    shutil.copy(IT_DIR / "macros" / "spark__load_csv_rows.sql", project / "macros")
    config = yaml.safe_load((project / "dbt_project.yml").read_text())
    config.update({"macro-paths": ["macros"],
                   "dispatch": [{"macro_namespace": "dbt", "search_order": [config["name"], "dbt"]}]})
    (project / "dbt_project.yml").write_text(yaml.safe_dump(config))
    schema = unique_schema("rs_float")
    write_profiles(project, "float_tolerance", spark_profile(schema))
    assert _invoke(project, ["deps"]).success

    def query(sql):
        spark_query(f"use {schema}")
        try:
            return spark_query(sql)
        finally:
            spark_query("use default")
    return _invoke(project, ["build"]), query


def test_float_tolerance_on_spark_has_the_exact_failure_counts(float_built_spark):
    from test_float_tolerance_macros import EXPECTED_FAILURES as FLOAT_FAILURES, K

    build, query = float_built_spark
    assert build.success, _error_text(build)
    # the seeds hold the values written, bit for bit: K of them differ between the two orders
    assert query("select count(*) from data_float_reference a join data_float_reordered b on a.id = b.id "
                 "where a.x <> b.x")[0][0] == K > 200
    tests = {name: r for name, r in _by_name(build).items() if r.node.resource_type == "test"}
    assert {name: (str(r.status), r.failures) for name, r in tests.items()} == {
        name: ("pass" if n == 0 else "warn", n) for name, n in FLOAT_FAILURES.items()}

    def rows(name):
        return query(f"select * from ({tests[name].node.compiled_code}) as t")

    (grp, model_sum, compare_sum, diff, *_), = rows("expect_fail_bigint_reconcile_sums")
    assert (grp, int(diff), int(model_sum) - int(compare_sum)) == (0, 1, 1)
    # found by the sums' exact comparison; the shown difference is Spark's decimal(38,9) of it
    (grp, model_sum, compare_sum, diff, *_), = rows("expect_fail_decimal_reconcile_sums")
    assert (grp, Decimal(str(model_sum)) - Decimal(str(compare_sum)), Decimal(str(diff))) == (
        1, Decimal("1e-10"), Decimal("0"))
    assert sorted(r[0] for r in rows("expect_fail_float_changed_reconcile_sums")) == [3, 5]
    assert sorted(r[0] for r in rows("expect_fail_float_changed_equal_multiset")) == [10, 10, 99999]


# ---------------------------------------------------------------------------------------------
# The run ledger under dbt --threads 4: several models finish at once and each post-hook would
# create the ledger. Without the on-run-start hook `rerun_safety.create_ledger()`, every round failed on DuckDB
# ("Catalog write-write conflict on create") and 7 of 8 on Postgres (duplicate key in pg_type).

LEDGER_MODELS = 8
LEDGER_ROUNDS = 3


def _ledger_race_project(tmp_path: Path, engine: str, request, hook: str | None):
    """Eight independent table models whose post-hook records into the ledger: `hook` is "direct"
    (rerun_safety.record_batch()), "wrapped" (through a macro of the project) or None."""
    project = tmp_path / "ledger_race"
    (project / "models").mkdir(parents=True)
    (project / "macros").mkdir()
    models_config: dict = {"+materialized": "table"}
    if hook:
        models_config["+post-hook"] = ["{{ audit_batch() }}" if hook == "wrapped" else "{{ rerun_safety.record_batch() }}"]
    (project / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "ledger_race", "version": "1.0.0", "config-version": 2, "profile": "ledger_race",
        "on-run-start": ["{{ rerun_safety.create_ledger() }}"],
        "models": {"ledger_race": models_config}}))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    # A team's own wrapper: the on-run-start hook cannot see record_batch through it.
    (project / "macros" / "audit_batch.sql").write_text(
        "{% macro audit_batch() %}{{ return(rerun_safety.record_batch()) }}{% endmacro %}")
    for i in range(LEDGER_MODELS):
        (project / "models" / f"m{i}.sql").write_text(f"select {i} as id")
    query, _ = warehouse_target(engine, project, "ledger_race", tmp_path, request, "race", threads=4)
    assert _invoke(project, ["deps"]).success
    return project, query


def _race_rounds(project: Path, query, vars_: dict) -> list[tuple[int, int, int]]:
    """Each round starts without the ledger (and its schema) and runs every model at once.
    Returns per round: models that succeeded, ledger rows of that invocation, distinct models."""
    out = []
    for _ in range(LEDGER_ROUNDS):
        query("drop schema if exists race_audit cascade")
        res = _invoke(project, ["run", "--threads", "4", "--vars", yaml.safe_dump(vars_)])
        ok = sum(1 for r in res.result.results
                 if r.node.resource_type == "model" and str(r.status) == "success") if res.result else 0
        assert res.success, _error_text(res)
        rows = query("select count(*), count(distinct model_name), max(invocation_id), min(invocation_id) "
                     "from race_audit.rerun_safety_ledger")[0]
        assert rows[2] == rows[3]  # the ledger was created fresh in this round: one invocation
        out.append((ok, rows[0], rows[1]))
    return out


def test_ledger_created_once_under_threads(engine, tmp_path, request):
    project, query = _ledger_race_project(tmp_path, engine, request, hook="direct")
    rounds = _race_rounds(project, query, {"rerun_safety_ledger_schema": "race_audit"})
    assert rounds == [(LEDGER_MODELS, LEDGER_MODELS, LEDGER_MODELS)] * LEDGER_ROUNDS


def test_ledger_created_once_under_threads_through_a_wrapper_macro(engine, tmp_path, request):
    """record_batch called from the team's own macro: on DuckDB the var tells the hook to create the
    ledger; on Postgres the post-hooks serialise the creation themselves (no var needed)."""
    project, query = _ledger_race_project(tmp_path, engine, request, hook="wrapped")
    vars_ = {"rerun_safety_ledger_schema": "race_audit"}
    if engine == "duckdb":
        vars_["rerun_safety_ledger_enabled"] = True
    rounds = _race_rounds(project, query, vars_)
    # with the var on, the package's ledger view is a ninth model (it records nothing)
    models = LEDGER_MODELS + (1 if engine == "duckdb" else 0)
    assert rounds == [(models, LEDGER_MODELS, LEDGER_MODELS)] * LEDGER_ROUNDS


def test_a_run_that_records_nothing_creates_no_ledger(tmp_path):
    """The on-run-start hook is a no-op when nothing selected records into the ledger."""
    project, query = _ledger_race_project(tmp_path, "duckdb", None, hook=None)
    res = _invoke(project, ["run", "--threads", "4", "--vars", "{rerun_safety_ledger_schema: race_audit}"])
    assert res.success, _error_text(res)
    assert sum(1 for r in res.result.results if r.node.resource_type == "model") == LEDGER_MODELS
    assert query("select count(*) from information_schema.schemata where schema_name = 'race_audit'") == [(0,)]
    assert query("select count(*) from information_schema.tables where table_name = 'rerun_safety_ledger'") == [(0,)]
